//! An open key: its type, hash fields, string value, TTL, deletion. Every read and write the
//! glue makes to a key goes through [`Key`].

use super::rm::{api, bytes, millis, rm, Ctx, RStr};
use redis_module::raw;
use std::os::raw::c_int;
use std::ptr::null_mut;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// A key's type, as the kinds need to tell them apart (a lock is a hash; a semaphore a string
/// and a sorted set; anything else is another kind's business or a wrong type).
pub enum KeyKind {
    Empty,
    Hash,
    String,
    SortedSet,
    /// A list, set, stream or module type.
    Other,
}

/// An open key, closed on drop.
pub struct Key {
    ctx: Ctx,
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    /// Open for reading and writing. Opening deletes the key if its lease already passed.
    pub fn write(ctx: Ctx, name: RStr) -> Key {
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        Key { ctx, ptr: rm!(RedisModule_OpenKey(ctx.0, name.0, mode) else null_mut()) }
    }

    /// Open read-only (the handle is null when the key does not exist).
    pub fn read(ctx: Ctx, name: RStr) -> Key {
        let mode = raw::REDISMODULE_READ as c_int;
        Key { ctx, ptr: rm!(RedisModule_OpenKey(ctx.0, name.0, mode) else null_mut()) }
    }

    pub fn kind(&self) -> KeyKind {
        if self.ptr.is_null() {
            return KeyKind::Empty;
        }
        match rm!(RedisModule_KeyType(self.ptr) else 0) as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::SortedSet,
            _ => KeyKind::Other,
        }
    }

    /// Run `f` on the bytes of hash field `field`, if present.
    pub fn hash_get<R>(&self, field: RStr, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if self.ptr.is_null() {
            return None;
        }
        let mut out = RStr::ABSENT;
        let flags = raw::REDISMODULE_HASH_NONE as c_int;
        let end: *mut raw::RedisModuleString = null_mut();
        rm!(RedisModule_HashGet(self.ptr, flags, field.0, &mut out.0 as *mut *mut raw::RedisModuleString, end) else 0);
        if out.is_null() {
            return None;
        }
        let r = f(bytes(&out));
        rm!(RedisModule_FreeString(self.ctx.0, out.0) else ());
        Some(r)
    }

    /// Whether hash field `field` exists (no copy of its value is made).
    pub fn hash_has(&self, field: RStr) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        let mut exists: c_int = 0;
        let flags = raw::REDISMODULE_HASH_EXISTS as c_int;
        let end: *mut raw::RedisModuleString = null_mut();
        rm!(RedisModule_HashGet(self.ptr, flags, field.0, &mut exists as *mut c_int, end) else 0);
        exists != 0
    }

    /// Set hash field `field` to `value`, creating the hash if needed.
    pub fn hash_set(&self, field: RStr, value: RStr) {
        let flags = raw::REDISMODULE_HASH_NONE as c_int;
        let end: *mut raw::RedisModuleString = null_mut();
        rm!(RedisModule_HashSet(self.ptr, flags, field.0, value.0, end) else 0);
    }

    /// Set one or two hash fields in one call, creating the hash if needed.
    pub fn hash_set_pairs(&self, pairs: &[(RStr, RStr)]) {
        let flags = raw::REDISMODULE_HASH_NONE as c_int;
        let end: *mut raw::RedisModuleString = null_mut();
        match pairs {
            [(f, v)] => rm!(RedisModule_HashSet(self.ptr, flags, f.0, v.0, end) else 0),
            [(f1, v1), (f2, v2)] => {
                rm!(RedisModule_HashSet(self.ptr, flags, f1.0, v1.0, f2.0, v2.0, end) else 0)
            }
            _ => pairs
                .iter()
                .map(|(f, v)| rm!(RedisModule_HashSet(self.ptr, flags, f.0, v.0, end) else 0))
                .sum(),
        };
    }

    /// Delete hash field `field` (nothing if absent; the hash goes with its last field).
    pub fn hash_del(&self, field: RStr) {
        if self.ptr.is_null() {
            return;
        }
        let flags = raw::REDISMODULE_HASH_NONE as c_int;
        let end: *mut raw::RedisModuleString = null_mut();
        // REDISMODULE_HASH_DELETE: the C header's `(RedisModuleString *)(long)1`, a marker
        // never dereferenced (the crate's constant is a dangling pointer of another value).
        let delete = std::ptr::without_provenance_mut::<raw::RedisModuleString>(1);
        rm!(RedisModule_HashSet(self.ptr, flags, field.0, delete, end) else 0);
    }

    /// The number of fields of a hash (HLEN), 0 without a key.
    pub fn hash_len(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        rm!(RedisModule_ValueLength(self.ptr) else 0)
    }

    /// Remaining ms, or -1 without a TTL, or -2 when the key does not exist (like PTTL).
    ///
    /// Measured against the same clock the module sets deadlines with (`millis()`): on 7.2+
    /// RM_GetExpire subtracts the command-time snapshot, which inside MULTI/EXEC or a long script
    /// is older than the clock the deadline came from, and would report more than the lease.
    pub fn pttl(&self) -> i64 {
        if self.kind() == KeyKind::Empty {
            return -2;
        }
        self.deadline().map_or(-1, |d| d.saturating_sub(millis()).max(0))
    }

    /// Absolute expiry in unix ms, `None` without a TTL (or without a key).
    pub fn deadline(&self) -> Option<i64> {
        if self.kind() == KeyKind::Empty {
            return None;
        }
        let d = match api!(RedisModule_GetAbsExpire) {
            Some(f) => unsafe { f(self.ptr) },
            None => {
                let rel = rm!(RedisModule_GetExpire(self.ptr) else -1);
                if rel < 0 {
                    -1
                } else {
                    millis().saturating_add(rel)
                }
            }
        };
        (d >= 0).then_some(d)
    }

    /// Expire at `deadline` (unix ms). `now` is the base `deadline` was computed from, used
    /// only on servers older than 7.0.5 that lack RM_SetAbsExpire.
    pub fn set_deadline(&self, deadline: i64, now: i64) {
        match api!(RedisModule_SetAbsExpire) {
            Some(f) => unsafe {
                f(self.ptr, deadline);
            },
            None => {
                rm!(RedisModule_SetExpire(self.ptr, deadline.saturating_sub(now).max(1)) else 0);
            }
        }
    }

    pub fn delete(&self) {
        rm!(RedisModule_DeleteKey(self.ptr) else 0);
    }

    /// The raw handle, for the other key operations of `ffi` (lists: `list.rs`).
    pub(super) fn raw(&self) -> (Ctx, *mut raw::RedisModuleKey) {
        (self.ctx, self.ptr)
    }

    /// Whether the key holds a list.
    pub fn is_list(&self) -> bool {
        !self.ptr.is_null()
            && rm!(RedisModule_KeyType(self.ptr) else 0) as isize == raw::REDISMODULE_KEYTYPE_LIST
    }

    /// Whether the key holds a string.
    pub fn is_string(&self) -> bool {
        self.kind() == KeyKind::String
    }

    /// Run `f` on the bytes of a string value (key opened for writing: reading an integer-encoded
    /// value through RM_StringDMA converts it to a plain string).
    pub fn string_get<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if !self.is_string() {
            return None;
        }
        let mut len = 0usize;
        let mode = raw::REDISMODULE_READ as c_int;
        let p = rm!(RedisModule_StringDMA(self.ptr, &mut len, mode) else null_mut());
        if p.is_null() {
            return None;
        }
        // SAFETY: Redis guarantees `len` readable bytes at `p` while the key is open and unchanged.
        Some(f(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }))
    }

    /// Overwrite the string value in place with `value` (created when the key is empty), its
    /// TTL kept: cheaper than [`Key::string_set`], which replaces the value object. False when
    /// the key holds another type.
    pub fn string_overwrite(&self, value: &[u8]) -> bool {
        if !matches!(self.kind(), KeyKind::Empty | KeyKind::String) {
            return false;
        }
        if rm!(RedisModule_StringTruncate(self.ptr, value.len()) else raw::REDISMODULE_ERR as c_int)
            != raw::REDISMODULE_OK as c_int
        {
            return false;
        }
        let mut len = 0usize;
        let mode = raw::REDISMODULE_WRITE as c_int;
        let p = rm!(RedisModule_StringDMA(self.ptr, &mut len, mode) else null_mut());
        if p.is_null() || len != value.len() {
            return false;
        }
        // SAFETY: Redis guarantees `len` writable bytes at `p` while the key is open.
        unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) }.copy_from_slice(value);
        true
    }

    /// Make the key the string `value` (any TTL is removed, as SET does).
    pub fn string_set(&self, value: RStr) {
        rm!(RedisModule_StringSet(self.ptr, value.0) else 0);
    }

    /// Call `f` with every (field, value) of the hash, borrowed for the call (nothing copied).
    pub fn hash_each(&self, f: &mut dyn FnMut(&[u8], &[u8])) {
        if self.kind() != KeyKind::Hash {
            return;
        }
        unsafe extern "C" fn visit(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            privdata: *mut std::os::raw::c_void,
        ) {
            // SAFETY: privdata is the `&mut dyn FnMut` below, alive for the whole scan; the
            // strings are the server's, valid during the callback.
            let f = unsafe { &mut *privdata.cast::<&mut dyn FnMut(&[u8], &[u8])>() };
            f(bytes(&RStr(field)), bytes(&RStr(value)));
        }
        let cursor = rm!(RedisModule_ScanCursorCreate() else null_mut());
        if cursor.is_null() {
            return;
        }
        let mut f: &mut dyn FnMut(&[u8], &[u8]) = f;
        let pd = (&mut f as *mut &mut dyn FnMut(&[u8], &[u8])).cast::<std::os::raw::c_void>();
        while rm!(RedisModule_ScanKey(self.ptr, cursor, Some(visit), pd) else 0) != 0 {}
        rm!(RedisModule_ScanCursorDestroy(cursor) else ());
    }

    /// Every (field, value) of the hash.
    pub fn hash_entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if self.kind() != KeyKind::Hash {
            return out;
        }
        unsafe extern "C" fn collect(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            privdata: *mut std::os::raw::c_void,
        ) {
            // SAFETY: privdata is the `out` vector below, alive for the whole scan.
            let out = unsafe { &mut *privdata.cast::<Vec<(Vec<u8>, Vec<u8>)>>() };
            out.push((bytes(&RStr(field)).to_vec(), bytes(&RStr(value)).to_vec()));
        }
        let cursor = rm!(RedisModule_ScanCursorCreate() else null_mut());
        if cursor.is_null() {
            return out;
        }
        let pd = (&mut out as *mut Vec<(Vec<u8>, Vec<u8>)>).cast::<std::os::raw::c_void>();
        while rm!(RedisModule_ScanKey(self.ptr, cursor, Some(collect), pd) else 0) != 0 {}
        rm!(RedisModule_ScanCursorDestroy(cursor) else ());
        out
    }
}

