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

/// ZINCRBY `by` `member`, replicated as such: the replica does the same double arithmetic.
pub fn zincrby(ctx: Ctx, zset: &Key, name: RStr, by: RStr, member: &[u8]) {
    let m = OwnedStr::new(member);
    let Some(by_v) = crate::logic::args::parse_i64(rm::bytes(&by)) else { return };
    zset.zset_incr(m.ptr(), by_v as f64);
    replicate_argv(ctx, c"ZINCRBY", &[name, by, m.ptr()]);
    rm::notify(ctx, NOTIFY_ZSET, c"zincr", name);
    rm::signal_modified(ctx, name);
}

/// ZADD `score` `owner` (a whole number of ms).
pub fn zadd(ctx: Ctx, zset: &Key, name: RStr, score: i64, owner: RStr) {
    zset.zset_add_exact(score as f64, owner);
    let s = OwnedStr::from_i64(score);
    replicate_argv(ctx, c"ZADD", &[name, s.ptr(), owner]);
    rm::notify(ctx, NOTIFY_ZSET, c"zadd", name);
    rm::signal_modified(ctx, name);
}
