// No panics on client data in the module: these are errors in src/ (Cargo.toml's [lints] would
// also apply them to tests/, which may unwrap); clippy.toml allows them in #[cfg(test)] code.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
//! redis-lock: a Redis module with native, Redisson-compatible distributed lock commands.
//!
//! Layout (see docs/internals.md):
//! - `logic/`: pure code (parsing, state transitions, the waiter queue, fencing-token math,
//!   Redisson's script table, timer periods); no `redis_module` import; unit-tested and fuzzed
//! - `ffi/`: the boundary with the server (raw module API, C callbacks); the only folder that
//!   may hold code the compiler cannot check for memory safety
//! - `module/`: the glue (command handlers, effects, waiting and handoff, the Redisson filter and
//!   native scripts, ACL and write checks, cluster checks)
//! - `registry/`: leaves (configs, INFO counters, command registration and docs)
//! - this file: load, unload and server-event subscriptions

pub mod logic;

mod ffi;
mod module;
mod registry;

use ffi::events;
use ffi::rm;
use module::{acl, cluster, scripts::filter as script_filter, wait, writes};
use redis_module::{redis_module, Context, RedisString, Status};
use registry::{config, stats};

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
    rm::log(rm::Ctx::from_context(ctx), c"warning", &format!("lock module: {msg}"));
    Status::Err
}

fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        rm::log_global(c"warning", &format!("lock module panic: {info}"));
        default(info);
    }));
}

/// Every kind with waiters: one row per kind (the waiting core's events serve them all).
const KINDS: &[wait::Ops] = &[
    wait::ops::<module::lock::waiting::Lock>(),
    wait::ops::<module::rwlock::waiting::RwLock>(),
    wait::ops::<module::semaphore::waiting::Semaphore>(),
];

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if let Some(name) = rm::missing_required() {
        return fail(ctx, &format!("this server lacks {name}; Redis 7.0 or newer is required"));
    }
    install_panic_hook();
    wait::init(KINDS);
    reset_statics();
    rm::init_constants();
    ffi::replication::init();
    let context = ctx;
    let ctx = rm::Ctx::from_context(context);
    cluster::init(ctx);
    let arg_bytes: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    events::no_implicit_signal_modified(ctx);
    let hooks = config::FilterHooks { install: script_filter::install, set_extra: script_filter::set_extra };
    if let Err(e) = config::register(ctx, &arg_bytes, hooks) {
        return fail(context, &e);
    }
    let commands = module::commands::COMMANDS
        .iter()
        .chain(module::semaphore::commands::COMMANDS.iter())
        .chain([&module::scripts::native::COMMAND]);
    if let Err(e) = ffi::command_info::register(ctx, &commands.collect::<Vec<_>>()) {
        return fail(context, &e);
    }
    stats::register_info(ctx);
    if !events::subscribe(ctx, events::FLUSHDB, wait::on_flush)
        || !events::subscribe(ctx, events::ROLE_CHANGED, wait::on_role_change)
        || !events::subscribe(ctx, events::SWAPDB, wait::on_swapdb)
    {
        return fail(context, "cannot subscribe to server events");
    }
    // Events that may change whether the server refuses writes (see writes.rs); a reload
    // starts with no cached answer.
    let watched = writes::EVENTS.iter().all(|id| events::subscribe(ctx, *id, writes::on_event));
    if !watched {
        rm::log(
            ctx,
            c"warning",
            "lock module: cannot subscribe to write-state events; every write check asks the server",
        );
    }
    // Loading also ends with a look at the dataset (the semaphores' lease timers): this
    // subscription replaces the one above for that event, and invalidates as it did.
    let watched = watched && events::subscribe(ctx, events::LOADING, wait::on_loading);
    writes::set_watched(watched);
    wait::loaded(ctx);
    Status::Ok
}

/// Everything kept in statics goes back to a fresh start. Called at load and at unload: the
/// library may stay mapped after MODULE UNLOAD (Rust's thread-local destructors make glibc keep
/// it), so a reloaded module would otherwise see the old instance's handles and counters.
fn reset_statics() {
    script_filter::reset();
    wait::reset();
    module::semaphore::leases::reset();
    stats::reset();
    acl::reset();
    // Redis drops a module's event subscriptions when it unloads it.
    writes::set_watched(false);
}

fn deinit(ctx: &Context) -> Status {
    if wait::can_unload() {
        // Unregister the filter ourselves (Redis would drop it too), then forget every handle.
        let ctx = rm::Ctx::from_context(ctx);
        module::semaphore::leases::stop_all(ctx);
        if script_filter::install(ctx, false).is_err() {
            rm::log(ctx, c"warning", "lock module: could not unregister the command filter");
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
