//! The fair lock's acquires and its give-up path (`fair_queue.rs` has the shared reads, the
//! purge and the unlocks): take a free lock the caller is first for (everyone else's deadline
//! drops by `wait`), re-enter, answer a queued caller, or queue it behind the last waiter.
//! Pure.

use super::fair_queue::{exact, lease_act, time, wait_ms, Ctx, FairAct, FairKeys, FairReply};
use crate::logic::lock::state::LockView;
use crate::logic::plan::{Arg, Cmd, Quirk};
use crate::logic::scripts::{Call, Role};

/// The re-entry error of a non-reentrant acquire: ARGV's text (see the lock's `error_text`).
fn error_text(call: &Call) -> Result<FairReply, Quirk> {
    let i = crate::logic::lock::script_plans::error_text(call)?;
    Ok(FairReply::ErrorArg(usize::try_from(i).map_err(|_| Quirk::Layout)?))
}

pub(super) fn acquire_failed(c: &mut Ctx, keys: &mut impl FairKeys) -> Result<(), Quirk> {
    let (queue, zset, owner) = (c.key(Role::Queue)?, c.key(Role::Deadlines)?, c.arg(Role::Owner)?);
    let wait = wait_ms(c.call)? as f64;
    let me = c.call.arg(c.call.arg_index(Role::Owner).ok_or(Quirk::Layout)?).ok_or(Quirk::Layout)?.to_vec();
    let minus = c.made(&[(-(wait as i64)).to_string().as_bytes()]);
    c.out.plan.read(Cmd::LRange, [queue, Arg::Zero, Arg::MinusOne]);
    let n = keys.queue_len();
    let all: Vec<Vec<u8>> = (0..n).filter_map(|i| keys.queue_at(i)).collect();
    if let Some(at) = all.iter().position(|m| *m == me) {
        let mut scores: Vec<(Vec<u8>, f64)> = Vec::new();
        for m in all.iter().skip(at + 1) {
            // A member named twice behind the owner is lowered twice.
            let old = match scores.iter().rev().find(|(x, _)| x == m) {
                Some((_, s)) => *s,
                None => keys.deadline(m).map_or(Ok(0.0), exact)?,
            };
            let new = exact(old - wait)?;
            scores.push((m.clone(), new));
            let a = c.made(&[m]);
            c.write(Cmd::ZIncrBy, &[zset, minus, a], FairAct::ZIncr(m.clone(), new));
        }
    }
    c.write(Cmd::ZRem, &[zset, owner], FairAct::ZRem(me));
    c.write(Cmd::LRem, &[queue, Arg::Zero, owner], FairAct::LRemOwner);
    c.out.reply = Some(FairReply::Nil);
    Ok(())
}

