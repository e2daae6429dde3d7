//! What each lock script does natively: its path as a [`Plan`], or the reason it runs in Lua.
//!
//! Pure. The glue reads the keys on demand through [`Keys`], in the script's own order (a latch
//! present answers before the lock key is looked at; the token counter is read only by an
//! acquire that takes the lock), and the decisions are those of the LOCK.* commands
//! (`state::acquire`, `release`, `renew`) where the script agrees with them. Where it does not,
//! the difference is a [`Quirk`] (Lua runs the call) or a documented reading: HINCRBY takes any
//! integer count, so a count <= 0 is re-entered or released as the script does, and renewal
//! only asks HEXISTS.
//!
//! Lua decisions come in two places, as in the script: before the path (the script fails before
//! any command the ACL would check, or the native code refuses the keys as they are), or after
//! it ([`Then::Lua`]: the script fails at a command of the path, so a user who may not run the
//! path gets the ACL error first).

use crate::logic::error::Error;
use crate::logic::lock::scripts::LockOp;
use crate::logic::lock::state::{self, LockView};
use crate::logic::plan::{Arg, Cmd, Effect, Plan, Quirk, Reply, Then};
use crate::logic::scripts::{unit, Call, Publish, Role};

/// The token counter of a fenced acquire, as INCR would find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    Absent,
    Int(i64),
    /// A string that is not an integer.
    NotInteger,
    /// Another type.
    WrongType,
}

/// The unlock latch, as the 3.24+ unlock reads it with GET (shared by every kind).
pub use crate::logic::plan::Latch;

/// What the glue reads of the keys, when a transition asks; `lock`, `owner`, ... are KEYS and
/// ARGV slots of the call.
pub trait Keys {
    /// The lock key as an acquire finds it, the owner's count as HINCRBY reads it (any integer;
    /// `Err` when not one), once LOCK.* waiters had their go at a free lock; with the ms left of
    /// another owner's turn when the free lock is kept for it.
    fn for_acquire(&mut self, lock: usize, owner: usize) -> (LockView, Option<i64>);
    /// The lock key and the owner's count, as an unlock finds them.
    fn lock(&mut self, lock: usize, owner: usize) -> LockView;
    /// The lock key's PTTL (-1 without a TTL).
    fn pttl(&mut self, lock: usize) -> i64;
    /// Whether the lock key exists (any type).
    fn exists(&mut self, lock: usize) -> bool;
    /// A lock key of a renewal, through HEXISTS ([`LockView::field`]).
    fn held(&mut self, lock: usize, owner: usize) -> LockView;
    fn token(&mut self, token: usize) -> Counter;
    fn latch(&mut self, latch: usize) -> Latch;
    /// Whether SPUBLISH to the channel stays in the lock key's slot (always outside a cluster).
    fn channel_in_lock_slot(&mut self, lock: usize, channel: usize) -> bool;
}

