//! Module configs `lock.channel-prefix` and `lock.publish-mode`.
//!
//! Registered with the raw 7.0 config API so values are binary-safe: settable in redis.conf
//! after `loadmodule`, as module arguments (`loadmodule ... publish-mode global`), and with
//! CONFIG SET/GET.

use crate::rm::{self, rm, Ctx, RStr};
use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};

pub const DEFAULT_PREFIX: &[u8] = b"redisson_lock__channel";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishMode {
    Auto = 0,
    Global = 1,
    Sharded = 2,
    Off = 3,
}

const MODE_NAMES: [(&CStr, PublishMode); 4] = [
    (c"auto", PublishMode::Auto),
    (c"global", PublishMode::Global),
    (c"sharded", PublishMode::Sharded),
    (c"off", PublishMode::Off),
];

static PREFIX: Mutex<Vec<u8>> = Mutex::new(Vec::new());
static MODE: AtomicU8 = AtomicU8::new(PublishMode::Auto as u8);

pub fn prefix() -> Vec<u8> {
    let p = PREFIX.lock().unwrap_or_else(PoisonError::into_inner);
    if p.is_empty() {
        DEFAULT_PREFIX.to_vec()
    } else {
        p.clone()
    }
}

/// Build the release channel of `key` under the current prefix.
pub fn channel(key: &[u8]) -> Vec<u8> {
    let p = PREFIX.lock().unwrap_or_else(PoisonError::into_inner);
    let prefix: &[u8] = if p.is_empty() { DEFAULT_PREFIX } else { &p };
    crate::args::channel_name(prefix, key)
}

pub fn mode() -> PublishMode {
    match MODE.load(Ordering::Relaxed) {
        1 => PublishMode::Global,
        2 => PublishMode::Sharded,
        3 => PublishMode::Off,
        _ => PublishMode::Auto,
    }
}

unsafe extern "C" fn get_prefix(_name: *const c_char, _pd: *mut c_void) -> RStr {
    // Redis copies the value; keep one string alive per call site (freed on the next get).
    static LAST: Mutex<usize> = Mutex::new(0);
    let s = rm::OwnedStr::new(&prefix());
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    let old = std::mem::replace(&mut *last, s.ptr() as usize);
    std::mem::forget(s);
    if old != 0 {
        rm!(RedisModule_FreeString(std::ptr::null_mut(), old as RStr) else ());
    }
    *last as RStr
}

unsafe extern "C" fn set_prefix(_name: *const c_char, val: RStr, _pd: *mut c_void, err: *mut RStr) -> c_int {
    let b = rm::bytes(val);
    if b.is_empty() {
        if !err.is_null() {
            unsafe { *err = rm::OwnedStr::leak(b"channel-prefix must not be empty") };
        }
        return raw::REDISMODULE_ERR as c_int;
    }
    *PREFIX.lock().unwrap_or_else(PoisonError::into_inner) = b.to_vec();
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn get_mode(_name: *const c_char, _pd: *mut c_void) -> c_int {
    mode() as c_int
}

unsafe extern "C" fn set_mode(_name: *const c_char, val: c_int, _pd: *mut c_void, _err: *mut RStr) -> c_int {
    MODE.store(val.clamp(0, 3) as u8, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

/// Value of `name` (or `lock.name`) among the module arguments.
fn module_arg<'a>(args: &[&'a [u8]], name: &str) -> Option<&'a [u8]> {
    let full = format!("lock.{name}");
    args.windows(2)
        .find(|w| {
            w.first().is_some_and(|a| {
                a.eq_ignore_ascii_case(name.as_bytes()) || a.eq_ignore_ascii_case(full.as_bytes())
            })
        })
        .and_then(|w| w.get(1).copied())
}

/// Register both configs, taking defaults from the module arguments. `Err` names the problem.
pub fn register(ctx: Ctx, args: &[&[u8]]) -> Result<(), String> {
    let prefix_default = module_arg(args, "channel-prefix").unwrap_or(DEFAULT_PREFIX);
    if prefix_default.is_empty() || prefix_default.contains(&0) {
        return Err("channel-prefix must be a non-empty string without NUL bytes".into());
    }
    let mode_default = match module_arg(args, "publish-mode") {
        None => PublishMode::Auto,
        Some(v) => MODE_NAMES
            .iter()
            .find(|(n, _)| n.to_bytes().eq_ignore_ascii_case(v))
            .map(|(_, m)| *m)
            .ok_or_else(|| "publish-mode must be one of auto, global, sharded, off".to_string())?,
    };
    *PREFIX.lock().unwrap_or_else(PoisonError::into_inner) = prefix_default.to_vec();
    MODE.store(mode_default as u8, Ordering::Relaxed);

    let mut default_c = prefix_default.to_vec();
    default_c.push(0);
    let flags = raw::REDISMODULE_CONFIG_DEFAULT;
    let r1 = rm!(RedisModule_RegisterStringConfig(
        ctx,
        c"channel-prefix".as_ptr(),
        default_c.as_ptr().cast::<c_char>(),
        flags,
        Some(get_prefix),
        Some(set_prefix),
        None,
        std::ptr::null_mut(),
    ) else raw::REDISMODULE_ERR as c_int);
    let mut names: Vec<*const c_char> = MODE_NAMES.iter().map(|(n, _)| n.as_ptr()).collect();
    let vals: Vec<c_int> = MODE_NAMES.iter().map(|(_, m)| *m as c_int).collect();
    let r2 = rm!(RedisModule_RegisterEnumConfig(
        ctx,
        c"publish-mode".as_ptr(),
        mode_default as c_int,
        flags,
        names.as_mut_ptr(),
        vals.as_ptr(),
        names.len() as c_int,
        Some(get_mode),
        Some(set_mode),
        None,
        std::ptr::null_mut(),
    ) else raw::REDISMODULE_ERR as c_int);
    if r1 != raw::REDISMODULE_OK as c_int || r2 != raw::REDISMODULE_OK as c_int {
        return Err("could not register the module configs".into());
    }
    if rm!(RedisModule_LoadConfigs(ctx) else raw::REDISMODULE_ERR as c_int) != raw::REDISMODULE_OK as c_int {
        return Err("could not load the module configs".into());
    }
    Ok(())
}
