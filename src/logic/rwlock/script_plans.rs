//! What each read-write lock script does natively: its path as a [`Plan`], or the reason it
//! runs in Lua.
//!
//! Pure. The glue (`module/rwlock/scripts.rs`) reads the keys on demand through [`Keys`], in the
//! script's own order, and every command the script runs on the path becomes a step with its
//! real arguments, derived keys included (a read hold's timeout key `<prefix>:<n>`, every hold
//! of every field in the read unlock's and the renewals' walks), so the interpreter checks the
//! ACL of each and the write refusal at the first write.
//!
//! Shared decisions: a read unlock ends as `state::after_read_drop` says, a write unlock as
//! `state::release_write` says (the LOCK.* commands decide with the same functions). Where the
//! scripts differ from the LOCK.* rules, the script is followed and the difference is a
//! documented reading: a hash without `mode` is a missing lock to every script (a read or write
//! acquire adds `mode` to it, an unlock publishes); a `mode` other than `read` / `write` is
//! contended for an acquire, not the writer's for a write unlock, and freed by a read unlock that
//! finds no live hold; a read field beside a foreign writer does not re-enter (the script asks
//! only for the writer field); the writer's field count is never parsed by a read acquire
//! (HEXISTS only); counts <= 0 run as HINCRBY and the loops compute them.
//!
//! Whatever would make the script raise an error (a wrong type, a count HINCRBY refuses, a
//! lease PEXPIRE refuses, a latch time SET refuses, an arithmetic error, 1affef78's nil
//! concatenation) is a [`Quirk`] raised at the step where the script fails: the steps before it
//! are ACL-checked (a user who may not run them gets the ACL error, as in Lua) and the call then
//! runs in Lua. Calls the module does not reproduce (numbers Lua would format as exponents, walks
//! longer than [`MAX_WALK`], a derived key that is one of the call's keys or outside its slot)
//! run in Lua too.

use crate::logic::plan::{Arg, Cmd, Effect, Latch, Plan, Quirk, Reply, Then};
use crate::logic::rwlock::scripts::RwOp;
use crate::logic::rwlock::state::{self, Mode, RwView, WriteRelease};
use crate::logic::scripts::{unit, Call, Publish, Role};

/// At most this many hold timeout keys are walked natively in one call; a longer walk runs in
/// Lua.
pub const MAX_WALK: i64 = 100_000;

/// Lua 5.1 writes a number into a string (`..`) with `%.14g`: plain digits below 10^14.
const LUA_DIGITS: i64 = 100_000_000_000_000;

/// A number passed to `redis.call` is written with `%.17g` (7.0) or the shortest form (7.2+):
/// plain digits on both below 10^15 for an integer.
const CALL_DIGITS: f64 = 1e15;

/// A key as the script's first command on it finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Absent,
    Hash,
    /// Another type: a hash command fails (WRONGTYPE).
    Other,
}

/// The `mode` field, as HGET returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeField {
    Absent,
    Read,
    Write,
    Other,
}

/// A hash field's value as Lua's `tonumber` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Num {
    /// Not a number (nil): the walks skip it.
    Skip,
    /// An integer below 10^14 in magnitude.
    Int(i64),
    /// A fraction, infinity, NaN or a larger number: run in Lua.
    Odd,
}

/// A field of the hash: its value as HINCRBY reads it (`None`: not an integer) and as
/// `tonumber` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub int: Option<i64>,
    pub num: Num,
}

/// What the glue reads of the keys, when a transition asks; `lock`, `latch`, ... are KEYS
/// slots, `field`, `arg` ARGV slots of the call.
pub trait Keys {
    /// An acquire is about to read lock `lock`: a free lock goes to LOCK.* waiters first.
    fn offer_free(&mut self, lock: usize);
    fn shape(&mut self, lock: usize) -> Shape;
    fn mode(&mut self, lock: usize) -> ModeField;
    /// The field named by ARGV slot `field`, `None` when absent.
    fn field(&mut self, lock: usize, field: usize) -> Option<Field>;
    fn hlen(&mut self, lock: usize) -> usize;
    /// Every field (HKEYS) with its value as `tonumber` reads it.
    fn fields(&mut self, lock: usize) -> Vec<(Vec<u8>, Num)>;
    /// PTTL of KEYS slot `key`.
    fn pttl(&mut self, key: usize) -> i64;
    /// PTTL of a derived key.
    fn pttl_named(&mut self, name: &[u8]) -> i64;
    fn latch(&mut self, latch: usize) -> Latch;
    /// `tonumber(ARGV[arg])` (Lua arithmetic on the string).
    fn arg_number(&mut self, arg: usize) -> Option<f64>;
    /// Whether derived key `name` is run natively: not one of the call's KEYS, and in the slot
    /// of KEYS `lock` in a cluster.
    fn derived_ok(&mut self, lock: usize, name: &[u8]) -> bool;
    /// Whether SPUBLISH to the channel stays in the lock key's slot (always outside a cluster).
    fn channel_in_lock_slot(&mut self, lock: usize, channel: usize) -> bool;
}

