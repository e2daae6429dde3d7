//! Module configs (the 7.0 config API): typed registration. A config is a `'static` value
//! implementing one of the traits below; it is the callbacks' private data, and the generic C
//! callbacks here call its safe methods. A `set` that fails returns the message CONFIG SET
//! replies with.

use crate::ffi::rm::{self, rm, Ctx, OwnedStr, RStr};
use redis_module::raw;
use std::ffi::{c_char, c_int, c_longlong, c_void, CStr};
use std::sync::{Mutex, PoisonError};

pub trait StringConfig: Sync + 'static {
    fn get(&self) -> Vec<u8>;
    fn set(&self, value: &[u8]) -> Result<(), String>;
    /// Where the string last handed to the server is kept (the server copies it; it is freed
    /// on the next get).
    fn kept(&self) -> &Kept;
}

pub trait NumericConfig: Sync + 'static {
    fn get(&self) -> i64;
    fn set(&self, value: i64) -> Result<(), String>;
}

pub trait EnumConfig: Sync + 'static {
    fn get(&self) -> c_int;
    fn set(&self, value: c_int) -> Result<(), String>;
    /// After a CONFIG SET that changed it (only when registered with `apply`).
    fn apply(&self, _ctx: Ctx) -> Result<(), String> {
        Ok(())
    }
}

pub trait BoolConfig: Sync + 'static {
    fn get(&self) -> bool;
    fn set(&self, value: bool) -> Result<(), String>;
}

/// The last string a string config's getter handed to the server.
pub struct Kept(Mutex<Option<KeptStr>>);

