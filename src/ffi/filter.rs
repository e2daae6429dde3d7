//! The command filter API: registering a filter and reading / replacing the filtered
//! command's arguments. The server-internals trick built on it (our own command-name objects)
//! is described in module/scripts/filter.rs.

use crate::ffi::rm::{self, rm, Ctx, RStr};
use redis_module::raw;
use std::ffi::c_int;

/// The command being filtered. Argument bytes are borrowed from it.
pub struct FilterArgs(*mut raw::RedisModuleCommandFilterCtx);

impl FilterArgs {
    /// # Safety
    /// `ctx` must be the filter context the server passed to the callback, used only during it.
    pub unsafe fn new(ctx: *mut raw::RedisModuleCommandFilterCtx) -> FilterArgs {
        FilterArgs(ctx)
    }

    pub fn len(&self) -> c_int {
        rm!(RedisModule_CommandFilterArgsCount(self.0) else 0)
    }

    /// The bytes of argument `i` (empty when there is none).
    pub fn arg(&self, i: c_int) -> &[u8] {
        let s = rm!(RedisModule_CommandFilterArgGet(self.0, i) else std::ptr::null_mut());
        // SAFETY: the argument lives while the filter runs, which `self` does not outlive.
        unsafe { rm::bytes_of(RStr(s)) }
    }

    /// Put `name` in place of the command name. The filter keeps `name` alive: the server
    /// takes the reference added here and frees the name it replaces.
    pub fn replace_name(&self, name: RStr) {
        rm!(RedisModule_RetainString(std::ptr::null_mut(), name.0) else ());
        rm!(RedisModule_CommandFilterArgReplace(self.0, 0, name.0) else 0);
    }
}

/// A command filter callback, as the server calls it.
pub type Callback = unsafe extern "C" fn(*mut raw::RedisModuleCommandFilterCtx);

/// Define `unsafe extern "C" fn $name`, a filter [`Callback`] that calls the safe
/// `$body(&FilterArgs)`.
macro_rules! callback {
    ($name:ident, $body:path) => {
        unsafe extern "C" fn $name(fctx: *mut redis_module::raw::RedisModuleCommandFilterCtx) {
            // SAFETY: the server's filter context, used only during this call.
            let args = unsafe { $crate::ffi::filter::FilterArgs::new(fctx) };
            $body(&args);
        }
    };
}
pub(crate) use callback;

/// A registered filter's handle (`RedisModuleCommandFilter`), made only here.
#[derive(Clone, Copy)]
pub struct Filter(*mut raw::RedisModuleCommandFilter);

// SAFETY: the server calls the module from its main thread only, so a handle kept in the
// glue's static is only ever used on that thread.
unsafe impl Send for Filter {}

/// Register `cb` for every command but the module's own calls (`NOSELF`); the handle, `None`
/// when the server refused.
pub fn register(ctx: Ctx, cb: Callback) -> Option<Filter> {
    let flags = raw::REDISMODULE_CMDFILTER_NOSELF as c_int;
    let f = rm!(RedisModule_RegisterCommandFilter(ctx.0, Some(cb), flags) else std::ptr::null_mut());
    (!f.is_null()).then_some(Filter(f))
}

/// Unregister the filter `handle` (from [`register`]); false when the server refused.
pub fn unregister(ctx: Ctx, handle: Filter) -> bool {
    rm!(RedisModule_UnregisterCommandFilter(ctx.0, handle.0) else raw::REDISMODULE_ERR as c_int)
        == raw::REDISMODULE_OK as c_int
}