/// The path of `op` for `call` at `now`, written into `p`. A [`Quirk`] ends the path with
/// [`Then::Lua`]: the steps written so far are those the script runs before it fails.
pub fn plan(op: RwOp, call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) {
    let done = match op {
        RwOp::ReadAcquire => read_acquire(call, now, keys, p),
        RwOp::WriteAcquire => write_acquire(call, now, keys, p),
        RwOp::ReadUnlockPublish | RwOp::ReadUnlock => read_unlock(call, now, keys, p, Missing::One),
        RwOp::ReadUnlockLatch => read_unlock(call, now, keys, p, Missing::One),
        RwOp::ReadUnlockLatchNil => read_unlock(call, now, keys, p, Missing::Nil),
        RwOp::WriteUnlockPublish | RwOp::WriteUnlock | RwOp::WriteUnlockLatch => {
            write_unlock(call, now, keys, p, Missing::One)
        }
        RwOp::WriteUnlockLatchNil => write_unlock(call, now, keys, p, Missing::Nil),
        RwOp::ReadForceUnlockPublish | RwOp::ReadForceUnlock => force_unlock(call, keys, p, ModeField::Read),
        RwOp::WriteForceUnlockPublish | RwOp::WriteForceUnlock => {
            force_unlock(call, keys, p, ModeField::Write)
        }
        RwOp::ReadIsLocked => is_locked(call, keys, p),
        RwOp::ReadRenew => renew(call, now, keys, p, Walk::Fixed),
        RwOp::ReadRenewBatch => renew(call, now, keys, p, Walk::Fixed),
        RwOp::ReadRenewBatchBug => renew(call, now, keys, p, Walk::Bug),
        RwOp::ReadRenewBatchOwn => renew_own(call, now, keys, p),
    };
    if let Err(q) = done {
        p.drop_effects();
        p.then = Then::Lua(q);
    }
}

/// What an unlock replies when the lock is missing (it publishes and sets the latch anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// Up to 3.43.
    One,
    /// 3.44+.
    Nil,
}

/// How a renewal names hold n of a field: with its lock's key prefix, or (1affef78) with
/// KEYS[n + 1].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    Fixed,
    Bug,
}

/// The decimal digits of `n` in `buf` (no allocation: the walks name one key per hold).
fn digits(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'0' + (v % 10) as u8;
        }
        v /= 10;
        if v == 0 || i == 1 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'-';
        }
    }
    buf.get(i..).unwrap_or_default()
}

fn slot(i: Option<usize>) -> Result<u32, Quirk> {
    i.and_then(|i| u32::try_from(i).ok()).ok_or(Quirk::Layout)
}

fn key(call: &Call, role: Role) -> Result<u32, Quirk> {
    slot(call.key_index(role))
}

fn arg(call: &Call, role: Role) -> Result<u32, Quirk> {
    slot(call.arg_index(role))
}

fn us(i: u32) -> usize {
    i as usize
}

fn deadline(now: i64, ms: i64) -> Result<i64, Quirk> {
    now.checked_add(ms).ok_or(Quirk::DeadlineOverflow)
}

/// PEXPIRE's effect on a KEYS slot: > 0 re-arms, <= 0 deletes.
fn lease_effect(ms: i64, now: i64, fresh: bool) -> Result<Effect, Quirk> {
    Ok(if ms > 0 { Effect::Lease { deadline: deadline(now, ms)?, fresh } } else { Effect::Delete })
}

/// PEXPIRE's effect on a derived key.
fn lease_named(ms: i64, now: i64) -> Result<Effect, Quirk> {
    Ok(if ms > 0 { Effect::LeaseNamed { deadline: deadline(now, ms)? } } else { Effect::DeleteNamed })
}

fn publish_cmd(call: &Call) -> Cmd {
    match call.publish {
        Some(Publish::SPublish) => Cmd::SPublish,
        _ => Cmd::Publish,
    }
}

