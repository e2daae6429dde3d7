//! The read-write lock's read-renewal scripts as plans (see `script_plans.rs`): every hold of
//! every field (up to 4.3), 1affef78's loop bug, and 4.4's renewal of the client's own holds.

use super::script_steps::*;
use crate::logic::plan::{Arg, Cmd, Effect, Plan, Quirk, Reply, Then};
use crate::logic::scripts::{unit, Call, Role};

pub(super) fn renew(
    call: &Call,
    now: i64,
    keys: &mut impl Keys,
    p: &mut Plan,
    walk: Walk,
) -> Result<(), Quirk> {
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
    let mut walked = WalkBudget::default();
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
            let fields = keys.fields(us(lock));
            for (field, num) in fields.iter() {
                let f = p.made(&[field]);
                p.read(Cmd::HGet, [Arg::Key(lock), f]);
                let count = match num {
                    Num::Skip => continue,
                    Num::Int(c) => c,
                    Num::Odd => return Err(Quirk::LuaNumber),
                };
                // 1affef78 names holds with KEYS[i + 1]: bound by the longest key.
                let prefix_len = match walk {
                    Walk::Fixed => call.key(us(keyprefix)).map_or(0, <[u8]>::len),
                    Walk::Bug => call.keys.iter().map(|k| k.len()).max().unwrap_or(0),
                };
                walked.take(count, hold_name_len(prefix_len, field.len()))?;
                let mut i = count;
                while i >= 1 {
                    let prefix = match walk {
                        Walk::Fixed => call.key(us(keyprefix)),
                        // 1affef78: KEYS[i + 1]; past the last key Lua concatenates nil (error).
                        Walk::Bug => call.key(usize::try_from(i).map_err(|_| Quirk::Layout)?),
                    };
                    let Some(prefix) = prefix else { return Err(Quirk::ScriptBug) };
                    let name = hold_name(keys, p, lock, prefix, field, i)?;
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

pub(super) fn renew_own(call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) -> Result<(), Quirk> {
    let lease = arg(call, Role::Lease)?;
    let ((k0, ks), (p0, ps)) = (
        call.unit_slots(Role::Lock).ok_or(Quirk::Layout)?,
        call.unit_slots(Role::KeyPrefix).ok_or(Quirk::Layout)?,
    );
    let ms = call.lease();
    let mut out = Vec::with_capacity(call.units);
    let mut deleted: Vec<&[u8]> = Vec::new();
    let mut walked = WalkBudget::default();
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
            let (prefix, field) =
                (call.key(us(keyprefix)).unwrap_or_default(), call.arg(j).unwrap_or_default());
            walked.take(count, hold_name_len(prefix.len(), field.len()))?;
            let mut i = count;
            while i >= 1 {
                let name = hold_name(keys, p, lock, prefix, field, i)?;
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

/// Renewals: for each unit, whether the lock was deleted earlier in the call (PEXPIRE <= 0).
fn gone(deleted: &[&[u8]], name: &[u8]) -> bool {
    deleted.contains(&name)
}
