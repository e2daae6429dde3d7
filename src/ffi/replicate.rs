//! `RM_Replicate` of each effect in its plain form: what `replication.rs` falls back to when an
//! effect does not fit the running command's argv, and what grants made outside a command use.

use super::rm::{rm, Ctx, RStr};
use std::ffi::{c_longlong, CStr};

/// Replicate `HINCRBY key owner delta`.
pub fn replicate_key_owner_delta(ctx: Ctx, key: RStr, owner: RStr, delta: RStr) {
    rm!(RedisModule_Replicate(ctx.0, c"HINCRBY".as_ptr(), c"sss".as_ptr(), key.0, owner.0, delta.0) else 0);
}

pub fn replicate_pexpireat(ctx: Ctx, key: RStr, deadline: RStr) {
    rm!(RedisModule_Replicate(ctx.0, c"PEXPIREAT".as_ptr(), c"ss".as_ptr(), key.0, deadline.0) else 0);
}

/// Replicate `SET key value`, with `PXAT deadline` when given.
pub fn replicate_set(ctx: Ctx, key: RStr, value: RStr, deadline: Option<i64>) {
    match deadline {
        Some(d) => {
            let d: c_longlong = d;
            rm!(RedisModule_Replicate(ctx.0, c"SET".as_ptr(), c"sscl".as_ptr(), key.0, value.0, c"PXAT".as_ptr(), d) else 0)
        }
        None => rm!(RedisModule_Replicate(ctx.0, c"SET".as_ptr(), c"ss".as_ptr(), key.0, value.0) else 0),
    };
}

/// Replicate `HSET key field value`.
pub fn replicate_hset(ctx: Ctx, key: RStr, field: RStr, value: RStr) {
    rm!(RedisModule_Replicate(ctx.0, c"HSET".as_ptr(), c"sss".as_ptr(), key.0, field.0, value.0) else 0);
}

/// Replicate `HSET key f1 v1 f2 v2`.
pub fn replicate_hset2(ctx: Ctx, key: RStr, f1: RStr, v1: RStr, f2: RStr, v2: RStr) {
    rm!(RedisModule_Replicate(ctx.0, c"HSET".as_ptr(), c"sssss".as_ptr(), key.0, f1.0, v1.0, f2.0, v2.0) else 0);
}

/// Replicate `HDEL key field`.
pub fn replicate_hdel(ctx: Ctx, key: RStr, field: RStr) {
    rm!(RedisModule_Replicate(ctx.0, c"HDEL".as_ptr(), c"ss".as_ptr(), key.0, field.0) else 0);
}

pub fn replicate_incr(ctx: Ctx, key: RStr) {
    rm!(RedisModule_Replicate(ctx.0, c"INCR".as_ptr(), c"s".as_ptr(), key.0) else 0);
}

pub fn replicate_del(ctx: Ctx, key: RStr) {
    rm!(RedisModule_Replicate(ctx.0, c"DEL".as_ptr(), c"s".as_ptr(), key.0) else 0);
}

pub fn replicate_publish(ctx: Ctx, cmd: &CStr, channel: RStr, msg: RStr) {
    rm!(RedisModule_Replicate(ctx.0, cmd.as_ptr(), c"ss".as_ptr(), channel.0, msg.0) else 0);
}

/// Replicate `cmd args...` (any length: a ZADD or ZREM of many ids).
pub fn replicate_argv(ctx: Ctx, cmd: &CStr, args: &[RStr]) {
    // RStr is a transparent wrapper of the string pointer: the slice is an argv vector.
    let argv = args.as_ptr().cast_mut().cast::<*mut redis_module::raw::RedisModuleString>();
    rm!(RedisModule_Replicate(ctx.0, cmd.as_ptr(), c"v".as_ptr(), argv, args.len()) else 0);
}
