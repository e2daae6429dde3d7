//! Server-side FIFO waiting: blocked LOCK.ACQUIRE ... WAIT clients and the lock handoff.
//!
//! Clients block with a raw `RM_BlockClient` (no Redis timeout); their wait timeout runs on a
//! module timer so it is exact, and a grant never reaches a client whose deadline passed.
//! Frees that do not go through LOCK.RELEASE/FORCERELEASE are noticed three ways: a timer armed
//! at the holder's lease deadline, keyspace events on keys that have waiters (DEL, RENAME, a
//! foreign script, a type change...), and the FLUSHDB/FLUSHALL server event. Those paths write
//! from a 0 ms timer, never inside the event callback.

use crate::ffi::blocked::{self, Client, Waits};
use crate::ffi::events;
use crate::ffi::rm::{self, Ctx, Key, KeyKind, OwnedStr, RStr};
use crate::ffi::timers::{self, TimerId};
use crate::logic::error::Error;
use crate::logic::timing;
use crate::logic::wait::policy::{self as grant, Gate, Head, Holder, Step};
use crate::logic::wait::queue::{KeyId, WaitQueues, Waiter};
use crate::module::cluster::Here;
use crate::module::effects;
use crate::module::token;
use crate::registry::stats;
use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, TryLockError};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Default)]
struct Shared {
    q: WaitQueues<Client, TimerId>,
    by_client: HashMap<Client, u64>,
    pending: HashSet<KeyId>,
    check_armed: bool,
}

static SHARED: LazyLock<Mutex<Shared>> = LazyLock::new(Default::default);
/// Mirrors of the table's sizes, readable without the lock (fast paths), pushed into the
/// INFO gauges that stats owns.
use crate::registry::stats::{BYTES, KEYS, TURNS, WAITERS};
/// Whether the keyspace-event subscription is in place (see [`watch_keyspace`]).
static WATCHING: AtomicBool = AtomicBool::new(false);

