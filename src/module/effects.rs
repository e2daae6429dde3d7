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
    key.string_set(v.ptr());
    key.set_deadline(deadline, now);
    rm::replicate_set(ctx, name, v.ptr(), Some(deadline));
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
    let mode = config::mode();
    if mode == PublishMode::Off {
        return;
    }
    let sharded = match mode {
        PublishMode::Auto => crate::module::cluster::enabled(),
        PublishMode::Sharded => true,
        PublishMode::Global | PublishMode::Off => false,
    };
    let channel = OwnedStr::new(&config::channel(rm::bytes(&name)));
    publish(ctx, channel.ptr(), rm::zero().ptr(), sharded);
}

/// Publish `msg` on `channel` (sharded: SPUBLISH semantics). Outside cluster mode the publish
/// is also replicated, so subscribers connected to replicas get it too.
pub fn publish(ctx: Ctx, channel: RStr, msg: RStr, sharded: bool) {
    rm::publish(ctx, channel, msg, sharded);
    if !crate::module::cluster::enabled() {
        replication::publish(ctx, sharded, channel, msg);
    }
    stats::PUBLISHES.inc();
}
