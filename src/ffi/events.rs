//! Server-event subscriptions and module options.

use crate::ffi::rm::{rm, Ctx, RStr};
use redis_module::raw;
use std::ffi::{c_int, c_void};

pub use redis_module::raw::{
    REDISMODULE_EVENT_FLUSHDB as FLUSHDB, REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED as ROLE_CHANGED,
    REDISMODULE_EVENT_SWAPDB as SWAPDB,
};

/// Subevents the waiters react to (module/wait).
pub use redis_module::raw::{
    REDISMODULE_EVENT_LOADING as LOADING, REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER as NOW_MASTER,
    REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA as NOW_REPLICA,
    REDISMODULE_SUBEVENT_FLUSHDB_END as FLUSHDB_END, REDISMODULE_SUBEVENT_LOADING_ENDED as LOADING_ENDED,
};

/// Events that may change whether the server refuses writes (module/writes.rs).
pub const WRITE_STATE: [u64; 6] = [
    raw::REDISMODULE_EVENT_CRON_LOOP,
    raw::REDISMODULE_EVENT_CONFIG,
    raw::REDISMODULE_EVENT_REPLICA_CHANGE,
    raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE,
    raw::REDISMODULE_EVENT_PERSISTENCE,
    raw::REDISMODULE_EVENT_LOADING,
];

/// Define `pub unsafe extern "C" fn $name`, a server-event [`Callback`] that calls the safe
/// `$body()` (the event's details unused), or with `with_sub`, `$body(ctx, subevent)`.
macro_rules! callback {
    ($name:ident, $body:path, with_sub) => {
        pub unsafe extern "C" fn $name(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            _eid: redis_module::raw::RedisModuleEvent,
            sub: u64,
            _data: *mut std::ffi::c_void,
        ) {
            // SAFETY: the context the server passed to the callback.
            let ctx = unsafe { $crate::ffi::events::handle(ctx) };
            $body(ctx, sub);
        }
    };
    ($name:ident, $body:path) => {
        pub unsafe extern "C" fn $name(
            _ctx: *mut redis_module::raw::RedisModuleCtx,
            _eid: redis_module::raw::RedisModuleEvent,
            _sub: u64,
            _data: *mut std::ffi::c_void,
        ) {
            $body();
        }
    };
}
pub(crate) use callback;

/// The context of a [`callback!`]'s call.
///
/// # Safety
/// `ctx` must be the context the server passed to the callback, used only during it.
#[inline(always)]
pub unsafe fn handle(ctx: *mut raw::RedisModuleCtx) -> Ctx {
    Ctx(ctx)
}

/// A server-event callback, as the server calls it.
pub type Callback = unsafe extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut c_void);

/// Subscribe `cb` to server event `id`; false when the server refused.
pub fn subscribe(ctx: Ctx, id: u64, cb: Callback) -> bool {
    let ev = raw::RedisModuleEvent { id, dataver: 1 };
    rm!(RedisModule_SubscribeToServerEvent(ctx.0, ev, Some(cb)) else 1) == 0
}

/// Writes made through the low-level key API do not signal the key as modified by themselves
/// (the module signals what it changes, once).
pub fn no_implicit_signal_modified(ctx: Ctx) {
    rm!(RedisModule_SetModuleOptions(ctx.0, raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int) else ());
}

/// Define `pub unsafe extern "C" fn $name`, a keyspace-event [`KeyCallback`] that calls the
/// safe `$body(ctx, key)` (the event's class and name unused).
macro_rules! key_callback {
    ($name:ident, $body:path) => {
        pub unsafe extern "C" fn $name(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            _class: std::ffi::c_int,
            _event: *const std::ffi::c_char,
            key: *mut redis_module::raw::RedisModuleString,
        ) -> std::ffi::c_int {
            // SAFETY: the context and key the server passed to the callback.
            let (ctx, key) = unsafe { $crate::ffi::events::key_handles(ctx, key) };
            $body(ctx, key);
            0
        }
    };
}
pub(crate) use key_callback;

/// The context and key of a [`key_callback!`]'s call.
///
/// # Safety
/// `ctx` and `key` must be what the server passed to the callback, used only during it.
#[inline(always)]
pub unsafe fn key_handles(ctx: *mut raw::RedisModuleCtx, key: *mut raw::RedisModuleString) -> (Ctx, RStr) {
    (Ctx(ctx), RStr(key))
}

/// A keyspace-event callback, as the server calls it.
pub type KeyCallback = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    c_int,
    *const std::ffi::c_char,
    *mut raw::RedisModuleString,
) -> c_int;

/// Subscribe `cb` to every keyspace event class the server has; false when it refused.
pub fn subscribe_keyspace(ctx: Ctx, cb: KeyCallback) -> bool {
    let all = rm!(RedisModule_GetKeyspaceNotificationFlagsAll() else raw::REDISMODULE_NOTIFY_ALL);
    let events = all & raw::REDISMODULE_NOTIFY_ALL;
    rm!(RedisModule_SubscribeToKeyspaceEvents(ctx.0, events, Some(cb)) else 1) == 0
}
