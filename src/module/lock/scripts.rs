//! The reentrant lock's scripts run natively: what the lock's transitions
//! (`logic/lock/script_plans.rs`) read of the keys, and the lock's waiters seen from a script.
//! The entry point, checks and Lua fallback are shared by every kind (`module/scripts/native.rs`);
//! the plan is run by the one interpreter (`module/scripts/plan.rs`).
//!
//! The intended differences from the script: a release that frees a lock with LOCK.* waiters
//! hands it to the head waiter (no message), and while LOCK.* clients wait, a Redisson acquire
//! that fails takes a place in their FIFO (a turn).

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{Ctx, RStr};
use crate::logic::args::parse_i64;
use crate::logic::error::Error;
use crate::logic::lock::script_plans::{self, Counter, Keys, Latch};
use crate::logic::lock::scripts::LockOp;
use crate::logic::lock::state::LockView;
use crate::logic::plan::{Plan, Quirk};
use crate::logic::scripts::{Call, Op};
use crate::module::cluster;
use crate::module::lock::waiting::Lock;
use crate::module::scripts::plan::{self, Argv, Handles, Waiters};
use crate::module::wait;

/// Run lock operation `op` for `call`. `Err`: the call runs in Lua; nothing was written.
#[inline]
pub fn run(ctx: Ctx, op: Op, call: &Call, a: &Argv, now: i64) -> Result<(), Quirk> {
    let op = LockOp::of(op).ok_or(Quirk::Layout)?;
    let mut keys = Handles::new(ctx, call.numkeys());
    let mut plan = Plan::new();
    script_plans::plan(op, call, now, &mut Reads { ctx, a, call, keys: &mut keys, now }, &mut plan)?;
    plan::run::<LockWaiters>(ctx, a, &mut keys, &plan, now)
}

// ---- the lock's waiters (module/wait), one helper per call ----------------------------------

fn has_waiters(ctx: Ctx, name: RStr) -> bool {
    wait::has_waiters::<Lock>(ctx, name)
}

fn grant_head(ctx: Ctx, key: &Key, name: RStr, now: i64, handoff: bool) -> bool {
    wait::grant_head::<Lock>(ctx, key, name, now, handoff)
}

/// The ms left of another owner's turn on the free lock `name`, if it is kept for one.
fn turn(ctx: Ctx, name: RStr, owner: &[u8], now: i64) -> Option<i64> {
    match wait::turn::<Lock>(ctx, name, owner, now) {
        wait::Turn::Wait(ms) => Some(ms),
        wait::Turn::Go => None,
    }
}

fn queue_turn(ctx: Ctx, name: RStr, owner: &[u8], pttl: i64, now: i64) {
    wait::queue_turn::<Lock>(ctx, name, owner, Default::default(), pttl, now);
}

struct LockWaiters;

impl Waiters for LockWaiters {
    fn hand_over(ctx: Ctx, key: &Key, name: RStr, now: i64) -> bool {
        grant_head(ctx, key, name, now, true)
    }
    fn keep_turn(ctx: Ctx, name: RStr, owner: &[u8], pttl: i64, now: i64) {
        queue_turn(ctx, name, owner, pttl, now);
    }
}

// ---- what the transitions read ----------------------------------------------------------------

struct Reads<'r, 'a> {
    ctx: Ctx,
    a: &'r Argv<'a>,
    call: &'r Call<'r>,
    keys: &'r mut Handles,
    now: i64,
}

/// The lock key for `owner`, its count as HINCRBY reads it (any integer; `Err` when not one).
#[inline]
fn view(key: &Key, owner: RStr) -> LockView {
    match key.kind() {
        KeyKind::Empty => LockView::Free,
        KeyKind::String | KeyKind::SortedSet | KeyKind::Other => LockView::WrongType,
        KeyKind::Hash => {
            LockView::Hash { mine: key.hash_get(owner, |b| parse_i64(b).ok_or(Error::CorruptCount)) }
        }
    }
}

impl Reads<'_, '_> {
    /// KEYS slot `i`, opened, with its name.
    fn open(&mut self, i: usize) -> Option<(&Key, RStr)> {
        let name = self.a.key(i)?;
        Some((self.keys.open(self.a, i)?, name))
    }
}

impl Keys for Reads<'_, '_> {
    #[inline]
    fn for_acquire(&mut self, lock: usize, owner: usize) -> (LockView, Option<i64>) {
        let (ctx, now) = (self.ctx, self.now);
        let Some(owner) = self.a.arg(owner) else { return (LockView::WrongType, None) };
        let Some((key, name)) = self.open(lock) else { return (LockView::WrongType, None) };
        // LOCK.* waiters go first: a lock freed behind their back belongs to the head of the
        // queue; a lock kept for another script owner's turn is not free for this one.
        let mut waiting = None;
        if key.kind() == KeyKind::Empty && has_waiters(ctx, name) && !grant_head(ctx, key, name, now, false) {
            waiting = turn(ctx, name, crate::ffi::rm::bytes(&owner), now);
        }
        (view(key, owner), waiting)
    }

    fn lock(&mut self, lock: usize, owner: usize) -> LockView {
        let Some(owner) = self.a.arg(owner) else { return LockView::WrongType };
        self.open(lock).map_or(LockView::WrongType, |(key, _)| view(key, owner))
    }

    fn pttl(&mut self, lock: usize) -> i64 {
        self.open(lock).map_or(-2, |(key, _)| key.pttl())
    }

    fn exists(&mut self, lock: usize) -> bool {
        self.open(lock).is_some_and(|(key, _)| key.kind() != KeyKind::Empty)
    }

    #[inline]
    fn held(&mut self, lock: usize, owner: usize) -> LockView {
        let (Some(owner), Some((key, _))) = (self.a.arg(owner), self.open(lock)) else {
            return LockView::WrongType;
        };
        match key.kind() {
            KeyKind::Empty => LockView::Free,
            KeyKind::String | KeyKind::SortedSet | KeyKind::Other => LockView::WrongType,
            KeyKind::Hash => LockView::field(key.hash_has(owner)),
        }
    }

    fn token(&mut self, token: usize) -> Counter {
        let Some((key, _)) = self.open(token) else { return Counter::WrongType };
        match key.kind() {
            KeyKind::Empty => Counter::Absent,
            _ if key.is_string() => {
                key.string_get(parse_i64).flatten().map_or(Counter::NotInteger, Counter::Int)
            }
            _ => Counter::WrongType,
        }
    }

    fn latch(&mut self, latch: usize) -> Latch {
        let Some((key, _)) = self.open(latch) else { return Latch::WrongType };
        match key.kind() {
            KeyKind::Empty => Latch::Absent,
            // `return tonumber(value)`: nil for what Lua does not convert.
            _ if key.is_string() => {
                key.string_get(crate::ffi::luanum::latch_reply).map_or(Latch::WrongType, Latch::Value)
            }
            _ => Latch::WrongType,
        }
    }

    fn channel_in_lock_slot(&mut self, lock: usize, channel: usize) -> bool {
        let (Some(lock), Some(channel)) = (self.call.key(lock), self.call.key(channel)) else { return false };
        !cluster::enabled() || cluster::key_slot(lock) == cluster::key_slot(channel)
    }
}
