//! The command harness: every LOCK.* command's C entry point runs its safe handler here, with
//! panics caught, errors turned into replies, and the running argv recorded for
//! `replication.rs`.

use crate::ffi::rm::{self, rm, Ctx, RStr};
use crate::logic::error::Error;
use crate::registry::stats;
use redis_module::raw;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a command's C entry point returns.
pub const OK: c_int = raw::REDISMODULE_OK as c_int;

/// A command's argument vector, as the server passed it (the command name first). Its strings
/// are borrowed for as long as the `Argv` is, which lives in the entry point's frame.
pub struct Argv {
    ptr: *mut RStr,
    argc: c_int,
}

impl Argv {
    /// # Safety
    /// `ptr` must point to `argc` valid strings for as long as the `Argv` lives (what the
    /// server passes to a command).
    pub unsafe fn new(ptr: *mut *mut raw::RedisModuleString, argc: c_int) -> Argv {
        // An RStr is a transparent wrapper of the string pointer.
        Argv { ptr: ptr.cast::<RStr>(), argc }
    }

    pub fn strs(&self) -> &[RStr] {
        match usize::try_from(self.argc) {
            // SAFETY: see `new`.
            Ok(n) if n > 0 && !self.ptr.is_null() => unsafe { std::slice::from_raw_parts(self.ptr, n) },
            _ => &[],
        }
    }
}

/// A command's C entry point (made by [`entry!`]).
pub type Entry =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Define `pub unsafe extern "C" fn $name(ctx, argv, argc)`, the C entry point of a command,
/// calling the safe `$body(ctx, &Argv)`. One entry per command, so the body is inlined.
macro_rules! entry {
    ($name:ident, $body:expr) => {
        pub unsafe extern "C" fn $name(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            argv: *mut *mut redis_module::raw::RedisModuleString,
            argc: std::ffi::c_int,
        ) -> std::ffi::c_int {
            // SAFETY: what the server passed to the command.
            let (ctx, argv) = unsafe { $crate::ffi::command::handles(ctx, argv, argc) };
            ($body)(ctx, &argv)
        }
    };
}
pub(crate) use entry;

/// The context and argv of a command's call, for [`entry!`].
///
/// # Safety
/// The arguments must be what the server passed to the command (`argc` valid strings at
/// `argv`, alive for the call), and the handles used only during the call.
#[inline(always)]
pub unsafe fn handles(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> (Ctx, Argv) {
    // SAFETY: see above.
    (Ctx(ctx), unsafe { Argv::new(argv, argc) })
}

/// Most argv a LOCK.* command can accept; more is always an error and takes the slow path.
const MAX_ARGS: usize = 8;

/// Run `handler` with the arguments (after the name) as Redis strings and as bytes; errors
/// turned into replies, panics caught.
pub fn run(
    ctx: Ctx,
    argv: &Argv,
    handler: impl FnOnce(Ctx, &[RStr], &[&[u8]]) -> Result<(), Error>,
) -> c_int {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let all = argv.strs();
        // Effects that fit this command's argv are replicated through it (see replication.rs).
        let _scope = crate::ffi::replication::enter(argv.ptr, all.len());
        let strs = all.get(1..).unwrap_or(&[]);
        let mut stack: [&[u8]; MAX_ARGS] = [&[]; MAX_ARGS];
        let heap: Vec<&[u8]>;
        let bytes: &[&[u8]] = if strs.len() <= MAX_ARGS {
            for (slot, s) in stack.iter_mut().zip(strs) {
                *slot = rm::bytes(s);
            }
            stack.get(..strs.len()).unwrap_or(&[])
        } else {
            heap = strs.iter().map(rm::bytes).collect();
            &heap
        };
        handler(ctx, strs, bytes)
    }));
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(Error::Arity)) => {
            rm!(RedisModule_WrongArity(ctx.0) else 0);
        }
        Ok(Err(e)) => {
            stats::ERRORS.inc();
            rm::reply_error(ctx, &e.reply());
        }
        Err(_) => {
            stats::PANICS.inc();
            rm::reply_error(ctx, &Error::Panic.reply());
        }
    }
    OK
}

/// Whether the server only asks for the command's key positions (`getkeys-api`).
pub fn is_keys_position_request(ctx: Ctx) -> bool {
    rm!(RedisModule_IsKeysPositionRequest(ctx.0) else 0) != 0
}

/// Report argv position `pos` as a key (during a key-positions request).
pub fn key_at_pos(ctx: Ctx, pos: c_int) {
    rm!(RedisModule_KeyAtPos(ctx.0, pos) else ());
}
