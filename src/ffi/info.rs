//! The module's INFO section: a safe writer handed to the function that fills it.

use crate::ffi::rm::{rm, Ctx};
use redis_module::raw;
use std::ffi::CStr;
use std::sync::{PoisonError, RwLock};

/// The INFO context of one INFO call.
pub struct Info(*mut raw::RedisModuleInfoCtx);

impl Info {
    pub fn section(&mut self, name: &CStr) {
        rm!(RedisModule_InfoAddSection(self.0, name.as_ptr()) else 0);
    }
    pub fn field(&mut self, name: &CStr, value: u64) {
        rm!(RedisModule_InfoAddFieldULongLong(self.0, name.as_ptr(), value) else 0);
    }
}

/// What fills the section (set by [`register`]).
static WRITER: RwLock<fn(&mut Info)> = RwLock::new(|_| {});

unsafe extern "C" fn info(ictx: *mut raw::RedisModuleInfoCtx, _for_crash_report: i32) {
    let write = *WRITER.read().unwrap_or_else(PoisonError::into_inner);
    write(&mut Info(ictx));
}

/// Register the module's INFO section, filled by `write` on every INFO.
pub fn register(ctx: Ctx, write: fn(&mut Info)) {
    *WRITER.write().unwrap_or_else(PoisonError::into_inner) = write;
    rm!(RedisModule_RegisterInfoFunc(ctx.0, Some(info)) else 0);
}
