//! The command filter of `lock.redisson-scripts native`.
//!
//! Installed only while the config is `native`, so with `lua` (the default) no command pays
//! anything. It looks at every command Redis is about to run; for `EVALSHA <known sha1>` and
//! `EVAL <body of a known sha1>` whose keys and arguments match the script exactly, it rewrites
//!
//!   EVALSHA <sha1> <numkeys> <keys...> <args...>
//!   into  LOCK.REDISSON <kind> EVALSHA <sha1> <numkeys> <keys...> <args...>
//!
//! so the keys keep their place relative to `numkeys` (cluster routing, CROSSSLOT and ACL key
//! checks see the script's keys) and the original call can still be run in Lua when the
//! keyspace requires it. Everything else passes through untouched.

use crate::redisson_scripts::{self, Kind, Table, KINDS};
use crate::rm::{self, rm, Ctx, OwnedStr, RStr};
use crate::stats;
use redis_module::raw;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, PoisonError, RwLock};

pub const COMMAND: &[u8] = b"LOCK.REDISSON";

/// The scripts recognised: the built-in table plus `lock.redisson-extra-scripts`.
static TABLE: LazyLock<RwLock<Table>> = LazyLock::new(|| RwLock::new(Table::builtin()));
/// The installed filter (null when none).
static FILTER: AtomicUsize = AtomicUsize::new(0);
/// Strings inserted into rewritten commands, created once; each insertion takes a reference.
static INSERTS: LazyLock<Vec<usize>> = LazyLock::new(|| {
    std::iter::once(COMMAND)
        .chain(KINDS.iter().map(|k| k.name().as_bytes()))
        .map(|b| OwnedStr::leak(b) as usize)
        .collect()
});

/// Replace the extra entries (`kind:sha1:length`, comma- or space-separated).
pub fn set_extra(spec: &[u8]) -> Result<(), String> {
    let t = Table::with_extra(spec)?;
    *TABLE.write().unwrap_or_else(PoisonError::into_inner) = t;
    Ok(())
}

/// The kind of a script given by SHA1 (EVALSHA) or by body (EVAL).
pub fn lookup(evalsha: bool, script: &[u8]) -> Option<Kind> {
    let t = TABLE.read().unwrap_or_else(PoisonError::into_inner);
    if evalsha {
        redisson_scripts::parse_sha(script).and_then(|s| t.by_sha(&s))
    } else {
        t.by_body(script)
    }
}

/// Install (`on`) or remove the filter; idempotent.
pub fn install(ctx: Ctx, on: bool) -> Result<(), String> {
    LazyLock::force(&INSERTS);
    let current = FILTER.load(Ordering::Relaxed);
    if on && current == 0 {
        let flags = raw::REDISMODULE_CMDFILTER_NOSELF as c_int;
        let f = rm!(RedisModule_RegisterCommandFilter(ctx, Some(filter), flags) else std::ptr::null_mut());
        if f.is_null() {
            return Err("cannot register the command filter".into());
        }
        FILTER.store(f as usize, Ordering::Relaxed);
    } else if !on && current != 0 {
        let f = current as *mut raw::RedisModuleCommandFilter;
        if rm!(RedisModule_UnregisterCommandFilter(ctx, f) else raw::REDISMODULE_ERR as c_int)
            != raw::REDISMODULE_OK as c_int
        {
            return Err("cannot unregister the command filter".into());
        }
        FILTER.store(0, Ordering::Relaxed);
    }
    Ok(())
}

/// A shared insert string with one more reference, for Redis to own.
fn insert_str(i: usize) -> Option<RStr> {
    let s = *INSERTS.get(i)? as RStr;
    rm!(RedisModule_RetainString(std::ptr::null_mut(), s) else ());
    Some(s)
}

/// `EVAL` / `EVALSHA` (any case) -> whether it is EVALSHA.
fn eval_kind(name: &[u8]) -> Option<bool> {
    match name.len() {
        4 if name.eq_ignore_ascii_case(b"EVAL") => Some(false),
        7 if name.eq_ignore_ascii_case(b"EVALSHA") => Some(true),
        _ => None,
    }
}

unsafe extern "C" fn filter(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // Cheap exits first: this runs before every command.
    let argc = rm!(RedisModule_CommandFilterArgsCount(fctx) else 0);
    if argc < 4 {
        return;
    }
    let arg = |i: c_int| rm::bytes(rm!(RedisModule_CommandFilterArgGet(fctx, i) else std::ptr::null_mut()));
    let Some(evalsha) = eval_kind(arg(0)) else { return };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let kind = lookup(evalsha, arg(1))?;
        let rest: Vec<&[u8]> = (2..argc).map(arg).collect();
        if redisson_scripts::parse(kind, &rest).is_err() {
            stats::redisson_lua(kind);
            return None;
        }
        Some(kind)
    }));
    let Ok(Some(kind)) = r else { return };
    let (Some(name), Some(token)) = (insert_str(0), insert_str(1 + kind.index())) else { return };
    rm!(RedisModule_CommandFilterArgInsert(fctx, 0, name) else 0);
    rm!(RedisModule_CommandFilterArgInsert(fctx, 1, token) else 0);
}
