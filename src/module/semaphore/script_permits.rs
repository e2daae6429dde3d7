//! Redisson's `RPermitExpirableSemaphore` scripts natively (those that read the zset of held
//! permits): the reclaim, the acquire, the releases, the counts, the total, the leases
//! (`scripts.rs` checks the path, writes and replies).

use super::script_path::{
    id_slots, int_arg, int_value, lua, score_text, slot, zset_has_expired, Act, Out, Path, LUA_EXACT,
    UNPACK_MAX,
};
use crate::ffi::key::Key;
use crate::ffi::rm::OwnedStr;
use crate::logic::args::parse_i64;
use crate::logic::plan::{Arg, Cmd, Quirk};
use crate::logic::scripts::Role;
use crate::logic::semaphore::scripts::SemOp;

/// The decision of a permit script `op` (`raw`: the count as read, `None` absent).
pub(super) fn decide(
    op: SemOp,
    p: &mut Path,
    count: &Key,
    zset: Option<&Key>,
    raw: Option<Vec<u8>>,
) -> Result<Out, Quirk> {
    let call = p.call;
    let key = p.key;
    match op {
        SemOp::PesTryAcquireOnePublish | SemOp::PesTryAcquireOne | SemOp::PesTryAcquire => {
            let zset = zset.ok_or(Quirk::Layout)?;
            let z = p.zset.ok_or(Quirk::Layout)?;
            let n = int_arg(call, Role::Count).filter(|n| *n >= 1).ok_or(Quirk::LuaNumber)?;
            let now = int_arg(call, Role::Now).ok_or(Quirk::LuaNumber)?;
            let score = int_arg(call, Role::Score)
                .filter(|s| s.unsigned_abs() < LUA_EXACT as u64)
                .ok_or(Quirk::LuaNumber)?;
            let ids = match op {
                SemOp::PesTryAcquire => id_slots(call),
                _ => vec![call.arg_index(Role::Id).ok_or(Quirk::Layout)?],
            };
            if op == SemOp::PesTryAcquire && usize::try_from(n).ok() != Some(ids.len()) {
                return lua();
            }
            let limit = usize::try_from(n).unwrap_or(usize::MAX);
            let v = int_value(raw.as_deref())?;
            let (_, v) = p.reclaim(zset, v, now, limit)?;
            p.step1(Cmd::Get, key);
            if let Some(v) = v.filter(|v| *v >= n) {
                p.add(Cmd::DecrBy, v, -n)?;
                for id in &ids {
                    p.plan.read(Cmd::ZAdd, [Arg::Key(slot(z)), Arg::Argv(slot(*id))]);
                }
                p.step1(Cmd::PTtl, key);
                let ttl = count.deadline().is_some();
                if ttl {
                    p.step1(Cmd::PExpire, z);
                }
                p.acts.push(Act::ZAdd(ids.clone(), score, ttl));
                let reply = match op {
                    SemOp::PesTryAcquire => b"OK".to_vec(),
                    _ => ids.first().and_then(|i| call.arg(*i)).unwrap_or_default().to_vec(),
                };
                return Ok(Out::Bulk(reply));
            }
            p.step1(Cmd::ZRange, z);
            // The lowest score after the reclaim: the zset as the script sees it then.
            let reclaimed: std::collections::HashSet<Vec<u8>> = p
                .acts
                .iter()
                .filter_map(|a| if let Act::ZRem(ids) = a { Some(ids.iter().cloned()) } else { None })
                .flatten()
                .collect();
            let mut lowest = None;
            zset.zset_range(f64::NEG_INFINITY, f64::INFINITY, reclaimed.len() + 1, &mut |id, s| {
                if lowest.is_none() && !reclaimed.contains(id) {
                    lowest = Some(s);
                }
            });
            let no_lease = call.arg(call.arg_index(Role::NoLease).ok_or(Quirk::Layout)?).unwrap_or_default();
            match lowest {
                Some(s) => {
                    let text = score_text(s)?;
                    if text == no_lease {
                        Ok(Out::Nil)
                    } else {
                        let mut b = vec![b':'];
                        b.extend_from_slice(&text);
                        Ok(Out::Bulk(b))
                    }
                }
                None => Ok(Out::Nil),
            }
        }
        SemOp::PesReleasePublish | SemOp::PesRelease => {
            let zset = zset.ok_or(Quirk::Layout)?;
            let z = p.zset.ok_or(Quirk::Layout)?;
            let id_at = call.arg_index(Role::Id).ok_or(Quirk::Layout)?;
            let n = int_arg(call, Role::Count).ok_or(Quirk::LuaNumber)?;
            let now = int_arg(call, Role::Now).ok_or(Quirk::LuaNumber)?;
            let id = OwnedStr::new(call.arg(id_at).unwrap_or_default());
            p.plan.read(Cmd::ZScore, [Arg::Key(slot(z)), Arg::Argv(slot(id_at))]);
            p.plan.read(Cmd::ZRem, [Arg::Key(slot(z)), Arg::Argv(slot(id_at))]);
            let Some(score) = zset.zset_score_exact(id.ptr()) else { return Ok(Out::Int(0)) };
            let v = int_value(raw.as_deref())?.unwrap_or(0);
            p.acts.push(Act::ZRem(vec![id.bytes().to_vec()]));
            let new = p.add(Cmd::IncrBy, v, n)?;
            p.acts.push(Act::Grant);
            p.publish(new.to_string().into_bytes());
            Ok(Out::Int(if score <= now as f64 { 0 } else { 1 }))
        }
        SemOp::PesReleaseManyPartial | SemOp::PesReleaseMany => {
            let zset = zset.ok_or(Quirk::Layout)?;
            let z = p.zset.ok_or(Quirk::Layout)?;
            let now = int_arg(call, Role::Now).ok_or(Quirk::LuaNumber)?;
            let slots = id_slots(call);
            if slots.len() > UNPACK_MAX - 3 {
                return lua();
            }
            let ids: Vec<&[u8]> = slots.iter().filter_map(|i| call.arg(*i)).collect();
            let score = |id: &[u8]| zset.zset_score_exact(OwnedStr::new(id).ptr());
            if op == SemOp::PesReleaseMany {
                for (id, at) in ids.iter().zip(&slots) {
                    p.plan.read(Cmd::ZScore, [Arg::Key(slot(z)), Arg::Argv(slot(*at))]);
                    if score(id).is_none_or(|s| s <= now as f64) {
                        return Ok(Out::Int(0));
                    }
                }
            }
            let v = int_value(raw.as_deref())?;
            let (_, v) = p.reclaim(zset, v, now, usize::MAX)?;
            p.plan.read(Cmd::ZRem, [Arg::Key(slot(z))]);
            // Held after the reclaim: present and later than `now`; each id once.
            let mut gone: Vec<Vec<u8>> = Vec::new();
            for id in &ids {
                if score(id).is_some_and(|s| s > now as f64 || s < 0.0) && !gone.iter().any(|g| g == id) {
                    gone.push(id.to_vec());
                }
            }
            if gone.is_empty() {
                return Ok(Out::Int(0));
            }
            let removed = i64::try_from(gone.len()).unwrap_or(i64::MAX);
            p.acts.push(Act::ZRem(gone));
            p.add(Cmd::IncrBy, v.unwrap_or(0), removed)?;
            p.acts.push(Act::Grant);
            p.publish(removed.to_string().into_bytes());
            Ok(Out::Int(removed))
        }
        SemOp::PesAvailablePublish
        | SemOp::PesAvailable
        | SemOp::PesGetPermitsPublish
        | SemOp::PesGetPermits
        | SemOp::PesAcquiredPublish
        | SemOp::PesAcquired => {
            let zset = zset.ok_or(Quirk::Layout)?;
            let z = p.zset.ok_or(Quirk::Layout)?;
            let now = int_arg(call, Role::Now).ok_or(Quirk::LuaNumber)?;
            let reclaim_needs_int = zset_has_expired(zset, now);
            let v = if reclaim_needs_int { int_value(raw.as_deref())? } else { None };
            let (n, after) = p.reclaim(zset, v, now, usize::MAX)?;
            let held = i64::try_from(zset.len().saturating_sub(n)).unwrap_or(i64::MAX);
            match op {
                SemOp::PesAvailablePublish | SemOp::PesAvailable => {
                    if n > 0 {
                        return Ok(Out::Int(after.unwrap_or(0)));
                    }
                    p.step1(Cmd::Get, key);
                    Ok(raw.map_or(Out::Int(0), Out::Bulk))
                }
                SemOp::PesGetPermitsPublish | SemOp::PesGetPermits => {
                    p.step1(Cmd::Get, key);
                    let v = if n > 0 { after } else { int_value(raw.as_deref())? };
                    let Some(v) = v else { return Ok(Out::Int(0)) };
                    p.step1(Cmd::ZCount, z);
                    Ok(Out::Int(v.checked_add(held).ok_or(Quirk::LuaNumber)?))
                }
                _ => {
                    p.step1(Cmd::ZCount, z);
                    Ok(Out::Int(held))
                }
            }
        }
        SemOp::PesSetPermitsPublishBug | SemOp::PesSetPermitsBug | SemOp::PesSetPermits => {
            let zset = zset.ok_or(Quirk::Layout)?;
            let z = p.zset.ok_or(Quirk::Layout)?;
            let at = call.arg_index(Role::Count).ok_or(Quirk::Layout)?;
            let permits_raw = call.arg(at).unwrap_or_default().to_vec();
            p.step1(Cmd::Get, key);
            let Some(v) = int_value(raw.as_deref())? else {
                p.plan.step(Cmd::Set, [p.count_key(), Arg::Argv(slot(at))], crate::logic::plan::Effect::None);
                p.acts.push(Act::Set(permits_raw.clone(), None));
                p.acts.push(Act::Grant);
                p.publish(permits_raw);
                return Ok(Out::Nil);
            };
            let permits = parse_i64(&permits_raw).ok_or(Quirk::LuaNumber)?;
            p.step1(Cmd::ZCount, z);
            let total =
                v.checked_add(i64::try_from(zset.len()).unwrap_or(i64::MAX)).ok_or(Quirk::LuaNumber)?;
            if op == SemOp::PesSetPermits && total == permits {
                return Ok(Out::Nil);
            }
            let diff = permits
                .checked_sub(total)
                .filter(|d| d.unsigned_abs() < LUA_EXACT as u64)
                .ok_or(Quirk::LuaNumber)?;
            p.add(Cmd::IncrBy, v, diff)?;
            p.acts.push(Act::Grant);
            p.publish(permits_raw);
            Ok(Out::Nil)
        }
        SemOp::PesUpdateLeasePublish | SemOp::PesUpdateLease | SemOp::PesGetLease => {
            let zset = zset.ok_or(Quirk::Layout)?;
            let z = p.zset.ok_or(Quirk::Layout)?;
            let now = int_arg(call, Role::Now).ok_or(Quirk::LuaNumber)?;
            let id_at = call.arg_index(Role::Id).ok_or(Quirk::Layout)?;
            let id = OwnedStr::new(call.arg(id_at).unwrap_or_default());
            let reclaim_needs_int = zset_has_expired(zset, now);
            let v = if reclaim_needs_int { int_value(raw.as_deref())? } else { None };
            p.reclaim(zset, v, now, usize::MAX)?;
            p.plan.read(Cmd::ZScore, [Arg::Key(slot(z)), Arg::Argv(slot(id_at))]);
            let score = zset.zset_score_exact(id.ptr()).filter(|s| !(*s >= 0.0 && *s <= now as f64));
            let Some(score) = score else { return Ok(Out::Int(0)) };
            if op == SemOp::PesGetLease {
                let text = score_text(score)?;
                let no_lease =
                    call.arg(call.arg_index(Role::NoLease).ok_or(Quirk::Layout)?).unwrap_or_default();
                if text == no_lease {
                    return Ok(Out::Int(-1));
                }
                return Ok(Out::Int((score as i64).checked_sub(now).ok_or(Quirk::LuaNumber)?));
            }
            let new = int_arg(call, Role::Score)
                .filter(|s| s.unsigned_abs() < LUA_EXACT as u64)
                .ok_or(Quirk::LuaNumber)?;
            p.plan.read(Cmd::ZAdd, [Arg::Key(slot(z)), Arg::Argv(slot(id_at))]);
            p.acts.push(Act::ZAdd(vec![id_at], new, false));
            Ok(Out::Int(1))
        }

        _ => Err(Quirk::Layout),
    }
}
