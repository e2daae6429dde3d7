//! The fair lock's unlock and force unlock (`fair_queue.rs` has the shared reads and the
//! purge): the latch answers first, then the purge, then the lock is released (the queue
//! head told on its own channel) or kept. Pure.

use super::fair_queue::{lease_act, publish_cmd, time, Ctx, FairAct, FairKeys, FairReply};
use crate::logic::lock::state::LockView;
use crate::logic::plan::{Arg, Cmd, Latch, Quirk};
use crate::logic::scripts::Role;

/// The 3.24+ unlock latch: `Some(deadline)` of its SET, checked before any write.
fn latch_deadline(c: &Ctx, now: i64) -> Result<Option<i64>, Quirk> {
    if c.call.key_index(Role::Latch).is_none() {
        return Ok(None);
    }
    let ms = c.call.latch_ms().ok_or(Quirk::LatchMs)?;
    Ok(Some(now.checked_add(ms).ok_or(Quirk::DeadlineOverflow)?))
}

fn set_latch(c: &mut Ctx, released: bool, deadline: Option<i64>) -> Result<(), Quirk> {
    if let Some(deadline) = deadline {
        let (k, ms) = (c.key(Role::Latch)?, c.arg(Role::LatchMs)?);
        let v = if released { Arg::One } else { Arg::Zero };
        c.write(Cmd::Set, &[k, v, Arg::Px, ms], FairAct::Latch { released, deadline });
    }
    Ok(())
}

pub(super) fn unlock(c: &mut Ctx, keys: &mut impl FairKeys, server_now: i64) -> Result<(), Quirk> {
    let (lock, owner, lease) = (c.key(Role::Lock)?, c.arg(Role::Owner)?, c.arg(Role::Lease)?);
    if c.call.key_index(Role::Latch).is_some() {
        let k = c.key(Role::Latch)?;
        c.out.plan.read(Cmd::Get, [k]);
        match keys.latch() {
            Latch::Absent => {}
            Latch::Value(v) => {
                c.out.reply = Some(v.map_or(FairReply::Nil, FairReply::Int));
                return Ok(());
            }
            Latch::WrongType => return Err(Quirk::LatchWrongType),
        }
    }
    let now = time(c.call, Role::Now)?;
    let view = keys.lock();
    if matches!(view, LockView::WrongType) {
        return Err(Quirk::WrongType);
    }
    c.purge(keys, now)?;
    let publish = publish_cmd(c.call);
    c.out.plan.read(Cmd::Exists, [lock]);
    match view {
        LockView::Free => {
            let latch = latch_deadline(c, server_now)?;
            c.out.acts.push(FairAct::Free);
            c.tell_head(keys, publish)?;
            set_latch(c, true, latch)?;
            c.out.reply = Some(FairReply::Int(1));
        }
        LockView::Hash { mine: None } => {
            c.out.plan.read(Cmd::HExists, [lock, owner]);
            c.out.reply = Some(FairReply::Nil);
        }
        LockView::Hash { mine: Some(count) } => {
            c.out.plan.read(Cmd::HExists, [lock, owner]);
            let count = count.map_err(|_| Quirk::CountNotInteger)?;
            let left = count.checked_sub(1).ok_or(Quirk::CountOverflow)?;
            let latch = latch_deadline(c, server_now)?;
            if left > 0 {
                let lease_step = lease_act(c.call, server_now, false)?;
                c.write(
                    Cmd::HIncrBy,
                    &[lock, owner, Arg::MinusOne],
                    FairAct::Count { count: left, up: false },
                );
                c.write(Cmd::PExpire, &[lock, lease], lease_step);
                set_latch(c, false, latch)?;
                c.out.reply = Some(FairReply::Int(0));
            } else {
                c.write(
                    Cmd::HIncrBy,
                    &[lock, owner, Arg::MinusOne],
                    FairAct::Count { count: left, up: false },
                );
                c.write(Cmd::Del, &[lock], FairAct::Delete { freed: true });
                c.tell_head(keys, publish)?;
                set_latch(c, true, latch)?;
                c.out.reply = Some(FairReply::Int(1));
            }
        }
        LockView::WrongType => return Err(Quirk::WrongType),
    }
    Ok(())
}

pub(super) fn force_unlock(c: &mut Ctx, keys: &mut impl FairKeys) -> Result<(), Quirk> {
    let lock = c.key(Role::Lock)?;
    let now = time(c.call, Role::Now)?;
    let view = keys.lock();
    c.purge(keys, now)?;
    // DEL works on any type.
    let exists = !matches!(view, LockView::Free);
    if !exists {
        c.out.plan.read(Cmd::Del, [lock]);
        c.out.reply = Some(FairReply::Int(0));
        return Ok(());
    }
    c.write(Cmd::Del, &[lock], FairAct::Delete { freed: true });
    c.tell_head(keys, publish_cmd(c.call))?;
    c.out.reply = Some(FairReply::Int(1));
    Ok(())
}
