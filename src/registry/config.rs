//! Module configs `lock.channel-prefix`, `lock.publish-mode`, `lock.token-prefix`,
//! `lock.token-ttl`, `lock.redisson-scripts`, `lock.redisson-extra-scripts`, and the limits
//! `lock.max-waiters`, `lock.max-script-turns`, `lock.max-waiter-bytes`.
//!
//! Registered with the raw 7.0 config API so values are binary-safe: settable in redis.conf
//! after `loadmodule`, as module arguments (`loadmodule ... publish-mode global`), and with
//! CONFIG SET/GET.

use crate::ffi::replication;
use crate::ffi::rm::{self, rm, Ctx, RStr};
use redis_module::raw;
use std::ffi::CStr;
use std::ffi::{c_char, c_int, c_longlong, c_void};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};

pub const DEFAULT_PREFIX: &[u8] = b"redisson_lock__channel";
pub const DEFAULT_TOKEN_PREFIX: &[u8] = b"redisson_lock_token";

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

/// A binary-safe string config: its value, and the string last handed to Redis by the getter.
struct StrConfig {
    name: &'static CStr,
    default: &'static [u8],
    value: Mutex<Vec<u8>>,
    last: Mutex<usize>,
}

impl StrConfig {
    const fn new(name: &'static CStr, default: &'static [u8]) -> StrConfig {
        StrConfig { name, default, value: Mutex::new(Vec::new()), last: Mutex::new(0) }
    }

    /// Run `f` on the current value (the default until one is set).
    fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let v = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        f(if v.is_empty() { self.default } else { &v })
    }

    fn set(&self, b: &[u8]) {
        *self.value.lock().unwrap_or_else(PoisonError::into_inner) = b.to_vec();
    }
}

static PREFIX: StrConfig = StrConfig::new(c"channel-prefix", DEFAULT_PREFIX);
static TOKEN_PREFIX: StrConfig = StrConfig::new(c"token-prefix", DEFAULT_TOKEN_PREFIX);
static MODE: AtomicU8 = AtomicU8::new(PublishMode::Auto as u8);
/// `lock.redisson-scripts`: false = `lua` (default), true = `native`.
static REDISSON_NATIVE: AtomicBool = AtomicBool::new(false);
/// `lock.redisson-extra-scripts` as last set (the parsed table lives in `script_filter`).
static REDISSON_EXTRA: Mutex<Vec<u8>> = Mutex::new(Vec::new());
static TOKEN_TTL: AtomicI64 = AtomicI64::new(0);

/// Build the release channel of `key` under the current prefix.
pub fn channel(key: &[u8]) -> Vec<u8> {
    PREFIX.with(|p| crate::logic::args::channel_name(p, key))
}

/// Build the fencing-token key of lock `key` under the current token prefix.
pub fn token_key(key: &[u8]) -> Vec<u8> {
    TOKEN_PREFIX.with(|p| crate::logic::fence::token_key(p, key))
}

/// Whether `lock.redisson-scripts` is `native`.
pub fn redisson_native() -> bool {
    REDISSON_NATIVE.load(Ordering::Relaxed)
}

/// `lock.token-ttl` in ms; 0 keeps token keys without a TTL.
pub fn token_ttl() -> i64 {
    TOKEN_TTL.load(Ordering::Relaxed)
}

pub fn mode() -> PublishMode {
    match MODE.load(Ordering::Relaxed) {
        1 => PublishMode::Global,
        2 => PublishMode::Sharded,
        3 => PublishMode::Off,
        _ => PublishMode::Auto,
    }
}

/// `privdata` of the string-config callbacks: the `StrConfig` they serve.
fn str_config<'a>(pd: *mut c_void) -> Option<&'a StrConfig> {
    // SAFETY: registered with a pointer to one of the `StrConfig` statics above.
    unsafe { pd.cast::<StrConfig>().as_ref() }
}

unsafe extern "C" fn get_str(_name: *const c_char, pd: *mut c_void) -> RStr {
    let Some(cfg) = str_config(pd) else { return std::ptr::null_mut() };
    // Redis copies the value; keep one string alive per config (freed on the next get).
    let s = cfg.with(rm::OwnedStr::leak);
    let mut last = cfg.last.lock().unwrap_or_else(PoisonError::into_inner);
    let old = std::mem::replace(&mut *last, s as usize);
    if old != 0 {
        rm!(RedisModule_FreeString(std::ptr::null_mut(), old as RStr) else ());
    }
    s
}

