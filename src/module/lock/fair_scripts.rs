//! Redisson's fair-lock scripts (and the non-reentrant fair lock's acquires) run natively: the
//! keys read for the decisions of `logic/fair/queue.rs`, the path checked (ACL per command,
//! write refusal) before anything is written, then the writes in the script's order through
//! `store.rs` (queue, deadlines) and `effects.rs` (the lock hash, the latch, messages), and the
//! reply. The entry point, the call's parsing and the Lua fallback are shared by every kind
//! (`module/scripts/native.rs`).
//!
//! Differences from the scripts, on purpose: a fair lock is an RLock hash, so LOCK.ACQUIRE
//! waiters on the same key go first. An acquire of a free lock they wait for grants their head
//! before the script decides (the script then finds the lock held), and an unlock that frees
//! the lock grants their head inside the call (the script's message is still published to the
//! Redisson queue head, which finds the lock held and waits on).

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::args::parse_i64;
use crate::logic::lock::fair_plans;
use crate::logic::lock::fair_queue::{FairAct, FairKeys, FairReply};
use crate::logic::lock::fair_scripts::FairOp;
use crate::logic::lock::state::LockView;
use crate::logic::plan::{Latch, Quirk};
use crate::logic::scripts::{Call, Op, Publish, Role};
use crate::module::cluster;
use crate::module::lock::fair_store as store;
use crate::module::lock::waiting::Lock;
use crate::module::scripts::plan::{check_script_path, reply_text_error, Argv};
use crate::module::{effects, wait};

/// The call's keys, opened once (no two slots name the same key: checked first).
struct Keys {
    lock: Option<Key>,
    queue: Option<Key>,
    zset: Option<Key>,
    latch: Option<Key>,
}

struct Reads<'k> {
    ctx: Ctx,
    keys: &'k Keys,
    owner: Option<RStr>,
    queue_name: Option<RStr>,
    /// The deadlines' highest member and score, once read (the last waiter's, usually).
    last: Option<Option<(Vec<u8>, f64)>>,
}

impl FairKeys for Reads<'_> {
    fn lock(&mut self) -> LockView {
        let Some(key) = &self.keys.lock else { return LockView::WrongType };
        match key.kind() {
            KeyKind::Empty => LockView::Free,
            KeyKind::Hash => LockView::Hash {
                mine: self.owner.and_then(|o| {
                    key.hash_get(o, |b| parse_i64(b).ok_or(crate::logic::error::Error::CorruptCount))
                }),
            },
            _ => LockView::WrongType,
        }
    }

    fn pttl(&mut self) -> i64 {
        self.keys.lock.as_ref().map_or(-2, Key::pttl)
    }

    fn queue_len(&mut self) -> usize {
        self.keys.queue.as_ref().map_or(0, Key::list_len)
    }

    fn queue_at(&mut self, i: usize) -> Option<Vec<u8>> {
        let q = self.keys.queue.as_ref()?;
        let len = q.list_len();
        // The tail through a handle of its own: the server steps the open handle's iterator
        // from wherever it was (the head) one element at a time.
        if len > 2 && i + 1 == len {
            let tail = Key::read(self.ctx, self.queue_name?);
            return tail.list_get(-1);
        }
        q.list_get(i64::try_from(i).ok()?)
    }

    fn deadline(&mut self, member: &[u8]) -> Option<f64> {
        let z = self.keys.zset.as_ref()?;
        // The last waiter's deadline is usually the highest: read from the zset's end, no scan.
        let last = self.last.get_or_insert_with(|| z.zset_last());
        if let Some((m, s)) = last {
            if m.as_slice() == member {
                return Some(*s);
            }
        }
        let m = OwnedStr::new(member);
        z.zset_score_exact(m.ptr())
    }

    fn deadlines(&mut self) -> Vec<(Vec<u8>, f64)> {
        let mut out = Vec::new();
        if let Some(z) = &self.keys.zset {
            z.zset_range(f64::NEG_INFINITY, f64::INFINITY, usize::MAX, &mut |m, s| out.push((m.to_vec(), s)));
        }
        out
    }

    fn latch(&mut self) -> Latch {
        let Some(key) = &self.keys.latch else { return Latch::WrongType };
        match key.kind() {
            KeyKind::Empty => Latch::Absent,
            _ if key.is_string() => {
                key.string_get(crate::ffi::luanum::latch_reply).map_or(Latch::WrongType, Latch::Value)
            }
            _ => Latch::WrongType,
        }
    }
}

