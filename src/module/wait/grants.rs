//! Grants, for every kind: serving a key's line when its object becomes available (inside the
//! command that made it so, or from a timer after a lease ran out, a foreign write, a flush),
//! script owners' turns, and the timers and deferrals that bring a key back to be looked at.
//! The kind's policy decides on each head (`logic/wait/policy.rs`); the kind writes each grant.

use super::callbacks::{quietly, unblock, Outcome};
use super::kind::{Grant, Kind, Look, Req};
use crate::ffi::key::Key;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::ffi::timers;
use crate::logic::error::Error;
use crate::logic::timing;
use crate::logic::wait::policy::{self, Gate, Head, Policy, Step};
use crate::logic::wait::queue::{KeyId, Waiter};
use crate::module::cluster::{self, Here};
use crate::module::{acl, effects, writes};
use crate::registry::{config, stats};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The key `name` in the context's database.
pub fn key_id(ctx: Ctx, name: RStr) -> KeyId {
    (rm::selected_db(ctx), rm::bytes(&name).to_vec())
}

/// The object at `key` (open for writing) may have become available: serve the head of its
/// line, and those behind it the policy lets follow. Returns whether anyone was granted.
/// `handoff` is true inside a release (a LOCK.* release, a native Redisson unlock).
///
/// When the head is a script owner's turn, nobody is granted: the object stays free, kept for
/// that owner for [`policy::TURN_MS`], and the release message tells it (published by the
/// releasing command, or here when it was freed some other way).
pub fn grant_head<K: Kind>(ctx: Ctx, key: &Key, name: RStr, now: i64, handoff: bool) -> bool {
    let table = K::table();
    if table.clients() == 0 {
        return false;
    }
    let kid = key_id(ctx, name);
    // A grant is a write: while the server refuses writes (or is out of memory) it is put off;
    // the waiters keep their places and the key is looked at again shortly.
    if writes::refused_or_oom(ctx, name).is_some() {
        stats::GRANTS_DEFERRED.inc();
        defer::<K>(ctx, kid);
        return false;
    }
    let reserved = table.with(|s| s.q.reservation(&kid).map(|(_, until)| until));
    match policy::gate(reserved, now) {
        Gate::Reserved => return false,
        Gate::Missed => {
            table.with(|s| s.q.set_reservation(&kid, None));
            stats::TURNS_MISSED.inc();
        }
        Gate::Open => {}
    }
    let view = match K::look(ctx, key, name) {
        Look::Open(v) | Look::Shared(v, _) => v,
        Look::Held(_) | Look::WrongType => return false,
    };
    let mut round = K::Policy::start(view);
    let mut any = false;
    loop {
        let next = table.with(|s| {
            let id = s.q.head(&kid)?;
            let w = s.q.get(id)?;
            let head = Head { owner: &w.owner, req: &w.req, turn_until: w.turn_until, deadline: w.deadline };
            Some((id, policy::next::<K::Policy>(Some(&head), &round, now)))
        });
        let Some((id, step)) = next else { break };
        if step == Step::Stop {
            break;
        }
        let who = table.with(|s| s.q.get(id).map(|w| w.handle)).and_then(acl::waiter_user);
        let Some(w) = table.take(ctx, id) else { break };
        let grant = match step {
            Step::Stop => break,
            Step::DropTurn => continue, // the script owner stopped trying
            Step::TimeOut => {
                stats::WAITS_TIMED_OUT.inc();
                K::stats().waits_timed_out.inc();
                unblock::<K>(w.handle, Outcome::TimedOut(w.req));
                continue;
            }
            Step::GiveTurn { until } => {
                table.with(|s| s.q.set_reservation(&kid, Some((w.owner.to_vec(), until))));
                stats::TURNS_GIVEN.inc();
                arm_expiry::<K>(ctx, &kid, Some(until), now);
                if !handoff {
                    effects::publish_release(ctx, name);
                }
                return false;
            }
            Step::Grant(g) => g,
        };
        let g = Grant { key, name, lock: &kid.1, owner: &w.owner, req: &w.req, grant, first: !any, now, who };
        match K::apply(ctx, g) {
            Ok(granted) => unblock::<K>(w.handle, Outcome::Granted(granted)),
            Err(e) => {
                stats::WAITS_FAILED.inc();
                unblock::<K>(w.handle, Outcome::Failed(e));
                continue;
            }
        }
        stats::WAITS_GRANTED.inc();
        K::stats().waits_granted.inc();
        if handoff {
            stats::HANDOFFS.inc();
            K::stats().handoffs.inc();
        } else {
            stats::GRANTS_AFTER_FREE.inc();
            K::stats().grants_after_free.inc();
        }
        K::Policy::granted(&mut round, &w.owner, grant);
        any = true;
    }
    // Waiters may remain: keep a timer at the end of the holds they wait for.
    if table.with(|s| s.q.has(&kid)) {
        match K::look(ctx, key, name) {
            Look::Held(deadline) | Look::Shared(_, deadline) => arm_expiry::<K>(ctx, &kid, deadline, now),
            Look::Open(_) | Look::WrongType => {}
        }
    }
    any
}