impl Key {
    /// `ZADD key score member` (creates the zset); whether the member was added or its score
    /// changed (ZADD fires its event only then).
    pub fn zset_add(&self, score: i64, member: RStr) -> bool {
        self.zset_set(score as f64, member)
    }

    /// `ZADD key score member` with an exact score; whether it added or changed anything.
    pub fn zset_set(&self, score: f64, member: RStr) -> bool {
        let mut flags: c_int = 0;
        rm!(RedisModule_ZsetAdd(self.ptr, score, member.0, &mut flags) else 0);
        flags & (raw::REDISMODULE_ZADD_ADDED | raw::REDISMODULE_ZADD_UPDATED) as c_int != 0
    }

    /// `ZREM key member`; whether it was there (the zset goes with its last member).
    pub fn zset_rem(&self, member: RStr) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        let mut deleted: c_int = 0;
        rm!(RedisModule_ZsetRem(self.ptr, member.0, &mut deleted) else 0);
        deleted != 0
    }

    /// The score of `member`, if present (scores are whole ms: the fraction is dropped).
    pub fn zset_score(&self, member: RStr) -> Option<i64> {
        self.zset_score_exact(member).map(score_ms)
    }

    /// The exact score of `member`, if present.
    pub fn zset_score_exact(&self, member: RStr) -> Option<f64> {
        if self.kind() != KeyKind::SortedSet {
            return None;
        }
        let mut score = 0f64;
        let ok =
            rm!(RedisModule_ZsetScore(self.ptr, member.0, &mut score) else raw::REDISMODULE_ERR as c_int);
        (ok == raw::REDISMODULE_OK as c_int).then_some(score)
    }

    /// Members with a score `<= max`, lowest first, at most `limit` of them: `f(member, score)`
    /// for each (the zset must not change during the walk).
    pub fn zset_upto(&self, max: f64, limit: usize, f: &mut dyn FnMut(&[u8], i64)) {
        self.zset_range(f64::NEG_INFINITY, max, limit, &mut |m, s| f(m, score_ms(s)));
    }

    /// Members with `min <= score <= max`, lowest first, at most `limit` of them, with their
    /// exact scores.
    pub fn zset_range(&self, min: f64, max: f64, limit: usize, f: &mut dyn FnMut(&[u8], f64)) {
        if self.kind() != KeyKind::SortedSet || limit == 0 {
            return;
        }
        let ok = rm!(RedisModule_ZsetFirstInScoreRange(self.ptr, min, max, 0, 0) else raw::REDISMODULE_ERR as c_int);
        if ok != raw::REDISMODULE_OK as c_int {
            return;
        }
        let mut seen = 0usize;
        while seen < limit && rm!(RedisModule_ZsetRangeEndReached(self.ptr) else 1) == 0 {
            let mut score = 0f64;
            let ele = rm!(RedisModule_ZsetRangeCurrentElement(self.ptr, &mut score) else null_mut());
            if ele.is_null() {
                break;
            }
            f(bytes(&RStr(ele)), score);
            rm!(RedisModule_FreeString(self.ctx.0, ele) else ());
            seen += 1;
            if rm!(RedisModule_ZsetRangeNext(self.ptr) else 0) == 0 {
                break;
            }
        }
        rm!(RedisModule_ZsetRangeStop(self.ptr) else ());
    }

    /// The member with the highest score and its score (O(1) from the zset's end), if any.
    pub fn zset_last(&self) -> Option<(Vec<u8>, f64)> {
        if self.kind() != KeyKind::SortedSet {
            return None;
        }
        let (lo, hi) = (f64::NEG_INFINITY, f64::INFINITY);
        let ok =
            rm!(RedisModule_ZsetLastInScoreRange(self.ptr, lo, hi, 0, 0) else raw::REDISMODULE_ERR as c_int);
        if ok != raw::REDISMODULE_OK as c_int {
            return None;
        }
        let mut score = 0f64;
        let ele = rm!(RedisModule_ZsetRangeCurrentElement(self.ptr, &mut score) else null_mut());
        let out = (!ele.is_null()).then(|| (bytes(&RStr(ele)).to_vec(), score));
        if !ele.is_null() {
            rm!(RedisModule_FreeString(self.ctx.0, ele) else ());
        }
        rm!(RedisModule_ZsetRangeStop(self.ptr) else ());
        out
    }

    /// The lowest score, if the zset has members.
    pub fn zset_lowest(&self) -> Option<i64> {
        let mut out = None;
        self.zset_upto(f64::INFINITY, 1, &mut |_, s| out = Some(s));
        out
    }

    /// The number of elements of the key's value (HLEN, ZCARD, a string's length), 0 without
    /// a key.
    pub fn len(&self) -> usize {
        self.hash_len()
    }
}

