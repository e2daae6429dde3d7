//! Counters shown in the `lock_stats` INFO section.

use crate::ffi::info::Info;
use crate::ffi::rm::Ctx;
use crate::logic::kinds::{self, N_OPS};
use crate::logic::scripts::OpId;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Gauges of the waiter tables, the sums over every kind: each kind's table adds its changes
/// (`module/wait/table.rs`); INFO reads them, the waiting core's fast paths read `WAITERS`.
pub static WAITERS: AtomicUsize = AtomicUsize::new(0);
/// Semaphores with a lease timer armed (`module/semaphore/leases.rs` keeps it).
pub static SEM_LEASE_TIMERS: AtomicUsize = AtomicUsize::new(0);
/// Keys with waiters.
pub static KEYS: AtomicUsize = AtomicUsize::new(0);
/// Queued script-owner turns.
pub static TURNS: AtomicUsize = AtomicUsize::new(0);
/// Owner bytes kept for waiters and turns.
pub static BYTES: AtomicUsize = AtomicUsize::new(0);

pub struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// A kind's waiting counters (the `waits_*`, `handoffs` and `grants_after_free` fields are
/// their sums over every kind).
pub struct KindStats {
    pub waits_started: Counter,
    pub waits_granted: Counter,
    pub waits_timed_out: Counter,
    pub waits_cancelled: Counter,
    pub handoffs: Counter,
    pub grants_after_free: Counter,
}

impl KindStats {
    const fn new() -> KindStats {
        KindStats {
            waits_started: Counter::new(),
            waits_granted: Counter::new(),
            waits_timed_out: Counter::new(),
            waits_cancelled: Counter::new(),
            handoffs: Counter::new(),
            grants_after_free: Counter::new(),
        }
    }

