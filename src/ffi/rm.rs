//! Thin wrappers over the raw Redis module API that the rest of the glue uses.
//!
//! Every API pointer is checked once at load (`lib.rs` refuses to load without the ones listed
//! in [`REQUIRED`]); the `rm!` macro still carries a fallback so no call can panic.

use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::ptr::null_mut;

/// The context the server passes to a command or a callback. A handle: only `ffi` makes one
/// (from what the server passes, or [`Ctx::from_context`]) and reads the pointer in it.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct Ctx(pub(in crate::ffi) *mut raw::RedisModuleCtx);

impl Ctx {
    /// The context `redis_module` hands to the module's init and deinit.
    pub fn from_context(ctx: &redis_module::Context) -> Ctx {
        Ctx(ctx.ctx)
    }
}

/// Key-spec flags, for the command table (registry/cmdinfo.rs).
pub use redis_module::raw::{
    REDISMODULE_CMD_KEY_ACCESS as KEY_ACCESS, REDISMODULE_CMD_KEY_DELETE as KEY_DELETE,
    REDISMODULE_CMD_KEY_RO as KEY_RO, REDISMODULE_CMD_KEY_RW as KEY_RW,
    REDISMODULE_CMD_KEY_UPDATE as KEY_UPDATE,
};

/// Context flags (`RM_GetContextFlags`) and keyspace-event classes the glue tests or fires.
pub use redis_module::raw::{
    REDISMODULE_CTX_FLAGS_AOF as CTX_AOF, REDISMODULE_CTX_FLAGS_CLUSTER as CTX_CLUSTER,
    REDISMODULE_CTX_FLAGS_DENY_BLOCKING as CTX_DENY_BLOCKING, REDISMODULE_CTX_FLAGS_EVICT as CTX_EVICT,
    REDISMODULE_CTX_FLAGS_LUA as CTX_LUA, REDISMODULE_CTX_FLAGS_MASTER as CTX_MASTER,
    REDISMODULE_CTX_FLAGS_MULTI as CTX_MULTI, REDISMODULE_CTX_FLAGS_OOM as CTX_OOM,
    REDISMODULE_CTX_FLAGS_READONLY as CTX_READONLY, REDISMODULE_NOTIFY_GENERIC as NOTIFY_GENERIC,
    REDISMODULE_NOTIFY_HASH as NOTIFY_HASH, REDISMODULE_NOTIFY_LIST as NOTIFY_LIST,
    REDISMODULE_NOTIFY_STRING as NOTIFY_STRING, REDISMODULE_NOTIFY_ZSET as NOTIFY_ZSET,
};

/// A Redis string: an argv's, a callback argument's, an [`OwnedStr`]'s or a [`StaticStr`]'s.
/// A handle: only `ffi` makes one and reads the pointer in it. Transparent, so a slice of them
/// is an argv as the server passes and takes it.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct RStr(pub(in crate::ffi) *mut raw::RedisModuleString);

impl RStr {
    /// No string (an argv slot past the end): its bytes are empty.
    pub const ABSENT: RStr = RStr(null_mut());

    pub(in crate::ffi) fn is_null(self) -> bool {
        self.0.is_null()
    }
}

/// A Redis string created once and never freed (command names, constants), shared by every
/// call; `Send + Sync`, so it can be kept in a static.
pub struct StaticStr(RStr);

// SAFETY: the string is never freed nor changed after it is made, and the server calls the
// module from its main thread only, so its reference count (`RM_RetainString`, the server
// dropping a reference) only changes on that thread.
unsafe impl Send for StaticStr {}
// SAFETY: as above.
unsafe impl Sync for StaticStr {}

impl StaticStr {
    /// Create the string `b`, never freed.
    pub fn new(b: &[u8]) -> StaticStr {
        StaticStr(OwnedStr::leak(b))
    }
    pub fn ptr(&self) -> RStr {
        self.0
    }
}

impl RStr {
    /// The string's address: what identifies an object the module made (a lookup key only).
    pub fn addr(&self) -> usize {
        self.0 as usize
    }
}

/// Call a raw API function, or evaluate the fallback when the server lacks it.
macro_rules! rm {
    ($f:ident ( $($a:expr),* $(,)? ) else $d:expr) => {
        {
            #[allow(unused_unsafe)]
            let f = unsafe { redis_module::raw::$f };
            match f {
                #[allow(unused_unsafe)]
                Some(f) => unsafe { f($($a),*) },
                None => $d,
            }
        }
    };
}
pub(crate) use rm;