/// The path of `op` for `call` at `now`, written into `p` (an empty plan: built in place, the
/// hot path copies nothing), or why the call runs in Lua (`p` is then to be ignored).
pub fn plan(op: LockOp, call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    match op {
        LockOp::Acquire
        | LockOp::FencedAcquire
        | LockOp::FencedAcquirePlain
        | LockOp::NonReentrantAcquire => acquire(op, call, now, keys, p),
        LockOp::UnlockPublish
        | LockOp::Unlock
        | LockOp::UnlockLatch
        | LockOp::SpinUnlock
        | LockOp::SpinUnlockLatch => unlock(call, now, keys, p),
        LockOp::ForceUnlockPublish | LockOp::ForceUnlock | LockOp::SpinForceUnlock => {
            force_unlock(call, keys, p)
        }
        LockOp::Renew | LockOp::RenewBatch => renew(call, now, keys, p),
    }
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

/// A view the script cannot run on: another type, or a count HINCRBY refuses.
fn runnable(view: &LockView) -> Result<(), Quirk> {
    match view {
        LockView::WrongType => Err(Quirk::WrongType),
        LockView::Hash { mine: Some(Err(_)) } => Err(Quirk::CountNotInteger),
        _ => Ok(()),
    }
}

/// A refusal of the shared transitions, once [`runnable`] passed: the count overflowed.
fn refused(e: Error) -> Quirk {
    if e == Error::WrongType {
        Quirk::WrongType
    } else {
        Quirk::CountOverflow
    }
}

fn deadline(now: i64, ms: i64) -> Result<i64, Quirk> {
    now.checked_add(ms).ok_or(Quirk::DeadlineOverflow)
}

/// HINCRBY then PEXPIRE with the lease: the lease > 0 re-arms the key, <= 0 deletes it.
fn count_and_lease(
    count: i64,
    up: bool,
    lease: i64,
    now: i64,
    fresh: bool,
) -> Result<(Effect, Effect), Quirk> {
    Ok(if lease > 0 {
        (Effect::Count { count, up }, Effect::Lease { deadline: deadline(now, lease)?, fresh })
    } else {
        (Effect::CountThenGone, Effect::Delete)
    })
}

fn acquire(op: LockOp, call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let (lock, owner, lease) = (key(call, Role::Lock)?, arg(call, Role::Owner)?, arg(call, Role::Lease)?);
    let pair = op == LockOp::FencedAcquire;
    let (view, turn) = keys.for_acquire(lock as usize, owner as usize);
    runnable(&view)?;
    // A lock kept for another owner's turn is not free for this one.
    let taken = match turn {
        Some(_) => state::Acquire::Contended,
        None => state::acquire(&view).map_err(refused)?,
    };
    let free = matches!(view, LockView::Free);
    p.read(Cmd::Exists, [Arg::Key(lock)]);
    if !free {
        p.read(Cmd::HExists, [Arg::Key(lock), Arg::Argv(owner)]);
    }
    let count = match taken {
        state::Acquire::Create => 1,
        // The non-reentrant lock refuses its own owner with the error text it is given.
        state::Acquire::Reenter { .. } if op == LockOp::NonReentrantAcquire => {
            p.then = Then::Reply(Reply::ErrorArg(error_text(call)?));
            return Ok(());
        }
        state::Acquire::Reenter { new_count } => new_count,
        state::Acquire::Contended => {
            // While LOCK.* clients wait, this owner takes a place in their FIFO.
            let pttl = turn.unwrap_or_else(|| keys.pttl(lock as usize));
            p.step(Cmd::PTtl, [Arg::Key(lock)], Effect::Turn { owner, pttl });
            p.then = Then::Reply(if pair { Reply::Pair(pttl, -1) } else { Reply::Int(pttl) });
            return Ok(());
        }
    };
    let ms = call.lease().ok_or(Quirk::LeaseNotInteger)?;
    let (counted, leased) = count_and_lease(count, true, ms, now, free)?;
    // The fenced scripts INCR the token counter: checked before anything is written.
    let token = match call.key_index(Role::Token) {
        None => None,
        Some(t) => {
            if call.key(t) == call.key(lock as usize) {
                return Err(Quirk::TokenIsLock); // INCR on the lock hash: the script fails half-way
            }
            let stored = match keys.token(t) {
                Counter::Absent => 0,
                Counter::Int(n) => n,
                Counter::NotInteger => return Err(Quirk::TokenNotInteger),
                Counter::WrongType => return Err(Quirk::TokenWrongType),
            };
            Some((slot(Some(t))?, stored.checked_add(1).ok_or(Quirk::TokenOverflow)?))
        }
    };
    p.step(Cmd::HIncrBy, [Arg::Key(lock), Arg::Argv(owner), Arg::One], counted);
    p.step(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)], leased);
    if let Some((t, value)) = token {
        p.step(Cmd::Incr, [Arg::Key(t)], Effect::Incr { value });
    }
    p.then = Then::Reply(match token {
        Some((_, value)) if pair => Reply::Pair(-1, value),
        _ => Reply::Nil,
    });
    Ok(())
}

/// The ARGV slot of a non-reentrant acquire's error text, natively only when the reply carries
/// it as Lua's would (printable ASCII, not empty, no leading `-`).
pub fn error_text(call: &Call) -> Result<u32, Quirk> {
    let i = arg(call, Role::ErrText)?;
    let t = call.arg(i as usize).ok_or(Quirk::Layout)?;
    if t.is_empty() || t.first() == Some(&b'-') || !t.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Err(Quirk::ErrorText);
    }
    Ok(i)
}