    fn fields(&self) -> [(&'static str, &Counter); 6] {
        [
            ("waits_started", &self.waits_started),
            ("waits_granted", &self.waits_granted),
            ("waits_timed_out", &self.waits_timed_out),
            ("waits_cancelled", &self.waits_cancelled),
            ("handoffs", &self.handoffs),
            ("grants_after_free", &self.grants_after_free),
        ]
    }
}

/// The plain lock's waiting counters (INFO shows them as the sums, with no prefix).
pub static LOCK: KindStats = KindStats::new();
/// The read-write lock's (INFO: `rwlock_*`).
pub static RWLOCK: KindStats = KindStats::new();

/// The semaphore's (INFO: `semaphore_*`).
pub static SEMAPHORE: KindStats = KindStats::new();

pub static SEM_ACQUIRES: Counter = Counter::new();
pub static SEM_ACQUIRES_CONTENDED: Counter = Counter::new();
pub static SEM_PERMITS_TAKEN: Counter = Counter::new();
pub static SEM_RELEASES: Counter = Counter::new();
pub static SEM_RELEASES_MISSED: Counter = Counter::new();
pub static SEM_PERMITS_RELEASED: Counter = Counter::new();
pub static SEM_RENEWALS: Counter = Counter::new();
pub static SEM_RENEWALS_MISSED: Counter = Counter::new();
pub static SEM_SETS: Counter = Counter::new();
pub static SEM_SETS_NOT_SET: Counter = Counter::new();
/// Permits whose lease ended, returned by the module (a timer, or a command that found them).
pub static SEM_EXPIRED_RETURNED: Counter = Counter::new();

const SEM_FIELDS: [(&CStr, &Counter); 11] = [
    (c"semaphore_acquires", &SEM_ACQUIRES),
    (c"semaphore_acquires_contended", &SEM_ACQUIRES_CONTENDED),
    (c"semaphore_permits_taken", &SEM_PERMITS_TAKEN),
    (c"semaphore_releases", &SEM_RELEASES),
    (c"semaphore_releases_missed", &SEM_RELEASES_MISSED),
    (c"semaphore_permits_released", &SEM_PERMITS_RELEASED),
    (c"semaphore_renewals", &SEM_RENEWALS),
    (c"semaphore_renewals_missed", &SEM_RENEWALS_MISSED),
    (c"semaphore_sets", &SEM_SETS),
    (c"semaphore_sets_not_set", &SEM_SETS_NOT_SET),
    (c"semaphore_expired_returned", &SEM_EXPIRED_RETURNED),
];

pub static RW_ACQUIRES_READ: Counter = Counter::new();
pub static RW_ACQUIRES_WRITE: Counter = Counter::new();
pub static RW_ACQUIRES_REENTRANT: Counter = Counter::new();
pub static RW_ACQUIRES_CONTENDED: Counter = Counter::new();
pub static RW_RELEASES_READ: Counter = Counter::new();
pub static RW_RELEASES_WRITE: Counter = Counter::new();
pub static RW_RELEASES_FULL: Counter = Counter::new();
pub static RW_RELEASES_NOT_OWNER: Counter = Counter::new();
pub static RW_RENEWALS_OK: Counter = Counter::new();
pub static RW_RENEWALS_MISSED: Counter = Counter::new();
pub static RW_FORCE_RELEASES: Counter = Counter::new();
/// Read-mode hashes whose every read hold had expired, cleared for a writer.
pub static RW_EXPIRED_HOLDS: Counter = Counter::new();

const RW_FIELDS: [(&CStr, &Counter); 12] = [
    (c"rwlock_acquires_read", &RW_ACQUIRES_READ),
    (c"rwlock_acquires_write", &RW_ACQUIRES_WRITE),
    (c"rwlock_acquires_reentrant", &RW_ACQUIRES_REENTRANT),
    (c"rwlock_acquires_contended", &RW_ACQUIRES_CONTENDED),
    (c"rwlock_releases_read", &RW_RELEASES_READ),
    (c"rwlock_releases_write", &RW_RELEASES_WRITE),
    (c"rwlock_releases_full", &RW_RELEASES_FULL),
    (c"rwlock_releases_not_owner", &RW_RELEASES_NOT_OWNER),
    (c"rwlock_renewals_ok", &RW_RENEWALS_OK),
    (c"rwlock_renewals_missed", &RW_RENEWALS_MISSED),
    (c"rwlock_force_releases", &RW_FORCE_RELEASES),
    (c"rwlock_expired_holds_cleared", &RW_EXPIRED_HOLDS),
];

pub static ACQUIRES_NEW: Counter = Counter::new();
pub static ACQUIRES_REENTRANT: Counter = Counter::new();
pub static ACQUIRES_CONTENDED: Counter = Counter::new();
pub static RELEASES_PARTIAL: Counter = Counter::new();
pub static RELEASES_FULL: Counter = Counter::new();
pub static RELEASES_NOT_OWNER: Counter = Counter::new();
pub static RENEWALS_OK: Counter = Counter::new();
pub static RENEWALS_MISSED: Counter = Counter::new();
pub static FORCE_RELEASES: Counter = Counter::new();
pub static FORCE_RELEASES_MISSED: Counter = Counter::new();
pub static PUBLISHES: Counter = Counter::new();
pub static WAITS_STARTED: Counter = Counter::new();
pub static WAITS_GRANTED: Counter = Counter::new();
pub static WAITS_TIMED_OUT: Counter = Counter::new();
pub static WAITS_CANCELLED: Counter = Counter::new();
pub static WAITS_FAILED: Counter = Counter::new();
pub static HANDOFFS: Counter = Counter::new();
pub static GRANTS_AFTER_FREE: Counter = Counter::new();
pub static TOKENS_ISSUED: Counter = Counter::new();
pub static TURNS_QUEUED: Counter = Counter::new();
pub static TURNS_GIVEN: Counter = Counter::new();
pub static TURNS_TAKEN: Counter = Counter::new();
pub static TURNS_MISSED: Counter = Counter::new();
pub static ERRORS: Counter = Counter::new();
pub static PANICS: Counter = Counter::new();
/// WAIT requests served as without WAIT because of `lock.max-waiters` / `lock.max-waiter-bytes`.
pub static WAITS_REFUSED: Counter = Counter::new();
/// Turns not queued because of `lock.max-script-turns` / `lock.max-waiter-bytes`.
pub static TURNS_REFUSED: Counter = Counter::new();
/// Natively run scripts, FENCE token keys and grants refused by an ACL check of the module.
pub static ACL_DENIED: Counter = Counter::new();
/// Natively run scripts refused because the server refuses writes (NOREPLICAS, MISCONF...).
pub static WRITES_REFUSED: Counter = Counter::new();
/// Grants put off because the server refused writes (or was out of memory) at that moment.
pub static GRANTS_DEFERRED: Counter = Counter::new();

const FIELDS: [(&CStr, &Counter); 30] = [
    (c"acquires_new", &ACQUIRES_NEW),
    (c"acquires_reentrant", &ACQUIRES_REENTRANT),
    (c"acquires_contended", &ACQUIRES_CONTENDED),
    (c"releases_partial", &RELEASES_PARTIAL),
    (c"releases_full", &RELEASES_FULL),
    (c"releases_not_owner", &RELEASES_NOT_OWNER),
    (c"renewals_ok", &RENEWALS_OK),
    (c"renewals_missed", &RENEWALS_MISSED),
    (c"force_releases", &FORCE_RELEASES),
    (c"force_releases_missed", &FORCE_RELEASES_MISSED),
    (c"release_messages", &PUBLISHES),
    (c"waits_started", &WAITS_STARTED),
    (c"waits_granted", &WAITS_GRANTED),
    (c"waits_timed_out", &WAITS_TIMED_OUT),
    (c"waits_cancelled", &WAITS_CANCELLED),
    (c"waits_failed", &WAITS_FAILED),
    (c"handoffs", &HANDOFFS),
    (c"grants_after_free", &GRANTS_AFTER_FREE),
    (c"tokens_issued", &TOKENS_ISSUED),
    (c"script_turns_queued", &TURNS_QUEUED),
    (c"script_turns_given", &TURNS_GIVEN),
    (c"script_turns_taken", &TURNS_TAKEN),
    (c"script_turns_missed", &TURNS_MISSED),
    (c"errors", &ERRORS),
    (c"panics_caught", &PANICS),
    (c"waits_refused", &WAITS_REFUSED),
    (c"script_turns_refused", &TURNS_REFUSED),
    (c"acl_denials", &ACL_DENIED),
    (c"writes_refused", &WRITES_REFUSED),
    (c"grants_deferred", &GRANTS_DEFERRED),
];

/// Zero every counter (module load and unload: a reloaded module starts afresh).
pub fn reset() {
    for (_, c) in FIELDS.iter().chain(RW_FIELDS.iter()).chain(SEM_FIELDS.iter()) {
        c.reset();
    }
    for k in [&LOCK, &RWLOCK, &SEMAPHORE] {
        for (_, c) in k.fields() {
            c.reset();
        }
    }
    for c in REDISSON_NATIVE.iter().chain(REDISSON_LUA.iter()) {
        c.reset();
    }
}

/// Native runs and runs left to Lua of each script operation (by `OpId`, `kinds::OPS`).
static REDISSON_NATIVE: [Counter; N_OPS] = [const { Counter::new() }; N_OPS];
static REDISSON_LUA: [Counter; N_OPS] = [const { Counter::new() }; N_OPS];

pub fn redisson_native(op: OpId) {
    if let Some(c) = REDISSON_NATIVE.get(op.0) {
        c.inc();
    }
}

pub fn redisson_lua(op: OpId) {
    if let Some(c) = REDISSON_LUA.get(op.0) {
        c.inc();
    }
}

/// The INFO section `lock_stats`: every counter and the waiter gauges.
fn write_info(info: &mut Info) {
    info.section(c"stats");
    for (name, c) in FIELDS {
        info.field(name, c.get());
    }
    for (i, op) in kinds::OPS.iter().enumerate() {
        let base = op.name.replace('-', "_");
        for (suffix, counters) in [("native", &REDISSON_NATIVE), ("lua", &REDISSON_LUA)] {
            let n = counters.get(i).map_or(0, Counter::get);
            if let Ok(name) = std::ffi::CString::new(format!("redisson_{base}_{suffix}")) {
                info.field(&name, n);
            }
        }
    }
    for (name, c) in RW_FIELDS {
        info.field(name, c.get());
    }
    for (name, c) in RWLOCK.fields() {
        if let Ok(name) = std::ffi::CString::new(format!("rwlock_{name}")) {
            info.field(&name, c.get());
        }
    }
    for (name, c) in SEM_FIELDS {
        info.field(name, c.get());
    }
    for (name, c) in SEMAPHORE.fields() {
        if let Ok(name) = std::ffi::CString::new(format!("semaphore_{name}")) {
            info.field(&name, c.get());
        }
    }
    info.field(c"semaphore_lease_timers", SEM_LEASE_TIMERS.load(Ordering::Relaxed) as u64);
    let [waiters, keys, turns] = [&WAITERS, &KEYS, &TURNS].map(|g| g.load(Ordering::Relaxed));
    info.field(c"waiters", waiters as u64);
    info.field(c"keys_with_waiters", keys as u64);
    info.field(c"script_turns_waiting", turns as u64);
    info.field(c"waiter_bytes", BYTES.load(Ordering::Relaxed) as u64);
}

pub fn register_info(ctx: Ctx) {
    crate::ffi::info::register(ctx, write_info);
}