unsafe extern "C" fn set_str(_name: *const c_char, val: RStr, pd: *mut c_void, err: *mut RStr) -> c_int {
    let Some(cfg) = str_config(pd) else { return raw::REDISMODULE_ERR as c_int };
    let b = rm::bytes(&val);
    if b.is_empty() {
        if !err.is_null() {
            let msg = format!("{} must not be empty", cfg.name.to_string_lossy());
            unsafe { *err = rm::OwnedStr::leak(msg.as_bytes()) };
        }
        return raw::REDISMODULE_ERR as c_int;
    }
    cfg.set(b);
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn get_mode(_name: *const c_char, _pd: *mut c_void) -> c_int {
    mode() as c_int
}

unsafe extern "C" fn set_mode(_name: *const c_char, val: c_int, _pd: *mut c_void, _err: *mut RStr) -> c_int {
    MODE.store(val.clamp(0, 3) as u8, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

/// `lock.argv-reuse`: whether effects may be propagated through the command's own argv
/// (ffi/replication.rs); `no` sends every effect through `RM_Replicate`.
unsafe extern "C" fn get_argv_reuse(_name: *const c_char, _pd: *mut c_void) -> c_int {
    c_int::from(replication::argv_reuse())
}

unsafe extern "C" fn set_argv_reuse(
    _name: *const c_char,
    val: c_int,
    _pd: *mut c_void,
    _err: *mut RStr,
) -> c_int {
    replication::set_argv_reuse(val != 0);
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn get_scripts(_name: *const c_char, _pd: *mut c_void) -> c_int {
    c_int::from(redisson_native())
}

unsafe extern "C" fn set_scripts(
    _name: *const c_char,
    val: c_int,
    _pd: *mut c_void,
    _err: *mut RStr,
) -> c_int {
    REDISSON_NATIVE.store(val == 1, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

/// What the Redisson configs act on: the command filter (module/redisson/filter.rs). `lib.rs`
/// wires it in at load, so the configs stay a leaf that imports no glue.
#[derive(Clone, Copy)]
pub struct FilterHooks {
    /// Install (`true`) or remove the filter.
    pub install: fn(Ctx, bool) -> Result<(), String>,
    /// Replace the extra script entries.
    pub set_extra: fn(&[u8]) -> Result<(), String>,
}

static HOOKS: std::sync::RwLock<FilterHooks> =
    std::sync::RwLock::new(FilterHooks { install: |_, _| Ok(()), set_extra: |_| Ok(()) });

fn filter_hooks() -> FilterHooks {
    *HOOKS.read().unwrap_or_else(PoisonError::into_inner)
}

/// Apply `lock.redisson-scripts` after CONFIG SET: install or remove the command filter.
unsafe extern "C" fn apply_scripts(ctx: Ctx, _pd: *mut c_void, err: *mut RStr) -> c_int {
    match (filter_hooks().install)(ctx, redisson_native()) {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(e) => {
            if !err.is_null() {
                unsafe { *err = rm::OwnedStr::leak(e.as_bytes()) };
            }
            raw::REDISMODULE_ERR as c_int
        }
    }
}

unsafe extern "C" fn get_extra(_name: *const c_char, _pd: *mut c_void) -> RStr {
    // Redis copies the value; keep one string alive (freed on the next get).
    static LAST: Mutex<usize> = Mutex::new(0);
    let s = rm::OwnedStr::leak(&REDISSON_EXTRA.lock().unwrap_or_else(PoisonError::into_inner));
    let old = std::mem::replace(&mut *LAST.lock().unwrap_or_else(PoisonError::into_inner), s as usize);
    if old != 0 {
        rm!(RedisModule_FreeString(std::ptr::null_mut(), old as RStr) else ());
    }
    s
}

unsafe extern "C" fn set_extra(_name: *const c_char, val: RStr, _pd: *mut c_void, err: *mut RStr) -> c_int {
    let b = rm::bytes(&val);
    match (filter_hooks().set_extra)(b) {
        Ok(()) => {
            *REDISSON_EXTRA.lock().unwrap_or_else(PoisonError::into_inner) = b.to_vec();
            raw::REDISMODULE_OK as c_int
        }
        Err(e) => {
            if !err.is_null() {
                unsafe { *err = rm::OwnedStr::leak(format!("redisson-extra-scripts: {e}").as_bytes()) };
            }
            raw::REDISMODULE_ERR as c_int
        }
    }
}

unsafe extern "C" fn get_ttl(_name: *const c_char, _pd: *mut c_void) -> c_longlong {
    token_ttl()
}

unsafe extern "C" fn set_ttl(
    _name: *const c_char,
    val: c_longlong,
    _pd: *mut c_void,
    _err: *mut RStr,
) -> c_int {
    TOKEN_TTL.store(val.max(0), Ordering::Relaxed);
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

/// Register a string config whose default may come from the module arguments.
fn register_str(ctx: Ctx, args: &[&[u8]], cfg: &'static StrConfig) -> Result<(), String> {
    let name = cfg.name.to_string_lossy();
    let default = module_arg(args, &name).unwrap_or(cfg.default);
    if default.is_empty() || default.contains(&0) {
        return Err(format!("{name} must be a non-empty string without NUL bytes"));
    }
    cfg.set(default);
    let mut default_c = default.to_vec();
    default_c.push(0);
    let pd = (cfg as *const StrConfig).cast_mut().cast::<c_void>();
    let r = rm!(RedisModule_RegisterStringConfig(
        ctx,
        cfg.name.as_ptr(),
        default_c.as_ptr().cast::<c_char>(),
        raw::REDISMODULE_CONFIG_DEFAULT,
        Some(get_str),
        Some(set_str),
        None,
        pd,
    ) else raw::REDISMODULE_ERR as c_int);
    if r != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not register the config {name}"));
    }
    Ok(())
}

/// Register every config, taking defaults from the module arguments. `Err` names the problem.
pub fn register(ctx: Ctx, args: &[&[u8]], hooks: FilterHooks) -> Result<(), String> {
    *HOOKS.write().unwrap_or_else(PoisonError::into_inner) = hooks;
    register_str(ctx, args, &PREFIX)?;
    register_str(ctx, args, &TOKEN_PREFIX)?;
    let mode_default = match module_arg(args, "publish-mode") {
        None => PublishMode::Auto,
        Some(v) => MODE_NAMES
            .iter()
            .find(|(n, _)| n.to_bytes().eq_ignore_ascii_case(v))
            .map(|(_, m)| *m)
            .ok_or_else(|| "publish-mode must be one of auto, global, sharded, off".to_string())?,
    };
    MODE.store(mode_default as u8, Ordering::Relaxed);
    let ttl_default = match module_arg(args, "token-ttl") {
        None => 0,
        Some(v) => crate::logic::args::parse_i64(v)
            .filter(|t| *t >= 0)
            .ok_or_else(|| "token-ttl must be an integer >= 0 (milliseconds)".to_string())?,
    };
    TOKEN_TTL.store(ttl_default, Ordering::Relaxed);

    let flags = raw::REDISMODULE_CONFIG_DEFAULT;
    let mut names: Vec<*const c_char> = MODE_NAMES.iter().map(|(n, _)| n.as_ptr()).collect();
    let vals: Vec<c_int> = MODE_NAMES.iter().map(|(_, m)| *m as c_int).collect();
    let r1 = rm!(RedisModule_RegisterEnumConfig(
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
    let r2 = rm!(RedisModule_RegisterNumericConfig(
        ctx,
        c"token-ttl".as_ptr(),
        ttl_default,
        flags,
        0,
        c_longlong::MAX,
        Some(get_ttl),
        Some(set_ttl),
        None,
        std::ptr::null_mut(),
    ) else raw::REDISMODULE_ERR as c_int);
    let scripts_default = match module_arg(args, "redisson-scripts") {
        None => 0,
        Some(v) if v.eq_ignore_ascii_case(b"lua") => 0,
        Some(v) if v.eq_ignore_ascii_case(b"native") => 1,
        Some(_) => return Err("redisson-scripts must be lua or native".into()),
    };
    REDISSON_NATIVE.store(scripts_default == 1, Ordering::Relaxed);
    let mut script_names = [c"lua".as_ptr(), c"native".as_ptr()];
    let script_vals: [c_int; 2] = [0, 1];
    let r3 = rm!(RedisModule_RegisterEnumConfig(
        ctx,
        c"redisson-scripts".as_ptr(),
        scripts_default,
        flags,
        script_names.as_mut_ptr(),
        script_vals.as_ptr(),
        2,
        Some(get_scripts),
        Some(set_scripts),
        Some(apply_scripts),
        std::ptr::null_mut(),
    ) else raw::REDISMODULE_ERR as c_int);
    let extra = module_arg(args, "redisson-extra-scripts").unwrap_or(b"");
    (filter_hooks().set_extra)(extra).map_err(|e| format!("redisson-extra-scripts: {e}"))?;
    *REDISSON_EXTRA.lock().unwrap_or_else(PoisonError::into_inner) = extra.to_vec();
    let mut extra_c = extra.to_vec();
    extra_c.push(0);
    let r4 = rm!(RedisModule_RegisterStringConfig(
        ctx,
        c"redisson-extra-scripts".as_ptr(),
        extra_c.as_ptr().cast::<c_char>(),
        flags,
        Some(get_extra),
        Some(set_extra),
        None,
        std::ptr::null_mut(),
    ) else raw::REDISMODULE_ERR as c_int);
    let reuse_default = match module_arg(args, "argv-reuse") {
        None => true,
        Some(v) if v.eq_ignore_ascii_case(b"yes") => true,
        Some(v) if v.eq_ignore_ascii_case(b"no") => false,
        Some(_) => return Err("argv-reuse must be yes or no".into()),
    };
    replication::set_argv_reuse(reuse_default);
    let r5 = rm!(RedisModule_RegisterBoolConfig(
        ctx,
        c"argv-reuse".as_ptr(),
        c_int::from(reuse_default),
        flags,
        Some(get_argv_reuse),
        Some(set_argv_reuse),
        None,
        std::ptr::null_mut(),
    ) else raw::REDISMODULE_ERR as c_int);
    if [r1, r2, r3, r4, r5].iter().any(|r| *r != raw::REDISMODULE_OK as c_int) {
        return Err("could not register the module configs".into());
    }
    register_limits(ctx, args)?;
    if rm!(RedisModule_LoadConfigs(ctx) else raw::REDISMODULE_ERR as c_int) != raw::REDISMODULE_OK as c_int {
        return Err("could not load the module configs".into());
    }
    (filter_hooks().install)(ctx, redisson_native())
}

// ---- limits: what the module keeps per waiter and per Redisson turn (spec section 9) ---------

/// An integer config bounding memory the module keeps.
pub struct Limit {
    name: &'static CStr,
    default: i64,
    value: AtomicI64,
}

impl Limit {
    const fn new(name: &'static CStr, default: i64) -> Limit {
        Limit { name, default, value: AtomicI64::new(default) }
    }

    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// `lock.max-waiters`: clients blocked in LOCK.ACQUIRE ... WAIT, all keys.
pub static MAX_WAITERS: Limit = Limit::new(c"max-waiters", 100_000);
/// `lock.max-script-turns`: Redisson script owners' places in line, all keys.
pub static MAX_SCRIPT_TURNS: Limit = Limit::new(c"max-script-turns", 10_000);
/// `lock.max-waiter-bytes`: the longest owner id kept for a waiter or a turn.
pub static MAX_WAITER_BYTES: Limit = Limit::new(c"max-waiter-bytes", 65_536);

const LIMITS: [&Limit; 3] = [&MAX_WAITERS, &MAX_SCRIPT_TURNS, &MAX_WAITER_BYTES];

fn limit<'a>(pd: *mut c_void) -> Option<&'a Limit> {
    // SAFETY: registered with a pointer to one of the `Limit` statics above.
    unsafe { pd.cast::<Limit>().as_ref() }
}

unsafe extern "C" fn get_limit(_name: *const c_char, pd: *mut c_void) -> c_longlong {
    limit(pd).map_or(0, Limit::get)
}

unsafe extern "C" fn set_limit(
    _name: *const c_char,
    val: c_longlong,
    pd: *mut c_void,
    _err: *mut RStr,
) -> c_int {
    match limit(pd) {
        Some(l) => {
            l.value.store(val.max(0), Ordering::Relaxed);
            raw::REDISMODULE_OK as c_int
        }
        None => raw::REDISMODULE_ERR as c_int,
    }
}

fn register_limits(ctx: Ctx, args: &[&[u8]]) -> Result<(), String> {
    for l in LIMITS {
        let name = l.name.to_string_lossy();
        let default = match module_arg(args, &name) {
            None => l.default,
            Some(v) => crate::logic::args::parse_i64(v)
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("{name} must be an integer >= 0"))?,
        };
        l.value.store(default, Ordering::Relaxed);
        let pd = (l as *const Limit).cast_mut().cast::<c_void>();
        let r = rm!(RedisModule_RegisterNumericConfig(
            ctx,
            l.name.as_ptr(),
            default,
            raw::REDISMODULE_CONFIG_DEFAULT,
            0,
            c_longlong::MAX,
            Some(get_limit),
            Some(set_limit),
            None,
            pd,
        ) else raw::REDISMODULE_ERR as c_int);
        if r != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not register the config {name}"));
        }
    }
    Ok(())
}