/// HGET lock mode, once the key's type allows it.
fn read_mode(keys: &mut impl Keys, p: &mut Plan, lock: u32) -> Result<(Shape, ModeField), Quirk> {
    p.read(Cmd::HGet, [Arg::Key(lock), Arg::Mode]);
    let shape = keys.shape(us(lock));
    if shape == Shape::Other {
        return Err(Quirk::WrongType);
    }
    let mode = if shape == Shape::Absent { ModeField::Absent } else { keys.mode(us(lock)) };
    Ok((shape, mode))
}

/// A derived key's name as an argument, once the module may run it.
fn derived(keys: &mut impl Keys, p: &mut Plan, lock: u32, parts: &[&[u8]]) -> Result<Arg, Quirk> {
    let a = p.made(parts);
    let ok = match a {
        Arg::Made(i) => keys.derived_ok(us(lock), p.made_text(i).unwrap_or_default()),
        _ => false,
    };
    if ok {
        Ok(a)
    } else {
        Err(Quirk::DerivedKey)
    }
}

/// `SET hold 1` then `PEXPIRE hold lease` (strict: the lease reaches PEXPIRE as given).
fn set_hold(p: &mut Plan, hold: Arg, lease: u32, ms: Option<i64>, now: i64) -> Result<(), Quirk> {
    let Some(ms) = ms else {
        p.read(Cmd::Set, [hold, Arg::One]);
        p.read(Cmd::PExpire, [hold, Arg::Argv(lease)]);
        return Err(Quirk::LeaseNotInteger);
    };
    if ms > 0 {
        let d = deadline(now, ms);
        p.step(Cmd::Set, [hold, Arg::One], d.map_or(Effect::None, |deadline| Effect::Marker { deadline }));
        p.read(Cmd::PExpire, [hold, Arg::Argv(lease)]);
        d.map(|_| ())
    } else {
        p.read(Cmd::Set, [hold, Arg::One]);
        p.step(Cmd::PExpire, [hold, Arg::Argv(lease)], Effect::DeleteNamed);
        Ok(())
    }
}

/// HINCRBY's new count, or the quirk it fails on (or that makes the hold's name a Lua one).
fn incremented(field: Option<Field>, by: i64) -> Result<i64, Quirk> {
    let old = match field {
        None => 0,
        Some(Field { int: Some(n), .. }) => n,
        Some(Field { int: None, .. }) => return Err(Quirk::CountNotInteger),
    };
    old.checked_add(by).ok_or(Quirk::CountOverflow)
}

fn digits_ok(n: i64) -> Result<i64, Quirk> {
    if n > -LUA_DIGITS && n < LUA_DIGITS {
        Ok(n)
    } else {
        Err(Quirk::LuaNumber)
    }
}

fn read_acquire(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let (lock, prefix) = (key(call, Role::Lock)?, key(call, Role::Prefix)?);
    let (lease, owner, writer) = (arg(call, Role::Lease)?, arg(call, Role::Owner)?, arg(call, Role::Writer)?);
    let prefix_text = call.key(us(prefix)).unwrap_or_default();
    keys.offer_free(us(lock));
    let (shape, mode) = read_mode(keys, p, lock)?;
    let ms = call.lease();
    if mode == ModeField::Absent {
        p.step(Cmd::HSet, [Arg::Key(lock), Arg::Mode, Arg::Read], Effect::HSet { wake: false });
        p.step(Cmd::HSet, [Arg::Key(lock), Arg::Argv(owner), Arg::One], Effect::HSet { wake: false });
        let hold = derived(keys, p, lock, &[prefix_text, b":1"])?;
        set_hold(p, hold, lease, ms, now)?;
        let ms = ms.ok_or(Quirk::LeaseNotInteger)?;
        p.step(
            Cmd::PExpire,
            [Arg::Key(lock), Arg::Argv(lease)],
            lease_effect(ms, now, shape == Shape::Absent)?,
        );
        p.then = Then::Reply(Reply::Nil);
        return Ok(());
    }
    let joins = match mode {
        ModeField::Read => true,
        ModeField::Write => {
            p.read(Cmd::HExists, [Arg::Key(lock), Arg::Argv(writer)]);
            keys.field(us(lock), us(writer)).is_some()
        }
        ModeField::Absent | ModeField::Other => false,
    };
    if !joins {
        let pttl = keys.pttl(us(lock));
        p.read(Cmd::PTtl, [Arg::Key(lock)]);
        p.then = Then::Reply(Reply::Int(pttl));
        return Ok(());
    }
    p.read(Cmd::HIncrBy, [Arg::Key(lock), Arg::Argv(owner), Arg::One]);
    let n = digits_ok(incremented(keys.field(us(lock), us(owner)), 1)?)?;
    let hold = derived(keys, p, lock, &[prefix_text, b":", digits(n, &mut [0; 20])])?;
    set_hold(p, hold, lease, ms, now)?;
    let ms = ms.ok_or(Quirk::LeaseNotInteger)?;
    let left = keys.pttl(us(lock));
    p.read(Cmd::PTtl, [Arg::Key(lock)]);
    // math.max(PTTL, lease): both integers, written back as plain digits.
    if (ms as f64).abs() >= CALL_DIGITS {
        return Err(Quirk::LuaNumber);
    }
    let ttl = left.max(ms);
    let ttl_arg = p.made_int(ttl);
    let effect = lease_effect(ttl, now, false)?;
    p.step(Cmd::PExpire, [Arg::Key(lock), ttl_arg], effect);
    set_count_effect(p, ttl > 0, n, true);
    p.then = Then::Reply(Reply::Nil);
    Ok(())
}

