//! List operations on an open [`Key`] (a fair lock's wait queue): element reads, head pop,
//! tail push, removal by value. `RM_ListGet` and
//! `RM_ListDelete` are Redis 7.0+ (every target server has them).

use super::key::Key;
use super::rm::{bytes, rm, RStr};
use redis_module::raw;
use std::os::raw::{c_int, c_long};
use std::ptr::null_mut;

impl Key {
    /// LLEN (0 when the key is absent or not a list).
    pub fn list_len(&self) -> usize {
        let (_, ptr) = self.raw();
        if !self.is_list() {
            return 0;
        }
        rm!(RedisModule_ValueLength(ptr) else 0)
    }

    /// LINDEX `index` (negative from the tail), copied.
    pub fn list_get(&self, index: i64) -> Option<Vec<u8>> {
        let (ctx, ptr) = self.raw();
        if !self.is_list() {
            return None;
        }
        let index = c_long::try_from(index).ok()?;
        let ele = rm!(RedisModule_ListGet(ptr, index) else null_mut());
        if ele.is_null() {
            return None;
        }
        let out = bytes(&RStr(ele)).to_vec();
        rm!(RedisModule_FreeString(ctx.0, ele) else ());
        Some(out)
    }

    /// LPOP (the list goes with its last element).
    pub fn list_pop_head(&self) {
        let (ctx, ptr) = self.raw();
        if !self.is_list() {
            return;
        }
        let ele = rm!(RedisModule_ListPop(ptr, raw::REDISMODULE_LIST_HEAD as c_int) else null_mut());
        if !ele.is_null() {
            rm!(RedisModule_FreeString(ctx.0, ele) else ());
        }
    }

    /// RPUSH `value` (creates the list).
    pub fn list_push_tail(&self, value: RStr) {
        let (_, ptr) = self.raw();
        rm!(RedisModule_ListPush(ptr, raw::REDISMODULE_LIST_TAIL as c_int, value.0) else 0);
    }

    /// LREM 0 `value`: every element equal to it; how many went.
    pub fn list_remove_all(&self, value: &[u8]) -> usize {
        let (_, ptr) = self.raw();
        let mut removed = 0;
        let mut i = self.list_len();
        while i > 0 {
            i -= 1;
            let Ok(at) = c_long::try_from(i) else { break };
            if self.list_get(i as i64).as_deref() == Some(value) {
                rm!(RedisModule_ListDelete(ptr, at) else 0);
                removed += 1;
                if !self.is_list() {
                    break;
                }
            }
        }
        removed
    }
}
