//! What every read-write lock script path is built from (see `script_plans.rs`): the reads the
//! glue answers ([`Keys`]), the views of a field and of the mode, the shared steps (derived
//! keys, holds, leases, counts), and the two acquire paths.

use crate::logic::plan::{Arg, Cmd, Effect, Latch, Plan, Quirk, Reply, Then};
use crate::logic::scripts::{Call, Publish, Role};

/// At most this many hold timeout keys are walked natively in one call; a longer walk runs in
/// Lua.
pub const MAX_WALK: i64 = 100_000;

/// At most this many bytes of derived key names are built natively in one call (a hold count
/// times a name's length, whatever the hash holds: a long field with a large count must not
/// exhaust memory); a longer walk runs in Lua.
pub const MAX_WALK_BYTES: usize = 32 << 20;

/// What one call's walks have built so far, against [`MAX_WALK`] and [`MAX_WALK_BYTES`].
#[derive(Debug, Default)]
pub(super) struct WalkBudget {
    holds: i64,
    bytes: usize,
}

impl WalkBudget {
    /// Count `count` holds whose names are `name_len` bytes before the hold number.
    pub(super) fn take(&mut self, count: i64, name_len: usize) -> Result<(), Quirk> {
        let c = count.max(0);
        self.holds = self.holds.saturating_add(c);
        let each = name_len.saturating_add(21);
        self.bytes = self.bytes.saturating_add(usize::try_from(c).unwrap_or(usize::MAX).saturating_mul(each));
        if self.holds > MAX_WALK || self.bytes > MAX_WALK_BYTES {
            return Err(Quirk::WalkTooLong);
        }
        Ok(())
    }

    pub(super) fn holds(&self) -> usize {
        usize::try_from(self.holds).unwrap_or(0)
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// `<prefix>:<field>:rwlock_timeout:`: the length of a hold's name before its number.
pub(super) fn hold_name_len(prefix: usize, field: usize) -> usize {
    prefix.saturating_add(field).saturating_add(17)
}

/// Lua 5.1 writes a number into a string (`..`) with `%.14g`: plain digits below 10^14.
pub(super) const LUA_DIGITS: i64 = 100_000_000_000_000;

/// A number passed to `redis.call` is written with `%.17g` (7.0) or the shortest form (7.2+):
/// plain digits on both below 10^15 for an integer.
pub(super) const CALL_DIGITS: f64 = 1e15;

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

/// A hash's fields in HKEYS order with their values as `tonumber` reads them, end to end in one
/// buffer (a read unlock walks every reader's field: no allocation per field).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    text: Vec<u8>,
    items: Vec<(usize, usize, Num)>,
}

impl Fields {
    pub fn with_capacity(fields: usize, bytes: usize) -> Fields {
        Fields { text: Vec::with_capacity(bytes), items: Vec::with_capacity(fields) }
    }

    pub fn push(&mut self, field: &[u8], num: Num) {
        let start = self.text.len();
        self.text.extend_from_slice(field);
        self.items.push((start, self.text.len(), num));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Num)> + '_ {
        self.items.iter().map(|&(s, e, n)| (self.text.get(s..e).unwrap_or_default(), n))
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Bytes of every field name together.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }
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
    fn fields(&mut self, lock: usize) -> Fields;
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

/// What an unlock replies when the lock is missing (it publishes and sets the latch anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Missing {
    /// Up to 3.43.
    One,
    /// 3.44+.
    Nil,
}

/// How a renewal names hold n of a field: with its lock's key prefix, or (1affef78) with
/// KEYS[n + 1].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Walk {
    Fixed,
    Bug,
}

pub(super) use crate::logic::rwlock::names::decimal as digits;

/// The derived name of hold `n` of `field`, `<prefix>:<field>:rwlock_timeout:<n>`, once the
/// module may run it (see [`derived`]).
pub(super) fn hold_name(
    keys: &mut impl Keys,
    p: &mut Plan,
    lock: u32,
    prefix: &[u8],
    field: &[u8],
    n: i64,
) -> Result<Arg, Quirk> {
    derived(keys, p, lock, &[prefix, b":", field, b":rwlock_timeout:", digits(n, &mut [0; 20])])
}

pub(super) fn slot(i: Option<usize>) -> Result<u32, Quirk> {
    i.and_then(|i| u32::try_from(i).ok()).ok_or(Quirk::Layout)
}

pub(super) fn key(call: &Call, role: Role) -> Result<u32, Quirk> {
    slot(call.key_index(role))
}

pub(super) fn arg(call: &Call, role: Role) -> Result<u32, Quirk> {
    slot(call.arg_index(role))
}

pub(super) fn us(i: u32) -> usize {
    i as usize
}

pub(super) fn deadline(now: i64, ms: i64) -> Result<i64, Quirk> {
    now.checked_add(ms).ok_or(Quirk::DeadlineOverflow)
}

/// PEXPIRE's effect on a KEYS slot: > 0 re-arms, <= 0 deletes.
pub(super) fn lease_effect(ms: i64, now: i64, fresh: bool) -> Result<Effect, Quirk> {
    Ok(if ms > 0 { Effect::Lease { deadline: deadline(now, ms)?, fresh } } else { Effect::Delete })
}

/// PEXPIRE's effect on a derived key.
pub(super) fn lease_named(ms: i64, now: i64) -> Result<Effect, Quirk> {
    Ok(if ms > 0 { Effect::LeaseNamed { deadline: deadline(now, ms)? } } else { Effect::DeleteNamed })
}

pub(super) fn publish_cmd(call: &Call) -> Cmd {
    match call.publish {
        Some(Publish::SPublish) => Cmd::SPublish,
        _ => Cmd::Publish,
    }
}

/// HGET lock mode, once the key's type allows it.
pub(super) fn read_mode(keys: &mut impl Keys, p: &mut Plan, lock: u32) -> Result<(Shape, ModeField), Quirk> {
    p.read(Cmd::HGet, [Arg::Key(lock), Arg::Mode]);
    let shape = keys.shape(us(lock));
    if shape == Shape::Other {
        return Err(Quirk::WrongType);
    }
    let mode = if shape == Shape::Absent { ModeField::Absent } else { keys.mode(us(lock)) };
    Ok((shape, mode))
}

/// A derived key's name as an argument, once the module may run it.
pub(super) fn derived(keys: &mut impl Keys, p: &mut Plan, lock: u32, parts: &[&[u8]]) -> Result<Arg, Quirk> {
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
pub(super) fn set_hold(p: &mut Plan, hold: Arg, lease: u32, ms: Option<i64>, now: i64) -> Result<(), Quirk> {
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
pub(super) fn incremented(field: Option<Field>, by: i64) -> Result<i64, Quirk> {
    let old = match field {
        None => 0,
        Some(Field { int: Some(n), .. }) => n,
        Some(Field { int: None, .. }) => return Err(Quirk::CountNotInteger),
    };
    old.checked_add(by).ok_or(Quirk::CountOverflow)
}

pub(super) fn digits_ok(n: i64) -> Result<i64, Quirk> {
    if n > -LUA_DIGITS && n < LUA_DIGITS {
        Ok(n)
    } else {
        Err(Quirk::LuaNumber)
    }
}

pub(super) fn read_acquire(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
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
pub(super) fn set_count_effect(p: &mut Plan, kept: bool, count: i64, up: bool) {
    let effect = if kept { Effect::Count { count, up } } else { Effect::CountThenGone };
    p.set_effect(Cmd::HIncrBy, effect);
}

pub(super) fn write_acquire(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
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
