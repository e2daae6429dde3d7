//! Write refusals: whether the server refuses client writes right now.
//!
//! LOCK.* commands are flagged `write` (and LOCK.ACQUIRE `deny-oom`), so the server itself
//! refuses them with `NOREPLICAS` (min-replicas-to-write not met), `MISCONF` (failed background
//! save with stop-writes-on-bgsave-error), `READONLY` (read-only replica) or `OOM`. A natively
//! run Redisson script (LOCK.REDISSON, flagged like EVAL) and a grant made later (lease expiry,
//! DEL, a timer) are not covered by that, so they ask here before their first write.
//!
//! The question is put to the server itself: `RM_Call` in script mode (`S`, which applies the
//! same min-replicas / disk-error / read-only-replica rules as a script's write) of
//! `SETRANGE <key> -1 x`, a write command that fails on its offset before touching anything
//! (`LOCK.RENEW <key> probe x` where SETRANGE is renamed or disabled: see `ffi::call`).
//! An error of another class than the refusals below means writes are accepted; a refusal is
//! returned with the server's own text. The answer is kept until a server event that can change it (cron,
//! CONFIG SET, replica connected or gone, master link, persistence, loading, role change).

use crate::ffi::rm::{self, Ctx, RStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Bumped by every server event that may change the answer.
static EPOCH: AtomicU64 = AtomicU64::new(1);
/// (epoch of the answer, the refusal text or `None` when writes are accepted).
static ANSWER: Mutex<(u64, Option<String>)> = Mutex::new((0, None));
/// The epoch at which writes were last found accepted (the common case, read without a lock).
static ACCEPTED: AtomicU64 = AtomicU64::new(0);

/// Forget the cached answer.
pub fn invalidate() {
    EPOCH.fetch_add(1, Ordering::Relaxed);
}

/// Whether every event in [`EVENTS`] is subscribed to: only then can an answer be kept (a
/// missed event would leave it stale). Otherwise the server is asked on every call.
static WATCHED: AtomicBool = AtomicBool::new(false);

/// Module load: whether the subscriptions to [`EVENTS`] all succeeded.
pub fn set_watched(all: bool) {
    WATCHED.store(all, Ordering::Relaxed);
    invalidate();
}

/// The epoch an answer is kept for; a fresh one on every call when the events are not watched.
fn epoch() -> u64 {
    if WATCHED.load(Ordering::Relaxed) {
        EPOCH.load(Ordering::Relaxed)
    } else {
        EPOCH.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// (epoch, whether the replication stream has a reader) as last read.
static REPLICAS: AtomicU64 = AtomicU64::new(0);

/// Whether the replication stream has a reader (a replica attached, in any state, or the AOF
/// on), read once per epoch (the cron loop, every replica change, CONFIG SET and persistence
/// events bump it): a message a module command publishes is propagated only then (without a
/// replica nor an AOF the propagated PUBLISH would go nowhere). When the events are not all
/// watched, always true.
pub fn may_have_replicas(ctx: Ctx) -> bool {
    if !WATCHED.load(Ordering::Relaxed) {
        return true;
    }
    let epoch = EPOCH.load(Ordering::Relaxed);
    let seen = REPLICAS.load(Ordering::Relaxed);
    if seen >> 1 == epoch {
        return seen & 1 == 1;
    }
    let any = rm::flag(ctx, crate::ffi::rm::CTX_AOF)
        || crate::ffi::replication::connected_replicas(ctx).is_none_or(|n| n != 0);
    REPLICAS.store(epoch << 1 | u64::from(any), Ordering::Relaxed);
    any
}

/// (epoch, whether this server is a read-only replica) as last read.
static READONLY: AtomicU64 = AtomicU64::new(0);

/// Whether this server is a read-only replica, read from the context flags once per epoch
/// (they cost more than a native script on some servers, see `rm::ctx_flags`). A role change
/// bumps the epoch (wait/events.rs), as do CONFIG SET and the cron loop.
pub fn readonly_replica(ctx: Ctx) -> bool {
    let epoch = epoch();
    let seen = READONLY.load(Ordering::Relaxed);
    if seen >> 1 == epoch {
        return seen & 1 == 1;
    }
    let ro = rm::flag(ctx, crate::ffi::rm::CTX_READONLY);
    READONLY.store(epoch << 1 | u64::from(ro), Ordering::Relaxed);
    ro
}

/// The error a client write would get now (`NOREPLICAS ...`, `MISCONF ...`, `READONLY ...`),
/// or `None` when writes are accepted. `key` is used for the probe (nothing is written).
pub fn refused(ctx: Ctx, key: RStr) -> Option<String> {
    let epoch = epoch();
    if ACCEPTED.load(Ordering::Relaxed) == epoch {
        return None;
    }
    {
        let a = ANSWER.lock().unwrap_or_else(PoisonError::into_inner);
        if a.0 == epoch {
            return a.1.clone();
        }
    }
    let answer = probe(ctx, key);
    if answer.is_none() {
        ACCEPTED.store(epoch, Ordering::Relaxed);
    }
    *ANSWER.lock().unwrap_or_else(PoisonError::into_inner) = (epoch, answer.clone());
    answer
}

/// The refusal for grants, which may be made outside any command (a timer, an event): also
/// while the server keeps its dataset still (`CLIENT PAUSE WRITE/ALL`, `FAILOVER`, a cluster
/// manual failover), which only pauses clients' commands, and under `maxmemory`, as grants add
/// data. OOM only with the `noeviction` policy: with any other policy the server evicts to make
/// room before its next command, and a grant made from a timer (no command to evict before)
/// would otherwise wait for traffic that may never come.
pub fn refused_or_oom(ctx: Ctx, key: RStr) -> Option<String> {
    if rm::dataset_paused() {
        return Some(PAUSED.to_string());
    }
    let flags = rm::ctx_flags(ctx);
    if flags & crate::ffi::rm::CTX_OOM != 0 && flags & crate::ffi::rm::CTX_EVICT == 0 {
        return Some(crate::logic::error::Error::Oom.reply().into_owned());
    }
    refused(ctx, key)
}

/// Error classes that mean "the server refuses writes now" (anything else, e.g. the expected
/// `ERR offset is out of range`, or a cluster redirect of the probe, means it does not).
const REFUSALS: [&str; 5] = ["NOREPLICAS", "MISCONF", "READONLY", "OOM", "MASTERDOWN"];

/// Why a grant is put off while the server pauses writes (counted, never replied).
const PAUSED: &str = "PAUSED the server pauses writes";

fn probe(ctx: Ctx, key: RStr) -> Option<String> {
    let r = crate::ffi::call::write_probe(ctx, key).ok()?;
    if !r.is_error() {
        return None; // cannot happen (the offset is invalid); writes are accepted
    }
    let text = String::from_utf8_lossy(r.bytes()).into_owned();
    let class = text.split(' ').next().unwrap_or("");
    REFUSALS.contains(&class).then_some(text)
}

// Server events that may change whether writes are refused.
crate::ffi::events::callback!(on_event, invalidate);

/// The events [`on_event`] is subscribed to (`lib.rs`).
pub const EVENTS: [u64; 6] = crate::ffi::events::WRITE_STATE;