pub(super) fn acquire(c: &mut Ctx, keys: &mut impl FairKeys, server_now: i64) -> Result<(), Quirk> {
    let (lock, queue, zset) = (c.key(Role::Lock)?, c.key(Role::Queue)?, c.key(Role::Deadlines)?);
    let (owner, lease) = (c.arg(Role::Owner)?, c.arg(Role::Lease)?);
    let me = c.call.arg(c.call.arg_index(Role::Owner).ok_or(Quirk::Layout)?).ok_or(Quirk::Layout)?.to_vec();
    let now = time(c.call, Role::Now)?;
    let wait = wait_ms(c.call)?;
    let view = keys.lock();
    if matches!(view, LockView::WrongType) {
        return Err(Quirk::WrongType);
    }
    c.purge(keys, now)?;
    c.out.plan.read(Cmd::Exists, [lock]);
    let free = matches!(view, LockView::Free);
    if free {
        c.out.plan.read(Cmd::Exists, [queue]);
        let left = c.queue_left(keys);
        let first = if left == 0 {
            true
        } else {
            c.out.plan.read(Cmd::LIndex, [queue, Arg::Zero]);
            c.queue_at(keys, 0).as_deref() == Some(&me[..])
        };
        if first {
            return take(c, keys, &me, wait, server_now);
        }
    }
    c.out.plan.read(Cmd::HExists, [lock, owner]);
    if let LockView::Hash { mine: Some(count) } = view {
        if c.op.non_reentrant() {
            c.out.reply = Some(error_text(c.call)?);
            return Ok(());
        }
        let count = count.map_err(|_| Quirk::CountNotInteger)?;
        let new = count.checked_add(1).ok_or(Quirk::CountOverflow)?;
        let lease_step = lease_act(c.call, server_now, false)?;
        c.write(Cmd::HIncrBy, &[lock, owner, Arg::One], FairAct::Count { count: new, up: true });
        c.write(Cmd::PExpire, &[lock, lease], lease_step);
        c.out.reply = Some(FairReply::Nil);
        return Ok(());
    }
    if !c.op.queues() {
        c.out.reply = Some(FairReply::Int(1));
        return Ok(());
    }
    // Queued already: its place is kept.
    let mine = c.made(&[&me]);
    c.read2(Cmd::ZScore, zset, mine);
    if let Some(d) = c.deadline_of(keys, &me) {
        let reply = if c.op.old_queued_reply() {
            exact(exact(d)? - wait as f64 - now as f64)? as i64
        } else {
            c.out.plan.read(Cmd::PTtl, [lock]);
            keys.pttl().max(0)
        };
        c.out.reply = Some(FairReply::Int(reply));
        return Ok(());
    }
    // Behind the last waiter (its deadline) or the holder (the lock's PTTL).
    c.out.plan.read(Cmd::LIndex, [queue, Arg::MinusOne]);
    let left = c.queue_left(keys);
    let last = left.checked_sub(1).and_then(|i| c.queue_at(keys, i));
    let behind = match last {
        Some(l) if l != me => {
            let a = c.made(&[&l]);
            c.read2(Cmd::ZScore, zset, a);
            match c.deadline_of(keys, &l) {
                Some(d) => Some(exact(d)? - now as f64),
                None if c.op.enqueue_fails_on_nil() => return Err(Quirk::ScriptBug),
                None => None,
            }
        }
        _ => None,
    };
    let ttl = match behind {
        Some(t) => exact(t)?,
        None => {
            c.out.plan.read(Cmd::PTtl, [lock]);
            keys.pttl() as f64
        }
    };
    let deadline = exact(ttl + wait as f64 + now as f64)?;
    let d = c.made(&[(deadline as i64).to_string().as_bytes()]);
    c.write(Cmd::ZAdd, &[zset, d, owner], FairAct::Enqueue(deadline));
    c.write(Cmd::RPush, &[queue, owner], FairAct::Push);
    c.out.reply = Some(FairReply::Int(ttl as i64));
    Ok(())
}

/// The lock is free and the caller first: it leaves the queue, everyone else's deadline drops
/// by `wait`, and it holds the lock once.
fn take(c: &mut Ctx, keys: &mut impl FairKeys, me: &[u8], wait: i64, now: i64) -> Result<(), Quirk> {
    let (lock, queue, zset) = (c.key(Role::Lock)?, c.key(Role::Queue)?, c.key(Role::Deadlines)?);
    let (owner, lease) = (c.arg(Role::Owner)?, c.arg(Role::Lease)?);
    let lease_step = lease_act(c.call, now, true)?;
    if c.queue_left(keys) > 0 {
        c.write(Cmd::LPop, &[queue], FairAct::LPop);
        c.popped += 1;
    } else {
        c.out.plan.read(Cmd::LPop, [queue]);
    }
    c.write(Cmd::ZRem, &[zset, owner], FairAct::ZRem(me.to_vec()));
    c.removed.push(me.to_vec());
    c.out.plan.read(Cmd::ZRange, [zset, Arg::Zero, Arg::MinusOne]);
    let minus = c.made(&[(-wait).to_string().as_bytes()]);
    // Every other deadline drops by `wait` (the order stays: integers of at most 2^53 subtract
    // exactly); the zset is rewritten in one go (`FairAct::LowerAll`).
    let mut lowered = Vec::new();
    for (m, old) in keys.deadlines() {
        if c.removed.contains(&m) {
            continue;
        }
        let new = exact(exact(old)? - wait as f64)?;
        let a = c.made(&[&m]);
        c.out.plan.read(Cmd::ZIncrBy, [zset, minus, a]);
        lowered.push((m, new));
    }
    if !lowered.is_empty() {
        c.out.acts.push(FairAct::LowerAll { members: lowered, changed: wait != 0 });
    }
    c.write(Cmd::HSet, &[lock, owner, Arg::One], FairAct::Take);
    c.write(Cmd::PExpire, &[lock, lease], lease_step);
    c.out.reply = Some(FairReply::Nil);
    Ok(())
}