/// Subscribe to keyspace events, once, when the first client waits. A module subscriber costs
/// every write in the server a callback (about 1 200 instructions per notification on 7.0),
/// so servers that never use WAIT do not pay it. Redis 7.0 has no unsubscribe API, so the
/// subscription then stays for the life of the process.
fn watch_keyspace(ctx: Ctx) {
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

/// Run `f` on the waiter table. Never call Redis APIs that can call back into this module
/// (notifications, unblocking) inside `f`.
fn with<R>(f: impl FnOnce(&mut Shared) -> R) -> R {
    let mut g = match SHARED.try_lock() {
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
    WAITERS.store(g.q.clients(), Ordering::Relaxed);
    TURNS.store(g.q.turns(), Ordering::Relaxed);
    BYTES.store(g.q.kept_bytes(), Ordering::Relaxed);
    KEYS.store(g.q.key_count(), Ordering::Relaxed);
    r
}

/// Whether `lock.max-waiter-bytes` lets an entry for lock `name` and owner id `owner` be kept:
/// the bytes one waiter or turn may make the module keep (its owner id, and the name, which is
/// kept once per key).
fn fits(name: &[u8], owner: &[u8]) -> bool {
    i64::try_from(name.len().saturating_add(owner.len()))
        .is_ok_and(|n| n <= crate::registry::config::MAX_WAITER_BYTES.get())
}

/// May a client with this owner id block on lock `name` now (`lock.max-waiters`,
/// `lock.max-waiter-bytes`)? When not, counted in `waits_refused`; the caller serves the
/// request as without WAIT.
pub fn admit(name: &[u8], owner: &[u8]) -> bool {
    let waiters = i64::try_from(WAITERS.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
    let ok = waiters < crate::registry::config::MAX_WAITERS.get() && fits(name, owner);
    if !ok {
        stats::WAITS_REFUSED.inc();
    }
    ok
}

/// Module load and unload: forget everything (a reloaded module starts afresh; the library
/// may stay mapped between the two, keeping its statics).
pub fn reset() {
    *SHARED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Shared::default();
    for gauge in [&WAITERS, &KEYS, &TURNS, &BYTES] {
        gauge.store(0, Ordering::Relaxed);
    }
    // Redis drops a module's keyspace subscription when it unloads the module.
    WATCHING.store(false, Ordering::Relaxed);
    DEFER_ARMED.store(false, Ordering::Relaxed);
}

/// Number of clients waiting on `key` in `db`.
pub fn waiting_on(db: i32, key: &[u8]) -> usize {
    if WAITERS.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    with(|s| s.q.clients_on(&(db, key.to_vec())))
}

enum Outcome {
    /// Granted; the fencing token when the waiter asked for one.
    Granted(Option<i64>),
    /// The wait ran out; `fence`: the waiter asked for a token (the reply is then a pair).
    TimedOut {
        fence: bool,
    },
    Failed(Error),
}

/// The blocked LOCK.ACQUIRE ... WAIT clients' callbacks (see [`blocked::Waits`]).
struct Waiting;

#[inline]
fn unblock(handle: Client, outcome: Outcome) {
    blocked::unblock::<Waiting>(handle, outcome);
}

/// Take waiter `id` out of the table and stop its timers. `None` if it was already gone.
fn take(ctx: Ctx, id: u64) -> Option<Waiter<Client, TimerId>> {
    let (w, stale) = with(|s| {
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

/// Wall-clock microseconds since the unix epoch.
fn now_us() -> Option<i64> {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_micros()).ok()
}

/// Keep a timer armed at the lock's lease deadline while `key` has waiters (for a free lock
/// kept for a script owner: at the end of its turn).
fn arm_expiry(ctx: Ctx, key: &KeyId, deadline: Option<i64>, now: i64) {
    let current = with(|s| {
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
        let t = timers::after(ctx, period, move |ctx| on_expiry_timer(ctx, key));
        (t, d)
    });
    if let Some(old) = with(|s| s.q.set_expiry_timer(key, new)) {
        timers::stop(ctx, old);
    }
}

/// What a blocked LOCK.ACQUIRE asked for.
pub struct Request<'a> {
    pub owner: &'a [u8],
    pub lease_ms: i64,
    pub fence: bool,
}

/// Block the calling client at the tail of `name`'s queue.
pub fn block(
    ctx: Ctx,
    name: RStr,
    req: Request,
    wait_deadline: Option<i64>,
    lock_deadline: Option<i64>,
    now: i64,
) {
    let Some(bc) = blocked::block::<Waiting>(ctx) else {
        rm::reply_error(ctx, &Error::CannotBlock.reply());
        return;
    };
    crate::module::acl::remember_waiter(ctx, bc);
    watch_keyspace(ctx);
    let key: KeyId = (rm::selected_db(ctx), rm::bytes(&name).to_vec());
    let waiter = Waiter {
        key: Arc::new(key.clone()),
        owner: Arc::from(req.owner),
        lease_ms: req.lease_ms,
        fence: req.fence,
        deadline: wait_deadline,
        handle: bc,
        timer: None,
        turn_until: None,
    };
    let id = with(|s| {
        let id = s.q.push(waiter);
        s.by_client.insert(bc, id);
        id
    });
    stats::WAITS_STARTED.inc();
    if let Some(d) = wait_deadline {
        arm_wait_timer(ctx, id, timing::period(d, now));
    }
    arm_expiry(ctx, &key, lock_deadline, now);
}

/// Whether `key` (in the context's db) has waiters; cheap when nobody waits anywhere.
pub fn has_waiters(ctx: Ctx, name: RStr) -> bool {
    WAITERS.load(Ordering::Relaxed) != 0 && waiting_on(rm::selected_db(ctx), rm::bytes(&name)) != 0
}

/// The lock at `key` (open for writing) is free: give it to the head waiter, and to the
/// waiters right behind it that have the same owner id. Returns whether anyone got it.
/// `handoff` is true inside a release (LOCK.RELEASE / FORCERELEASE, a native Redisson unlock).
///
/// When the head is a script owner's turn, nobody is granted: the lock stays free, kept for
/// that owner for [`grant::TURN_MS`], and the release message tells it (published by the releasing
/// command, or here when the lock was freed some other way).
pub fn grant_head(ctx: Ctx, key: &Key, name: RStr, now: i64, handoff: bool) -> bool {
    if WAITERS.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let kid: KeyId = (rm::selected_db(ctx), rm::bytes(&name).to_vec());
    // A grant is a write: while the server refuses writes (or is out of memory) it is put off;
    // the waiters keep their places and the key is looked at again shortly.
    if crate::module::writes::refused_or_oom(ctx, name).is_some() {
        stats::GRANTS_DEFERRED.inc();
        defer_grant(ctx, kid);
        return false;
    }
    let reserved = with(|s| s.q.reservation(&kid).map(|(_, until)| until));
    match grant::gate(reserved, now) {
        Gate::Reserved => return false,
        Gate::Missed => {
            with(|s| s.q.set_reservation(&kid, None));
            stats::TURNS_MISSED.inc();
        }
        Gate::Open => {}
    }
    let mut holder: Option<(Vec<u8>, i64)> = None;
    loop {
        // The policy decides on the head (logic/grant.rs); this applies the decision.
        let next = with(|s| {
            let id = s.q.head(&kid)?;
            let w = s.q.get(id)?;
            let head = Head { owner: &w.owner, turn_until: w.turn_until, deadline: w.deadline };
            let held = holder.as_ref().map(|(owner, count)| Holder { owner, count: *count });
            Some((id, grant::next(Some(&head), held.as_ref(), now)))
        });
        let Some((id, step)) = next else { break };
        if step == Step::Stop {
            break;
        }
        let who = with(|s| s.q.get(id).map(|w| w.handle)).and_then(crate::module::acl::waiter_user);
        let Some(w) = take(ctx, id) else { break };
        let count = match step {
            Step::Stop => break,
            Step::DropTurn => continue, // the script owner stopped trying
            Step::TimeOut => {
                stats::WAITS_TIMED_OUT.inc();
                unblock(w.handle, Outcome::TimedOut { fence: w.fence });
                continue;
            }
            Step::GiveTurn { until } => {
                with(|s| s.q.set_reservation(&kid, Some((w.owner.to_vec(), until))));
                stats::TURNS_GIVEN.inc();
                arm_expiry(ctx, &kid, Some(until), now);
                if !handoff {
                    effects::publish_release(ctx, name);
                }
                return false;
            }
            Step::Grant { count } => count,
        };
        // Where the server re-checks its own blocked commands, a waiter that lost the permission
        // to take the lock (or to write its token key) gets NOPERM instead of the grant.
        let token_key = w.fence.then(|| crate::registry::config::token_key(&kid.1));
        if !crate::module::acl::waiter_may_take(who, &kid.1, &w.owner, token_key.as_deref()) {
            stats::WAITS_FAILED.inc();
            unblock(w.handle, Outcome::Failed(Error::GrantDenied));
            continue;
        }
        // A FENCE waiter's token key is checked before its grant writes anything.
        // Same-owner waiters granted behind the first share its hold, and so its token.
        let token = match w.fence.then(|| token::prepare_for(ctx, &kid.1, count > 1)).transpose() {
            Ok(t) => t,
            Err(msg) => {
                stats::WAITS_FAILED.inc();
                unblock(w.handle, Outcome::Failed(msg));
                continue;
            }
        };
        let owner = OwnedStr::new(&w.owner);
        // The first grant writes a free (absent) key; a later one in this loop re-enters it.
        let deadline = now.saturating_add(w.lease_ms);
        let hold = effects::Hold { owner: owner.ptr(), count, deadline, now, fresh: holder.is_none() };
        effects::grant(ctx, key, name, hold);
        unblock(w.handle, Outcome::Granted(token.map(|t| t.write(ctx, now))));
        stats::WAITS_GRANTED.inc();
        if handoff {
            stats::HANDOFFS.inc();
        } else {
            stats::GRANTS_AFTER_FREE.inc();
        }
        holder = Some((w.owner.to_vec(), count));
    }
    if holder.is_some() {
        arm_expiry(ctx, &kid, key.deadline(), now);
    }
    holder.is_some()
}

/// May `owner` take the free lock `name` now? Call after [`grant_head`] left it free.
pub enum Turn {
    Go,
    /// Another script owner's turn: the ms left of it (>= 1), to be replied as the PTTL.
    Wait(i64),
}

pub fn turn(ctx: Ctx, name: RStr, owner: &[u8], now: i64) -> Turn {
    if WAITERS.load(Ordering::Relaxed) == 0 {
        return Turn::Go;
    }
    let kid: KeyId = (rm::selected_db(ctx), rm::bytes(&name).to_vec());
    with(|s| match grant::turn(s.q.reservation(&kid), owner, now) {
        grant::Turn::Wait(ms) => Turn::Wait(ms),
        grant::Turn::TakeReservation => {
            s.q.set_reservation(&kid, None);
            stats::TURNS_TAKEN.inc();
            Turn::Go
        }
        grant::Turn::Go => Turn::Go,
    })
}

/// A Redisson script owner's acquire of `name` failed while LOCK.* clients wait on it: give
/// it a place in the key's FIFO (or keep the one it has). It was told to retry within `pttl`
/// ms (-1: only on the release message); its place lapses if it does not.
pub fn queue_turn(ctx: Ctx, name: RStr, owner: &[u8], pttl: i64, now: i64) {
    if WAITERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let kid: KeyId = (rm::selected_db(ctx), rm::bytes(&name).to_vec());
    let until = grant::turn_place_until(pttl, now);
    with(|s| {
        if let Some(w) = s.q.turn_of(&kid, owner).and_then(|id| s.q.get_mut(id)) {
            w.turn_until = Some(until);
            return;
        }
        // Beyond the bounds the acquire is served as without the module: no turn.
        let turns = i64::try_from(s.q.turns()).unwrap_or(i64::MAX);
        if turns >= crate::registry::config::MAX_SCRIPT_TURNS.get() || !fits(&kid.1, owner) {
            if s.q.clients_on(&kid) != 0 {
                stats::TURNS_REFUSED.inc();
            }
            return;
        }
        let entry = Waiter {
            key: Arc::new(kid.clone()),
            owner: Arc::from(owner),
            lease_ms: 0,
            fence: false,
            deadline: None,
            handle: Client::NONE,
            timer: None,
            turn_until: Some(until),
        };
        if s.q.try_push(entry).is_some() {
            stats::TURNS_QUEUED.inc();
        }
    });
}

/// End every wait on `key` with an error.
fn fail_all(ctx: Ctx, key: &KeyId, msg: Error) {
    for id in with(|s| s.q.ids_of(key)) {
        if let Some(w) = take(ctx, id).filter(|w| !w.is_turn()) {
            stats::WAITS_FAILED.inc();
            unblock(w.handle, Outcome::Failed(msg.clone()));
        }
    }
}

/// Re-examine a key with waiters after something else touched it.
fn check_key(ctx: Ctx, kid: &KeyId, now: i64) {
    if !rm::flag(ctx, crate::ffi::rm::CTX_MASTER) || !with(|s| s.q.has(kid)) {
        return;
    }
    rm::select_db(ctx, kid.0);
    let name = OwnedStr::new(&kid.1);
    let key = Key::write(ctx, name.ptr());
    match key.kind() {
        // A free lock: grant it, if this node still serves it (cluster). While the server
        // keeps its dataset still (CLIENT PAUSE, FAILOVER), an expired key is not deleted and
        // opens as empty; `grant_head` puts the grant off until the pause ends.
        KeyKind::Empty => match crate::module::cluster::may_grant(ctx, name.ptr()) {
            Here::Moved => fail_all(ctx, kid, Error::SlotMoved),
            Here::Later => defer_grant(ctx, kid.clone()),
            Here::Yes => {
                grant_head(ctx, &key, name.ptr(), now, false);
            }
        },
        KeyKind::Hash => arm_expiry(ctx, kid, key.deadline(), now),
        KeyKind::Other => fail_all(ctx, kid, Error::WrongType),
    }
}

/// How long a grant put off by a write refusal waits before it is tried again.
const GRANT_RETRY_MS: i64 = 50;

/// Whether the retry timer of deferred grants is armed (one for all keys).
static DEFER_ARMED: AtomicBool = AtomicBool::new(false);

/// Look at `kid` again in [`GRANT_RETRY_MS`] (one shared timer, whatever the number of keys).
fn defer_grant(ctx: Ctx, kid: KeyId) {
    with(|s| s.pending.insert(kid));
    if !DEFER_ARMED.swap(true, Ordering::Relaxed) {
        timers::after(ctx, GRANT_RETRY_MS, on_defer_timer);
    }
}

fn on_defer_timer(ctx: Ctx) {
    DEFER_ARMED.store(false, Ordering::Relaxed);
    on_check_timer(ctx);
}

/// Re-examine `keys` in the next event-loop iteration (one shared 0 ms timer).
fn schedule_checks(ctx: Ctx, keys: impl FnOnce(&Shared) -> Vec<KeyId>) {
    let arm = with(|s| {
        let ks = keys(s);
        s.pending.extend(ks);
        let arm = !s.check_armed && !s.pending.is_empty();
        s.check_armed |= arm;
        arm
    });
    if arm {
        timers::after(ctx, 0, on_check_timer);
    }
}

/// Run `f`, logging instead of unwinding into Redis.
fn quietly(ctx: Ctx, what: &str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        stats::PANICS.inc();
        rm::log(ctx, c"warning", &format!("lock module: internal error in {what} (panic caught)"));
    }
}

// ---- callbacks -------------------------------------------------------------------------------

/// The "not acquired" reply of a wait that ended without a grant: the lock's PTTL, as
/// `[pttl, -1]` when the command asked for `FENCE`.
/// The reply of a wait that ended without the lock: the key's PTTL (argv[1] is the key), as a
/// pair with no token when the waiter asked for `FENCE` (the outcome says so; argv is not
/// parsed again).
fn reply_pttl(ctx: Ctx, argv: &[RStr], fence: bool) {
    let pttl = argv.get(1).map_or(-2, |name| Key::read(ctx, *name).pttl());
    if fence {
        rm::reply_pair(ctx, pttl, -1);
    } else {
        rm::reply_int(ctx, pttl);
    }
}

impl Waits for Waiting {
    type Outcome = Outcome;

    fn reply(ctx: Ctx, outcome: Option<&Outcome>, argv: &[RStr]) {
        let r = catch_unwind(AssertUnwindSafe(|| match outcome {
            Some(Outcome::Granted(None)) => {
                rm::reply_null(ctx);
            }
            Some(Outcome::Granted(Some(token))) => {
                rm::reply_pair(ctx, -1, *token);
            }
            Some(Outcome::Failed(e)) => {
                rm::reply_error(ctx, &e.reply());
            }
            Some(Outcome::TimedOut { fence }) => reply_pttl(ctx, argv, *fence),
            None => reply_pttl(ctx, argv, false),
        }));
        if r.is_err() {
            stats::PANICS.inc();
            rm::reply_error(ctx, &Error::PanicInReply.reply());
        }
    }

    /// Redis calls this for CLIENT UNBLOCK (waits have no Redis-side timeout).
    fn unblocked(ctx: Ctx, bc: Client, argv: &[RStr]) {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut fence = false;
            if let Some(id) = with(|s| s.by_client.get(&bc).copied()) {
                fence = take(ctx, id).is_some_and(|w| w.fence);
                stats::WAITS_CANCELLED.inc();
            }
            reply_pttl(ctx, argv, fence);
        }));
        if r.is_err() {
            stats::PANICS.inc();
            rm::reply_error(ctx, &Error::PanicInReply.reply());
        }
    }

    fn disconnected(ctx: Ctx, bc: Client) -> bool {
        let mut found = false;
        quietly(ctx, "disconnect", || {
            if let Some(id) = with(|s| s.by_client.get(&bc).copied()) {
                found = take(ctx, id).is_some();
                stats::WAITS_CANCELLED.inc();
            }
        });
        found
    }
}

