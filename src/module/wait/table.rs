//! A kind's waiter table: its per-key lines of blocked clients and script owners' turns
//! (`logic/wait/queue.rs`) behind one mutex, the keys to re-examine, its gauges (INFO shows
//! their sums over every kind), and the bounds on what waiting may keep.

use crate::ffi::blocked::Client;
use crate::ffi::rm::Ctx;
use crate::ffi::timers::{self, TimerId};
use crate::logic::wait::policy::Policy;
use crate::logic::wait::queue::{KeyId, WaitQueues, Waiter};
use crate::registry::config;
use crate::registry::stats::{self, BYTES, KEYS, TURNS, WAITERS};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError, TryLockError};

/// What the mutex guards.
pub struct Shared<P: Policy> {
    pub q: WaitQueues<Client, P::Request, TimerId>,
    /// The waiter id of each blocked client.
    pub by_client: HashMap<Client, u64>,
    /// Keys to re-examine at the next check (a 0 ms timer, or the deferral timer).
    pub pending: HashSet<KeyId>,
    /// Whether the 0 ms check timer is armed.
    pub check_armed: bool,
}

impl<P: Policy> Default for Shared<P> {
    fn default() -> Self {
        Shared {
            q: WaitQueues::default(),
            by_client: HashMap::new(),
            pending: HashSet::new(),
            check_armed: false,
        }
    }
}

/// A kind's table, made once as a `static` by the kind.
pub struct Table<P: Policy> {
    shared: LazyLock<Mutex<Shared<P>>>,
    clients: AtomicUsize,
    turns: AtomicUsize,
    bytes: AtomicUsize,
    keys: AtomicUsize,
    /// Whether the retry timer of deferred grants is armed (one per kind, whatever the keys).
    pub defer_armed: AtomicBool,
}

impl<P: Policy> Table<P> {
    pub const fn new() -> Self {
        Table {
            shared: LazyLock::new(|| Mutex::new(Shared::default())),
            clients: AtomicUsize::new(0),
            turns: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            keys: AtomicUsize::new(0),
            defer_armed: AtomicBool::new(false),
        }
    }

    /// Run `f` on the table. Never call Redis APIs that can call back into this module
    /// (notifications, unblocking) inside `f`.
    pub fn with<R>(&self, f: impl FnOnce(&mut Shared<P>) -> R) -> R {
        let mut g = match self.shared.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => panic!("lock module: re-entrant use of the waiter table"),
        };
        let r = f(&mut g);
        if g.q.is_empty() && g.by_client.capacity() > 0 {
            g.q.shrink_if_empty();
            g.by_client.shrink_to_fit();
        }
        if g.pending.is_empty() && g.pending.capacity() > 0 {
            g.pending.shrink_to_fit();
        }
        self.publish(g.q.clients(), g.q.turns(), g.q.kept_bytes(), g.q.key_count());
        r
    }

    /// Keep this table's gauges, and the server-wide ones (the sums over kinds), up to date.
    fn publish(&self, clients: usize, turns: usize, bytes: usize, keys: usize) {
        for (mine, total, v) in [
            (&self.clients, &WAITERS, clients),
            (&self.turns, &TURNS, turns),
            (&self.bytes, &BYTES, bytes),
            (&self.keys, &KEYS, keys),
        ] {
            let old = mine.swap(v, Ordering::Relaxed);
            if v > old {
                total.fetch_add(v - old, Ordering::Relaxed);
            } else if old > v {
                total.fetch_sub(old - v, Ordering::Relaxed);
            }
        }
    }

    /// Blocked clients of this kind (readable without the lock: fast paths).
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// Module load and unload: forget everything.
    pub fn reset(&self) {
        *self.shared.lock().unwrap_or_else(PoisonError::into_inner) = Shared::default();
        self.publish(0, 0, 0, 0);
        self.defer_armed.store(false, Ordering::Relaxed);
    }

    /// Take waiter `id` out of the table and stop its timers. `None` if it was already gone.
    pub fn take(&self, ctx: Ctx, id: u64) -> Option<Waiter<Client, P::Request, TimerId>> {
        let (w, stale) = self.with(|s| {
            let (w, stale) = s.q.remove(id)?;
            s.by_client.remove(&w.handle);
            Some((w, stale))
        })?;
        if !w.is_turn() {
            crate::module::acl::forget_waiter(w.handle);
        }
        if let Some(t) = w.timer {
            timers::stop(ctx, t);
        }
        if let Some(t) = stale {
            timers::stop(ctx, t);
        }
        Some(w)
    }
}

/// Whether `lock.max-waiter-bytes` lets an entry for key `name` and owner id `owner` be kept:
/// the bytes one waiter or turn may make the module keep (its owner id, and the name, which is
/// kept once per key).
pub fn fits(name: &[u8], owner: &[u8]) -> bool {
    i64::try_from(name.len().saturating_add(owner.len())).is_ok_and(|n| n <= config::MAX_WAITER_BYTES.get())
}

/// May a client with this owner id block on key `name` now (`lock.max-waiters` over every
/// kind, `lock.max-waiter-bytes`)? When not, counted in `waits_refused`; the caller serves the
/// request as without WAIT.
pub fn admit(name: &[u8], owner: &[u8]) -> bool {
    let waiters = i64::try_from(WAITERS.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
    let ok = waiters < config::MAX_WAITERS.get() && fits(name, owner);
    if !ok {
        stats::WAITS_REFUSED.inc();
    }
    ok
}
