//! How the effects of a write reach replicas and the AOF, cheaply.
//!
//! `RM_Replicate` looks the command up by its C-string name on every call (Redis 7.0-8.x:
//! `lookupCommandByCString` allocates and splits the name, ~1 500 instructions) and builds a new
//! argv, before `alsoPropagate` copies it. Half of LOCK.ACQUIRE was spent there. When the
//! effect fits the running command's argv (as many arguments, or padded to as many by
//! repeating arguments whose repetition changes nothing, up to 12), it is propagated through the
//! command's own argv instead: the effect's strings are put in the argv slots, `alsoPropagate`
//! copies them (`RM_ReplicateVerbatim`: a refcount each, no lookup), and the original strings go
//! back at once. Replicas and the AOF receive exactly the same plain command either way.
//! Effects of another length, and grants made outside a command (timers), use `RM_Replicate`.
//!
//! Server behaviour this relies on (Redis 7.0-8.x, Valkey 8-9; a server internal, not an API
//! promise):
//! - `RM_ReplicateVerbatim` calls `alsoPropagate(c->db->id, c->argv, c->argc, ...)` with the
//!   *current* `c->argv`, and `alsoPropagate` takes its own reference to every string (it
//!   copies the array and `incrRefCount`s each object) before returning. So the slots may be
//!   swapped for the call and restored right after; the command's argv is unchanged when the
//!   command returns.
//! - The argv we are handed is `c->argv` itself (not a copy) while the command runs.
//! - Propagation of a command's effects is wrapped in MULTI/EXEC when there are several, the
//!   same for verbatim and `RM_Replicate` effects, so their order is kept.
//!
//! Tests that check it: `tests/replication.rs`
//! `effects_through_the_command_argv_replicate_exactly` (every padded form, byte for byte, and
//! the replica's state), `random_sequence_replicas_with_and_without_module_match_master`, and
//! `argv_reuse_off_replicates_plain_effects` (the same commands with `lock.argv-reuse no`, so
//! every effect goes through `RM_Replicate`). Should a server change this behaviour,
//! `lock.argv-reuse no` turns the trick off.

use crate::ffi::rm::{self, Ctx, OwnedStr, RStr, StaticStr};
use std::cell::{Cell, RefCell};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;

/// `lock.argv-reuse` (default yes): off, every effect goes through `RM_Replicate`.
static ARGV_REUSE: AtomicBool = AtomicBool::new(true);

pub fn set_argv_reuse(on: bool) {
    ARGV_REUSE.store(on, Ordering::Relaxed);
}

pub fn argv_reuse() -> bool {
    ARGV_REUSE.load(Ordering::Relaxed)
}

thread_local! {
    /// argv and argc of the LOCK.* command running on this (the main) thread.
    static CURRENT: Cell<(*mut RStr, usize)> = const { Cell::new((null_mut(), 0)) };
    /// The last deadline replicated, and its string.
    static LAST_DEADLINE: RefCell<Option<(i64, OwnedStr)>> = const { RefCell::new(None) };
}

/// While alive, the command with this argv is the one running; restores the previous on drop
/// (a command run from a script run by another command nests).
pub struct Scope {
    prev: (*mut RStr, usize),
}

pub fn enter(argv: *mut RStr, argc: usize) -> Scope {
    let prev = CURRENT.with(|c| c.replace((argv, argc)));
    Scope { prev }
}