/// Run fair-lock operation `op` for `call` at server time `now`. `Err`: the call runs in Lua;
/// nothing was written.
pub fn run(ctx: Ctx, op: Op, call: &Call, a: &Argv, now: i64) -> Result<(), Quirk> {
    let op = FairOp::of(op).ok_or(Quirk::Layout)?;
    // Keys that alias each other make the script fail half-way (a type error): Lua.
    for (i, k) in call.keys.iter().enumerate() {
        if call.keys.iter().skip(i + 1).any(|o| o == k) {
            return Err(Quirk::DerivedKey);
        }
    }
    let open = |role: Role| call.key_index(role).and_then(|i| a.key(i)).map(|n| Key::write(ctx, n));
    let keys = Keys {
        lock: open(Role::Lock),
        queue: open(Role::Queue),
        zset: open(Role::Deadlines),
        latch: open(Role::Latch),
    };
    if keys.queue.as_ref().is_some_and(|q| q.kind() != KeyKind::Empty && !q.is_list())
        || keys.zset.as_ref().is_some_and(|z| !matches!(z.kind(), KeyKind::Empty | KeyKind::SortedSet))
    {
        return Err(Quirk::WrongType);
    }
    let lock_name = call.key_index(Role::Lock).and_then(|i| a.key(i));
    // LOCK.* waiters go first on a free lock.
    if let (Some(key), Some(name), true) = (&keys.lock, lock_name, acquires(op)) {
        if key.kind() == KeyKind::Empty && wait::has_waiters::<Lock>(ctx, name) {
            wait::grant_head::<Lock>(ctx, key, name, now, false);
        }
    }
    let owner = call.arg_index(Role::Owner).and_then(|i| a.arg(i));
    let queue_name = call.key_index(Role::Queue).and_then(|i| a.key(i));
    let mut reads = Reads { ctx, keys: &keys, owner, queue_name, last: None };
    let fair = fair_plans::decide(op, call, &mut reads, now, a.checks_args())?;
    let sharded = call.publish == Some(Publish::SPublish);
    if sharded && cluster::enabled() {
        let home = call.key(0).map(cluster::key_slot);
        for act in &fair.acts {
            if let FairAct::Publish(ch) = act {
                if Some(cluster::key_slot(ch)) != home {
                    return Err(Quirk::CrossSlotPublish);
                }
            }
        }
    }
    let reply = fair.reply.ok_or(Quirk::Layout)?;
    if let Err(e) = check_script_path(ctx, a, &fair.plan) {
        rm::reply_error(ctx, &e.reply());
        return Ok(());
    }
    apply(ctx, call, a, &keys, &fair.acts, now, sharded);
    match reply {
        FairReply::Nil => rm::reply_null(ctx),
        FairReply::Int(n) => rm::reply_int(ctx, n),
        FairReply::ErrorArg(i) => reply_text_error(ctx, a.arg(i)),
    };
    Ok(())
}

fn acquires(op: FairOp) -> bool {
    !matches!(
        op,
        FairOp::AcquireFailed
            | FairOp::UnlockPublishBug
            | FairOp::UnlockBug
            | FairOp::UnlockLatchBug
            | FairOp::UnlockLatch
            | FairOp::ForceUnlockPublishBug
            | FairOp::ForceUnlockBug
            | FairOp::ForceUnlock
    )
}

