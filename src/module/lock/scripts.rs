//! The reentrant lock's scripts run natively: what the lock's transitions
//! (`logic/lock/script_plans.rs`) read of the keys, and the lock's waiters seen from a script.
//! The entry point, checks and Lua fallback are shared by every kind (`module/scripts/native.rs`);
//! the plan is run by the one interpreter (`module/scripts/plan.rs`).
//!
//! The intended differences from the script: a release that frees a lock with LOCK.* waiters
//! hands it to the head waiter (no message), and while LOCK.* clients wait, a Redisson acquire
//! that fails takes a place in their FIFO (a turn).

use crate::ffi::rm::{Ctx, Key, KeyKind, RStr};
use crate::logic::args::parse_i64;
use crate::logic::error::Error;
use crate::logic::lock::script_plans::{self, Counter, Keys, Latch};
use crate::logic::lock::scripts::LockOp;
use crate::logic::lock::state::LockView;
use crate::logic::plan::{Plan, Quirk};
use crate::logic::scripts::{Call, Op, Role};
use crate::module::cluster;
use crate::module::scripts::plan::{self, Argv, Handles, Waiters};
use crate::module::wait;

/// Run lock operation `op` for `call`. `Err`: the call runs in Lua; nothing was written.
pub fn run(ctx: Ctx, op: Op, call: &Call, a: &Argv, now: i64) -> Result<(), Quirk> {
    let op = LockOp::of(op).ok_or(Quirk::Layout)?;
    let mut keys = Handles::new(ctx);
    let mut plan = Plan::new();
    script_plans::plan(op, call, now, &mut Reads { ctx, a, call, keys: &mut keys, now }, &mut plan)?;
    plan::run::<LockWaiters>(ctx, a, &mut keys, &plan, now)
}

// ---- the lock's waiters (module/wait), one helper per call ----------------------------------

fn has_waiters(ctx: Ctx, name: RStr) -> bool {
    wait::has_waiters(ctx, name)
}

fn grant_head(ctx: Ctx, key: &Key, name: RStr, now: i64, handoff: bool) -> bool {
    wait::grant_head(ctx, key, name, now, handoff)
}

/// The ms left of another owner's turn on the free lock `name`, if it is kept for one.
fn turn(ctx: Ctx, name: RStr, owner: &[u8], now: i64) -> Option<i64> {
    match wait::turn(ctx, name, owner, now) {
        wait::Turn::Wait(ms) => Some(ms),
        wait::Turn::Go => None,
    }
}

fn queue_turn(ctx: Ctx, name: RStr, owner: &[u8], pttl: i64, now: i64) {
    wait::queue_turn(ctx, name, owner, pttl, now);
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
fn view(key: &Key, owner: RStr) -> LockView {
    match key.kind() {
        KeyKind::Empty => LockView::Free,
        KeyKind::Other => LockView::WrongType,
        KeyKind::Hash => {
            LockView::Hash { mine: key.hash_get(owner, |b| parse_i64(b).ok_or(Error::CorruptCount)) }
        }
    }
}

impl Reads<'_, '_> {
    fn key_slot(&self, role: Role) -> Option<usize> {
        self.call.key_index(role)
    }
    fn owner(&self) -> Option<RStr> {
        self.a.arg(self.call.arg_index(Role::Owner)?)
    }
    fn open(&mut self, role: Role) -> Option<(&Key, RStr)> {
        let i = self.key_slot(role)?;
        let name = self.a.key(i)?;
        Some((self.keys.open(self.a, i)?, name))
    }
}

impl Keys for Reads<'_, '_> {
    fn for_acquire(&mut self) -> (LockView, Option<i64>) {
        let (ctx, now) = (self.ctx, self.now);
        let Some(owner) = self.owner() else { return (LockView::WrongType, None) };
        let Some((key, name)) = self.open(Role::Lock) else { return (LockView::WrongType, None) };
        // LOCK.* waiters go first: a lock freed behind their back belongs to the head of the
        // queue; a lock kept for another script owner's turn is not free for this one.
        let mut waiting = None;
        if key.kind() == KeyKind::Empty && has_waiters(ctx, name) && !grant_head(ctx, key, name, now, false) {
            waiting = turn(ctx, name, crate::ffi::rm::bytes(&owner), now);
        }
        (view(key, owner), waiting)
    }

    fn lock(&mut self) -> LockView {
        let Some(owner) = self.owner() else { return LockView::WrongType };
        self.open(Role::Lock).map_or(LockView::WrongType, |(key, _)| view(key, owner))
    }

    fn pttl(&mut self) -> i64 {
        self.open(Role::Lock).map_or(-2, |(key, _)| key.pttl())
    }

    fn exists(&mut self) -> bool {
        self.open(Role::Lock).is_some_and(|(key, _)| key.kind() != KeyKind::Empty)
    }

    fn held(&mut self, u: usize) -> LockView {
        let (Some(k), Some(o)) =
            (self.call.unit_key_index(u, Role::Lock), self.call.unit_arg_index(u, Role::Owner))
        else {
            return LockView::WrongType;
        };
        let (Some(owner), Some(key)) = (self.a.arg(o), self.keys.open(self.a, k)) else {
            return LockView::WrongType;
        };
        match key.kind() {
            KeyKind::Empty => LockView::Free,
            KeyKind::Other => LockView::WrongType,
            KeyKind::Hash => LockView::field(key.hash_has(owner)),
        }
    }

    fn token(&mut self) -> Counter {
        let Some((key, _)) = self.open(Role::Token) else { return Counter::WrongType };
        match key.kind() {
            KeyKind::Empty => Counter::Absent,
            _ if key.is_string() => {
                key.string_get(parse_i64).flatten().map_or(Counter::NotInteger, Counter::Int)
            }
            _ => Counter::WrongType,
        }
    }

    fn latch(&mut self) -> Latch {
        let Some((key, _)) = self.open(Role::Latch) else { return Latch::WrongType };
        match key.kind() {
            KeyKind::Empty => Latch::Absent,
            // `return tonumber(value)`: nil for what Lua does not convert.
            _ if key.is_string() => {
                key.string_get(crate::ffi::luanum::latch_reply).map_or(Latch::WrongType, Latch::Value)
            }
            _ => Latch::WrongType,
        }
    }

    fn channel_in_lock_slot(&mut self) -> bool {
        let (Some(lock), Some(channel)) = (
            self.key_slot(Role::Lock).and_then(|i| self.call.key(i)),
            self.key_slot(Role::Channel).and_then(|i| self.call.key(i)),
        ) else {
            return false;
        };
        !cluster::enabled() || cluster::key_slot(lock) == cluster::key_slot(channel)
    }
}