/// A string in a [`Kept`], held only to be freed when replaced.
struct KeptStr(#[allow(dead_code, reason = "freed on drop, never read")] OwnedStr);

// SAFETY: the server calls the module (the config getters) from its main thread only, so the
// string is made, read and freed on that thread.
unsafe impl Send for KeptStr {}

impl Kept {
    pub const fn new() -> Kept {
        Kept(Mutex::new(None))
    }
}

impl Default for Kept {
    fn default() -> Self {
        Kept::new()
    }
}

fn pd<C>(cfg: &'static C) -> *mut c_void {
    (cfg as *const C).cast_mut().cast::<c_void>()
}

/// # Safety
/// `pd` is the private data registered with the callback: a `&'static C`.
unsafe fn cfg<'a, C>(pd: *mut c_void) -> Option<&'a C> {
    // SAFETY: see above.
    unsafe { pd.cast::<C>().as_ref() }
}

fn result(r: Result<(), String>, err: *mut *mut raw::RedisModuleString) -> c_int {
    match r {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(msg) => {
            if !err.is_null() {
                // SAFETY: the server passes a valid out-pointer for the error string.
                unsafe { *err = OwnedStr::leak(msg.as_bytes()).0 };
            }
            raw::REDISMODULE_ERR as c_int
        }
    }
}

unsafe extern "C" fn get_str<C: StringConfig>(
    _name: *const c_char,
    pd: *mut c_void,
) -> *mut raw::RedisModuleString {
    // SAFETY: registered by `register_string::<C>`.
    let Some(c) = (unsafe { cfg::<C>(pd) }) else { return std::ptr::null_mut() };
    let s = OwnedStr::new(&c.get());
    let p = s.ptr().0;
    // Kept until the next get, which frees it.
    *c.kept().0.lock().unwrap_or_else(PoisonError::into_inner) = Some(KeptStr(s));
    p
}

unsafe extern "C" fn set_str<C: StringConfig>(
    _name: *const c_char,
    val: *mut raw::RedisModuleString,
    pd: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: registered by `register_string::<C>`.
    let Some(c) = (unsafe { cfg::<C>(pd) }) else { return raw::REDISMODULE_ERR as c_int };
    result(c.set(rm::bytes(&RStr(val))), err)
}

unsafe extern "C" fn get_num<C: NumericConfig>(_name: *const c_char, pd: *mut c_void) -> c_longlong {
    // SAFETY: registered by `register_numeric::<C>`.
    unsafe { cfg::<C>(pd) }.map_or(0, C::get)
}

unsafe extern "C" fn set_num<C: NumericConfig>(
    _name: *const c_char,
    val: c_longlong,
    pd: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: registered by `register_numeric::<C>`.
    let Some(c) = (unsafe { cfg::<C>(pd) }) else { return raw::REDISMODULE_ERR as c_int };
    result(c.set(val), err)
}

unsafe extern "C" fn get_enum<C: EnumConfig>(_name: *const c_char, pd: *mut c_void) -> c_int {
    // SAFETY: registered by `register_enum::<C>`.
    unsafe { cfg::<C>(pd) }.map_or(0, C::get)
}

unsafe extern "C" fn set_enum<C: EnumConfig>(
    _name: *const c_char,
    val: c_int,
    pd: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: registered by `register_enum::<C>`.
    let Some(c) = (unsafe { cfg::<C>(pd) }) else { return raw::REDISMODULE_ERR as c_int };
    result(c.set(val), err)
}

unsafe extern "C" fn apply_enum<C: EnumConfig>(
    ctx: *mut raw::RedisModuleCtx,
    pd: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: registered by `register_enum::<C>`.
    let Some(c) = (unsafe { cfg::<C>(pd) }) else { return raw::REDISMODULE_ERR as c_int };
    result(c.apply(Ctx(ctx)), err)
}

unsafe extern "C" fn get_bool<C: BoolConfig>(_name: *const c_char, pd: *mut c_void) -> c_int {
    // SAFETY: registered by `register_bool::<C>`.
    c_int::from(unsafe { cfg::<C>(pd) }.is_some_and(C::get))
}

unsafe extern "C" fn set_bool<C: BoolConfig>(
    _name: *const c_char,
    val: c_int,
    pd: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: registered by `register_bool::<C>`.
    let Some(c) = (unsafe { cfg::<C>(pd) }) else { return raw::REDISMODULE_ERR as c_int };
    result(c.set(val != 0), err)
}

fn ok(r: c_int) -> bool {
    r == raw::REDISMODULE_OK as c_int
}

/// Register string config `lock.<name>` (binary-safe; `default` without NUL).
pub fn register_string<C: StringConfig>(ctx: Ctx, name: &CStr, default: &[u8], cfg: &'static C) -> bool {
    let mut default_c = default.to_vec();
    default_c.push(0);
    ok(rm!(RedisModule_RegisterStringConfig(
        ctx.0,
        name.as_ptr(),
        default_c.as_ptr().cast::<c_char>(),
        raw::REDISMODULE_CONFIG_DEFAULT,
        Some(get_str::<C>),
        Some(set_str::<C>),
        None,
        pd(cfg),
    ) else raw::REDISMODULE_ERR as c_int))
}

/// Register numeric config `lock.<name>` within `min..=max`.
pub fn register_numeric<C: NumericConfig>(
    ctx: Ctx,
    name: &CStr,
    default: i64,
    min: i64,
    max: i64,
    cfg: &'static C,
) -> bool {
    ok(rm!(RedisModule_RegisterNumericConfig(
        ctx.0,
        name.as_ptr(),
        default,
        raw::REDISMODULE_CONFIG_DEFAULT,
        min,
        max,
        Some(get_num::<C>),
        Some(set_num::<C>),
        None,
        pd(cfg),
    ) else raw::REDISMODULE_ERR as c_int))
}

/// Register enum config `lock.<name>` with its (name, value) pairs; `apply`: call
/// [`EnumConfig::apply`] after a CONFIG SET.
pub fn register_enum<C: EnumConfig>(
    ctx: Ctx,
    name: &CStr,
    default: c_int,
    values: &[(&CStr, c_int)],
    apply: bool,
    cfg: &'static C,
) -> bool {
    let mut names: Vec<*const c_char> = values.iter().map(|(n, _)| n.as_ptr()).collect();
    let vals: Vec<c_int> = values.iter().map(|(_, v)| *v).collect();
    let Ok(n) = c_int::try_from(values.len()) else { return false };
    ok(rm!(RedisModule_RegisterEnumConfig(
        ctx.0,
        name.as_ptr(),
        default,
        raw::REDISMODULE_CONFIG_DEFAULT,
        names.as_mut_ptr(),
        vals.as_ptr(),
        n,
        Some(get_enum::<C>),
        Some(set_enum::<C>),
        if apply { Some(apply_enum::<C>) } else { None },
        pd(cfg),
    ) else raw::REDISMODULE_ERR as c_int))
}

/// Register bool config `lock.<name>` (yes/no).
pub fn register_bool<C: BoolConfig>(ctx: Ctx, name: &CStr, default: bool, cfg: &'static C) -> bool {
    ok(rm!(RedisModule_RegisterBoolConfig(
        ctx.0,
        name.as_ptr(),
        c_int::from(default),
        raw::REDISMODULE_CONFIG_DEFAULT,
        Some(get_bool::<C>),
        Some(set_bool::<C>),
        None,
        pd(cfg),
    ) else raw::REDISMODULE_ERR as c_int))
}

/// Apply the values from the config file and module arguments (`RM_LoadConfigs`).
pub fn load(ctx: Ctx) -> bool {
    ok(rm!(RedisModule_LoadConfigs(ctx.0) else raw::REDISMODULE_ERR as c_int))
}