fn apply(ctx: Ctx, call: &Call, a: &Argv, keys: &Keys, acts: &[FairAct], now: i64, sharded: bool) {
    let name = |role: Role| call.key_index(role).and_then(|i| a.key(i));
    let (lock_name, queue_name, zset_name, latch_name) =
        (name(Role::Lock), name(Role::Queue), name(Role::Deadlines), name(Role::Latch));
    let owner = call.arg_index(Role::Owner).and_then(|i| a.arg(i));
    let message = call.arg_index(Role::Message).and_then(|i| a.arg(i));
    let mut lock_gone = false;
    let mut skip = 0;
    for (i, act) in acts.iter().enumerate() {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        match act {
            FairAct::ZRem(m) => {
                if let (Some(z), Some(n)) = (&keys.zset, zset_name) {
                    store::zrem(ctx, z, n, m);
                }
            }
            FairAct::LPop => {
                if let (Some(q), Some(n)) = (&keys.queue, queue_name) {
                    store::lpop(ctx, q, n);
                }
            }
            FairAct::LowerAll { members, changed } => {
                if let (Some(z), Some(n), true) = (&keys.zset, zset_name, *changed) {
                    store::rewrite_deadlines(ctx, z, n, members, now);
                }
            }
            FairAct::ZIncr(..) => {
                // A run of ZINCRBYs (every waiter's deadline): one ZADD replicates them all.
                if let (Some(z), Some(n)) = (&keys.zset, zset_name) {
                    let run: Vec<(&[u8], f64)> = acts
                        .get(i..)
                        .unwrap_or_default()
                        .iter()
                        .map_while(|a| match a {
                            FairAct::ZIncr(m, s) => Some((m.as_slice(), *s)),
                            _ => None,
                        })
                        .collect();
                    skip = run.len().saturating_sub(1);
                    store::lower_deadlines(ctx, z, n, &run);
                }
            }
            FairAct::Enqueue(score) => {
                if let (Some(z), Some(n), Some(o)) = (&keys.zset, zset_name, owner) {
                    store::zadd(ctx, z, n, *score as i64, o);
                }
            }
            FairAct::Push => {
                if let (Some(q), Some(n), Some(o)) = (&keys.queue, queue_name, owner) {
                    store::rpush(ctx, q, n, o);
                }
            }
            FairAct::LRemOwner => {
                if let (Some(q), Some(n), Some(o)) = (&keys.queue, queue_name, owner) {
                    store::lrem(ctx, q, n, o);
                }
            }
            FairAct::Take => {
                if let (Some(k), Some(n), Some(o)) = (&keys.lock, lock_name, owner) {
                    let one = rm::one();
                    effects::hset(ctx, k, n, &[(o, one.ptr())]);
                }
            }
            FairAct::Count { count, up } => {
                if let (Some(k), Some(n), Some(o)) = (&keys.lock, lock_name, owner) {
                    if *count <= 0 && !*up {
                        effects::hincrby_event(ctx, n); // the DEL follows
                    } else {
                        effects::set_count(ctx, k, n, o, *count, if *up { 1 } else { -1 });
                    }
                }
            }
            FairAct::Lease { deadline, fresh } => {
                if let (Some(k), Some(n)) = (&keys.lock, lock_name) {
                    effects::rearm(ctx, k, n, *deadline, now, *fresh);
                }
            }
            FairAct::Delete { freed } => {
                if let (Some(k), Some(n)) = (&keys.lock, lock_name) {
                    effects::delete(ctx, k, n);
                    lock_gone = *freed;
                }
            }
            FairAct::Free => lock_gone = true,
            FairAct::Publish(channel) => {
                if lock_gone {
                    // The freed lock goes to LOCK.* waiters first.
                    if let (Some(k), Some(n)) = (&keys.lock, lock_name) {
                        wait::grant_head::<Lock>(ctx, k, n, now, true);
                    }
                    lock_gone = false;
                }
                if let Some(m) = message {
                    let ch = OwnedStr::new(channel);
                    effects::publish(ctx, ch.ptr(), m, sharded);
                }
            }
            FairAct::Latch { released, deadline } => {
                if let (Some(k), Some(n)) = (&keys.latch, latch_name) {
                    effects::set_latch(ctx, k, n, *released, *deadline, now);
                }
            }
        }
    }
    if lock_gone {
        if let (Some(k), Some(n)) = (&keys.lock, lock_name) {
            wait::grant_head::<Lock>(ctx, k, n, now, true);
        }
    }
}