/// The effect of the path's HINCRBY (found by its command): the count, or only the event when
/// the path deletes the key afterwards.
fn set_count_effect(p: &mut Plan, kept: bool, count: i64, up: bool) {
    let effect = if kept { Effect::Count { count, up } } else { Effect::CountThenGone };
    p.set_effect(Cmd::HIncrBy, effect);
}

fn write_acquire(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let (lock, lease, owner) = (key(call, Role::Lock)?, arg(call, Role::Lease)?, arg(call, Role::Owner)?);
    keys.offer_free(us(lock));
    let (shape, mode) = read_mode(keys, p, lock)?;
    if mode == ModeField::Absent {
        p.step(Cmd::HSet, [Arg::Key(lock), Arg::Mode, Arg::Write], Effect::HSet { wake: false });
        p.step(Cmd::HSet, [Arg::Key(lock), Arg::Argv(owner), Arg::One], Effect::HSet { wake: false });
        let Some(ms) = call.lease() else {
            p.read(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)]);
            return Err(Quirk::LeaseNotInteger);
        };
        let effect = lease_effect(ms, now, shape == Shape::Absent);
        p.step(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)], effect.unwrap_or(Effect::None));
        effect?;
        p.then = Then::Reply(Reply::Nil);
        return Ok(());
    }
    let reenters = mode == ModeField::Write && {
        p.read(Cmd::HExists, [Arg::Key(lock), Arg::Argv(owner)]);
        keys.field(us(lock), us(owner)).is_some()
    };
    if !reenters {
        let pttl = keys.pttl(us(lock));
        p.read(Cmd::PTtl, [Arg::Key(lock)]);
        p.then = Then::Reply(Reply::Int(pttl));
        return Ok(());
    }
    p.read(Cmd::HIncrBy, [Arg::Key(lock), Arg::Argv(owner), Arg::One]);
    let n = incremented(keys.field(us(lock), us(owner)), 1)?;
    let left = keys.pttl(us(lock));
    p.read(Cmd::PTtl, [Arg::Key(lock)]);
    // PTTL + lease, computed through Lua doubles (the lease converted as Lua's arithmetic does).
    let lf = keys.arg_number(us(lease)).ok_or(Quirk::LeaseNotInteger)?;
    let sum = left as f64 + lf;
    if sum.fract() != 0.0 || sum.abs() >= CALL_DIGITS {
        return Err(Quirk::LuaNumber);
    }
    let ttl = sum as i64;
    let ttl_arg = p.made_int(ttl);
    let effect = lease_effect(ttl, now, false)?;
    p.step(Cmd::PExpire, [Arg::Key(lock), ttl_arg], effect);
    set_count_effect(p, ttl > 0, n, true);
    p.then = Then::Reply(Reply::Nil);
    Ok(())
}

/// The 3.24+ latch: an existing one answers a retried unlock, nothing else happens. `Some`
/// (latch slot, latch-ms slot) when the text has one; `Err(Ok(()))`: the reply is written.
fn check_latch(
    call: &Call,
    keys: &mut impl Keys,
    p: &mut Plan,
) -> Result<Result<Option<(u32, u32)>, ()>, Quirk> {
    let Some(k) = call.key_index(Role::Latch) else { return Ok(Ok(None)) };
    let (k, ms) = (slot(Some(k))?, arg(call, Role::LatchMs)?);
    p.read(Cmd::Get, [Arg::Key(k)]);
    match keys.latch(us(k)) {
        Latch::Absent => Ok(Ok(Some((k, ms)))),
        Latch::Value(v) => {
            p.then = Then::Reply(v.map_or(Reply::Nil, Reply::Int));
            Ok(Err(()))
        }
        Latch::WrongType => Err(Quirk::LatchWrongType),
    }
}

