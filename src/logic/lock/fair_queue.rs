//! What each fair-lock script does natively: its writes in the script's order, the commands of
//! its path (for the ACL and write-refusal checks) and its reply, or why it runs in Lua.
//!
//! Pure. The glue reads the keys on demand through [`FairKeys`], as they were before the call;
//! the decisions keep track of what the path removed (purged heads, the popped head, the
//! caller's deadline), so every later read sees what the script would. Numbers follow Lua's:
//! the ARGV times are read as Lua reads them only when they are integers in Redis's spelling,
//! and a deadline the path reads or computes must be an integer of at most 2^53 in magnitude
//! (every server then writes it as plain digits); anything else runs in Lua. A key of another
//! type, a head without deadline where the version compares it, and a last waiter without
//! deadline where the version does arithmetic on it run in Lua too: the error and the writes
//! before it are then Lua's own.

use crate::logic::args::parse_i64;
use crate::logic::lock::fair_scripts::FairOp;
use crate::logic::lock::state::LockView;
use crate::logic::plan::{Arg, Cmd, Latch, Plan, Quirk};
use crate::logic::scripts::{Call, Publish, Role};

/// Largest magnitude every server writes as plain digits and Lua's doubles hold exactly.
pub const EXACT: f64 = 9_007_199_254_740_992.0;

/// What the glue reads of the keys, before any write of the call.
pub trait FairKeys {
    /// The lock key and the owner's count (`LockView::WrongType` for another type).
    fn lock(&mut self) -> LockView;
    /// The lock key's PTTL (-2 absent, -1 without a TTL).
    fn pttl(&mut self) -> i64;
    /// The queue's length (0 absent).
    fn queue_len(&mut self) -> usize;
    /// Element `i` of the queue (from the head).
    fn queue_at(&mut self, i: usize) -> Option<Vec<u8>>;
    /// The deadline (zset score) of `member`.
    fn deadline(&mut self, member: &[u8]) -> Option<f64>;
    /// Every member of the deadlines zset with its score, lowest first (as ZRANGE 0 -1).
    fn deadlines(&mut self) -> Vec<(Vec<u8>, f64)>;
    /// The unlock latch, as GET reads it.
    fn latch(&mut self) -> Latch;
}

/// One write (or message) of the path, in the script's order.
#[derive(Debug, Clone, PartialEq)]
pub enum FairAct {
    /// ZREM deadlines member.
    ZRem(Vec<u8>),
    /// LPOP queue (its head).
    LPop,
    /// ZINCRBY deadlines -wait member: the score becomes `.1` (created when absent).
    ZIncr(Vec<u8>, f64),
    /// ZINCRBY deadlines -wait on every member of the zset (a take): each member's new score,
    /// in the zset's order; `changed`: wait is not 0 (ZINCRBY by 0 changes nothing, fires
    /// nothing).
    LowerAll { members: Vec<(Vec<u8>, f64)>, changed: bool },
    /// HSET lock owner 1 (a fresh lock).
    Take,
    /// HINCRBY lock owner +-1: the count becomes `count`.
    Count { count: i64, up: bool },
    /// PEXPIRE lock > 0: the lease ends at `deadline`; `fresh`: the key was just created.
    Lease { deadline: i64, fresh: bool },
    /// DEL lock, or PEXPIRE <= 0; `freed`: the lock went (LOCK.* waiters may take it).
    Delete { freed: bool },
    /// ZADD deadlines score owner.
    Enqueue(f64),
    /// RPUSH queue owner.
    Push,
    /// LREM queue 0 owner.
    LRemOwner,
    /// The lock is free for LOCK.* waiters (no write: the key was already absent).
    Free,
    /// Publish the message on `<prefix>:<head>`.
    Publish(Vec<u8>),
    /// SET latch "1" / "0" PX ms: ends at `deadline`.
    Latch { released: bool, deadline: i64 },
}

/// What the script replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairReply {
    Nil,
    Int(i64),
    /// The error text of ARGV slot `.0` (a non-reentrant re-entry).
    ErrorArg(usize),
}

/// A decided call: the path's commands (`plan`, for the checks), its writes and its reply.
#[derive(Debug, Default)]
pub struct Fair {
    pub plan: Plan,
    pub acts: Vec<FairAct>,
    pub reply: Option<FairReply>,
}

pub(super) struct Ctx<'c, 'a> {
    pub(super) call: &'c Call<'a>,
    pub(super) op: FairOp,
    pub(super) out: Fair,
    /// Whether the path's arguments are checked (a user with restricted permissions).
    pub(super) args: bool,
    /// Queue heads popped so far.
    pub(super) popped: usize,
    /// Deadlines removed so far.
    pub(super) removed: Vec<Vec<u8>>,
}

pub(super) fn slot(call: &Call, role: Role, key: bool) -> Result<u32, Quirk> {
    let i = if key { call.key_index(role) } else { call.arg_index(role) };
    i.and_then(|i| u32::try_from(i).ok()).ok_or(Quirk::Layout)
}

/// An ARGV time as Lua reads it, natively only as an integer of at most 2^53.
pub(super) fn time(call: &Call, role: Role) -> Result<i64, Quirk> {
    let v = parse_i64(call.arg(call.arg_index(role).ok_or(Quirk::Layout)?).ok_or(Quirk::Layout)?)
        .ok_or(Quirk::LuaNumber)?;
    exact(v as f64).map(|_| v)
}

