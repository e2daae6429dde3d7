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

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::args::parse_i64;
use crate::logic::plan::{Arg, Cmd, Plan, Quirk};
use crate::logic::scripts::{Call, Op, Publish, Role};
use crate::logic::semaphore::names::NO_LEASE;
use crate::logic::semaphore::scripts::SemOp;
use crate::module::cluster;
use crate::module::scripts::plan::{check_script_path, Argv};
use crate::module::semaphore::store::Sem;
use crate::module::semaphore::{leases, waiting::Semaphore};
use crate::module::{effects, wait};

/// Lua's `unpack` fails with 8000 results or more ("too many results to unpack").
const UNPACK_MAX: usize = 7999;

/// Largest magnitude Lua writes as plain integer digits on every server (2^53).
const LUA_EXACT: i64 = 1 << 53;

/// What the script replies.
enum Out {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
}

/// One write (or message) of the path, in the script's order.
enum Act {
    /// ZREM these ids (the reclaim's or a release's).
    ZRem(Vec<Vec<u8>>),
    /// INCRBY / DECRBY the count by `.0`; it becomes `.1`.
    Add(i64, i64),
    /// SET the count to these bytes (PX: ending at the deadline).
    Set(Vec<u8>, Option<i64>),
    /// ZADD the ids (ARGV slots) with the score; copy the count's TTL.
    ZAdd(Vec<usize>, i64, bool),
    /// Offer the permits to LOCK.SEM* waiters.
    Grant,
    /// Publish these bytes on the channel.
    Publish(Vec<u8>),
}

/// The call's keys and what the path has read and decided.
struct Path<'a> {
    call: &'a Call<'a>,
    plan: Plan,
    acts: Vec<Act>,
    key: usize,
    zset: Option<usize>,
    channel: Option<usize>,
    publish: Cmd,
    /// Whether the path's arguments are checked (a user with restricted permissions): only
    /// then are computed numbers made into strings for the check.
    args: bool,
}

fn lua<T>() -> Result<T, Quirk> {
    Err(Quirk::LuaNumber)
}

/// An ARGV slot of `role` as an integer; `None` when absent or not one.
fn int_arg(call: &Call, role: Role) -> Option<i64> {
    parse_i64(call.arg(call.arg_index(role)?)?)
}

fn slot(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

impl Path<'_> {
    fn step1(&mut self, cmd: Cmd, key: usize) {
        self.plan.read(cmd, [Arg::Key(slot(key))]);
    }

    fn count_key(&self) -> Arg {
        Arg::Key(slot(self.key))
    }

    /// The count as the script reads it: `None` absent, else its bytes.
    fn value(&self, key: &Key) -> Option<Vec<u8>> {
        key.string_get(<[u8]>::to_vec)
    }

    /// A computed number as a step's argument (a placeholder when arguments are not checked).
    fn num(&mut self, n: i64) -> Arg {
        if self.args {
            self.plan.made_int(n)
        } else {
            Arg::Zero
        }
    }

    /// A publish of `msg` on the channel, with the script's command.
    fn publish(&mut self, msg: Vec<u8>) {
        if let Some(ch) = self.channel {
            let m = if self.args { self.plan.made(&[&msg]) } else { Arg::Zero };
            self.plan.read(self.publish, [Arg::Key(slot(ch)), m]);
        }
        self.acts.push(Act::Publish(msg));
    }

    /// INCRBY (or DECRBY) of the count from `old` by `by`: the new value, or Lua (overflow).
    fn add(&mut self, cmd: Cmd, old: i64, by: i64) -> Result<i64, Quirk> {
        let new = old.checked_add(by).ok_or(Quirk::CountOverflow)?;
        let n = self.num(by.saturating_abs());
        self.plan.step(cmd, [self.count_key(), n], crate::logic::plan::Effect::None);
        self.acts.push(Act::Add(by, new));
        Ok(new)
    }

    /// Redisson's reclaim: permits whose score is in `0..=now` (at most `limit`) leave the zset,
    /// the count grows by their number, and the new value is published when positive. Returns
    /// (how many, the count after), `count` the count before (None: absent).
    fn reclaim(
        &mut self,
        zset: &Key,
        count: Option<i64>,
        now: i64,
        limit: usize,
    ) -> Result<(usize, Option<i64>), Quirk> {
        let z = self.zset.ok_or(Quirk::Layout)?;
        let now_arg = self.call.arg_index(Role::Now).ok_or(Quirk::Layout)?;
        self.plan.read(Cmd::ZRangeByScore, [Arg::Key(slot(z)), Arg::Zero, Arg::Argv(slot(now_arg))]);
        let mut ids = Vec::new();
        zset.zset_range(0.0, now as f64, limit.min(UNPACK_MAX + 1), &mut |id, _| ids.push(id.to_vec()));
        if ids.len() > UNPACK_MAX {
            return lua();
        }
        if ids.is_empty() {
            return Ok((0, count));
        }
        let n = ids.len();
        self.plan.read(Cmd::ZRem, [Arg::Key(slot(z))]);
        self.acts.push(Act::ZRem(ids));
        let new = self.add(Cmd::IncrBy, count.unwrap_or(0), i64::try_from(n).unwrap_or(i64::MAX))?;
        self.acts.push(Act::Grant);
        if new > 0 {
            self.publish(new.to_string().into_bytes());
        }
        Ok((n, Some(new)))
    }
}

/// The count as an integer (`None` absent); a value the script's arithmetic would fail on
/// sends the call to Lua.
fn int_value(v: Option<&[u8]>) -> Result<Option<i64>, Quirk> {
    match v {
        None => Ok(None),
        Some(b) => parse_i64(b).map(Some).ok_or(Quirk::CountNotInteger),
    }
}

/// A zset score as the script sees it through a RESP reply (plain digits for whole numbers up
/// to 2^53 on every server); other scores run in Lua.
fn score_text(s: f64) -> Result<Vec<u8>, Quirk> {
    if s.fract() != 0.0 || s.abs() >= LUA_EXACT as f64 {
        return lua();
    }
    Ok((s as i64).to_string().into_bytes())
}

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

/// The ids of an acquire or a release: the ARGV slots of [`Role::Id`].
fn id_slots(call: &Call) -> Vec<usize> {
    (0..call.units).filter_map(|u| call.unit_arg_index(u, Role::Id)).collect()
}

fn decide(op: SemOp, p: &mut Path, count: &Key, zset: Option<&Key>) -> Result<Out, Quirk> {
    let call = p.call;
    let raw = p.value(count);
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
    }
}

/// Whether the zset holds a permit whose score is in `0..=now` (a reclaim will write).
fn zset_has_expired(zset: &Key, now: i64) -> bool {
    let mut any = false;
    zset.zset_range(0.0, now as f64, 1, &mut |_, _| any = true);
    any
}
