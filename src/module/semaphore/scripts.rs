//! Redisson's semaphore and permit-expirable semaphore scripts run natively: each call's path
//! (the commands the script runs, in its order, for the ACL and write-refusal checks), its
//! writes through the same store functions as LOCK.SEM*, its messages and its reply, typed as
//! the script types it (bulk strings where Redisson replies a GET value, `OK`, an id or
//! `:<score>`).
//!
//! Read first, decide, check the whole path, then write: a call the script would fail on (a
//! count that is not an integer, a key of another type, more expired permits than Lua can
//! unpack, a number Lua would format as a fraction or an exponent, an overflow) runs in Lua,
//! untouched. The entry point, the call's parsing and the Lua fallback are shared by every
//! kind (`module/scripts/native.rs`).
//!
//! Differences from the scripts, on purpose: permits a script returns (release, reclaim, a
//! raised count) go to LOCK.SEM* waiters first, inside the call (the script's message is still
//! published, with the script's value); a permit taken with a lease arms the semaphore's lease
//! timer. A failed Redisson acquire takes no place in the LOCK.* line (it retries on its
//! channel, as without the module).

use super::script_path::{Act, Out, Path};
use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::plan::{Cmd, Plan, Quirk};
use crate::logic::scripts::{Call, Op, Publish, Role};
use crate::logic::semaphore::names::NO_LEASE;
use crate::logic::semaphore::scripts::SemOp;
use crate::module::cluster;
use crate::module::scripts::plan::{check_script_path, Argv};
use crate::module::semaphore::store::Sem;
use crate::module::semaphore::{leases, waiting::Semaphore};
use crate::module::{effects, wait};

/// Run semaphore operation `op` for `call` at server time `now`. `Err`: the call runs in Lua;
/// nothing was written.
pub fn run(ctx: Ctx, op: Op, call: &Call, a: &Argv, now: i64) -> Result<(), Quirk> {
    let op = SemOp::of(op).ok_or(Quirk::Layout)?;
    let key = call.key_index(Role::Lock).ok_or(Quirk::Layout)?;
    let zset = call.key_index(Role::Permits);
    let channel = call.key_index(Role::Channel);
    // Keys that alias each other make the script fail half-way (a type error): Lua.
    for (i, k) in call.keys.iter().enumerate() {
        if call.keys.iter().skip(i + 1).any(|o| o == k) {
            return Err(Quirk::DerivedKey);
        }
    }
    let publish = match call.publish {
        Some(Publish::SPublish) => Cmd::SPublish,
        _ => Cmd::Publish,
    };
    if publish == Cmd::SPublish && cluster::enabled() {
        let (k, ch) = (call.key(key), channel.and_then(|c| call.key(c)));
        if let (Some(k), Some(ch)) = (k, ch) {
            if cluster::key_slot(k) != cluster::key_slot(ch) {
                return Err(Quirk::CrossSlotPublish);
            }
        }
    }
    let name = a.key(key).ok_or(Quirk::Layout)?;
    let count_key = Key::write(ctx, name);
    if !matches!(count_key.kind(), KeyKind::Empty | KeyKind::String) {
        return Err(Quirk::WrongType);
    }
    let zname = zset.and_then(|z| a.key(z));
    let zkey = zname.map(|z| Key::read(ctx, z));
    if zkey.as_ref().is_some_and(|z| !matches!(z.kind(), KeyKind::Empty | KeyKind::SortedSet)) {
        return Err(Quirk::WrongType);
    }
    let mut p = Path {
        call,
        plan: Plan::new(),
        acts: Vec::with_capacity(4),
        key,
        zset,
        channel,
        publish,
        args: a.checks_args(),
    };
    let out = decide(op, &mut p, &count_key, zkey.as_ref())?;
    drop(zkey);
    if let Err(e) = check_script_path(ctx, a, &p.plan) {
        rm::reply_error(ctx, &e.reply());
        return Ok(());
    }
    let zn = zname.map_or_else(Vec::new, |z| rm::bytes(&z).to_vec());
    let sem = Sem { key: &count_key, name, zname: OwnedStr::new(&zn) };
    apply(ctx, &p, a, &sem, now);
    match out {
        Out::Nil => rm::reply_null(ctx),
        Out::Int(n) => rm::reply_int(ctx, n),
        Out::Bulk(b) => rm::reply_bytes(ctx, &b),
    };
    Ok(())
}

fn apply(ctx: Ctx, p: &Path, a: &Argv, sem: &Sem, now: i64) {
    let channel = p.channel.and_then(|c| a.key(c));
    for act in &p.acts {
        match act {
            Act::ZRem(ids) => {
                let owned: Vec<OwnedStr> = ids.iter().map(|i| OwnedStr::new(i)).collect();
                let ptrs: Vec<RStr> = owned.iter().map(OwnedStr::ptr).collect();
                sem.drop_ids(ctx, &ptrs);
            }
            Act::Add(by, new) => sem.add(ctx, *by, *new),
            Act::Set(v, deadline) => {
                let v = OwnedStr::new(v);
                sem.set(ctx, v.ptr(), *deadline);
            }
            Act::ZAdd(slots, score, copy) => {
                let ids: Vec<RStr> = slots.iter().filter_map(|i| a.arg(*i)).collect();
                sem.zadd(ctx, &ids, *score, *copy);
                if *score < NO_LEASE {
                    leases::watch::<Semaphore>(ctx, rm::bytes(&sem.name), Some(*score), now);
                }
            }
            Act::Grant => {
                wait::grant_head::<Semaphore>(ctx, sem.key, sem.name, now, true);
            }
            Act::Publish(msg) => {
                if let Some(ch) = channel {
                    let m = OwnedStr::new(msg);
                    effects::publish(ctx, ch, m.ptr(), p.publish == Cmd::SPublish);
                }
            }
        }
    }
}

fn decide(op: SemOp, p: &mut Path, count: &Key, zset: Option<&Key>) -> Result<Out, Quirk> {
    let raw = p.value(count);
    match op {
        SemOp::TryAcquire
        | SemOp::ReleasePublish
        | SemOp::Release
        | SemOp::ReleaseIfExists
        | SemOp::Drain
        | SemOp::TrySetPublish
        | SemOp::TrySet
        | SemOp::TrySetTtl
        | SemOp::AddPublish
        | SemOp::Add
        | SemOp::PesAddPublish
        | SemOp::PesAdd => super::script_counts::decide(op, p, raw),
        _ => super::script_permits::decide(op, p, count, zset, raw),
    }
}
