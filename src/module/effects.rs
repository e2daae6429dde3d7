//! Writes to a lock key together with their effects: replication to replicas and the AOF as
//! plain commands (HINCRBY, PEXPIREAT with the absolute deadline, DEL, PUBLISH), the keyspace
//! notifications the native commands would fire, WATCH invalidation, and the release message.

use crate::ffi::key::Key;
use crate::ffi::replication;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::registry::config::{self, PublishMode};
use crate::registry::stats;

use crate::ffi::rm::{NOTIFY_GENERIC, NOTIFY_HASH};

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

/// The lease of a key this command has just created (it had no TTL).
pub fn set_first_lease(ctx: Ctx, key: &Key, name: RStr, deadline: i64, now: i64) {
    lease(ctx, key, name, deadline, now, true);
}

fn lease(ctx: Ctx, key: &Key, name: RStr, deadline: i64, now: i64, fresh: bool) {
    // Needed only where the effect goes through the command's argv (it carries NX or XX).
    let had_ttl = replication::pexpireat_in_place().then(|| !fresh && key.deadline().is_some());
    key.set_deadline(deadline, now);
    replication::pexpireat(ctx, name, deadline, had_ttl);
    rm::notify(ctx, NOTIFY_GENERIC, c"expire", name);
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
