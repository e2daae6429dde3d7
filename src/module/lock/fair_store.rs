//! A fair lock's wait queue (a list) and waiter deadlines (a zset): the writes its scripts make,
//! each replicated as the plain command the script runs (LPOP, RPUSH, LREM, ZREM, ZINCRBY,
//! ZADD), with the keyspace events that command fires. The lock hash itself is written through
//! `effects.rs`, as every lock's.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::replicate::replicate_argv;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr, NOTIFY_GENERIC, NOTIFY_LIST, NOTIFY_ZSET};

/// The `del` event of a list or zset its last element left, then WATCH is told.
fn after(ctx: Ctx, key: &Key, name: RStr) {
    if key.kind() == KeyKind::Empty {
        rm::notify(ctx, NOTIFY_GENERIC, c"del", name);
    }
    rm::signal_modified(ctx, name);
}

/// LPOP: the head leaves the queue.
pub fn lpop(ctx: Ctx, queue: &Key, name: RStr) {
    queue.list_pop_head();
    replicate_argv(ctx, c"LPOP", &[name]);
    rm::notify(ctx, NOTIFY_LIST, c"lpop", name);
    after(ctx, queue, name);
}

/// RPUSH: `owner` joins the queue's tail.
pub fn rpush(ctx: Ctx, queue: &Key, name: RStr, owner: RStr) {
    queue.list_push_tail(owner);
    replicate_argv(ctx, c"RPUSH", &[name, owner]);
    rm::notify(ctx, NOTIFY_LIST, c"rpush", name);
    rm::signal_modified(ctx, name);
}

/// LREM 0 `owner`: every place of `owner` in the queue (nothing when it has none).
pub fn lrem(ctx: Ctx, queue: &Key, name: RStr, owner: RStr) {
    if queue.list_remove_all(rm::bytes(&owner)) == 0 {
        return;
    }
    let zero = rm::zero();
    replicate_argv(ctx, c"LREM", &[name, zero.ptr(), owner]);
    rm::notify(ctx, NOTIFY_LIST, c"lrem", name);
    after(ctx, queue, name);
}

/// ZREM `member` (nothing when it is not there).
pub fn zrem(ctx: Ctx, zset: &Key, name: RStr, member: &[u8]) {
    let m = OwnedStr::new(member);
    if !zset.zset_rem(m.ptr()) {
        return;
    }
    replicate_argv(ctx, c"ZREM", &[name, m.ptr()]);
    rm::notify(ctx, NOTIFY_ZSET, c"zrem", name);
    after(ctx, zset, name);
}

/// The ZINCRBYs of a run (member, new score: the old one less the wait, computed exactly as
/// the server would): written, with a `zincr` event each, and replicated as one ZADD of the new
/// scores (the replica ends with the same doubles; every member is written even when it was
/// missing, as ZINCRBY creates it).
pub fn lower_deadlines(ctx: Ctx, zset: &Key, name: RStr, run: &[(&[u8], f64)]) {
    if run.is_empty() {
        return;
    }
    let mut argv: Vec<OwnedStr> = Vec::with_capacity(2 * run.len());
    for (member, score) in run {
        let m = OwnedStr::new(member);
        // ZINCRBY fires its event only when it added or re-scored the member.
        if zset.zset_set(*score, m.ptr()) {
            rm::notify(ctx, NOTIFY_ZSET, c"zincr", name);
        }
        argv.push(OwnedStr::from_i64(*score as i64));
        argv.push(m);
    }
    let mut ptrs: Vec<RStr> = Vec::with_capacity(1 + argv.len());
    ptrs.push(name);
    ptrs.extend(argv.iter().map(OwnedStr::ptr));
    replicate_argv(ctx, c"ZADD", &ptrs);
    rm::signal_modified(ctx, name);
}

/// Every member's ZINCRBY of a take (`members`: all of the zset's, with their new scores, in
/// its order): the zset is written anew, highest score first (each insert lands at the head of
/// a small zset's listpack: no search per member), its TTL kept, with a `zincr` event per
/// member, and replicated as one ZADD of the new scores.
pub fn rewrite_deadlines(ctx: Ctx, zset: &Key, name: RStr, members: &[(Vec<u8>, f64)], now: i64) {
    let ttl = zset.deadline();
    zset.delete();
    let mut argv: Vec<OwnedStr> = Vec::with_capacity(2 * members.len());
    for (member, score) in members.iter().rev() {
        let m = OwnedStr::new(member);
        zset.zset_set(*score, m.ptr());
        argv.push(m);
        argv.push(OwnedStr::from_i64(*score as i64));
    }
    if let Some(d) = ttl {
        zset.set_deadline(d, now);
    }
    for _ in members {
        rm::notify(ctx, NOTIFY_ZSET, c"zincr", name);
    }
    let mut ptrs: Vec<RStr> = Vec::with_capacity(1 + argv.len());
    ptrs.push(name);
    for pair in argv.chunks(2) {
        if let [m, s] = pair {
            ptrs.push(s.ptr());
            ptrs.push(m.ptr());
        }
    }
    replicate_argv(ctx, c"ZADD", &ptrs);
    rm::signal_modified(ctx, name);
}

/// ZADD `score` `owner` (a whole number of ms).
pub fn zadd(ctx: Ctx, zset: &Key, name: RStr, score: i64, owner: RStr) {
    zset.zset_set(score as f64, owner);
    let s = OwnedStr::from_i64(score);
    replicate_argv(ctx, c"ZADD", &[name, s.ptr(), owner]);
    rm::notify(ctx, NOTIFY_ZSET, c"zadd", name);
    rm::signal_modified(ctx, name);
}
