//! The read-write lock's scripts run natively: what its transitions
//! (`logic/rwlock/script_plans.rs`) read of the keys, and its waiters seen from a script. The
//! entry point, checks and Lua fallback are shared by every kind (`module/scripts/native.rs`);
//! the plan is run by the one interpreter (`module/scripts/plan.rs`).
//!
//! The intended differences from the scripts: an unlock or force unlock that frees the lock
//! offers it to LOCK.* waiters of the read-write lock first (no message when one is granted), a
//! write unlock that leaves the writer's read holds offers the now readable lock to them (the
//! script publishes nothing there either), and an acquire that finds the key free lets LOCK.*
//! waiters take it first. A failed Redisson acquire takes no place in the LOCK.* queue (it
//! retries on Redisson's own pub/sub, as without the module).

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::luanum;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr, StaticStr};
use crate::logic::args::parse_i64;
use crate::logic::plan::{Latch, Plan, Quirk};
use crate::logic::rwlock::names;
use crate::logic::rwlock::script_plans::{self, Field, Fields, Keys, ModeField, Num, Shape};
use crate::logic::rwlock::scripts::RwOp;
use crate::logic::scripts::{Call, Op};
use crate::module::cluster;
use crate::module::rwlock::waiting::RwLock;
use crate::module::scripts::plan::{self, Argv, Handles, Waiters};
use crate::module::wait;
use std::sync::LazyLock;

/// Run read-write lock operation `op` for `call`. `Err`: the call runs in Lua; nothing was
/// written.
pub fn run(ctx: Ctx, op: Op, call: &Call, a: &Argv, now: i64) -> Result<(), Quirk> {
    let op = RwOp::of(op).ok_or(Quirk::Layout)?;
    let mut keys = Handles::new(ctx, call.numkeys());
    let mut plan = Plan::new();
    script_plans::plan(op, call, now, &mut Reads { ctx, a, call, keys: &mut keys, now }, &mut plan);
    plan::run::<RwWaiters>(ctx, a, &mut keys, &plan, now)
}

struct RwWaiters;

impl Waiters for RwWaiters {
    fn hand_over(ctx: Ctx, key: &Key, name: RStr, now: i64) -> bool {
        wait::grant_head::<RwLock>(ctx, key, name, now, true)
    }
    fn keep_turn(_: Ctx, _: RStr, _: &[u8], _: i64, _: i64) {}
}

struct Reads<'r, 'a> {
    ctx: Ctx,
    a: &'r Argv<'a>,
    call: &'r Call<'r>,
    keys: &'r mut Handles,
    now: i64,
}

/// The `mode` field's name, made once.
static MODE: LazyLock<StaticStr> = LazyLock::new(|| StaticStr::new(names::MODE));

/// A value as Lua's `tonumber` reads it (an integer in Redis's spelling without the C library).
fn lua_num(b: &[u8]) -> Num {
    if let Some(n) = parse_i64(b) {
        return if n.unsigned_abs() < 100_000_000_000_000 { Num::Int(n) } else { Num::Odd };
    }
    match luanum::tonumber(b) {
        None => Num::Skip,
        Some(f) if f.fract() == 0.0 && f.abs() < 1e14 => Num::Int(f as i64),
        Some(_) => Num::Odd,
    }
}

impl Reads<'_, '_> {
    fn open(&mut self, i: usize) -> Option<(&Key, RStr)> {
        let name = self.a.key(i)?;
        Some((self.keys.open(self.a, i)?, name))
    }
}

impl Keys for Reads<'_, '_> {
    fn offer_free(&mut self, lock: usize) {
        let (ctx, now) = (self.ctx, self.now);
        if let Some((key, name)) = self.open(lock) {
            if key.kind() == KeyKind::Empty && wait::has_waiters::<RwLock>(ctx, name) {
                wait::grant_head::<RwLock>(ctx, key, name, now, false);
            }
        }
    }

    fn shape(&mut self, lock: usize) -> Shape {
        match self.open(lock).map(|(k, _)| k.kind()) {
            Some(KeyKind::Empty) => Shape::Absent,
            Some(KeyKind::Hash) => Shape::Hash,
            _ => Shape::Other,
        }
    }

    fn mode(&mut self, lock: usize) -> ModeField {
        let f = MODE.ptr();
        let Some((key, _)) = self.open(lock) else { return ModeField::Other };
        let mode = key.hash_get(f, |b| match b {
            b"read" => ModeField::Read,
            b"write" => ModeField::Write,
            _ => ModeField::Other,
        });
        mode.unwrap_or(ModeField::Absent)
    }

    fn field(&mut self, lock: usize, field: usize) -> Option<Field> {
        let owner = self.a.arg(field)?;
        let (key, _) = self.open(lock)?;
        if key.kind() != KeyKind::Hash {
            return None;
        }
        key.hash_get(owner, |b| Field { int: parse_i64(b), num: lua_num(b) })
    }

    fn hlen(&mut self, lock: usize) -> usize {
        self.open(lock).map_or(0, |(k, _)| if k.kind() == KeyKind::Hash { k.hash_len() } else { 0 })
    }

    fn fields(&mut self, lock: usize) -> Fields {
        let Some((key, _)) = self.open(lock) else { return Fields::default() };
        let n = key.hash_len();
        let mut out = Fields::with_capacity(n, n * 48);
        key.hash_each(&mut |f, v| out.push(f, lua_num(v)));
        out
    }

    fn pttl(&mut self, key: usize) -> i64 {
        self.open(key).map_or(-2, |(k, _)| k.pttl())
    }

    fn pttl_named(&mut self, name: &[u8]) -> i64 {
        let s = OwnedStr::new(name);
        Key::read(self.ctx, s.ptr()).pttl()
    }

    fn latch(&mut self, latch: usize) -> Latch {
        let Some((key, _)) = self.open(latch) else { return Latch::WrongType };
        match key.kind() {
            KeyKind::Empty => Latch::Absent,
            _ if key.is_string() => {
                key.string_get(luanum::latch_reply).map_or(Latch::WrongType, Latch::Value)
            }
            _ => Latch::WrongType,
        }
    }

    fn arg_number(&mut self, arg: usize) -> Option<f64> {
        self.a.arg(arg).and_then(|s| luanum::tonumber(rm::bytes(&s)))
    }

    fn derived_ok(&mut self, lock: usize, name: &[u8]) -> bool {
        if self.call.keys.contains(&name) {
            return false;
        }
        !cluster::enabled()
            || self.call.key(lock).is_some_and(|l| cluster::key_slot(l) == cluster::key_slot(name))
    }

    fn channel_in_lock_slot(&mut self, lock: usize, channel: usize) -> bool {
        let (Some(lock), Some(channel)) = (self.call.key(lock), self.call.key(channel)) else { return false };
        !cluster::enabled() || cluster::key_slot(lock) == cluster::key_slot(channel)
    }
}