impl Drop for Scope {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Names and flags put in the argv, created once.
struct Words {
    hincrby: StaticStr,
    hset: StaticStr,
    pexpireat: StaticStr,
    nx: StaticStr,
    xx: StaticStr,
    del: StaticStr,
    publish: StaticStr,
    spublish: StaticStr,
    hdel: StaticStr,
    set: StaticStr,
    pxat: StaticStr,
    incrby: StaticStr,
    keepttl: StaticStr,
    zadd: StaticStr,
    zrem: StaticStr,
    ch: StaticStr,
}

static WORDS: LazyLock<Words> = LazyLock::new(|| Words {
    hincrby: StaticStr::new(b"HINCRBY"),
    hset: StaticStr::new(b"HSET"),
    pexpireat: StaticStr::new(b"PEXPIREAT"),
    nx: StaticStr::new(b"NX"),
    xx: StaticStr::new(b"XX"),
    del: StaticStr::new(b"DEL"),
    publish: StaticStr::new(b"PUBLISH"),
    spublish: StaticStr::new(b"SPUBLISH"),
    hdel: StaticStr::new(b"HDEL"),
    set: StaticStr::new(b"SET"),
    pxat: StaticStr::new(b"PXAT"),
    incrby: StaticStr::new(b"INCRBY"),
    keepttl: StaticStr::new(b"KEEPTTL"),
    zadd: StaticStr::new(b"ZADD"),
    zrem: StaticStr::new(b"ZREM"),
    ch: StaticStr::new(b"CH"),
});

fn word(pick: fn(&Words) -> &StaticStr) -> RStr {
    pick(&WORDS).ptr()
}

/// Most argv slots an effect is padded to. Longer commands (a 100-key watchdog batch) would
/// make every effect as long as themselves in the replication stream: they use RM_Replicate.
const MAX_SLOTS: usize = 12;

/// Whether `base` followed by whole repeats of `tail` fills exactly `argc` slots.
fn fits(base: usize, tail: usize, argc: usize) -> bool {
    argc <= MAX_SLOTS
        && argc >= base
        && if tail == 0 { argc == base } else { (argc - base).is_multiple_of(tail) }
}

/// Propagate `base` followed by `tail` repeated as often as it takes to fill the running
/// command's argv (`tail` must be arguments whose repetition changes nothing: a key DEL
/// deletes twice, a field HSET sets twice, a PEXPIREAT flag). False when it does not fit.
fn in_place(ctx: Ctx, base: &[RStr], tail: &[RStr]) -> bool {
    let (argv, argc) = CURRENT.with(Cell::get);
    if argv.is_null()
        || !argv_reuse()
        || !fits(base.len(), tail.len(), argc)
        || base.iter().chain(tail).any(|s| s.is_null())
    {
        return false;
    }
    let Some(f) = rm::api!(RedisModule_ReplicateVerbatim) else { return false };
    // SAFETY: `argv` is the running command's argv with `argc` (<= MAX_SLOTS) slots, set by
    // commands::run for the duration of the command. The original strings are put back before
    // anything else runs; alsoPropagate took its own reference to each string of the effect.
    unsafe {
        let slots = std::slice::from_raw_parts_mut(argv, argc);
        let mut saved: [RStr; MAX_SLOTS] = [RStr::ABSENT; MAX_SLOTS];
        let effect = base.iter().chain(tail.iter().cycle());
        for ((slot, keep), new) in slots.iter_mut().zip(saved.iter_mut()).zip(effect) {
            *keep = std::mem::replace(slot, *new);
        }
        f(ctx.0);
        for (slot, keep) in slots.iter_mut().zip(saved) {
            *slot = keep;
        }
    }
    true
}

/// `HINCRBY key owner delta`, the count becoming `count`. Through a longer even-length argv
/// (a Redisson script's) it is `HSET key owner count [owner count ...]`: the same field set
/// again, the same final hash.
pub fn hincrby(ctx: Ctx, key: RStr, owner: RStr, delta: RStr, count: RStr) {
    let done = in_place(ctx, &[word(|w| &w.hincrby), key, owner, delta], &[])
        || in_place(ctx, &[word(|w| &w.hset), key, owner, count], &[owner, count]);
    if !done {
        crate::ffi::replicate::replicate_key_owner_delta(ctx, key, owner, delta);
    }
}

/// Whether a `PEXPIREAT key deadline NX|XX...` effect can go through the running command's
/// argv: only then does [`pexpireat`] need to know whether the key had a TTL.
pub fn pexpireat_in_place() -> bool {
    let (argv, argc) = CURRENT.with(Cell::get);
    !argv.is_null() && argv_reuse() && fits(3, 1, argc)
}

/// `PEXPIREAT key deadline`. Through the argv it carries `NX` (the key had no TTL before) or
/// `XX` (it had one), which holds on the replica exactly as on the master, repeated to fill
/// the slots (every server from 7.0 accepts a repeated flag). `had_ttl` is `None` when
/// [`pexpireat_in_place`] said no (a 100-key watchdog batch): the effect is plain then.
pub fn pexpireat(ctx: Ctx, key: RStr, deadline: i64, had_ttl: Option<bool>) {
    LAST_DEADLINE.with(|last| {
        let mut last = last.borrow_mut();
        // A batch renewal gives every key the same deadline: make its string once.
        let d = match &*last {
            Some((v, s)) if *v == deadline => s.ptr(),
            _ => last.insert((deadline, OwnedStr::from_i64(deadline))).1.ptr(),
        };
        let done = had_ttl.is_some_and(|had| {
            let cond = if had { word(|w| &w.xx) } else { word(|w| &w.nx) };
            in_place(ctx, &[word(|w| &w.pexpireat), key, d], &[cond])
        });
        if !done {
            crate::ffi::replicate::replicate_pexpireat(ctx, key, d);
        }
    });
}

/// `DEL key` (through a longer argv as `DEL key key ...`, which deletes the same).
pub fn del(ctx: Ctx, key: RStr) {
    if !in_place(ctx, &[word(|w| &w.del), key], &[key]) {
        crate::ffi::replicate::replicate_del(ctx, key);
    }
}

/// `HSET key field value [field value]` (one or two pairs; through a longer argv the last pair
/// is set again).
pub fn hset(ctx: Ctx, key: RStr, pairs: &[(RStr, RStr)]) {
    let done = match pairs {
        [(f, v)] => in_place(ctx, &[word(|w| &w.hset), key, *f, *v], &[*f, *v]),
        [(f1, v1), (f2, v2)] => in_place(ctx, &[word(|w| &w.hset), key, *f1, *v1, *f2, *v2], &[*f2, *v2]),
        _ => false,
    };
    if !done {
        match pairs {
            [(f1, v1), (f2, v2)] => crate::ffi::replicate::replicate_hset2(ctx, key, *f1, *v1, *f2, *v2),
            _ => {
                for (f, v) in pairs {
                    crate::ffi::replicate::replicate_hset(ctx, key, *f, *v);
                }
            }
        }
    }
}

/// `HDEL key field` (through a longer argv `HDEL key field field ...`).
pub fn hdel(ctx: Ctx, key: RStr, field: RStr) {
    if !in_place(ctx, &[word(|w| &w.hdel), key, field], &[field]) {
        crate::ffi::replicate::replicate_hdel(ctx, key, field);
    }
}

/// `SET key value PXAT deadline`. Through a longer argv it carries `NX` (the key did not exist
/// before: `existed` false) or `XX` (it did), repeated to fill the slots (SET accepts a repeated
/// NX or XX), which holds on the replica exactly as on the master, as PEXPIREAT's NX / XX do.
pub fn set_pxat(ctx: Ctx, key: RStr, value: RStr, deadline: i64, existed: bool) {
    let d = OwnedStr::from_i64(deadline);
    let cond = if existed { word(|w| &w.xx) } else { word(|w| &w.nx) };
    if !in_place(ctx, &[word(|w| &w.set), key, value, word(|w| &w.pxat), d.ptr()], &[cond]) {
        crate::ffi::replicate::replicate_set(ctx, key, value, Some(deadline));
    }
}

/// `DEL key other` (through a longer argv `DEL key other other ...`).
pub fn del2(ctx: Ctx, key: RStr, other: RStr) {
    if !in_place(ctx, &[word(|w| &w.del), key, other], &[other]) {
        crate::ffi::replicate::replicate_del(ctx, key);
        crate::ffi::replicate::replicate_del(ctx, other);
    }
}

/// `PUBLISH channel message` or `SPUBLISH channel message`.
pub fn publish(ctx: Ctx, sharded: bool, channel: RStr, msg: RStr) {
    let cmd = if sharded { word(|w| &w.spublish) } else { word(|w| &w.publish) };
    if !in_place(ctx, &[cmd, channel, msg], &[]) {
        let name = if sharded { c"SPUBLISH" } else { c"PUBLISH" };
        crate::ffi::replicate::replicate_publish(ctx, name, channel, msg);
    }
}

/// A semaphore's count changed by `delta` to `value`, its TTL kept: `INCRBY key delta`, or
/// through a longer argv `SET key value KEEPTTL [KEEPTTL ...]` (every server from 7.0 accepts
/// the repeated flag); otherwise `INCRBY` through `RM_Replicate`.
pub fn count(ctx: Ctx, key: RStr, delta: i64, value: &[u8]) {
    let (_, argc) = CURRENT.with(Cell::get);
    // Only the string the effect takes is made.
    if argc == 3 {
        let d = OwnedStr::from_i64(delta);
        if in_place(ctx, &[word(|w| &w.incrby), key, d.ptr()], &[]) {
            return;
        }
    } else {
        let v = OwnedStr::new(value);
        if in_place(ctx, &[word(|w| &w.set), key, v.ptr(), word(|w| &w.keepttl)], &[word(|w| &w.keepttl)]) {
            return;
        }
    }
    let d = OwnedStr::from_i64(delta);
    crate::ffi::replicate::replicate_argv(ctx, c"INCRBY", &[key, d.ptr()]);
}

/// `ZADD key score member [score member ...]`; one member through a five-slot argv as
/// `ZADD key CH score member` (CH changes only the reply).
pub fn zadd(ctx: Ctx, key: RStr, score: RStr, members: &[RStr]) {
    if let [m] = members {
        if in_place(ctx, &[word(|w| &w.zadd), key, word(|w| &w.ch), score, *m], &[]) {
            return;
        }
    }
    let mut argv = Vec::with_capacity(1 + 2 * members.len());
    argv.push(key);
    for m in members {
        argv.push(score);
        argv.push(*m);
    }
    crate::ffi::replicate::replicate_argv(ctx, c"ZADD", &argv);
}

/// `ZREM key member [member ...]`; one member through a longer argv as `ZREM key member member ...`.
pub fn zrem(ctx: Ctx, key: RStr, members: &[RStr]) {
    if let [m] = members {
        if in_place(ctx, &[word(|w| &w.zrem), key, *m], &[*m]) {
            return;
        }
    }
    let mut argv = Vec::with_capacity(1 + members.len());
    argv.push(key);
    argv.extend_from_slice(members);
    crate::ffi::replicate::replicate_argv(ctx, c"ZREM", &argv);
}

/// How many replicas are attached (INFO replication `connected_slaves`, every state: syncing
/// ones too); `None` when the server cannot tell.
pub fn connected_replicas(ctx: Ctx) -> Option<i64> {
    let info = rm::rm!(RedisModule_GetServerInfo(ctx.0, c"replication".as_ptr()) else null_mut());
    if info.is_null() {
        return None;
    }
    let mut err: std::ffi::c_int = 0;
    let n =
        rm::rm!(RedisModule_ServerInfoGetFieldSigned(info, c"connected_slaves".as_ptr(), &mut err) else 0);
    rm::rm!(RedisModule_FreeServerInfo(ctx.0, info) else ());
    (err == 0).then_some(n)
}

/// Create the strings at load (on the main thread) rather than in the first command.
pub fn init() {
    LazyLock::force(&WORDS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_fill_the_argv_only_by_whole_repeats_of_their_tail() {
        assert!(fits(4, 0, 4));
        assert!(!fits(4, 0, 5));
        assert!(fits(3, 1, 3));
        assert!(fits(3, 1, 6));
        assert!(fits(4, 2, 6));
        assert!(!fits(4, 2, 7));
        assert!(fits(2, 1, 2));
        assert!(!fits(2, 1, 1));
        assert!(fits(3, 1, MAX_SLOTS));
        assert!(!fits(3, 1, MAX_SLOTS + 1));
        assert!(!fits(2, 1, 204), "a 100-key batch is not padded");
    }

    #[test]
    fn scopes_nest_and_restore() {
        assert_eq!(CURRENT.with(Cell::get), (null_mut(), 0));
        let mut outer: [RStr; 4] = [RStr::ABSENT; 4];
        let mut inner: [RStr; 3] = [RStr::ABSENT; 3];
        let a = enter(outer.as_mut_ptr(), 4);
        {
            let _b = enter(inner.as_mut_ptr(), 3);
            assert_eq!(CURRENT.with(Cell::get), (inner.as_mut_ptr(), 3));
        }
        assert_eq!(CURRENT.with(Cell::get), (outer.as_mut_ptr(), 4));
        drop(a);
        assert_eq!(CURRENT.with(Cell::get), (null_mut(), 0));
    }
}