/// The API function pointer, `None` when the running server lacks it.
macro_rules! api {
    ($f:ident) => {
        // SAFETY: the pointers are written once by RedisModule_Init, before any callback.
        {
            #[allow(unused_unsafe)]
            let f = unsafe { redis_module::raw::$f };
            f
        }
    };
}
pub(crate) use api;

/// APIs the module cannot work without (all exist in Redis 7.0.0).
pub fn missing_required() -> Option<&'static str> {
    macro_rules! check {
        ($($f:ident),*) => {{ $( if api!($f).is_none() { return Some(stringify!($f)); } )* None }};
    }
    check!(
        RedisModule_OpenKey,
        RedisModule_CloseKey,
        RedisModule_KeyType,
        RedisModule_HashGet,
        RedisModule_HashSet,
        RedisModule_GetExpire,
        RedisModule_SetExpire,
        RedisModule_DeleteKey,
        RedisModule_Replicate,
        RedisModule_NotifyKeyspaceEvent,
        RedisModule_PublishMessage,
        RedisModule_Milliseconds,
        RedisModule_CreateString,
        RedisModule_FreeString,
        RedisModule_StringPtrLen,
        RedisModule_GetSelectedDb,
        RedisModule_SelectDb,
        RedisModule_GetContextFlags,
        RedisModule_SignalModifiedKey,
        RedisModule_BlockClient,
        RedisModule_UnblockClient,
        RedisModule_SetDisconnectCallback,
        RedisModule_GetBlockedClientPrivateData,
        RedisModule_GetBlockedClientHandle,
        RedisModule_CreateTimer,
        RedisModule_StopTimer,
        RedisModule_ReplyWithNull,
        RedisModule_ReplyWithLongLong,
        RedisModule_ReplyWithError,
        RedisModule_ReplyWithArray,
        RedisModule_ReplyWithStringBuffer,
        RedisModule_WrongArity,
        RedisModule_ScanKey,
        RedisModule_ScanCursorCreate,
        RedisModule_ScanCursorDestroy,
        RedisModule_CreateCommand,
        RedisModule_SubscribeToKeyspaceEvents,
        RedisModule_SubscribeToServerEvent,
        RedisModule_CreateStringFromLongLong
    )
}

/// Bytes of a Redis string, borrowed from the handle: the slice cannot outlive the place that
/// holds the string (an argv slice, a callback argument, an [`OwnedStr`]), and the string must
/// not be freed or changed while it is borrowed (the server's strings are not, during a call).
pub fn bytes(s: &RStr) -> &[u8] {
    // SAFETY: the slice's lifetime is the borrow of the handle (see above).
    unsafe { bytes_of(*s) }
}

/// Bytes of a Redis string for a lifetime the caller picks.
///
/// # Safety
/// The string must stay alive and unchanged for `'a`.
pub(crate) unsafe fn bytes_of<'a>(s: RStr) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    let mut len = 0usize;
    let p = rm!(RedisModule_StringPtrLen(s.0, &mut len) else std::ptr::null());
    if p.is_null() {
        return &[];
    }
    // SAFETY: Redis guarantees `len` readable bytes at `p` while the string lives, which the
    // caller guarantees for 'a.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
}

/// Current unix time in milliseconds, as Redis measures it.
pub fn millis() -> i64 {
    rm!(RedisModule_Milliseconds() else 0)
}

/// Whether the server keeps its dataset still now: `CLIENT PAUSE WRITE` or `ALL`, `FAILOVER`,
/// a cluster manual failover, a shutdown waiting for replicas (`RM_AvoidReplicaTraffic`). No
/// write may be propagated then (the server asserts it is not: a write made outside a command
/// aborts it when the AOF is on or a replica is attached), and expired keys are not deleted.
pub fn dataset_paused() -> bool {
    rm!(RedisModule_AvoidReplicaTraffic() else 0) != 0
}

/// Whether the memory `maxmemory` counts is above it (what the OOM context flag says), without
/// `RM_GetContextFlags`: both come from the server's `getMaxmemoryState`.
pub fn over_maxmemory() -> bool {
    rm!(RedisModule_GetUsedMemoryRatio() else 0.0) > 1.0
}

