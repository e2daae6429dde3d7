//! Server-event subscriptions and module options.

use crate::ffi::rm::{rm, Ctx};
use redis_module::raw;
use std::ffi::{c_int, c_void};

pub use redis_module::raw::{
    REDISMODULE_EVENT_FLUSHDB as FLUSHDB, REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED as ROLE_CHANGED,
    REDISMODULE_EVENT_SWAPDB as SWAPDB,
};

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
