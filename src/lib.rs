//! redis-lock: a Redis module with native, Redisson-compatible distributed lock commands.
//!
//! Layout (one concern per file):
//! - `args`: argument parsing (pure)
//! - `state`: lock state transitions (pure)
//! - `queue`: the per-key FIFO waiter queue (pure)
//! - `rm`: thin wrappers over the raw module API
//! - `effects`: writes with their replication, notifications and release message;
//!   `replicate`: how those effects are propagated (through the command's argv when they fit)
//! - `commands`: the LOCK.* handlers
//! - `wait`: blocking, handoff, lease timers and keyspace/server events
//! - `fence`: how the next fencing token is chosen (pure); `token`: the token key's reads/writes
//! - `redisson_scripts`: Redisson's lock scripts by SHA1, exact-shape checks (pure);
//!   `script_filter`: the command filter that routes them; `redisson_native`: LOCK.REDISSON
//! - `timing`: timer periods, capped and re-armed (pure)
//! - `cluster`: slot checks before grants made outside a command
//! - `config`, `stats`, `cmdinfo`: configs, INFO section, command registration and docs

pub mod args;
pub mod fence;
pub mod luanum;
pub mod queue;
pub mod redisson_scripts;
pub mod state;
pub mod timing;

mod acl;
mod cluster;
mod cmdinfo;
mod commands;
mod config;
mod effects;
mod redisson_native;
mod replicate;
mod rm;
mod script_filter;
mod stats;
mod token;
mod wait;
mod writes;

use redis_module::{raw, redis_module, Context, RedisString, Status};
use rm::rm;
use std::os::raw::c_int;

#[cfg(not(any(test, feature = "fuzzing")))]
macro_rules! alloc {
    () => {
        redis_module::alloc::RedisAlloc
    };
}
#[cfg(any(test, feature = "fuzzing"))]
macro_rules! alloc {
    () => {
        std::alloc::System
    };
}

fn fail(ctx: &Context, msg: &str) -> Status {
    rm::log(ctx.ctx, c"warning", &format!("lock module: {msg}"));
    Status::Err
}

fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        rm::log(std::ptr::null_mut(), c"warning", &format!("lock module panic: {info}"));
        default(info);
    }));
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if let Some(name) = rm::missing_required() {
        return fail(ctx, &format!("this server lacks {name}; Redis 7.0 or newer is required"));
    }
    install_panic_hook();
    reset_statics();
    rm::init_constants();
    replicate::init();
    cluster::init(ctx.ctx);
    let ctx = ctx.ctx;
    let arg_bytes: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let context = Context::new(ctx);
    rm!(RedisModule_SetModuleOptions(ctx, raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int) else ());
    if let Err(e) = config::register(ctx, &arg_bytes) {
        return fail(&context, &e);
    }
    if let Err(e) = cmdinfo::register(ctx) {
        return fail(&context, &e);
    }
    stats::register_info(ctx);
    let subscribe = |id: u64, cb: raw::RedisModuleEventCallback| {
        let ev = raw::RedisModuleEvent { id, dataver: 1 };
        rm!(RedisModule_SubscribeToServerEvent(ctx, ev, cb) else 1)
    };
    if subscribe(raw::REDISMODULE_EVENT_FLUSHDB, Some(wait::on_flush)) != 0
        || subscribe(raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED, Some(wait::on_role_change)) != 0
        || subscribe(raw::REDISMODULE_EVENT_SWAPDB, Some(wait::on_swapdb)) != 0
    {
        return fail(&context, "cannot subscribe to server events");
    }
    // Events that may change whether the server refuses writes (see writes.rs); a reload
    // starts with no cached answer.
    writes::invalidate();
    for id in writes::EVENTS {
        subscribe(id, Some(writes::on_event));
    }
    Status::Ok
}

/// Everything kept in statics goes back to a fresh start. Called at load and at unload: the
/// library may stay mapped after MODULE UNLOAD (Rust's thread-local destructors make glibc keep
/// it), so a reloaded module would otherwise see the old instance's handles and counters.
fn reset_statics() {
    script_filter::reset();
    wait::reset();
    stats::reset();
    acl::reset();
    writes::invalidate();
}

fn deinit(ctx: &Context) -> Status {
    if wait::can_unload() {
        // Unregister the filter ourselves (Redis would drop it too), then forget every handle.
        if script_filter::install(ctx.ctx, false).is_err() {
            rm::log(ctx.ctx, c"warning", "lock module: could not unregister the command filter");
        }
        reset_statics();
        // Drop our panic hook: its code is about to be unloaded with the library.
        drop(std::panic::take_hook());
        Status::Ok
    } else {
        fail(ctx, "clients are waiting for locks; MODULE UNLOAD refused until they are served")
    }
}

redis_module! {
    name: "lock",
    version: 10000,
    allocator: (alloc!(), alloc!()),
    data_types: [],
    init: init,
    deinit: deinit,
    commands: [],
}