pub(super) fn exact(v: f64) -> Result<f64, Quirk> {
    if v.is_finite() && v.fract() == 0.0 && v.abs() <= EXACT {
        Ok(v)
    } else {
        Err(Quirk::LuaNumber)
    }
}

impl<'c, 'a> Ctx<'c, 'a> {
    pub(super) fn new(call: &'c Call<'a>, op: FairOp, args: bool) -> Self {
        Ctx { call, op, out: Fair::default(), args, popped: 0, removed: Vec::new() }
    }

    pub(super) fn key(&self, role: Role) -> Result<Arg, Quirk> {
        Ok(Arg::Key(slot(self.call, role, true)?))
    }

    pub(super) fn arg(&self, role: Role) -> Result<Arg, Quirk> {
        Ok(Arg::Argv(slot(self.call, role, false)?))
    }

    /// A string the path derives, as a step's argument (a placeholder when not checked).
    pub(super) fn made(&mut self, parts: &[&[u8]]) -> Arg {
        if self.args {
            self.out.plan.made(parts)
        } else {
            Arg::Zero
        }
    }

    pub(super) fn read2(&mut self, cmd: Cmd, a: Arg, b: Arg) {
        self.out.plan.read(cmd, [a, b]);
    }

    pub(super) fn write(&mut self, cmd: Cmd, args: &[Arg], act: FairAct) {
        match *args {
            [a] => self.out.plan.read(cmd, [a]),
            [a, b] => self.out.plan.read(cmd, [a, b]),
            [a, b, c] => self.out.plan.read(cmd, [a, b, c]),
            [a, b, c, d] => self.out.plan.read(cmd, [a, b, c, d]),
            _ => {}
        }
        self.out.acts.push(act);
    }

    pub(super) fn deadline_of(&mut self, keys: &mut impl FairKeys, member: &[u8]) -> Option<f64> {
        if self.removed.iter().any(|m| m == member) {
            return None;
        }
        keys.deadline(member)
    }

    /// The queue's element `i` from the head, as the path left it.
    pub(super) fn queue_at(&mut self, keys: &mut impl FairKeys, i: usize) -> Option<Vec<u8>> {
        keys.queue_at(self.popped.checked_add(i)?)
    }

    pub(super) fn queue_left(&mut self, keys: &mut impl FairKeys) -> usize {
        keys.queue_len().saturating_sub(self.popped)
    }

    /// Heads whose deadline is <= now leave the queue and the zset; a head without deadline
    /// stops the purge, or fails it in the versions that compare it.
    pub(super) fn purge(&mut self, keys: &mut impl FairKeys, now: i64) -> Result<(), Quirk> {
        let (queue, zset) = (self.key(Role::Queue)?, self.key(Role::Deadlines)?);
        loop {
            self.out.plan.read(Cmd::LIndex, [queue, Arg::Zero]);
            let Some(head) = self.queue_at(keys, 0) else { return Ok(()) };
            let h = self.made(&[&head]);
            self.read2(Cmd::ZScore, zset, h);
            let Some(d) = self.deadline_of(keys, &head) else {
                return if self.op.purge_fails_on_nil() { Err(Quirk::ScriptBug) } else { Ok(()) };
            };
            if d > now as f64 {
                return Ok(());
            }
            self.write(Cmd::ZRem, &[zset, h], FairAct::ZRem(head.clone()));
            self.write(Cmd::LPop, &[queue], FairAct::LPop);
            self.popped += 1;
            self.removed.push(head);
        }
    }

    /// Publish the message to the head's own channel, if there is a head.
    pub(super) fn tell_head(&mut self, keys: &mut impl FairKeys, publish: Cmd) -> Result<(), Quirk> {
        let queue = self.key(Role::Queue)?;
        self.out.plan.read(Cmd::LIndex, [queue, Arg::Zero]);
        let Some(head) = self.queue_at(keys, 0) else { return Ok(()) };
        let prefix = self.call.key(self.call.key_index(Role::ChannelPrefix).ok_or(Quirk::Layout)?);
        let channel = [prefix.ok_or(Quirk::Layout)?, b":", &head].concat();
        let c = self.made(&[&channel]);
        let m = self.arg(Role::Message)?;
        self.write(publish, &[c, m], FairAct::Publish(channel));
        Ok(())
    }
}

pub(super) fn publish_cmd(call: &Call) -> Cmd {
    match call.publish {
        Some(Publish::SPublish) => Cmd::SPublish,
        _ => Cmd::Publish,
    }
}

fn lease_deadline(call: &Call, now: i64) -> Result<(i64, i64), Quirk> {
    let ms = call.lease().ok_or(Quirk::LeaseNotInteger)?;
    Ok((ms, now.checked_add(ms).ok_or(Quirk::DeadlineOverflow)?))
}

/// PEXPIRE lock with the lease: > 0 re-arms, <= 0 deletes (the lock is then still held: not
/// freed for waiters).
pub(super) fn lease_act(call: &Call, now: i64, fresh: bool) -> Result<FairAct, Quirk> {
    let (ms, deadline) = lease_deadline(call, now)?;
    Ok(if ms > 0 { FairAct::Lease { deadline, fresh } } else { FairAct::Delete { freed: false } })
}

pub(super) fn wait_ms(call: &Call) -> Result<i64, Quirk> {
    time(call, Role::Wait)
}