/// `SET latch 0|1 PX ms` after the lock's writes (a time SET refuses fails the script there).
fn set_latch(
    call: &Call,
    now: i64,
    p: &mut Plan,
    latch: Option<(u32, u32)>,
    released: bool,
) -> Result<(), Quirk> {
    let Some((k, ms)) = latch else { return Ok(()) };
    let value = if released { Arg::One } else { Arg::Zero };
    let d = call.latch_ms().ok_or(Quirk::LatchMs).and_then(|ms| deadline(now, ms));
    let effect = d.map_or(Effect::None, |deadline| Effect::Latch { deadline });
    p.step(Cmd::Set, [Arg::Key(k), value, Arg::Px, Arg::Argv(ms)], effect);
    d.map(|_| ())
}

/// Publish on the channel: `release` when the script freed the lock (the kind's waiters first).
fn publish(call: &Call, keys: &mut impl Keys, p: &mut Plan, lock: u32, release: bool) -> Result<(), Quirk> {
    let (channel, message) = (key(call, Role::Channel)?, arg(call, Role::Message)?);
    let cmd = publish_cmd(call);
    let ok = cmd == Cmd::Publish || keys.channel_in_lock_slot(us(lock), us(channel));
    let effect = match (ok, release) {
        (false, _) => Effect::None,
        (true, true) => Effect::Release { lock },
        (true, false) => Effect::Message,
    };
    p.step(cmd, [Arg::Key(channel), Arg::Argv(message)], effect);
    if ok {
        Ok(())
    } else {
        Err(Quirk::CrossSlotPublish)
    }
}

/// The missing-lock case of every unlock: publish, latch "1", reply 1 (nil from 3.44).
fn unlock_missing(
    call: &Call,
    now: i64,
    keys: &mut impl Keys,
    p: &mut Plan,
    lock: u32,
    latch: Option<(u32, u32)>,
    missing: Missing,
) -> Result<(), Quirk> {
    publish(call, keys, p, lock, false)?;
    set_latch(call, now, p, latch, true)?;
    p.then = Then::Reply(if missing == Missing::Nil { Reply::Nil } else { Reply::Int(1) });
    Ok(())
}

