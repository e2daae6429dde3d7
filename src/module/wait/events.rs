//! Server events, for every kind: keyspace events on keys with waiters (DEL, RENAME, a foreign
//! script, a type change...), FLUSHDB/FLUSHALL, SWAPDB and becoming a replica. An event never
//! writes: it schedules a look at the keys from a 0 ms timer (`grants.rs`).
//!
//! The kinds are given once at load ([`init`]), as a list of [`Ops`] rows (`lib.rs`).

use super::grants;
use super::kind::Kind;
use crate::ffi::events;
use crate::ffi::rm::{self, Ctx, RStr};
use crate::logic::error::Error;
use crate::logic::wait::queue::KeyId;
use crate::module::writes;
use crate::registry::stats::WAITERS;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use super::callbacks::quietly;

/// What the events do to one kind's waiters (functions of the generic core, for kind `K`).
#[derive(Clone, Copy)]
pub struct Ops {
    /// A key was touched: look at it again if it has waiters.
    touched: fn(Ctx, &KeyId),
    /// Every key may have changed (a flush, a swap): look at all keys with waiters.
    all_touched: fn(Ctx),
    /// End every wait with an error.
    fail_everyone: fn(Ctx, Error),
    /// Module load and unload: forget everything.
    reset: fn(),
    /// Any key was written ([`Kind::key_written`]).
    key_written: fn(Ctx, &[u8]),
    /// The dataset was loaded or this server became a master ([`Kind::dataset_arrived`]).
    dataset_arrived: fn(Ctx),
}

/// The row of kind `K`.
pub const fn ops<K: Kind>() -> Ops {
    Ops {
        touched: touched::<K>,
        all_touched: all_touched::<K>,
        fail_everyone: fail_everyone::<K>,
        reset: reset_kind::<K>,
        key_written: K::key_written,
        dataset_arrived: K::dataset_arrived,
    }
}

fn touched<K: Kind>(ctx: Ctx, kid: &KeyId) {
    if K::table().clients() != 0 {
        grants::schedule_checks::<K>(ctx, |s| if s.q.has(kid) { vec![kid.clone()] } else { vec![] });
    }
}

fn all_touched<K: Kind>(ctx: Ctx) {
    if K::table().clients() != 0 {
        grants::schedule_checks::<K>(ctx, |s| s.q.keys());
    }
}

fn fail_everyone<K: Kind>(ctx: Ctx, e: Error) {
    for k in K::table().with(|s| s.q.keys()) {
        grants::fail_all::<K>(ctx, &k, e.clone());
    }
}

fn reset_kind<K: Kind>() {
    K::table().reset();
}

static KINDS: OnceLock<&'static [Ops]> = OnceLock::new();

/// The kinds with waiters, once at load (the same list on a reload).
pub fn init(kinds: &'static [Ops]) {
    let _ = KINDS.set(kinds);
}

fn kinds() -> &'static [Ops] {
    KINDS.get().copied().unwrap_or(&[])
}

/// Whether the keyspace-event subscription is in place (see [`watch_keyspace`]).
static WATCHING: AtomicBool = AtomicBool::new(false);

/// Subscribe to keyspace events, once, when the first client waits. A module subscriber costs
/// every write in the server a callback (about 1 200 instructions per notification on 7.0),
/// so servers that never use WAIT do not pay it. Redis 7.0 has no unsubscribe API, so the
/// subscription then stays for the life of the process.
pub fn watch_keyspace(ctx: Ctx) {
    if WATCHING.swap(true, Ordering::Relaxed) {
        return;
    }
    if !events::subscribe_keyspace(ctx, on_key_event) {
        WATCHING.store(false, Ordering::Relaxed);
        rm::log(
            ctx,
            c"warning",
            "lock module: cannot subscribe to keyspace events; waiters rely on lease timers",
        );
    }
}

/// Module load and unload: every kind's table, and the subscription flag (Redis drops a
/// module's keyspace subscription when it unloads the module).
pub fn reset() {
    for k in kinds() {
        (k.reset)();
    }
    WATCHING.store(false, Ordering::Relaxed);
}

/// Refuse MODULE UNLOAD while clients wait (their callbacks live in this library).
pub fn can_unload() -> bool {
    WAITERS.load(Ordering::Relaxed) == 0
}

/// Keyspace events: anything that touches a key with waiters gets it re-examined.
fn key_event(ctx: Ctx, key: RStr) {
    for k in kinds() {
        (k.key_written)(ctx, rm::bytes(&key));
    }
    if WAITERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    quietly(ctx, "keyspace event", || {
        let kid: KeyId = (rm::selected_db(ctx), rm::bytes(&key).to_vec());
        for k in kinds() {
            (k.touched)(ctx, &kid);
        }
    });
}
events::key_callback!(on_key_event, key_event);

/// FLUSHDB / FLUSHALL: every key with waiters may be free now.
fn flush(ctx: Ctx, sub: u64) {
    if sub != events::FLUSHDB_END || WAITERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    quietly(ctx, "flush event", || kinds().iter().for_each(|k| (k.all_touched)(ctx)));
}
events::callback!(on_flush, flush, with_sub);

/// SWAPDB: keys with waiters in the swapped databases may be free (or different) now.
fn swapdb(ctx: Ctx, _sub: u64) {
    if WAITERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    quietly(ctx, "swapdb event", || kinds().iter().for_each(|k| (k.all_touched)(ctx)));
}
events::callback!(on_swapdb, swapdb, with_sub);

/// Becoming a replica ends every wait with an error.
fn role_change(ctx: Ctx, sub: u64) {
    // Whether writes are refused (and the server is a read-only replica) changed.
    writes::invalidate();
    if sub == events::NOW_MASTER {
        quietly(ctx, "promotion", || kinds().iter().for_each(|k| (k.dataset_arrived)(ctx)));
    }
    if sub != events::NOW_REPLICA {
        return;
    }
    quietly(ctx, "role change", || kinds().iter().for_each(|k| (k.fail_everyone)(ctx, Error::NotMaster)));
}
events::callback!(on_role_change, role_change, with_sub);

/// Loading (an RDB or AOF at start-up, a replica's full sync, DEBUG RELOAD): whether writes are
/// refused may change (`writes.rs`), and once it ended the kinds look at the dataset again.
fn loading(ctx: Ctx, sub: u64) {
    writes::invalidate();
    if sub == events::LOADING_ENDED {
        quietly(ctx, "loading", || kinds().iter().for_each(|k| (k.dataset_arrived)(ctx)));
    }
}
events::callback!(on_loading, loading, with_sub);

/// Module load with a dataset already there (`MODULE LOAD` at run time): the same look.
pub fn loaded(ctx: Ctx) {
    kinds().iter().for_each(|k| (k.dataset_arrived)(ctx));
}