/// Call `f` with the name of every key of the context's selected database (`RM_Scan`: a key
/// present for the whole scan is seen at least once). `f` must not write.
pub fn scan_names(ctx: super::rm::Ctx, f: &mut dyn FnMut(&[u8])) {
    unsafe extern "C" fn visit(
        _ctx: *mut raw::RedisModuleCtx,
        name: *mut raw::RedisModuleString,
        _key: *mut raw::RedisModuleKey,
        privdata: *mut std::os::raw::c_void,
    ) {
        // SAFETY: privdata is the `&mut dyn FnMut` below, alive for the whole scan; the name
        // is the server's, valid during the callback.
        let f = unsafe { &mut *privdata.cast::<&mut dyn FnMut(&[u8])>() };
        f(bytes(&RStr(name)));
    }
    let cursor = rm!(RedisModule_ScanCursorCreate() else null_mut());
    if cursor.is_null() {
        return;
    }
    let mut f: &mut dyn FnMut(&[u8]) = f;
    let pd = (&mut f as *mut &mut dyn FnMut(&[u8])).cast::<std::os::raw::c_void>();
    while rm!(RedisModule_Scan(ctx.0, cursor, Some(visit), pd) else 0) != 0 {}
    rm!(RedisModule_ScanCursorDestroy(cursor) else ());
}

/// A zset score as whole ms (clamped; NaN is 0).
fn score_ms(score: f64) -> i64 {
    if score.is_nan() {
        0
    } else {
        // `as` saturates at the i64 bounds.
        score.floor() as i64
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            rm!(RedisModule_CloseKey(self.ptr) else ());
        }
    }
}
