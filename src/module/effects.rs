//! Writes to a lock key together with their effects: replication to replicas and the AOF as
//! plain commands (HINCRBY, PEXPIREAT with the absolute deadline, DEL, PUBLISH, SET ... PXAT),
//! the keyspace notifications the native commands would fire, WATCH invalidation, and the
//! release message.

use crate::ffi::key::Key;
use crate::ffi::replication;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::registry::config::{self, PublishMode};
use crate::registry::stats;

use crate::ffi::rm::{NOTIFY_GENERIC, NOTIFY_HASH, NOTIFY_STRING};

/// Set `owner`'s hold count to `count`; the replicated change is `HINCRBY key owner delta`
/// where `delta` is +1 or -1.
pub fn set_count(ctx: Ctx, key: &Key, name: RStr, owner: RStr, count: i64, delta: i8) {
    let owned;
    let shared;
    let value = if count == 1 {
        shared = rm::one();
        shared.ptr()
    } else {
        owned = OwnedStr::from_i64(count);
        owned.ptr()
    };
    key.hash_set(owner, value);
    let delta = if delta < 0 { rm::minus_one() } else { rm::one() };
    replication::hincrby(ctx, name, owner, delta.ptr(), value);
    rm::notify(ctx, NOTIFY_HASH, c"hincrby", name);
}

/// Set the lease to end at `deadline`, replicated as PEXPIREAT.
pub fn set_lease(ctx: Ctx, key: &Key, name: RStr, deadline: i64, now: i64) {
    lease(ctx, key, name, deadline, now, false);
}

#[inline(always)]
fn lease(ctx: Ctx, key: &Key, name: RStr, deadline: i64, now: i64, fresh: bool) {
    // Needed only where the effect goes through the command's argv (it carries NX or XX).
    let had_ttl = replication::pexpireat_in_place().then(|| !fresh && key.deadline().is_some());
    key.set_deadline(deadline, now);
    replication::pexpireat(ctx, name, deadline, had_ttl);
    rm::notify(ctx, NOTIFY_GENERIC, c"expire", name);
}

/// The lease a script's PEXPIRE sets (after its HINCRBY, if any), then WATCH is told; `fresh`:
/// the key was just created.
#[inline]
pub fn rearm(ctx: Ctx, key: &Key, name: RStr, deadline: i64, now: i64, fresh: bool) {
    lease(ctx, key, name, deadline, now, fresh);
    rm::signal_modified(ctx, name);
}

/// The event of a script's HINCRBY on a key the script deletes next: the count itself is never
/// written (the deletion follows, with its own effects).
pub fn hincrby_event(ctx: Ctx, name: RStr) {
    rm::notify(ctx, NOTIFY_HASH, c"hincrby", name);
}

/// A Redisson unlock latch: `SET latch 0|1 PX ms` (`released`: "1"), replicated as SET ... PXAT,
/// with the events SET fires.
pub fn set_latch(ctx: Ctx, key: &Key, name: RStr, released: bool, deadline: i64, now: i64) {
    let v = if released { rm::one() } else { rm::zero() };
    let existed = key.kind() != crate::ffi::key::KeyKind::Empty;
    key.string_set(v.ptr());
    key.set_deadline(deadline, now);
    replication::set_pxat(ctx, name, v.ptr(), deadline, existed);
    rm::notify(ctx, NOTIFY_STRING, c"set", name);
    rm::notify(ctx, NOTIFY_GENERIC, c"expire", name);
    rm::signal_modified(ctx, name);
}

/// A hold to write: `owner` with `count` holds until `deadline` (computed at `now`); `fresh`:
/// the key did not exist before (a new lock), else a reentry.
pub struct Hold {
    pub owner: RStr,
    pub count: i64,
    pub deadline: i64,
    pub now: i64,
    pub fresh: bool,
}

/// A new or reentrant hold: count and lease in one go.
pub fn grant(ctx: Ctx, key: &Key, name: RStr, h: Hold) {
    set_count(ctx, key, name, h.owner, h.count, 1);
    lease(ctx, key, name, h.deadline, h.now, h.fresh);
    rm::signal_modified(ctx, name);
}

/// Delete the lock key, replicated as DEL.
pub fn delete(ctx: Ctx, key: &Key, name: RStr) {
    key.delete();
    replication::del(ctx, name);
    rm::notify(ctx, NOTIFY_GENERIC, c"del", name);
    rm::signal_modified(ctx, name);
}

/// Publish the release message `0` on the lock's channel, per `lock.publish-mode`.
pub fn publish_release(ctx: Ctx, name: RStr) {
    publish_message(ctx, &config::channel(rm::bytes(&name)), rm::zero().ptr());
}

