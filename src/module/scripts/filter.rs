//! The command filter of `lock.redisson-scripts native`.
//!
//! Installed only while the config is `native`, so with `lua` (the default) no command pays
//! anything. It looks at every command Redis is about to run; for `EVALSHA <known sha1>` and
//! `EVAL <body of a known sha1>` whose keys and arguments match the script exactly, it replaces
//! the command name:
//!
//!   EVALSHA <sha1> <numkeys> <keys...> <args...>
//!   becomes  LOCK.REDISSON <sha1> <numkeys> <keys...> <args...>
//!
//! so the keys keep their place (cluster routing, CROSSSLOT and ACL key checks see the
//! script's keys) and the original call can still be run in Lua when the keyspace requires it.
//! The new name is one of the string objects that all read `LOCK.REDISSON`, one per (script
//! operation of `kinds::OPS`, EVAL or EVALSHA): the command recognises which by the object's
//! address, so it never hashes a body twice. Nothing else is touched.
//!
//! Server behaviour the name objects rely on (Redis 7.0-8.x, Valkey 8-9; a server internal,
//! not an API promise):
//! - `RM_CommandFilterArgReplace` stores the object we pass in `c->argv[0]` as is (it does
//!   not copy it; it frees the old one and keeps ours, hence the `RM_RetainString` before), and
//!   the server looks the command up from that object after the filters ran.
//! - The command handler then receives that same `c->argv`, so `argv[0]` is our object and its
//!   address identifies (operation, EVAL or EVALSHA). A name object that did not come from the
//!   filter (a client typing `LOCK.REDISSON` itself) is not one of ours: the command then
//!   looks the script up itself (`native.rs`).
//!
//! Tests that check it: `tests/redisson_scripts.rs` (`builtin_shas_run_natively_like_the_scripts`,
//! `exact_matches_only_everything_else_gets_luas_own_reply`,
//! `multi_exec_and_scripts_behave_as_for_the_script`, `replicas_without_the_module_stay_equal`,
//! `known_scripts_left_to_lua_and_native_runs_are_counted_in_info`, and the random
//! differential runs against Lua), which fail if a call is not recognised, or recognised as the
//! wrong operation.

use crate::ffi::filter as hook;
use crate::ffi::rm::{Ctx, RStr, StaticStr};
use crate::logic::kinds;
use crate::logic::script_table::Table;
use crate::logic::scripts::{self, OpId};
use crate::registry::stats;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError, RwLock};

pub const COMMAND: &[u8] = b"LOCK.REDISSON";

/// The scripts recognised: the built-in rows plus `lock.redisson-extra-scripts`.
static TABLE: LazyLock<RwLock<Table>> = LazyLock::new(|| RwLock::new(kinds::table(b"").unwrap_or_default()));
/// The installed filter.
static FILTER: Mutex<Option<hook::Filter>> = Mutex::new(None);
/// Command names put in place by the filter, `[operation][evalsha]`, created once and never
/// freed (each use takes a reference for Redis to drop).
static NAMES: LazyLock<Vec<[StaticStr; 2]>> =
    LazyLock::new(|| kinds::OPS.iter().map(|_| [0, 1].map(|_| StaticStr::new(COMMAND))).collect());

/// Which of EVAL (bit 0) and EVALSHA (bit 1) the server resolves by those names: with
/// `rename-command EVALSHA ""` (or renamed to another name) the name is unknown to the server,
/// and the filter must not revive it. Read with `COMMAND INFO` at load (renames are only
/// possible in the config file, before any module loads; a CONFIG SET apply callback has no
/// client to `RM_Call` with on 7.0), or, where COMMAND is renamed too, by running EVAL and
/// EVALSHA with an argument they reject before doing anything. Bit 7: read.
static RESOLVED: AtomicU8 = AtomicU8::new(0);

fn read_resolved(ctx: Ctx) -> u8 {
    let known: [bool; 2] = match crate::ffi::call::command_info_eval(ctx) {
        Ok(r) => [0, 1].map(|i| r.elem(i).is_some_and(|e| e.is_array())),
        // COMMAND itself renamed or disabled: ask EVAL and EVALSHA themselves.
        Err(_) => [false, true].map(|evalsha| crate::ffi::call::runs_eval(ctx, evalsha)),
    };
    u8::from(known[0]) | (u8::from(known[1]) << 1)
}

/// Whether the server runs EVAL (`evalsha` false) or EVALSHA under that name.
pub fn resolves(evalsha: bool) -> bool {
    let r = RESOLVED.load(Ordering::Relaxed);
    r & 0x80 == 0 || r & (1 << u8::from(evalsha)) != 0
}

/// Replace the extra entries (`kind:sha1:length`, comma- or space-separated; the kind is an
/// operation's name).
pub fn set_extra(spec: &[u8]) -> Result<(), String> {
    let t = kinds::table(spec)?;
    *TABLE.write().unwrap_or_else(PoisonError::into_inner) = t;
    Ok(())
}