/// `RM_GetContextFlags`. Not for a hot path: on Redis 8.2 with `enable-debug-command local` it
/// formats the client's peer address (to say whether DEBUG is allowed) on every call, about
/// 1 800 instructions.
pub fn ctx_flags(ctx: Ctx) -> u32 {
    rm!(RedisModule_GetContextFlags(ctx.0) else 0) as u32
}

pub fn flag(ctx: Ctx, f: u32) -> bool {
    ctx_flags(ctx) & f != 0
}

pub fn selected_db(ctx: Ctx) -> i32 {
    rm!(RedisModule_GetSelectedDb(ctx.0) else 0)
}

pub fn select_db(ctx: Ctx, db: i32) {
    rm!(RedisModule_SelectDb(ctx.0, db) else 0);
}

/// Select database `db`; false when the server has no such database.
pub fn try_select_db(ctx: Ctx, db: i32) -> bool {
    rm!(RedisModule_SelectDb(ctx.0, db) else raw::REDISMODULE_ERR as c_int) == raw::REDISMODULE_OK as c_int
}

/// A Redis string this module owns; freed on drop.
pub struct OwnedStr(RStr);

impl OwnedStr {
    pub fn new(b: &[u8]) -> OwnedStr {
        OwnedStr(RStr(
            rm!(RedisModule_CreateString(null_mut(), b.as_ptr().cast::<c_char>(), b.len()) else null_mut()),
        ))
    }
    pub fn from_i64(n: i64) -> OwnedStr {
        OwnedStr(RStr(rm!(RedisModule_CreateStringFromLongLong(null_mut(), n) else null_mut())))
    }
    /// The string's bytes, borrowed from it.
    pub fn bytes(&self) -> &[u8] {
        bytes(&self.0)
    }
    pub fn ptr(&self) -> RStr {
        self.0
    }
}

impl Drop for OwnedStr {
    fn drop(&mut self) {
        if !self.0.is_null() {
            rm!(RedisModule_FreeString(null_mut(), self.0 .0) else ());
        }
    }
}

/// Strings used on every write, created once at load and never freed.
pub struct Constants {
    pub one: StaticStr,
    pub minus_one: StaticStr,
    pub zero: StaticStr,
    pub mode: StaticStr,
    pub read: StaticStr,
    pub write: StaticStr,
}

static CONSTANTS: std::sync::OnceLock<Constants> = std::sync::OnceLock::new();

pub fn init_constants() {
    CONSTANTS.get_or_init(|| Constants {
        one: StaticStr::new(b"1"),
        minus_one: StaticStr::new(b"-1"),
        zero: StaticStr::new(b"0"),
        mode: StaticStr::new(b"mode"),
        read: StaticStr::new(b"read"),
        write: StaticStr::new(b"write"),
    });
}

/// The shared string `s` ("1", "-1" or "0"); a fresh one if `init_constants` did not run.
pub fn constant(pick: fn(&Constants) -> &StaticStr, fallback: &[u8]) -> Shared {
    match CONSTANTS.get() {
        Some(c) => Shared::Static(pick(c).ptr()),
        None => Shared::Owned(OwnedStr::new(fallback)),
    }
}

pub enum Shared {
    Static(RStr),
    Owned(OwnedStr),
}

impl Shared {
    pub fn ptr(&self) -> RStr {
        match self {
            Shared::Static(p) => *p,
            Shared::Owned(o) => o.ptr(),
        }
    }
}

pub fn one() -> Shared {
    constant(|c| &c.one, b"1")
}
pub fn minus_one() -> Shared {
    constant(|c| &c.minus_one, b"-1")
}
pub fn zero() -> Shared {
    constant(|c| &c.zero, b"0")
}
/// A read-write lock's `mode` field and its values.
pub fn mode_field() -> Shared {
    constant(|c| &c.mode, b"mode")
}
pub fn read_word() -> Shared {
    constant(|c| &c.read, b"read")
}
pub fn write_word() -> Shared {
    constant(|c| &c.write, b"write")
}

pub fn notify(ctx: Ctx, class: c_int, event: &CStr, key: RStr) {
    rm!(RedisModule_NotifyKeyspaceEvent(ctx.0, class, event.as_ptr(), key.0) else 0);
}

