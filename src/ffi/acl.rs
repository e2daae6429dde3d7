//! The ACL API: the calling user, a user's command, key and channel permissions.

use crate::ffi::rm::{api, rm, Ctx, OwnedStr, RStr};
use redis_module::raw;
use std::ffi::c_int;

/// Whether the server has the ACL API (all Redis 7.0).
pub fn available() -> bool {
    api!(RedisModule_GetCurrentUserName).is_some()
        && api!(RedisModule_GetModuleUserFromUserName).is_some()
        && api!(RedisModule_ACLCheckCommandPermissions).is_some()
        && api!(RedisModule_ACLCheckKeyPermissions).is_some()
        && api!(RedisModule_ACLCheckChannelPermissions).is_some()
        && api!(RedisModule_FreeModuleUser).is_some()
        && api!(RedisModule_GetClientId).is_some()
}

/// Whether the server has an API of 7.2 (`RM_AddPostNotificationJob`).
pub fn has_7_2_api() -> bool {
    api!(RedisModule_AddPostNotificationJob).is_some()
}

/// The calling client's user name; `None` for a client without a user (AOF, master link).
pub fn current_user_name(ctx: Ctx) -> Option<OwnedStr> {
    OwnedStr::adopt(RStr(rm!(RedisModule_GetCurrentUserName(ctx.0) else std::ptr::null_mut())))
}

/// The calling client's id (0: none).
pub fn client_id(ctx: Ctx) -> u64 {
    rm!(RedisModule_GetClientId(ctx.0) else 0)
}

/// A user whose permissions are checked.
pub struct User {
    ptr: *mut raw::RedisModuleUser,
    name: OwnedStr,
}

impl Drop for User {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            rm!(RedisModule_FreeModuleUser(self.ptr) else ());
        }
    }
}

impl User {
    pub fn from_name(name: OwnedStr) -> User {
        let ptr = rm!(RedisModule_GetModuleUserFromUserName(name.ptr().0) else std::ptr::null_mut());
        User { ptr, name }
    }

    /// May the user run `argv` (name first), with its keys and channels? A deleted user may not.
    pub fn may_run(&self, argv: &[RStr]) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        let Ok(argc) = c_int::try_from(argv.len()) else { return false };
        let ok = rm!(RedisModule_ACLCheckCommandPermissions(self.ptr, argv.as_ptr().cast_mut().cast::<*mut raw::RedisModuleString>(), argc) else raw::REDISMODULE_ERR as c_int);
        ok == raw::REDISMODULE_OK as c_int
    }

    /// May the user write `key` (as SET / INCR / HINCRBY do)?
    pub fn may_write(&self, key: RStr) -> bool {
        let flags = (raw::REDISMODULE_CMD_KEY_ACCESS
            | raw::REDISMODULE_CMD_KEY_UPDATE
            | raw::REDISMODULE_CMD_KEY_INSERT) as c_int;
        self.key_permission(key, flags)
    }

    /// May the user read `key` (as GET does)?
    pub fn may_read(&self, key: RStr) -> bool {
        self.key_permission(key, raw::REDISMODULE_CMD_KEY_ACCESS as c_int)
    }

    /// May the user publish on `channel` (its channel rules, as PUBLISH / SPUBLISH check)?
    pub fn may_publish(&self, channel: RStr) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        /// `REDISMODULE_CMD_CHANNEL_PUBLISH` (a macro bindgen does not carry over).
        const PUBLISH: c_int = 1 << 1;
        let ok = rm!(RedisModule_ACLCheckChannelPermissions(self.ptr, channel.0, PUBLISH) else raw::REDISMODULE_ERR as c_int);
        ok == raw::REDISMODULE_OK as c_int
    }

    fn key_permission(&self, key: RStr, flags: c_int) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        let ok = rm!(RedisModule_ACLCheckKeyPermissions(self.ptr, key.0, flags) else raw::REDISMODULE_ERR as c_int);
        ok == raw::REDISMODULE_OK as c_int
    }

    pub fn name(&self) -> String {
        String::from_utf8_lossy(self.name.bytes()).into_owned()
    }
}
