//! Redisson's `RSemaphore` scripts natively (and PES's `addPermits`, which works on the count
//! alone): what each call reads of the count, the path it runs and what it replies
//! (`scripts.rs` checks the path, writes and replies).

use super::script_path::{int_arg, int_value, slot, Act, Out, Path, LUA_EXACT};
use crate::ffi::rm;
use crate::logic::args::parse_i64;
use crate::logic::plan::{Arg, Cmd, Quirk};
use crate::logic::scripts::Role;
use crate::logic::semaphore::scripts::SemOp;

/// The decision of a count script `op` (`raw`: the count as read, `None` absent).
pub(super) fn decide(op: SemOp, p: &mut Path, raw: Option<Vec<u8>>) -> Result<Out, Quirk> {
    let call = p.call;
    let key = p.key;
    match op {
        SemOp::TryAcquire => {
            let n = int_arg(call, Role::Count).filter(|n| *n >= 1).ok_or(Quirk::LuaNumber)?;
            p.step1(Cmd::Get, key);
            match raw.as_deref() {
                None => Ok(Out::Int(0)),
                Some(b) => {
                    let v = parse_i64(b).ok_or(Quirk::CountNotInteger)?;
                    if v >= n {
                        p.add(Cmd::DecrBy, v, -n)?;
                        Ok(Out::Int(1))
                    } else {
                        Ok(Out::Int(0))
                    }
                }
            }
        }
        SemOp::ReleasePublish | SemOp::Release | SemOp::ReleaseIfExists => {
            let n = int_arg(call, Role::Count).ok_or(Quirk::LuaNumber)?;
            if op == SemOp::ReleaseIfExists {
                p.step1(Cmd::Get, key);
                if raw.is_none() {
                    return Ok(Out::Int(0));
                }
            }
            let v = int_value(raw.as_deref())?.unwrap_or(0);
            let new = p.add(Cmd::IncrBy, v, n)?;
            p.acts.push(Act::Grant);
            p.publish(new.to_string().into_bytes());
            Ok(if op == SemOp::ReleaseIfExists { Out::Int(1) } else { Out::Nil })
        }
        SemOp::Drain => {
            p.step1(Cmd::Get, key);
            match raw {
                None => Ok(Out::Int(0)),
                Some(old) => {
                    let z = p.num(0);
                    p.plan.step(Cmd::Set, [p.count_key(), z], crate::logic::plan::Effect::None);
                    p.acts.push(Act::Set(b"0".to_vec(), None));
                    Ok(Out::Bulk(old))
                }
            }
        }
        SemOp::TrySetPublish | SemOp::TrySet | SemOp::TrySetTtl => {
            let permits = call.arg(call.arg_index(Role::Count).ok_or(Quirk::Layout)?).ok_or(Quirk::Layout)?;
            let deadline = match op {
                SemOp::TrySetTtl => {
                    let ttl = int_arg(call, Role::Ttl).filter(|t| *t > 0).ok_or(Quirk::LatchMs)?;
                    Some(rm::millis().checked_add(ttl).ok_or(Quirk::DeadlineOverflow)?)
                }
                _ => None,
            };
            p.step1(Cmd::Get, key);
            if raw.is_some() {
                return Ok(Out::Int(0));
            }
            let count_arg = Arg::Argv(slot(call.arg_index(Role::Count).unwrap_or(0)));
            p.plan.step(Cmd::Set, [p.count_key(), count_arg], crate::logic::plan::Effect::None);
            p.acts.push(Act::Set(permits.to_vec(), deadline));
            p.acts.push(Act::Grant);
            p.publish(permits.to_vec());
            Ok(Out::Int(1))
        }
        SemOp::AddPublish | SemOp::Add | SemOp::PesAddPublish | SemOp::PesAdd => {
            let delta = int_arg(call, Role::Count).ok_or(Quirk::LuaNumber)?;
            p.step1(Cmd::Get, key);
            let v = int_value(raw.as_deref())?.unwrap_or(0);
            let sum = v
                .checked_add(delta)
                .filter(|s| s.unsigned_abs() < LUA_EXACT as u64)
                .ok_or(Quirk::LuaNumber)?;
            let s = p.num(sum);
            p.plan.step(Cmd::Set, [p.count_key(), s], crate::logic::plan::Effect::None);
            p.acts.push(Act::Set(sum.to_string().into_bytes(), None));
            p.acts.push(Act::Grant);
            match op {
                SemOp::AddPublish | SemOp::Add => p.publish(sum.to_string().into_bytes()),
                _ if delta > 0 => p.publish(delta.to_string().into_bytes()),
                _ => {}
            }
            Ok(Out::Nil)
        }
        _ => Err(Quirk::Layout),
    }
}