/// The operation of a script given by SHA1 (EVALSHA) or by body (EVAL).
pub fn lookup(evalsha: bool, script: &[u8]) -> Option<OpId> {
    let t = TABLE.read().unwrap_or_else(PoisonError::into_inner);
    if evalsha {
        t.by_hex(script)
    } else {
        t.by_body(script)
    }
}

/// The name objects by address: which (operation, EVALSHA?) each stands for.
static BY_ADDR: LazyLock<HashMap<usize, (OpId, bool)>> = LazyLock::new(|| {
    NAMES
        .iter()
        .enumerate()
        .flat_map(|(op, pair)| {
            pair.iter().enumerate().map(move |(i, q)| (q.ptr().addr(), (OpId(op), i == 1)))
        })
        .collect()
});

/// Which (operation, EVALSHA?) a command name object put in place by the filter stands for.
pub fn identify(name: RStr) -> Option<(OpId, bool)> {
    BY_ADDR.get(&name.addr()).copied()
}

/// Install (`on`) or remove the filter; idempotent.
pub fn install(ctx: Ctx, on: bool) -> Result<(), String> {
    LazyLock::force(&BY_ADDR);
    // A context without a client (a config apply callback) cannot RM_Call.
    if RESOLVED.load(Ordering::Relaxed) & 0x80 == 0 && crate::ffi::acl::client_id(ctx) != 0 {
        RESOLVED.store(read_resolved(ctx) | 0x80, Ordering::Relaxed);
    }
    // Permissions may have changed while the filter was off (it watches ACL commands).
    crate::module::acl::invalidate();
    let mut installed = FILTER.lock().unwrap_or_else(PoisonError::into_inner);
    if on && installed.is_none() {
        let Some(f) = hook::register(ctx, filter) else {
            return Err("cannot register the command filter".into());
        };
        *installed = Some(f);
        crate::module::acl::set_filter_installed(true);
    } else if let (false, Some(current)) = (on, *installed) {
        if !hook::unregister(ctx, current) {
            return Err("cannot unregister the command filter".into());
        }
        *installed = None;
        crate::module::acl::set_filter_installed(false);
    }
    Ok(())
}

/// Forget the filter handle without unregistering (module load: a handle kept from before an
/// unload is gone with the old module instance; Redis removes a module's filters on unload).
pub fn reset() {
    *FILTER.lock().unwrap_or_else(PoisonError::into_inner) = None;
    crate::module::acl::set_filter_installed(false);
    RESOLVED.store(0, Ordering::Relaxed);
}

/// `EVAL` / `EVALSHA` (any case) -> whether it is EVALSHA; `None` for other names and for a
/// name the server does not resolve (renamed or disabled).
fn eval_kind(name: &[u8]) -> Option<bool> {
    let evalsha = match name.len() {
        4 if name.eq_ignore_ascii_case(b"EVAL") => false,
        7 if name.eq_ignore_ascii_case(b"EVALSHA") => true,
        _ => return None,
    };
    resolves(evalsha).then_some(evalsha)
}

/// Most arguments a fixed-layout script takes after its SHA1 (numkeys, 3 keys, 5 args).
const STACK_ARGS: usize = 12;

hook::callback!(filter, filter_command);

fn filter_command(fctx: &hook::FilterArgs) {
    // Cheap exits first: this runs before every command.
    let argc = fctx.len();
    let arg = |i: c_int| fctx.arg(i);
    if argc < 4 {
        if argc > 0 && crate::module::acl::changes_permissions(arg(0)) {
            crate::module::acl::invalidate();
        }
        return;
    }
    let name0 = arg(0);
    let Some(evalsha) = eval_kind(name0) else {
        if crate::module::acl::changes_permissions(name0) {
            crate::module::acl::invalidate();
        }
        return;
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let op = lookup(evalsha, arg(1))?;
        let n = usize::try_from(argc - 2).unwrap_or(0);
        let mut stack: [&[u8]; STACK_ARGS] = [&[]; STACK_ARGS];
        let heap: Vec<&[u8]>;
        let rest: &[&[u8]] = if n <= STACK_ARGS {
            for (slot, i) in stack.iter_mut().zip(2..argc) {
                *slot = arg(i);
            }
            stack.get(..n).unwrap_or(&[])
        } else {
            heap = (2..argc).map(arg).collect();
            &heap
        };
        if scripts::parse(&kinds::op(op)?.layout, rest).is_err() {
            stats::redisson_lua(op);
            return None;
        }
        let name = NAMES.get(op.0)?.get(usize::from(evalsha))?.ptr();
        Some(name)
    }));
    let Ok(Some(name)) = r else { return };
    fctx.replace_name(name);
}