fn publish_cmd(call: &Call) -> Cmd {
    // The scripts without a publish-command slot publish with PUBLISH.
    match call.publish {
        Some(Publish::SPublish) => Cmd::SPublish,
        _ => Cmd::Publish,
    }
}

/// In a cluster, a script's SPUBLISH must stay in the script's slot: Lua raises an error (after
/// the lock was deleted) when it does not.
fn publish_ok(cmd: Cmd, keys: &mut impl Keys, lock: u32, channel: u32) -> bool {
    cmd == Cmd::Publish || keys.channel_in_lock_slot(lock as usize, channel as usize)
}

fn unlock(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let lock = key(call, Role::Lock)?;
    // The spin lock's unlocks have no channel: the freed lock goes to LOCK.* waiters only.
    let channel = match call.key_index(Role::Channel) {
        Some(c) => Some((slot(Some(c))?, arg(call, Role::Message)?)),
        None => None,
    };
    let (lease, owner) = (arg(call, Role::Lease)?, arg(call, Role::Owner)?);
    let latch = match call.key_index(Role::Latch) {
        Some(k) => Some((slot(Some(k))?, arg(call, Role::LatchMs)?)),
        None => None,
    };
    // 3.24+: an existing latch answers a retried unlock and nothing else happens.
    if let Some((k, _)) = latch {
        p.read(Cmd::Get, [Arg::Key(k)]);
        match keys.latch(k as usize) {
            Latch::Absent => {}
            Latch::Value(v) => {
                p.then = Then::Reply(v.map_or(Reply::Nil, Reply::Int));
                return Ok(());
            }
            Latch::WrongType => return Err(Quirk::LatchWrongType),
        }
    }
    let view = keys.lock(lock as usize, owner as usize);
    runnable(&view)?;
    p.read(Cmd::HExists, [Arg::Key(lock), Arg::Argv(owner)]);
    let left = match state::release(&view).map_err(refused)? {
        state::Release::NotOwner => {
            p.then = Then::Reply(Reply::Nil);
            return Ok(());
        }
        state::Release::Decrement { new_count } => Some(new_count),
        state::Release::Free => None,
    };
    let latch_deadline = match latch {
        Some(_) => Some(deadline(now, call.latch_ms().ok_or(Quirk::LatchMs)?)?),
        None => None,
    };
    // What the path writes, or the quirk its PEXPIRE / SPUBLISH fails on (Lua, past the path).
    let effects = match left {
        // PEXPIRE <= 0 deletes the lock, which is still held: no release message.
        Some(n) => call
            .lease()
            .ok_or(Quirk::LeaseNotInteger)
            .and_then(|ms| count_and_lease(n, false, ms, now, false))
            .map(|(c, l)| [c, l, Effect::None]),
        None => match channel {
            None => Ok([Effect::CountThenGone, Effect::Freed, Effect::None]),
            Some((c, _)) if publish_ok(publish_cmd(call), keys, lock, c) => {
                Ok([Effect::CountThenGone, Effect::Delete, Effect::Release { lock }])
            }
            Some(_) => Err(Quirk::CrossSlotPublish),
        },
    };
    let [counted, second, published] = *effects.as_ref().unwrap_or(&[Effect::None; 3]);
    p.step(Cmd::HIncrBy, [Arg::Key(lock), Arg::Argv(owner), Arg::MinusOne], counted);
    if left.is_some() {
        p.step(Cmd::PExpire, [Arg::Key(lock), Arg::Argv(lease)], second);
    } else {
        p.step(Cmd::Del, [Arg::Key(lock)], second);
        if let Some((channel, message)) = channel {
            p.step(publish_cmd(call), [Arg::Key(channel), Arg::Argv(message)], published);
        }
    }
    // The latch keeps the reply: "0" while held, "1" once released.
    let reply = if left.is_some() { 0 } else { 1 };
    if let (Some((k, ms)), Some(d)) = (latch, latch_deadline) {
        let value = if reply == 0 { Arg::Zero } else { Arg::One };
        let effect = if effects.is_ok() { Effect::Latch { deadline: d } } else { Effect::None };
        p.step(Cmd::Set, [Arg::Key(k), value, Arg::Px, Arg::Argv(ms)], effect);
    }
    p.then = match effects {
        Ok(_) => Then::Reply(Reply::Int(reply)),
        Err(q) => Then::Lua(q),
    };
    Ok(())
}

