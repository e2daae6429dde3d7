//! Permits whose lease ended go back on time: one module timer per semaphore with leased
//! permits, armed at its earliest lease end, whether or not anyone waits. When it fires the
//! expired permits leave the zset, the count goes up, waiters are granted in order and the new
//! count is published; then the timer is armed at the next lease end.
//!
//! The module learns of leases from its own writes (LOCK.SEMACQUIRE, SEMRENEW, grants) and,
//! for permits Redisson clients take in Lua, from keyspace events on `...:timeout` keys (a
//! look at the zset from a 0 ms timer, never inside the event). Writes from a timer follow the
//! grants' rules: only on a master, put off while the server refuses writes.
//!
//! Generic over the kind whose waiters a return serves (the semaphore), so this file does not
//! name it.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr};
use crate::ffi::timers::{self, TimerId};
use crate::logic::semaphore::names::{self, NO_LEASE};
use crate::logic::timing;
use crate::logic::wait::queue::KeyId;
use crate::module::semaphore::store;
use crate::module::wait::callbacks::quietly;
use crate::module::wait::Kind;
use crate::module::{wait, writes};
use crate::registry::stats;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// The timer of each semaphore with a leased permit: (its id, the lease end it is armed for).
static ARMED: LazyLock<Mutex<HashMap<KeyId, (TimerId, i64)>>> = LazyLock::new(Default::default);

/// Zsets written by someone else, to look at from the next 0 ms timer.
static SEEN: LazyLock<Mutex<HashSet<KeyId>>> = LazyLock::new(Default::default);
/// The 0 ms timer that looks at them, while armed.
static SEEN_TIMER: Mutex<Option<TimerId>> = Mutex::new(None);

/// Whether any semaphore command ran since load: only then do keyspace events look for zsets.
static IN_USE: AtomicBool = AtomicBool::new(false);

/// How long a return put off by a write refusal waits before it is tried again.
const RETRY_MS: i64 = 50;

/// Run `f` on the armed timers; the INFO gauge follows.
fn with_armed<R>(f: impl FnOnce(&mut HashMap<KeyId, (TimerId, i64)>) -> R) -> R {
    let mut a = ARMED.lock().unwrap_or_else(PoisonError::into_inner);
    let r = f(&mut a);
    stats::SEM_LEASE_TIMERS.store(a.len(), Ordering::Relaxed);
    if a.is_empty() && a.capacity() > 64 {
        a.shrink_to_fit();
    }
    r
}

/// A semaphore command ran: watch the keyspace for Redisson's permits from now on.
pub fn in_use(ctx: Ctx) {
    if !IN_USE.swap(true, Ordering::Relaxed) {
        wait::events::watch_keyspace(ctx);
    }
}

fn now_us() -> Option<i64> {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_micros()).ok()
}

/// Semaphore `lock` (in the context's db) has a permit whose lease ends at `earliest`: make
/// sure its timer fires by then.
pub fn watch<K: Kind>(ctx: Ctx, lock: &[u8], earliest: Option<i64>, now: i64) {
    let Some(at) = earliest.filter(|&s| s < NO_LEASE) else { return };
    let kid: KeyId = (rm::selected_db(ctx), lock.to_vec());
    if with_armed(|a| a.get(&kid).is_some_and(|&(_, x)| x <= at)) {
        return;
    }
    arm::<K>(ctx, kid, at, now);
}

fn arm<K: Kind>(ctx: Ctx, kid: KeyId, at: i64, now: i64) {
    let now_us = now_us().unwrap_or_else(|| now.saturating_mul(1000));
    // A permit with score `at` is expired from `at` on (Redisson's `<= now`).
    let period = timing::period_us(at, now_us);
    arm_in::<K>(ctx, kid, at, period);
}

fn arm_in<K: Kind>(ctx: Ctx, kid: KeyId, at: i64, period: i64) {
    let k = kid.clone();
    let t = timers::after(ctx, period, move |ctx| on_timer::<K>(ctx, k, at));
    if let Some((old, _)) = with_armed(|a| a.insert(kid, (t, at))) {
        timers::stop(ctx, old);
    }
}

fn on_timer<K: Kind>(ctx: Ctx, kid: KeyId, at: i64) {
    quietly(ctx, "permit lease timer", || {
        // This timer fired: forget it (a newer one for the key would have stopped it).
        with_armed(|a| {
            if a.get(&kid).is_some_and(|&(_, x)| x == at) {
                a.remove(&kid);
            }
        });
        let now = rm::millis();
        if let timing::Fired::Rearm(p) = timing::on_fire(at, now) {
            arm_in::<K>(ctx, kid, at, p);
            return;
        }
        check::<K>(ctx, &kid, now);
    });
}

