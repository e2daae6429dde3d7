//! The read-write lock's unlock, force-unlock and isLocked scripts as plans (see
//! `script_plans.rs`, which dispatches here): the latch, the walk over every remaining hold,
//! the messages and their publish commands, Redisson's replies per version.

use super::script_steps::*;
use crate::logic::plan::{Arg, Cmd, Effect, Latch, Plan, Quirk, Reply, Then};
use crate::logic::rwlock::state::{self, Mode, RwView, WriteRelease};
use crate::logic::scripts::{Call, Role};

/// The 3.24+ latch: an existing one answers a retried unlock, nothing else happens. `Some`
/// (latch slot, latch-ms slot) when the text has one; `Err(Ok(()))`: the reply is written.
pub(super) fn check_latch(
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
pub(super) fn set_latch(
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
pub(super) fn publish(
    call: &Call,
    keys: &mut impl Keys,
    p: &mut Plan,
    lock: u32,
    release: bool,
) -> Result<(), Quirk> {
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
pub(super) fn unlock_missing(
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

pub(super) fn read_unlock(
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
        let keyprefix_text = call.key(us(keyprefix)).unwrap_or_default();
        // Every hold's name, bounded before any is made; then room for all of them at once.
        let mut budget = WalkBudget::default();
        for (f, n) in fields.iter() {
            if let Num::Int(c) = n {
                budget.take(c, hold_name_len(keyprefix_text.len(), f.len()))?;
            }
        }
        p.steps.reserve(p.steps.len() + fields.len() + budget.holds() + 4);
        p.reserve_made(
            fields.len().saturating_add(budget.holds()).saturating_add(4),
            fields.text_len().saturating_add(budget.bytes()),
        );
        for (field, num) in fields.iter() {
            // The owner's own field as HINCRBY / HDEL left it.
            let num = if field == owner_text {
                if left == 0 {
                    continue;
                }
                Num::Int(left)
            } else {
                num
            };
            let f = p.made(&[field]);
            p.read(Cmd::HGet, [Arg::Key(lock), f]);
            let count = match num {
                Num::Skip => continue,
                Num::Int(c) => c,
                Num::Odd => return Err(Quirk::LuaNumber),
            };
            let mut n = count;
            while n >= 1 {
                let name = hold_name(keys, p, lock, keyprefix_text, field, n)?;
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

pub(super) fn write_unlock(
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

pub(super) fn force_unlock(
    call: &Call,
    keys: &mut impl Keys,
    p: &mut Plan,
    want: ModeField,
) -> Result<(), Quirk> {
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

pub(super) fn is_locked(call: &Call, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
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
