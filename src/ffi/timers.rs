//! Module timers (`RM_CreateTimer` / `RM_StopTimer`) that run a Rust closure.
//!
//! Every timer of this module is made here, so each one's data is a boxed closure: the shim
//! runs it once when the timer fires, [`stop`] drops it when the timer is stopped first.

use crate::ffi::rm::{rm, Ctx};
use redis_module::raw;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

/// A timer's id (`RedisModuleTimerID`), made only here.
#[derive(Clone, Copy)]
pub struct TimerId(raw::RedisModuleTimerID);

type Job = Box<dyn FnOnce(Ctx)>;

/// Run `f` in `period_ms` ms (a period the caller capped: see `logic::timing`).
#[inline]
pub fn after(ctx: Ctx, period_ms: i64, f: impl FnOnce(Ctx) + 'static) -> TimerId {
    let job: Box<Job> = Box::new(Box::new(f));
    let data = Box::into_raw(job).cast::<c_void>();
    let id = rm!(RedisModule_CreateTimer(ctx.0, period_ms, Some(on_timer), data) else 0);
    if id == 0 {
        // SAFETY: no timer took the box.
        drop(unsafe { Box::from_raw(data.cast::<Job>()) });
    }
    TimerId(id)
}

/// Stop timer `id` before it fires (its closure is dropped); false when it had already fired.
#[inline]
pub fn stop(ctx: Ctx, id: TimerId) -> bool {
    let mut data: *mut c_void = null_mut();
    let ok = rm!(RedisModule_StopTimer(ctx.0, id.0, &mut data) else raw::REDISMODULE_ERR as c_int)
        == raw::REDISMODULE_OK as c_int;
    if ok && !data.is_null() {
        // SAFETY: every timer's data is a Box<Job> made by `after`; a stopped timer never fires.
        drop(unsafe { Box::from_raw(data.cast::<Job>()) });
    }
    ok
}

unsafe extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: the data is the Box<Job> made by `after`; a fired timer is never stopped after.
    let job = unsafe { Box::from_raw(data.cast::<Job>()) };
    job(Ctx(ctx));
}
