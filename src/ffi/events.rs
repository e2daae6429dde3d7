//! Server-event subscriptions and module options.

use crate::ffi::rm::{rm, Ctx};
use redis_module::raw;
use std::ffi::{c_int, c_void};

pub use redis_module::raw::{
    REDISMODULE_EVENT_FLUSHDB as FLUSHDB, REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED as ROLE_CHANGED,
    REDISMODULE_EVENT_SWAPDB as SWAPDB,
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
/// `$body()` (the event's details unused).
macro_rules! callback {
    ($name:ident, $body:path) => {
        pub unsafe extern "C" fn $name(
            _ctx: $crate::ffi::rm::Ctx,
            _eid: redis_module::raw::RedisModuleEvent,
            _sub: u64,
            _data: *mut std::ffi::c_void,
        ) {
            $body();
        }
    };
}
pub(crate) use callback;

/// A server-event callback, as the server calls it.
pub type Callback = unsafe extern "C" fn(Ctx, raw::RedisModuleEvent, u64, *mut c_void);

/// Subscribe `cb` to server event `id`; false when the server refused.
pub fn subscribe(ctx: Ctx, id: u64, cb: Callback) -> bool {
    let ev = raw::RedisModuleEvent { id, dataver: 1 };
    rm!(RedisModule_SubscribeToServerEvent(ctx, ev, Some(cb)) else 1) == 0
}

/// Writes made through the low-level key API do not signal the key as modified by themselves
/// (the module signals what it changes, once).
pub fn no_implicit_signal_modified(ctx: Ctx) {
    rm!(RedisModule_SetModuleOptions(ctx, raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int) else ());
}