fn read_unlock(
    call: &Call,
    now: i64,
    keys: &mut impl Keys,
    p: &mut Plan,
    missing: Missing,
) -> Result<(), Quirk> {
    let (lock, prefix, keyprefix) =
        (key(call, Role::Lock)?, key(call, Role::Prefix)?, key(call, Role::KeyPrefix)?);
    let owner = arg(call, Role::Owner)?;
    let Ok(latch) = check_latch(call, keys, p)? else { return Ok(()) };
    let (_, mode) = read_mode(keys, p, lock)?;
    if mode == ModeField::Absent {
        return unlock_missing(call, now, keys, p, lock, latch, missing);
    }
    p.read(Cmd::HExists, [Arg::Key(lock), Arg::Argv(owner)]);
    let mine = keys.field(us(lock), us(owner));
    if mine.is_none() {
        p.then = Then::Reply(Reply::Nil);
        return Ok(());
    }
    p.read(Cmd::HIncrBy, [Arg::Key(lock), Arg::Argv(owner), Arg::MinusOne]);
    let left = incremented(mine, -1)?;
    let old = digits_ok(left + 1)?;
    if left == 0 {
        p.step(Cmd::HDel, [Arg::Key(lock), Arg::Argv(owner)], Effect::HDel);
    }
    let prefix_text = call.key(us(prefix)).unwrap_or_default();
    let dropped = derived(keys, p, lock, &[prefix_text, b":", digits(old, &mut [0; 20])])?;
    p.step(Cmd::Del, [dropped], Effect::DeleteNamed);
    let dropped_name = match dropped {
        Arg::Made(i) => p.made_text(i).map(<[u8]>::to_vec).unwrap_or_default(),
        _ => Vec::new(),
    };
    p.read(Cmd::HLen, [Arg::Key(lock)]);
    let fields_left = keys.hlen(us(lock)).saturating_sub(usize::from(left == 0));
    let mut longest = -3i64;
    if fields_left > 1 {
        p.read(Cmd::HKeys, [Arg::Key(lock)]);
        let owner_text = call.arg(us(owner)).unwrap_or_default();
        let fields = keys.fields(us(lock));
        let walked: i64 = fields.iter().map(|(_, n)| if let Num::Int(c) = n { (*c).max(0) } else { 0 }).sum();
        if walked > MAX_WALK {
            return Err(Quirk::WalkTooLong);
        }
        p.steps.reserve(p.steps.len() + fields.len() + walked as usize + 4);
        let keyprefix_text = call.key(us(keyprefix)).unwrap_or_default();
        for (field, num) in fields {
            // The owner's own field as HINCRBY / HDEL left it.
            let num = if field == owner_text {
                if left == 0 {
                    continue;
                }
                Num::Int(left)
            } else {
                num
            };
            let f = p.made(&[&field]);
            p.read(Cmd::HGet, [Arg::Key(lock), f]);
            let count = match num {
                Num::Skip => continue,
                Num::Int(c) => c,
                Num::Odd => return Err(Quirk::LuaNumber),
            };
            let mut n = count;
            while n >= 1 {
                let name = derived(
                    keys,
                    p,
                    lock,
                    &[keyprefix_text, b":", &field, b":rwlock_timeout:", digits(n, &mut [0; 20])],
                )?;
                p.read(Cmd::PTtl, [name]);
                let text = match name {
                    Arg::Made(i) => p.made_text(i).unwrap_or_default(),
                    _ => &[],
                };
                let ttl = if text == dropped_name.as_slice() { -2 } else { keys.pttl_named(text) };
                longest = longest.max(ttl);
                n -= 1;
            }
        }
    }
    let mode = if mode == ModeField::Write { Mode::Write } else { Mode::Read };
    match state::after_read_drop(fields_left, longest, mode) {
        state::ReadAfter::Rearm(ms) => {
            let ttl = p.made_int(ms);
            p.step(Cmd::PExpire, [Arg::Key(lock), ttl], lease_effect(ms, now, false)?);
            set_count_effect(p, true, left, false);
            set_latch(call, now, p, latch, false)?;
            p.then = Then::Reply(Reply::Int(0));
        }
        state::ReadAfter::KeepWriter => {
            set_count_effect(p, true, left, false);
            set_latch(call, now, p, latch, false)?;
            p.then = Then::Reply(Reply::Int(0));
        }
        state::ReadAfter::Free => {
            set_count_effect(p, false, left, false);
            p.step(Cmd::Del, [Arg::Key(lock)], Effect::Delete);
            publish(call, keys, p, lock, true)?;
            set_latch(call, now, p, latch, true)?;
            p.then = Then::Reply(Reply::Int(1));
        }
    }
    if left == 0 {
        // The field goes with HDEL: HINCRBY's own write is only its event.
        p.set_effect(Cmd::HIncrBy, Effect::CountThenGone);
    }
    Ok(())
}

fn write_unlock(
    call: &Call,
    now: i64,
    keys: &mut impl Keys,
    p: &mut Plan,
    missing: Missing,
) -> Result<(), Quirk> {
    let (lock, lease, owner) = (key(call, Role::Lock)?, arg(call, Role::Lease)?, arg(call, Role::Owner)?);
    let Ok(latch) = check_latch(call, keys, p)? else { return Ok(()) };
    let (_, mode) = read_mode(keys, p, lock)?;
    if mode == ModeField::Absent {
        return unlock_missing(call, now, keys, p, lock, latch, missing);
    }
    if mode != ModeField::Write {
        p.then = Then::Reply(Reply::Nil);
        return Ok(());
    }
    p.read(Cmd::HExists, [Arg::Key(lock), Arg::Argv(owner)]);
    let Some(mine) = keys.field(us(lock), us(owner)) else {
        p.then = Then::Reply(Reply::Nil);
        return Ok(());
    };
    p.read(Cmd::HIncrBy, [Arg::Key(lock), Arg::Argv(owner), Arg::MinusOne]);
    let count = mine.int.ok_or(Quirk::CountNotInteger)?;
    // The LOCK.* rule on the writer's count (HINCRBY -1 > 0 keeps holds).
    let view = RwView::Held { mode: Mode::Write, read: None, write: Some(Ok(count)) };
    match state::release_write(&view).map_err(|_| Quirk::CountOverflow)? {
        WriteRelease::NotHeld => return Err(Quirk::Layout),
        WriteRelease::Decrement { count: left } => {
            let Some(ms) = call.lease() else {
                p.read(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)]);
                return Err(Quirk::LeaseNotInteger);
            };
            let effect = lease_effect(ms, now, false);
            p.step(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)], effect.unwrap_or(Effect::None));
            effect?;
            set_count_effect(p, ms > 0, left, false);
            set_latch(call, now, p, latch, false)?;
            p.then = Then::Reply(Reply::Int(0));
        }
        WriteRelease::Last => {
            p.set_effect(Cmd::HIncrBy, Effect::CountThenGone);
            p.step(Cmd::HDel, [Arg::Key(lock), Arg::Argv(owner)], Effect::HDel);
            p.read(Cmd::HLen, [Arg::Key(lock)]);
            if keys.hlen(us(lock)).saturating_sub(1) == 1 {
                p.step(Cmd::Del, [Arg::Key(lock)], Effect::Delete);
                publish(call, keys, p, lock, true)?;
            } else {
                // The writer keeps read holds: the lock turns readable, nobody is told (LOCK.*
                // readers waiting are offered it).
                p.step(Cmd::HSet, [Arg::Key(lock), Arg::Mode, Arg::Read], Effect::HSet { wake: true });
            }
            set_latch(call, now, p, latch, true)?;
            p.then = Then::Reply(Reply::Int(1));
        }
    }
    Ok(())
}