fn force_unlock(call: &Call, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let lock = key(call, Role::Lock)?;
    // DEL works on any type.
    if !keys.exists(lock as usize) {
        // DEL of a missing key writes nothing, but the server refuses it all the same.
        p.read(Cmd::Del, [Arg::Key(lock)]);
        p.then = Then::Reply(Reply::Int(0));
        return Ok(());
    }
    // The spin lock's force unlock has no channel: the lock goes to LOCK.* waiters only.
    let Some(channel) = call.key_index(Role::Channel) else {
        p.step(Cmd::Del, [Arg::Key(lock)], Effect::Freed);
        p.then = Then::Reply(Reply::Int(1));
        return Ok(());
    };
    let (channel, message) = (slot(Some(channel))?, arg(call, Role::Message)?);
    let cmd = publish_cmd(call);
    if !publish_ok(cmd, keys, lock, channel) {
        return Err(Quirk::CrossSlotPublish);
    }
    p.step(Cmd::Del, [Arg::Key(lock)], Effect::Delete);
    p.step(cmd, [Arg::Key(channel), Arg::Argv(message)], Effect::Release { lock });
    p.then = Then::Reply(Reply::Int(1));
    Ok(())
}

fn renew(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let lease = arg(call, Role::Lease)?;
    let n = call.units;
    let ((k0, ks), (o0, os)) = (
        call.unit_slots(Role::Lock).ok_or(Quirk::Layout)?,
        call.unit_slots(Role::Owner).ok_or(Quirk::Layout)?,
    );
    // The slots of the last unit fit the call (and a u32), so those of every unit do.
    let last = n.checked_sub(1).ok_or(Quirk::Layout)?;
    slot(unit(k0, ks, last))?;
    slot(unit(o0, os, last))?;
    let unit = |u: usize| ((k0 + u * ks) as u32, (o0 + u * os) as u32);
    // HEXISTS on a key of another type raises an error: every key is read before any write.
    // `renewed` holds whether each key is held, then whether the path renews it.
    let mut renewed = Vec::with_capacity(n);
    for u in 0..n {
        let (k, o) = unit(u);
        renewed.push(i64::from(state::renew(&keys.held(k as usize, o as usize)).map_err(refused)?));
    }
    let ms = match call.lease() {
        Some(ms) => ms,
        // PEXPIRE fails on a lease that is not an integer, if the script reaches it.
        None if renewed.contains(&1) => return Err(Quirk::LeaseNotInteger),
        None => 0,
    };
    // A lease > 0 whose deadline overflows fails once the path is checked (even when no key
    // is held, as before).
    let until = if ms > 0 { Some(deadline(now, ms)) } else { None };
    p.steps.reserve(2 * n);
    // PEXPIRE <= 0 deletes each lock renewed: a key named twice is not held the second time.
    let mut deleted: Vec<&[u8]> = Vec::new();
    for (u, held) in renewed.iter_mut().enumerate() {
        let (k, o) = unit(u);
        p.read(Cmd::HExists, [Arg::Key(k), Arg::Argv(o)]);
        if *held == 0 {
            continue;
        }
        let effect = match until {
            Some(Ok(d)) => Effect::Lease { deadline: d, fresh: false },
            Some(Err(_)) => Effect::None,
            None => {
                let name = call.key(k as usize).unwrap_or_default();
                if deleted.contains(&name) {
                    *held = 0;
                    continue;
                }
                deleted.push(name);
                Effect::Delete
            }
        };
        p.step(Cmd::PExpire, [Arg::Key(k), Arg::Argv(lease)], effect);
    }
    let reply = if call.layout.each.is_some() {
        p.ints = renewed;
        Reply::Ints
    } else {
        Reply::Int(renewed.first().copied().unwrap_or(0))
    };
    p.then = match until {
        Some(Err(q)) => Then::Lua(q),
        _ => Then::Reply(reply),
    };
    Ok(())
}