/// Return the expired permits of semaphore `kid`, grant its waiters, publish; arm the timer at
/// its next lease end.
fn check<K: Kind>(ctx: Ctx, kid: &KeyId, now: i64) {
    if !rm::flag(ctx, rm::CTX_MASTER) {
        return; // a replica: the master's returns reach it
    }
    rm::select_db(ctx, kid.0);
    let name = OwnedStr::new(&kid.1);
    if writes::refused_or_oom(ctx, name.ptr()).is_some() {
        stats::GRANTS_DEFERRED.inc();
        arm_in::<K>(ctx, kid.clone(), now, RETRY_MS);
        return;
    }
    let Ok(zname) = store::zset_name(None, &kid.1, true) else { return };
    let key = Key::write(ctx, name.ptr());
    let Ok(sem) = store::open(ctx, &key, name.ptr(), &zname) else { return };
    if sem.available().is_err() {
        return; // not a count: Redisson's scripts would fail on it too
    }
    let Ok(n) = sem.return_expired(ctx, now) else { return };
    if n > 0 {
        wait::grant_head::<K>(ctx, &key, name.ptr(), now, false);
        sem.publish(ctx);
    }
    let next = if n >= i64::try_from(store::RETURN_BATCH).unwrap_or(i64::MAX) {
        Some(now) // more expired than one batch: the rest in 1 ms
    } else {
        sem.earliest(ctx)
    };
    drop(sem);
    drop(key);
    match next {
        Some(at) if at <= now => arm_in::<K>(ctx, kid.clone(), at, 1),
        next => watch::<K>(ctx, &kid.1, next, now),
    }
}

/// A keyspace event on `key`: if it may be a semaphore's zset (`...:timeout`), look at it from
/// the next 0 ms timer (a Redisson client took or renewed a permit in Lua).
pub fn key_event<K: Kind>(ctx: Ctx, key: &[u8]) {
    if !IN_USE.load(Ordering::Relaxed) || !key.ends_with(b":timeout") {
        return;
    }
    quietly(ctx, "permit zset event", || {
        let db = rm::selected_db(ctx);
        SEEN.lock().unwrap_or_else(PoisonError::into_inner).insert((db, key.to_vec()));
        let mut t = SEEN_TIMER.lock().unwrap_or_else(PoisonError::into_inner);
        if t.is_none() {
            *t = Some(timers::after(ctx, 0, on_seen::<K>));
        }
    });
}

fn on_seen<K: Kind>(ctx: Ctx) {
    quietly(ctx, "permit zset check", || {
        *SEEN_TIMER.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let seen: Vec<KeyId> = SEEN.lock().unwrap_or_else(PoisonError::into_inner).drain().collect();
        let now = rm::millis();
        for (db, z) in seen {
            rm::select_db(ctx, db);
            let zs = OwnedStr::new(&z);
            let Some(earliest) = Key::read(ctx, zs.ptr()).zset_lowest() else { continue };
            // Of the names sharing this zset, one whose count exists, else the likelier.
            let owners = names::owners_of_zset(&z);
            let kind = |lock: &[u8]| Key::read(ctx, OwnedStr::new(lock).ptr()).kind();
            let pick = owners
                .iter()
                .find(|l| kind(l) == KeyKind::String)
                .or_else(|| owners.iter().find(|l| kind(l) == KeyKind::Empty));
            if let Some(lock) = pick {
                watch::<K>(ctx, lock, Some(earliest), now);
            }
        }
    });
}

/// Module unload: stop every timer (their code goes with the library).
pub fn stop_all(ctx: Ctx) {
    let all: Vec<(TimerId, i64)> = with_armed(|a| a.drain().map(|(_, v)| v).collect());
    for (t, _) in all {
        timers::stop(ctx, t);
    }
    if let Some(t) = SEEN_TIMER.lock().unwrap_or_else(PoisonError::into_inner).take() {
        timers::stop(ctx, t);
    }
}

/// Module load and unload: forget everything.
pub fn reset() {
    with_armed(HashMap::clear);
    SEEN.lock().unwrap_or_else(PoisonError::into_inner).clear();
    *SEEN_TIMER.lock().unwrap_or_else(PoisonError::into_inner) = None;
    IN_USE.store(false, Ordering::Relaxed);
}