fn force_unlock(call: &Call, keys: &mut impl Keys, p: &mut Plan, want: ModeField) -> Result<(), Quirk> {
    let lock = key(call, Role::Lock)?;
    let (_, mode) = read_mode(keys, p, lock)?;
    if mode != want {
        p.then = Then::Reply(Reply::Int(0));
        return Ok(());
    }
    p.step(Cmd::Del, [Arg::Key(lock)], Effect::Delete);
    publish(call, keys, p, lock, true)?;
    p.then = Then::Reply(Reply::Int(1));
    Ok(())
}

fn is_locked(call: &Call, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let lock = key(call, Role::Lock)?;
    let (_, mode) = read_mode(keys, p, lock)?;
    let locked = match mode {
        ModeField::Read => true,
        ModeField::Write => {
            p.read(Cmd::HLen, [Arg::Key(lock)]);
            keys.hlen(us(lock)) > 2
        }
        ModeField::Absent | ModeField::Other => false,
    };
    p.then = Then::Reply(Reply::Int(i64::from(locked)));
    Ok(())
}

/// Renewals: for each unit, whether the lock was deleted earlier in the call (PEXPIRE <= 0).
fn gone(deleted: &[&[u8]], name: &[u8]) -> bool {
    deleted.contains(&name)
}

fn renew(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan, walk: Walk) -> Result<(), Quirk> {
    let lease = arg(call, Role::Lease)?;
    let n = call.units;
    let ((k0, ks), (p0, ps), (o0, os)) = (
        call.unit_slots(Role::Lock).ok_or(Quirk::Layout)?,
        call.unit_slots(Role::KeyPrefix).ok_or(Quirk::Layout)?,
        call.unit_slots(Role::Owner).ok_or(Quirk::Layout)?,
    );
    let last = n.checked_sub(1).ok_or(Quirk::Layout)?;
    for (first, stride) in [(k0, ks), (p0, ps)] {
        slot(unit(first, stride, last))?;
    }
    slot(unit(o0, os, last))?;
    let ms = call.lease();
    let mut out = Vec::with_capacity(n);
    let mut deleted: Vec<&[u8]> = Vec::new();
    let mut walked = 0i64;
    for u in 0..n {
        let (lock, keyprefix, owner) = ((k0 + u * ks) as u32, (p0 + u * ps) as u32, (o0 + u * os) as u32);
        let lock_name = call.key(us(lock)).unwrap_or_default();
        p.read(Cmd::HExists, [Arg::Key(lock), Arg::Argv(owner)]);
        let present = if gone(&deleted, lock_name) {
            false
        } else {
            match keys.shape(us(lock)) {
                Shape::Other => return Err(Quirk::WrongType),
                Shape::Absent => false,
                Shape::Hash => keys.field(us(lock), us(owner)).is_some(),
            }
        };
        if !present {
            out.push(0);
            continue;
        }
        let Some(ms) = ms else {
            p.read(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)]);
            return Err(Quirk::LeaseNotInteger);
        };
        let effect = lease_effect(ms, now, false);
        p.step(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)], effect.unwrap_or(Effect::None));
        effect?;
        p.read(Cmd::HLen, [Arg::Key(lock)]);
        let hlen = if ms > 0 {
            keys.hlen(us(lock))
        } else {
            deleted.push(lock_name);
            0
        };
        if hlen > 1 {
            p.read(Cmd::HKeys, [Arg::Key(lock)]);
            for (field, num) in keys.fields(us(lock)) {
                let f = p.made(&[&field]);
                p.read(Cmd::HGet, [Arg::Key(lock), f]);
                let count = match num {
                    Num::Skip => continue,
                    Num::Int(c) => c,
                    Num::Odd => return Err(Quirk::LuaNumber),
                };
                walked += count.max(0);
                if walked > MAX_WALK {
                    return Err(Quirk::WalkTooLong);
                }
                let mut i = count;
                while i >= 1 {
                    let prefix = match walk {
                        Walk::Fixed => call.key(us(keyprefix)),
                        // 1affef78: KEYS[i + 1]; past the last key Lua concatenates nil (error).
                        Walk::Bug => call.key(usize::try_from(i).map_err(|_| Quirk::Layout)?),
                    };
                    let Some(prefix) = prefix else { return Err(Quirk::ScriptBug) };
                    let name = derived(
                        keys,
                        p,
                        lock,
                        &[prefix, b":", &field, b":rwlock_timeout:", digits(i, &mut [0; 20])],
                    )?;
                    p.step(Cmd::PExpire, [name, Arg::Argv(lease)], lease_named(ms, now)?);
                    i -= 1;
                }
            }
        }
        out.push(1);
    }
    p.ints = out;
    p.then = Then::Reply(if call.layout.each.is_some() {
        Reply::Ints
    } else {
        Reply::Int(p.ints.first().copied().unwrap_or(0))
    });
    Ok(())
}