/// Arm waiter `id`'s timeout timer `period` ms from now (a capped period: see `timing`).
fn arm_wait_timer(ctx: Ctx, id: u64, period: i64) {
    let t: TimerId = timers::after(ctx, period, move |ctx| on_wait_timer(ctx, id));
    with(|s| {
        if let Some(w) = s.q.get_mut(id) {
            w.timer = Some(t);
        }
    });
}

fn on_wait_timer(ctx: Ctx, id: u64) {
    quietly(ctx, "wait timeout", || {
        // The timer fired, so it must not be stopped again.
        let deadline = with(|s| {
            let w = s.q.get_mut(id)?;
            w.timer = None;
            w.deadline
        });
        // A long wait takes several capped timers: re-arm until the deadline is reached.
        if let Some(timing::Fired::Rearm(p)) = deadline.map(|d| timing::on_fire(d, rm::millis())) {
            arm_wait_timer(ctx, id, p);
            return;
        }
        if let Some(w) = take(ctx, id) {
            stats::WAITS_TIMED_OUT.inc();
            unblock(w.handle, Outcome::TimedOut { fence: w.fence });
        }
    });
}

fn on_expiry_timer(ctx: Ctx, key: KeyId) {
    quietly(ctx, "lease timer", || {
        with(|s| {
            s.q.set_expiry_timer(&key, None);
        });
        check_key(ctx, &key, rm::millis());
    });
}

