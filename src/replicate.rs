//! How the effects of a write reach replicas and the AOF, cheaply.
//!
//! `RM_Replicate` looks the command up by its C-string name on every call (Redis 7.0-8.x:
//! `lookupCommandByCString` allocates and splits the name, ~1 500 instructions) and builds a new
//! argv, before `alsoPropagate` copies it. Half of LOCK.ACQUIRE was spent there. When the
//! effect has as many arguments as the running LOCK.* command, it is propagated through the
//! command's own argv instead: the effect's strings are put in the argv slots, `alsoPropagate`
//! copies them (`RM_ReplicateVerbatim`: a refcount each, no lookup), and the original strings go
//! back at once. Replicas and the AOF receive exactly the same plain command either way.
//! Effects of another length, and grants made outside a command (timers), use `RM_Replicate`.

use crate::rm::{self, Ctx, OwnedStr, RStr};
use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::LazyLock;

thread_local! {
    /// argv and argc of the LOCK.* command running on this (the main) thread.
    static CURRENT: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// While alive, the command with this argv is the one running; restores the previous on drop
/// (a command run from a script run by another command nests).
pub struct Scope {
    prev: (usize, usize),
}

pub fn enter(argv: *mut RStr, argc: usize) -> Scope {
    let prev = CURRENT.with(|c| c.replace((argv as usize, argc)));
    Scope { prev }
}

impl Drop for Scope {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Names and flags put in the argv, created once.
struct Words {
    hincrby: usize,
    hset: usize,
    pexpireat: usize,
    nx: usize,
    xx: usize,
    del: usize,
    publish: usize,
    spublish: usize,
}

static WORDS: LazyLock<Words> = LazyLock::new(|| Words {
    hincrby: OwnedStr::leak(b"HINCRBY") as usize,
    hset: OwnedStr::leak(b"HSET") as usize,
    pexpireat: OwnedStr::leak(b"PEXPIREAT") as usize,
    nx: OwnedStr::leak(b"NX") as usize,
    xx: OwnedStr::leak(b"XX") as usize,
    del: OwnedStr::leak(b"DEL") as usize,
    publish: OwnedStr::leak(b"PUBLISH") as usize,
    spublish: OwnedStr::leak(b"SPUBLISH") as usize,
});

fn word(pick: fn(&Words) -> usize) -> RStr {
    pick(&WORDS) as RStr
}

/// Propagate `effect` through the running command's argv; false when it does not fit.
fn in_place(ctx: Ctx, effect: &[RStr]) -> bool {
    let (argv, argc) = CURRENT.with(Cell::get);
    if argv == 0 || argc != effect.len() || effect.iter().any(|s| s.is_null()) {
        return false;
    }
    let Some(f) = rm::api!(RedisModule_ReplicateVerbatim) else { return false };
    // SAFETY: `argv` is the running command's argv with `argc` slots (set by commands::run for
    // the duration of the command). The original strings are put back before anything else
    // runs; alsoPropagate took its own reference to each string of the effect.
    unsafe {
        let slots = std::slice::from_raw_parts_mut(argv as *mut RStr, argc);
        let mut saved: [RStr; 6] = [null_mut(); 6];
        if argc > saved.len() {
            return false;
        }
        for ((slot, keep), new) in slots.iter_mut().zip(saved.iter_mut()).zip(effect) {
            *keep = std::mem::replace(slot, *new);
        }
        f(ctx);
        for (slot, keep) in slots.iter_mut().zip(saved) {
            *slot = keep;
        }
    }
    true
}

/// `HINCRBY key owner delta`, the count becoming `count`. Through a 6-slot argv (a Redisson
/// script's) it is `HSET key owner count owner count`: the same field set twice, the same
/// final hash.
pub fn hincrby(ctx: Ctx, key: RStr, owner: RStr, delta: RStr, count: RStr) {
    let done = in_place(ctx, &[word(|w| w.hincrby), key, owner, delta])
        || in_place(ctx, &[word(|w| w.hset), key, owner, count, owner, count]);
    if !done {
        rm::replicate_key_owner_delta(ctx, key, owner, delta);
    }
}

/// `PEXPIREAT key deadline`. Through the argv it carries `NX` (the key had no TTL before) or
/// `XX` (it had one), which holds on the replica exactly as on the master, to fill 4 slots.
pub fn pexpireat(ctx: Ctx, key: RStr, deadline: i64, had_ttl: bool) {
    let d = OwnedStr::from_i64(deadline);
    let cond = if had_ttl { word(|w| w.xx) } else { word(|w| w.nx) };
    if !in_place(ctx, &[word(|w| w.pexpireat), key, d.ptr(), cond]) {
        rm::replicate_pexpireat(ctx, key, deadline);
    }
}

/// `DEL key` (through a 3-slot argv as `DEL key key`, which deletes the same).
pub fn del(ctx: Ctx, key: RStr) {
    let done = in_place(ctx, &[word(|w| w.del), key]) || in_place(ctx, &[word(|w| w.del), key, key]);
    if !done {
        rm::replicate_del(ctx, key);
    }
}

/// `PUBLISH channel message` or `SPUBLISH channel message`.
pub fn publish(ctx: Ctx, sharded: bool, channel: RStr, msg: RStr) {
    let cmd = if sharded { word(|w| w.spublish) } else { word(|w| w.publish) };
    if !in_place(ctx, &[cmd, channel, msg]) {
        let name = if sharded { c"SPUBLISH" } else { c"PUBLISH" };
        rm::replicate_publish(ctx, name, channel, msg);
    }
}

/// Create the strings at load (on the main thread) rather than in the first command.
pub fn init() {
    LazyLock::force(&WORDS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore() {
        assert_eq!(CURRENT.with(Cell::get), (0, 0));
        let mut outer: [RStr; 4] = [null_mut(); 4];
        let mut inner: [RStr; 3] = [null_mut(); 3];
        let a = enter(outer.as_mut_ptr(), 4);
        {
            let _b = enter(inner.as_mut_ptr(), 3);
            assert_eq!(CURRENT.with(Cell::get), (inner.as_mut_ptr() as usize, 3));
        }
        assert_eq!(CURRENT.with(Cell::get), (outer.as_mut_ptr() as usize, 4));
        drop(a);
        assert_eq!(CURRENT.with(Cell::get), (0, 0));
    }
}