/// May a script owner take the free object now? Call after [`grant_head`] left it free.
pub enum Turn {
    Go,
    /// Another script owner's turn: the ms left of it (>= 1), to be replied as the PTTL.
    Wait(i64),
}

pub fn turn<K: Kind>(ctx: Ctx, name: RStr, owner: &[u8], now: i64) -> Turn {
    let table = K::table();
    if table.clients() == 0 {
        return Turn::Go;
    }
    let kid = key_id(ctx, name);
    table.with(|s| match policy::turn(s.q.reservation(&kid), owner, now) {
        policy::Turn::Wait(ms) => Turn::Wait(ms),
        policy::Turn::TakeReservation => {
            s.q.set_reservation(&kid, None);
            stats::TURNS_TAKEN.inc();
            Turn::Go
        }
        policy::Turn::Go => Turn::Go,
    })
}

/// A Redisson script owner's acquire of `name` failed while LOCK.* clients wait on it: give
/// it a place in the key's line (or keep the one it has). It was told to retry within `pttl`
/// ms (-1: only on the release message); its place lapses if it does not.
pub fn queue_turn<K: Kind>(ctx: Ctx, name: RStr, owner: &[u8], req: Req<K>, pttl: i64, now: i64) {
    let table = K::table();
    if table.clients() == 0 {
        return;
    }
    let kid = key_id(ctx, name);
    let until = policy::turn_place_until(pttl, now);
    table.with(|s| {
        if let Some(w) = s.q.turn_of(&kid, owner).and_then(|id| s.q.get_mut(id)) {
            w.turn_until = Some(until);
            return;
        }
        // Beyond the bounds the acquire is served as without the module: no turn.
        let turns = i64::try_from(s.q.turns()).unwrap_or(i64::MAX);
        if turns >= config::MAX_SCRIPT_TURNS.get() || !super::table::fits(&kid.1, owner) {
            if s.q.clients_on(&kid) != 0 {
                stats::TURNS_REFUSED.inc();
            }
            return;
        }
        let entry = Waiter {
            key: Arc::new(kid.clone()),
            owner: Arc::from(owner),
            req,
            deadline: None,
            handle: crate::ffi::blocked::Client::NONE,
            timer: None,
            turn_until: Some(until),
        };
        if s.q.push(entry).is_some() {
            stats::TURNS_QUEUED.inc();
        }
    });
}

/// End every wait on `key` with an error.
pub fn fail_all<K: Kind>(ctx: Ctx, key: &KeyId, msg: Error) {
    let table = K::table();
    for id in table.with(|s| s.q.ids_of(key)) {
        if let Some(w) = table.take(ctx, id).filter(|w| !w.is_turn()) {
            stats::WAITS_FAILED.inc();
            unblock::<K>(w.handle, Outcome::Failed(msg.clone()));
        }
    }
}