/// Publish `msg` on `channel` as a release message of any kind, per `lock.publish-mode`.
pub fn publish_message(ctx: Ctx, channel: &[u8], msg: RStr) {
    let mode = config::mode();
    if mode == PublishMode::Off {
        return;
    }
    let sharded = match mode {
        PublishMode::Auto => crate::module::cluster::enabled(),
        PublishMode::Sharded => true,
        PublishMode::Global | PublishMode::Off => false,
    };
    let channel = OwnedStr::new(channel);
    publish(ctx, channel.ptr(), msg, sharded);
}

/// `HSET key field value [field value]` (fields other than a hold count: a read-write lock's
/// `mode`, a new hold), with its event.
pub fn hset(ctx: Ctx, key: &Key, name: RStr, pairs: &[(RStr, RStr)]) {
    key.hash_set_pairs(pairs);
    replication::hset(ctx, name, pairs);
    rm::notify(ctx, NOTIFY_HASH, c"hset", name);
}

/// `HDEL key field`, with its event (and `del` when the hash went with its last field).
pub fn hdel(ctx: Ctx, key: &Key, name: RStr, field: RStr) {
    key.hash_del(field);
    replication::hdel(ctx, name, field);
    rm::notify(ctx, NOTIFY_HASH, c"hdel", name);
    if key.hash_len() == 0 {
        rm::notify(ctx, NOTIFY_GENERIC, c"del", name);
    }
}

/// `SET name 1 PX ms` on another key than the one the command opened (a read hold's timeout
/// key), replicated as SET ... PXAT with the events SET fires.
pub fn set_marker(ctx: Ctx, name: RStr, deadline: i64, now: i64) {
    let key = Key::write(ctx, name);
    let one = rm::one();
    let existed = key.kind() != crate::ffi::key::KeyKind::Empty;
    key.string_set(one.ptr());
    key.set_deadline(deadline, now);
    replication::set_pxat(ctx, name, one.ptr(), deadline, existed);
    rm::notify(ctx, NOTIFY_STRING, c"set", name);
    rm::notify(ctx, NOTIFY_GENERIC, c"expire", name);
    rm::signal_modified(ctx, name);
}

/// Move the deadline of key `name` (if it exists) to `deadline`: PEXPIREAT, with its event.
pub fn expire_named(ctx: Ctx, name: RStr, deadline: i64, now: i64) -> bool {
    let key = Key::write(ctx, name);
    if key.kind() == crate::ffi::key::KeyKind::Empty {
        return false;
    }
    let had_ttl = replication::pexpireat_in_place().then(|| key.deadline().is_some());
    key.set_deadline(deadline, now);
    replication::pexpireat(ctx, name, deadline, had_ttl);
    rm::notify(ctx, NOTIFY_GENERIC, c"expire", name);
    rm::signal_modified(ctx, name);
    true
}

/// Delete key `name` if it exists (DEL), with its event. Whether it existed.
pub fn delete_named(ctx: Ctx, name: RStr) -> bool {
    let key = Key::write(ctx, name);
    if key.kind() == crate::ffi::key::KeyKind::Empty {
        return false;
    }
    key.delete();
    replication::del(ctx, name);
    rm::notify(ctx, NOTIFY_GENERIC, c"del", name);
    rm::signal_modified(ctx, name);
    true
}

/// Delete the lock key and one more key (a read hold's timeout key, if it exists), replicated
/// as one `DEL key other`.
pub fn delete_with(ctx: Ctx, key: &Key, name: RStr, other: RStr) {
    let o = Key::write(ctx, other);
    if o.kind() == crate::ffi::key::KeyKind::Empty {
        drop(o);
        delete(ctx, key, name);
        return;
    }
    o.delete();
    key.delete();
    replication::del2(ctx, name, other);
    rm::notify(ctx, NOTIFY_GENERIC, c"del", other);
    rm::signal_modified(ctx, other);
    rm::notify(ctx, NOTIFY_GENERIC, c"del", name);
    rm::signal_modified(ctx, name);
}

/// Publish `msg` on `channel` (sharded: SPUBLISH semantics). Outside cluster mode the publish
/// is also replicated when replicas may be attached, so subscribers connected to them get it too
/// (without replicas it would reach nobody: `writes::may_have_replicas`).
pub fn publish(ctx: Ctx, channel: RStr, msg: RStr, sharded: bool) {
    rm::publish(ctx, channel, msg, sharded);
    if !crate::module::cluster::enabled() && crate::module::writes::may_have_replicas(ctx) {
        replication::publish(ctx, sharded, channel, msg);
    }
    stats::PUBLISHES.inc();
}