/// Publish `msg` on `channel`; `sharded` uses `RM_PublishMessageShard` where the server has it.
pub fn publish(ctx: Ctx, channel: RStr, msg: RStr, sharded: bool) {
    // The receiver counts these return are not needed.
    match (sharded, api!(RedisModule_PublishMessageShard)) {
        // SAFETY: the API pointer is set by RedisModule_Init; the strings are live.
        (true, Some(f)) => unsafe { f(ctx.0, channel.0, msg.0) },
        _ => rm!(RedisModule_PublishMessage(ctx.0, channel.0, msg.0) else 0),
    };
}

/// Reply with an array header of `n` elements.
pub fn reply_array(ctx: Ctx, n: usize) {
    rm!(RedisModule_ReplyWithArray(ctx.0, n as std::os::raw::c_long) else 0);
}

pub fn signal_modified(ctx: Ctx, key: RStr) {
    rm!(RedisModule_SignalModifiedKey(ctx.0, key.0) else 0);
}

pub fn reply_null(ctx: Ctx) -> c_int {
    rm!(RedisModule_ReplyWithNull(ctx.0) else 0)
}

pub fn reply_int(ctx: Ctx, n: i64) -> c_int {
    rm!(RedisModule_ReplyWithLongLong(ctx.0, n) else 0)
}

/// Reply with the two-integer array `[a, b]` (the FENCE reply shape).
pub fn reply_pair(ctx: Ctx, a: i64, b: i64) -> c_int {
    rm!(RedisModule_ReplyWithArray(ctx.0, 2) else 0);
    reply_int(ctx, a);
    reply_int(ctx, b)
}

/// Reply with an error; `msg` must start with the error code (`ERR ...`).
pub fn reply_error(ctx: Ctx, msg: &str) -> c_int {
    let clean: Vec<u8> = msg
        .bytes()
        .map(|b| if b == 0 || b == b'\r' || b == b'\n' { b' ' } else { b })
        .chain(std::iter::once(0))
        .collect();
    rm!(RedisModule_ReplyWithError(ctx.0, clean.as_ptr().cast::<c_char>()) else 0)
}

pub fn reply_bytes(ctx: Ctx, b: &[u8]) -> c_int {
    rm!(RedisModule_ReplyWithStringBuffer(ctx.0, b.as_ptr().cast::<c_char>(), b.len()) else 0)
}

/// Start a map of `n` pairs (a flat array of 2n elements for RESP2 clients).
pub fn reply_map(ctx: Ctx, n: usize) {
    let n = n as std::os::raw::c_long;
    match api!(RedisModule_ReplyWithMap) {
        Some(f) => unsafe {
            f(ctx.0, n);
        },
        None => {
            rm!(RedisModule_ReplyWithArray(ctx.0, n * 2) else 0);
        }
    }
}

/// Write a line to the Redis log at `level` ("warning", "notice", ...).
pub fn log(ctx: Ctx, level: &CStr, msg: &str) {
    log_raw(ctx.0, level, msg);
}

/// [`log`] without a context (the panic hook has none).
pub fn log_global(level: &CStr, msg: &str) {
    log_raw(null_mut(), level, msg);
}

fn log_raw(ctx: *mut raw::RedisModuleCtx, level: &CStr, msg: &str) {
    let clean: Vec<u8> =
        msg.bytes().map(|b| if b == 0 { b' ' } else { b }).chain(std::iter::once(0)).collect();
    rm!(RedisModule_Log(ctx, level.as_ptr(), c"%s".as_ptr(), clean.as_ptr()) else ());
}

impl OwnedStr {
    /// Create a string and give up ownership (for APIs that take it over, and [`StaticStr`]).
    pub(in crate::ffi) fn leak(b: &[u8]) -> RStr {
        let s = OwnedStr::new(b);
        let p = s.0;
        std::mem::forget(s);
        p
    }
}

impl OwnedStr {
    /// Take ownership of a string the server created for us (freed on drop).
    pub(in crate::ffi) fn adopt(p: RStr) -> Option<OwnedStr> {
        // Not `then_some`: it would build (and drop) an `OwnedStr` of the null pointer too.
        if p.is_null() {
            None
        } else {
            Some(OwnedStr(p))
        }
    }
}
