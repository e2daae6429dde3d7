//! Permits whose lease ended go back on time: every semaphore with a leased permit is watched
//! at its earliest lease end (one module timer for all, at the earliest of them), whether or
//! not anyone waits. When it fires the
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
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// The semaphores whose next lease end is watched, with one module timer for all of them
/// (armed at the earliest): creating a timer per acquire cost more than the acquire.
#[derive(Default)]
struct Book {
    /// db -> semaphore -> the lease end watched for it.
    by_key: HashMap<i32, HashMap<Vec<u8>, i64>>,
    /// lease end -> the semaphores watched for it (an entry whose `by_key` time differs is stale).
    by_time: BTreeMap<i64, Vec<KeyId>>,
    /// The one timer: (id, the lease end it is armed for).
    timer: Option<(TimerId, i64)>,
    watched: usize,
}

static BOOK: LazyLock<Mutex<Book>> = LazyLock::new(Default::default);

/// Zsets written by someone else, to look at from the next 0 ms timer.
static SEEN: LazyLock<Mutex<HashSet<KeyId>>> = LazyLock::new(Default::default);
/// The 0 ms timer that looks at them, while armed.
static SEEN_TIMER: Mutex<Option<TimerId>> = Mutex::new(None);

/// Whether any semaphore command ran since load: only then do keyspace events look for zsets.
static IN_USE: AtomicBool = AtomicBool::new(false);

/// How long a return put off by a write refusal waits before it is tried again.
const RETRY_MS: i64 = 50;

/// Run `f` on the book; the INFO gauge follows.
fn with_book<R>(f: impl FnOnce(&mut Book) -> R) -> R {
    let mut b = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
    let r = f(&mut b);
    stats::SEM_LEASE_TIMERS.store(b.watched, Ordering::Relaxed);
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
/// sure it is looked at by then. Cheap when it already is (no allocation).
pub fn watch<K: Kind>(ctx: Ctx, lock: &[u8], earliest: Option<i64>, now: i64) {
    let Some(at) = earliest.filter(|&s| s < NO_LEASE) else { return };
    let db = rm::selected_db(ctx);
    let known = with_book(|b| b.by_key.get(&db).and_then(|m| m.get(lock)).is_some_and(|&x| x <= at));
    if !known {
        insert::<K>(ctx, (db, lock.to_vec()), at, now);
    }
}

/// Watch `kid` at `at` (replacing an earlier watch), and keep the timer at the earliest.
fn insert<K: Kind>(ctx: Ctx, kid: KeyId, at: i64, now: i64) {
    let rearm = with_book(|b| {
        let m = b.by_key.entry(kid.0).or_default();
        if m.insert(kid.1.clone(), at).is_none() {
            b.watched += 1;
        }
        b.by_time.entry(at).or_default().push(kid);
        b.timer.is_none_or(|(_, t)| at < t)
    });
    if rearm {
        arm::<K>(ctx, at, now);
    }
}

/// (Re-)arm the one timer for lease end `at`.
fn arm<K: Kind>(ctx: Ctx, at: i64, now: i64) {
    let now_us = now_us().unwrap_or_else(|| now.saturating_mul(1000));
    // A permit with score `at` is expired from `at` on (Redisson's `<= now`).
    let period = timing::period_us(at, now_us);
    let t = timers::after(ctx, period, move |ctx| on_timer::<K>(ctx, at));
    if let Some((old, _)) = with_book(|b| b.timer.replace((t, at))) {
        timers::stop(ctx, old);
    }
}

fn on_timer<K: Kind>(ctx: Ctx, at: i64) {
    quietly(ctx, "permit lease timer", || {
        with_book(|b| {
            if b.timer.is_some_and(|(_, t)| t == at) {
                b.timer = None;
            }
        });
        let now = rm::millis();
        // Every watch that is due, taken out of the book (stale entries dropped).
        let due: Vec<KeyId> = with_book(|b| {
            let later = b.by_time.split_off(&now.saturating_add(1));
            let due = std::mem::replace(&mut b.by_time, later);
            let mut out = Vec::new();
            for (t, kids) in due {
                for kid in kids {
                    let current = b.by_key.get(&kid.0).and_then(|m| m.get(&kid.1)).copied();
                    if current == Some(t) {
                        if let Some(m) = b.by_key.get_mut(&kid.0) {
                            m.remove(&kid.1);
                            if m.is_empty() {
                                b.by_key.remove(&kid.0);
                            }
                        }
                        b.watched = b.watched.saturating_sub(1);
                        out.push(kid);
                    }
                }
            }
            if b.by_key.is_empty() {
                b.by_key.shrink_to_fit();
            }
            out
        });
        for kid in due {
            check::<K>(ctx, &kid, now);
        }
        // The next lease end (a long one takes several capped timers: `period_us` caps).
        let next = with_book(|b| if b.timer.is_none() { b.by_time.keys().next().copied() } else { None });
        if let Some(t) = next {
            arm::<K>(ctx, t, rm::millis());
        }
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
        insert::<K>(ctx, kid.clone(), now.saturating_add(RETRY_MS), now);
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
        Some(at) if at <= now => insert::<K>(ctx, kid.clone(), now.saturating_add(1), now),
        next => {
            rm::select_db(ctx, kid.0);
            watch::<K>(ctx, &kid.1, next, now);
        }
    }
}

/// A keyspace event on `key`: if it may be a semaphore's zset (`...:timeout`), look at it from
/// the next 0 ms timer (a Redisson client took or renewed a permit in Lua).
pub fn key_event<K: Kind>(ctx: Ctx, key: &[u8]) {
    if !IN_USE.load(Ordering::Relaxed) || store::own_write() || !key.ends_with(b":timeout") {
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

/// The dataset arrived (loaded, or this server became a master): every `...:timeout` key in
/// every database is looked at from the next 0 ms timer, as a written one would be, so permits
/// loaded from disk or replicated here return on time with no client activity. One scan of the
/// keyspace (cheap next to the loading itself).
pub fn rescan<K: Kind>(ctx: Ctx) {
    let before = rm::selected_db(ctx);
    let mut found: Vec<KeyId> = Vec::new();
    let mut db = 0;
    while rm::try_select_db(ctx, db) {
        crate::ffi::key::scan_names(ctx, &mut |name| {
            if name.ends_with(b":timeout") {
                found.push((db, name.to_vec()));
            }
        });
        db += 1;
    }
    rm::select_db(ctx, before);
    if found.is_empty() {
        return;
    }
    // Semaphores are in use here: Redisson's Lua-taken permits are watched from now on too.
    in_use(ctx);
    SEEN.lock().unwrap_or_else(PoisonError::into_inner).extend(found);
    let mut t = SEEN_TIMER.lock().unwrap_or_else(PoisonError::into_inner);
    if t.is_none() {
        *t = Some(timers::after(ctx, 0, on_seen::<K>));
    }
}

/// Module unload: stop the timers (their code goes with the library).
pub fn stop_all(ctx: Ctx) {
    if let Some((t, _)) = with_book(|b| b.timer.take()) {
        timers::stop(ctx, t);
    }
    if let Some(t) = SEEN_TIMER.lock().unwrap_or_else(PoisonError::into_inner).take() {
        timers::stop(ctx, t);
    }
}

/// Module load and unload: forget everything.
pub fn reset() {
    with_book(|b| *b = Book::default());
    SEEN.lock().unwrap_or_else(PoisonError::into_inner).clear();
    *SEEN_TIMER.lock().unwrap_or_else(PoisonError::into_inner) = None;
    IN_USE.store(false, Ordering::Relaxed);
}