/// Re-examine a key with waiters after something else touched it.
fn check_key<K: Kind>(ctx: Ctx, kid: &KeyId, now: i64) {
    if !rm::flag(ctx, crate::ffi::rm::CTX_MASTER) || !K::table().with(|s| s.q.has(kid)) {
        return;
    }
    rm::select_db(ctx, kid.0);
    let name = OwnedStr::new(&kid.1);
    let key = Key::write(ctx, name.ptr());
    match K::look(ctx, &key, name.ptr()) {
        // Available (to some): grant it, if this node still serves it (cluster). While the
        // server keeps its dataset still (CLIENT PAUSE, FAILOVER), an expired key is not
        // deleted and opens as empty; `grant_head` puts the grant off until the pause ends.
        Look::Open(_) | Look::Shared(..) => match cluster::may_grant(ctx, name.ptr()) {
            Here::Moved => fail_all::<K>(ctx, kid, Error::SlotMoved),
            Here::Later => defer::<K>(ctx, kid.clone()),
            Here::Yes => {
                grant_head::<K>(ctx, &key, name.ptr(), now, false);
            }
        },
        Look::Held(deadline) => arm_expiry::<K>(ctx, kid, deadline, now),
        Look::WrongType => fail_all::<K>(ctx, kid, Error::WrongType),
    }
}

/// Wall-clock microseconds since the unix epoch.
fn now_us() -> Option<i64> {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_micros()).ok()
}

/// Keep a timer armed at the object's lease deadline while `key` has waiters (for a free
/// object kept for a script owner: at the end of its turn).
pub fn arm_expiry<K: Kind>(ctx: Ctx, key: &KeyId, deadline: Option<i64>, now: i64) {
    let table = K::table();
    let current = table.with(|s| {
        s.q.has(key).then(|| (s.q.expiry_timer(key), deadline.or(s.q.reservation(key).map(|(_, t)| t))))
    });
    let Some((current, deadline)) = current else { return };
    if current.map(|(_, d)| d) == deadline {
        return;
    }
    let new = deadline.map(|d| {
        // Redis expires a key once now > deadline, i.e. from (deadline + 1) ms on. The period is
        // computed from a microsecond clock so the timer is not up to 1 ms later than that; it
        // is capped (a later deadline re-arms) and never 0 for a key already past it.
        let now_us = now_us().unwrap_or_else(|| now.saturating_mul(1000));
        let period = timing::expiry_period_us(d, now_us);
        let key = key.clone();
        let t = timers::after(ctx, period, move |ctx| on_expiry_timer::<K>(ctx, key));
        (t, d)
    });
    if let Some(old) = table.with(|s| s.q.set_expiry_timer(key, new)) {
        timers::stop(ctx, old);
    }
}

fn on_expiry_timer<K: Kind>(ctx: Ctx, key: KeyId) {
    quietly(ctx, "lease timer", || {
        K::table().with(|s| {
            s.q.set_expiry_timer(&key, None);
        });
        check_key::<K>(ctx, &key, rm::millis());
    });
}

/// How long a grant put off by a write refusal waits before it is tried again.
const GRANT_RETRY_MS: i64 = 50;

/// Look at `kid` again in [`GRANT_RETRY_MS`] (one timer per kind, whatever the number of keys).
fn defer<K: Kind>(ctx: Ctx, kid: KeyId) {
    let table = K::table();
    table.with(|s| s.pending.insert(kid));
    if !table.defer_armed.swap(true, Ordering::Relaxed) {
        timers::after(ctx, GRANT_RETRY_MS, on_defer_timer::<K>);
    }
}

fn on_defer_timer<K: Kind>(ctx: Ctx) {
    K::table().defer_armed.store(false, Ordering::Relaxed);
    on_check_timer::<K>(ctx);
}

/// Re-examine the keys `pick` chooses (from those with waiters) in the next event-loop
/// iteration (one 0 ms timer per kind).
pub fn schedule_checks<K: Kind>(ctx: Ctx, pick: impl FnOnce(&super::table::Shared<K::Policy>) -> Vec<KeyId>) {
    let arm = K::table().with(|s| {
        let ks = pick(s);
        s.pending.extend(ks);
        let arm = !s.check_armed && !s.pending.is_empty();
        s.check_armed |= arm;
        arm
    });
    if arm {
        timers::after(ctx, 0, on_check_timer::<K>);
    }
}

fn on_check_timer<K: Kind>(ctx: Ctx) {
    quietly(ctx, "key check", || {
        let keys: Vec<KeyId> = K::table().with(|s| {
            s.check_armed = false;
            s.pending.drain().collect()
        });
        let now = rm::millis();
        for k in keys {
            check_key::<K>(ctx, &k, now);
        }
    });
}
