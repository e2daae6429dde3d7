//! Module configs `lock.channel-prefix`, `lock.publish-mode`, `lock.token-prefix`,
//! `lock.token-ttl`, `lock.redisson-scripts`, `lock.redisson-extra-scripts`, and the limits
//! `lock.max-waiters`, `lock.max-script-turns`, `lock.max-waiter-bytes`, `lock.argv-reuse`.
//!
//! Registered with the 7.0 config API (ffi/configs.rs) so values are binary-safe: settable in redis.conf
//! after `loadmodule`, as module arguments (`loadmodule ... publish-mode global`), and with
//! CONFIG SET/GET.

use crate::ffi::configs::{self, BoolConfig, EnumConfig, Kept, NumericConfig, StringConfig};
use crate::ffi::replication;
use crate::ffi::rm::Ctx;
use std::ffi::{c_int, CStr};
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
    kept: Kept,
}

impl StrConfig {
    const fn new(name: &'static CStr, default: &'static [u8]) -> StrConfig {
        StrConfig { name, default, value: Mutex::new(Vec::new()), kept: Kept::new() }
    }

    /// Run `f` on the current value (the default until one is set).
    fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let v = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        f(if v.is_empty() { self.default } else { &v })
    }

    fn store(&self, b: &[u8]) {
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
    PREFIX.with(|p| crate::logic::args::derived_name(p, key))
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

impl StringConfig for StrConfig {
    fn get(&self) -> Vec<u8> {
        self.with(<[u8]>::to_vec)
    }
    fn set(&self, b: &[u8]) -> Result<(), String> {
        if b.is_empty() {
            return Err(format!("{} must not be empty", self.name.to_string_lossy()));
        }
        self.store(b);
        Ok(())
    }
    fn kept(&self) -> &Kept {
        &self.kept
    }
}

struct ModeConfig;
impl EnumConfig for ModeConfig {
    fn get(&self) -> c_int {
        mode() as c_int
    }
    fn set(&self, val: c_int) -> Result<(), String> {
        MODE.store(val.clamp(0, 3) as u8, Ordering::Relaxed);
        Ok(())
    }
}

/// `lock.argv-reuse`: whether effects may be propagated through the command's own argv
/// (ffi/replication.rs); `no` sends every effect through `RM_Replicate`.
struct ArgvReuse;
impl BoolConfig for ArgvReuse {
    fn get(&self) -> bool {
        replication::argv_reuse()
    }
    fn set(&self, on: bool) -> Result<(), String> {
        replication::set_argv_reuse(on);
        Ok(())
    }
}

/// `lock.redisson-scripts`; applying it installs or removes the command filter.
struct Scripts;
impl EnumConfig for Scripts {
    fn get(&self) -> c_int {
        c_int::from(redisson_native())
    }
    fn set(&self, val: c_int) -> Result<(), String> {
        REDISSON_NATIVE.store(val == 1, Ordering::Relaxed);
        Ok(())
    }
    fn apply(&self, ctx: Ctx) -> Result<(), String> {
        (filter_hooks().install)(ctx, redisson_native())
    }
}

/// `lock.redisson-extra-scripts`.
struct Extra;
static EXTRA_KEPT: Kept = Kept::new();
impl StringConfig for Extra {
    fn get(&self) -> Vec<u8> {
        REDISSON_EXTRA.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
    fn set(&self, b: &[u8]) -> Result<(), String> {
        (filter_hooks().set_extra)(b).map_err(|e| format!("redisson-extra-scripts: {e}"))?;
        *REDISSON_EXTRA.lock().unwrap_or_else(PoisonError::into_inner) = b.to_vec();
        Ok(())
    }
    fn kept(&self) -> &Kept {
        &EXTRA_KEPT
    }
}

struct TokenTtl;
impl NumericConfig for TokenTtl {
    fn get(&self) -> i64 {
        token_ttl()
    }
    fn set(&self, val: i64) -> Result<(), String> {
        TOKEN_TTL.store(val.max(0), Ordering::Relaxed);
        Ok(())
    }
}

/// What the Redisson configs act on: the command filter (module/scripts/filter.rs). `lib.rs`
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
    cfg.store(default);
    if !configs::register_string(ctx, cfg.name, default, cfg) {
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

    let modes: Vec<(&CStr, c_int)> = MODE_NAMES.iter().map(|(n, m)| (*n, *m as c_int)).collect();
    let r1 = configs::register_enum(ctx, c"publish-mode", mode_default as c_int, &modes, false, &ModeConfig);
    let r2 = configs::register_numeric(ctx, c"token-ttl", ttl_default, 0, i64::MAX, &TokenTtl);
    let scripts_default = match module_arg(args, "redisson-scripts") {
        None => 0,
        Some(v) if v.eq_ignore_ascii_case(b"lua") => 0,
        Some(v) if v.eq_ignore_ascii_case(b"native") => 1,
        Some(_) => return Err("redisson-scripts must be lua or native".into()),
    };
    REDISSON_NATIVE.store(scripts_default == 1, Ordering::Relaxed);
    let r3 = configs::register_enum(
        ctx,
        c"redisson-scripts",
        scripts_default,
        &[(c"lua", 0), (c"native", 1)],
        true,
        &Scripts,
    );
    let extra = module_arg(args, "redisson-extra-scripts").unwrap_or(b"");
    (filter_hooks().set_extra)(extra).map_err(|e| format!("redisson-extra-scripts: {e}"))?;
    *REDISSON_EXTRA.lock().unwrap_or_else(PoisonError::into_inner) = extra.to_vec();
    let r4 = configs::register_string(ctx, c"redisson-extra-scripts", extra, &Extra);
    let reuse_default = match module_arg(args, "argv-reuse") {
        None => true,
        Some(v) if v.eq_ignore_ascii_case(b"yes") => true,
        Some(v) if v.eq_ignore_ascii_case(b"no") => false,
        Some(_) => return Err("argv-reuse must be yes or no".into()),
    };
    replication::set_argv_reuse(reuse_default);
    let r5 = configs::register_bool(ctx, c"argv-reuse", reuse_default, &ArgvReuse);
    if ![r1, r2, r3, r4, r5].iter().all(|r| *r) {
        return Err("could not register the module configs".into());
    }
    register_limits(ctx, args)?;
    if !configs::load(ctx) {
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

impl NumericConfig for Limit {
    fn get(&self) -> i64 {
        Limit::get(self)
    }
    fn set(&self, val: i64) -> Result<(), String> {
        self.value.store(val.max(0), Ordering::Relaxed);
        Ok(())
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
        if !configs::register_numeric(ctx, l.name, default, 0, i64::MAX, l) {
            return Err(format!("could not register the config {name}"));
        }
    }
    Ok(())
}