fn on_check_timer(ctx: Ctx) {
    quietly(ctx, "key check", || {
        let keys: Vec<KeyId> = with(|s| {
            s.check_armed = false;
            s.pending.drain().collect()
        });
        let now = rm::millis();
        for k in keys {
            check_key(ctx, &k, now);
        }
    });
}

/// Keyspace events: anything that touches a key with waiters gets it re-examined.
fn key_event(ctx: Ctx, key: RStr) {
    if WAITERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    quietly(ctx, "keyspace event", || {
        let kid: KeyId = (rm::selected_db(ctx), rm::bytes(&key).to_vec());
        schedule_checks(ctx, |s| if s.q.has(&kid) { vec![kid] } else { vec![] });
    });
}
events::key_callback!(on_key_event, key_event);

/// FLUSHDB / FLUSHALL: every key with waiters may be free now.
fn flush(ctx: Ctx, sub: u64) {
    if sub != events::FLUSHDB_END || WAITERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    quietly(ctx, "flush event", || schedule_checks(ctx, |s| s.q.keys()));
}
events::callback!(on_flush, flush, with_sub);

/// SWAPDB: keys with waiters in the swapped databases may be free (or different) now.
fn swapdb(ctx: Ctx, _sub: u64) {
    if WAITERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    quietly(ctx, "swapdb event", || schedule_checks(ctx, |s| s.q.keys()));
}
events::callback!(on_swapdb, swapdb, with_sub);

events::callback!(on_role_change, role_change, with_sub);

/// Becoming a replica ends every wait with an error.
fn role_change(ctx: Ctx, sub: u64) {
    // Whether writes are refused (and the server is a read-only replica) changed.
    crate::module::writes::invalidate();
    if sub != events::NOW_REPLICA {
        return;
    }
    quietly(ctx, "role change", || {
        for k in with(|s| s.q.keys()) {
            fail_all(ctx, &k, Error::NotMaster);
        }
    });
}

/// Refuse MODULE UNLOAD while clients wait (their callbacks live in this library).
pub fn can_unload() -> bool {
    WAITERS.load(Ordering::Relaxed) == 0
}