fn renew_own(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let lease = arg(call, Role::Lease)?;
    let ((k0, ks), (p0, ps)) = (
        call.unit_slots(Role::Lock).ok_or(Quirk::Layout)?,
        call.unit_slots(Role::KeyPrefix).ok_or(Quirk::Layout)?,
    );
    let ms = call.lease();
    let mut out = Vec::with_capacity(call.units);
    let mut deleted: Vec<&[u8]> = Vec::new();
    let mut walked = 0i64;
    // The groups after the fixed ARGV (their shape was checked by `parse`).
    let mut at = call.layout.args.len();
    for u in 0..call.units {
        let (lock, keyprefix) = (slot(unit(k0, ks, u))?, slot(unit(p0, ps, u))?);
        let lock_name = call.key(us(lock)).unwrap_or_default();
        let m = call.arg(at).and_then(crate::logic::scripts::numkeys).ok_or(Quirk::Layout)?;
        let mut any = false;
        for j in at + 1..=at + m {
            let field_slot = slot(Some(j))?;
            p.read(Cmd::HGet, [Arg::Key(lock), Arg::Argv(field_slot)]);
            let value = if gone(&deleted, lock_name) {
                None
            } else {
                match keys.shape(us(lock)) {
                    Shape::Other => return Err(Quirk::WrongType),
                    Shape::Absent => None,
                    Shape::Hash => keys.field(us(lock), j),
                }
            };
            let Some(value) = value else { continue };
            any = true;
            let count = match value.num {
                // `for n = tonumber(count), 1, -1` with nil: Lua raises an error.
                Num::Skip => return Err(Quirk::CountNotInteger),
                Num::Odd => return Err(Quirk::LuaNumber),
                Num::Int(c) => c,
            };
            walked += count.max(0);
            if walked > MAX_WALK {
                return Err(Quirk::WalkTooLong);
            }
            let (prefix, field) =
                (call.key(us(keyprefix)).unwrap_or_default(), call.arg(j).unwrap_or_default());
            let mut i = count;
            while i >= 1 {
                let name = derived(
                    keys,
                    p,
                    lock,
                    &[prefix, b":", field, b":rwlock_timeout:", digits(i, &mut [0; 20])],
                )?;
                let Some(ms) = ms else {
                    p.read(Cmd::PExpire, [name, Arg::Argv(lease)]);
                    return Err(Quirk::LeaseNotInteger);
                };
                p.step(Cmd::PExpire, [name, Arg::Argv(lease)], lease_named(ms, now)?);
                i -= 1;
            }
        }
        at += 1 + m;
        if any {
            let Some(ms) = ms else {
                p.read(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)]);
                return Err(Quirk::LeaseNotInteger);
            };
            let effect = lease_effect(ms, now, false);
            p.step(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)], effect.unwrap_or(Effect::None));
            effect?;
            if ms <= 0 {
                deleted.push(lock_name);
            }
        }
        out.push(i64::from(any));
    }
    p.ints = out;
    p.then = Then::Reply(Reply::Ints);
    Ok(())
}
