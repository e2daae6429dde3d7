//! Command registration: flags and key positions, plus COMMAND DOCS / COMMAND INFO metadata
//! (summary, complexity, arity, key specs, arguments) through the raw `RM_SetCommandInfo`
//! (7.0), and ACL categories on servers that have `RM_SetCommandACLCategories` (7.2+).

use crate::ffi::rm::{self, rm, Ctx};
use redis_module::raw;
use std::ffi::c_int;
use std::ffi::CStr;
use std::ptr::{null, null_mut};

/// A command's C entry point; `lib.rs` passes them in (the registry imports no glue).
pub type Cmd = unsafe extern "C" fn(Ctx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

#[derive(Clone, Copy)]
enum ArgKind {
    Key,
    Str,
    Int,
    /// A flag given by its token alone (`FENCE`).
    PureToken,
}

struct Arg {
    name: &'static CStr,
    kind: ArgKind,
    token: Option<&'static CStr>,
    optional: bool,
    multiple: bool,
}

const fn arg(name: &'static CStr, kind: ArgKind) -> Arg {
    Arg { name, kind, token: None, optional: false, multiple: false }
}

const fn opt(name: &'static CStr, kind: ArgKind, token: Option<&'static CStr>) -> Arg {
    Arg { name, kind, token, optional: true, multiple: false }
}

/// Where the command's keys are.
#[derive(Clone, Copy)]
enum Keys {
    /// Exactly one key, the first argument.
    First,
    /// `numkeys` at this argv index, then that many keys (the EVAL layout).
    Numkeys(c_int),
}

struct Spec {
    name: &'static CStr,
    flags: &'static CStr,
    acl: &'static CStr,
    arity: c_int,
    summary: &'static CStr,
    complexity: &'static CStr,
    key_flags: u32,
    keys: Keys,
    args: &'static [Arg],
}

const RW_UPDATE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;
const RW_ACCESS_UPDATE: u32 = RW_UPDATE | raw::REDISMODULE_CMD_KEY_ACCESS;
const RW_ACCESS_DELETE: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_DELETE;
const RO_ACCESS: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;

const SPECS: [Spec; 6] = [
    Spec {
        name: c"lock.acquire",
        flags: c"write deny-oom",
        acl: c"write blocking",
        arity: -4,
        summary:
            c"Acquires (or re-enters) a lock for an owner with a lease; optionally waits in a FIFO queue and issues a fencing token",
        complexity: c"O(1)",
        key_flags: RW_ACCESS_UPDATE,
        keys: Keys::First,
        args: &[
            arg(c"key", ArgKind::Key),
            arg(c"owner", ArgKind::Str),
            arg(c"lease-ms", ArgKind::Int),
            opt(c"timeout-ms", ArgKind::Int, Some(c"WAIT")),
            opt(c"fence", ArgKind::PureToken, Some(c"FENCE")),
        ],
    },
    Spec {
        name: c"lock.release",
        flags: c"write",
        acl: c"write fast",
        arity: -3,
        summary: c"Releases one hold of a lock; frees it (or hands it to the next waiter) on the last hold",
        complexity: c"O(1)",
        key_flags: RW_ACCESS_DELETE,
        keys: Keys::First,
        args: &[
            arg(c"key", ArgKind::Key),
            arg(c"owner", ArgKind::Str),
            opt(c"lease-ms", ArgKind::Int, None),
        ],
    },
    Spec {
        name: c"lock.renew",
        flags: c"write fast",
        acl: c"write fast",
        arity: 4,
        summary: c"Resets the lease of a lock held by the owner (watchdog renewal)",
        complexity: c"O(1)",
        key_flags: RW_UPDATE,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key), arg(c"owner", ArgKind::Str), arg(c"lease-ms", ArgKind::Int)],
    },
    Spec {
        name: c"lock.forcerelease",
        flags: c"write fast",
        acl: c"write fast",
        arity: 2,
        summary: c"Frees a lock whoever holds it (or hands it to the next waiter)",
        complexity: c"O(1)",
        key_flags: RW_ACCESS_DELETE,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key)],
    },
    Spec {
        name: c"lock.info",
        flags: c"readonly fast",
        acl: c"read fast",
        arity: 2,
        summary: c"Returns a lock's owners with hold counts, its PTTL, the number of waiting clients and its last fencing token",
        complexity: c"O(N) where N is the number of owner fields (1 for a Redisson lock)",
        key_flags: RO_ACCESS,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key)],
    },
    Spec {
        name: c"lock.redisson",
        // Like EVAL: not flagged write (a script decides at run time; on a read-only replica or
        // under OOM the call runs in Lua and fails or succeeds as the script does).
        flags: c"deny-script may-replicate allow-stale no-mandatory-keys getkeys-api",
        acl: c"scripting slow",
        arity: -3,
        summary: c"Runs a Redisson lock script natively; the command filter of lock.redisson-scripts native renames EVAL/EVALSHA calls of known scripts into it",
        complexity: c"O(N) where N is the number of keys (1 to 3, or the batch size of a watchdog renewal)",
        key_flags: RW_ACCESS_UPDATE,
        keys: Keys::Numkeys(2),
        args: &[
            arg(c"script-or-sha1", ArgKind::Str),
            arg(c"numkeys", ArgKind::Int),
            Arg { name: c"key", kind: ArgKind::Key, token: None, optional: false, multiple: true },
            Arg { name: c"arg", kind: ArgKind::Str, token: None, optional: true, multiple: true },
        ],
    },
];

static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

fn describe(ctx: Ctx, spec: &Spec) -> Result<(), String> {
    let cmd = rm!(RedisModule_GetCommand(ctx, spec.name.as_ptr()) else null_mut());
    if cmd.is_null() {
        return Err(format!("cannot find command {:?}", spec.name));
    }
    // Zero-terminated arrays, as RM_SetCommandInfo expects.
    // SAFETY: all-zero is a valid value for these plain C structs (null pointers, zero ints).
    let mut key_specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    key_specs[0].flags = u64::from(spec.key_flags);
    key_specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    match spec.keys {
        Keys::First => {
            key_specs[0].bs.index = raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: 1 };
            key_specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            key_specs[0].fk.range = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            };
        }
        Keys::Numkeys(pos) => {
            key_specs[0].bs.index = raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos };
            key_specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
            key_specs[0].fk.keynum = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 {
                keynumidx: 0,
                firstkey: 1,
                keystep: 1,
            };
        }
    }

    let mut args: Vec<raw::RedisModuleCommandArg> = spec
        .args
        .iter()
        .map(|a| {
            // SAFETY: as above.
            let mut r: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
            r.name = a.name.as_ptr();
            r.type_ = match a.kind {
                ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                ArgKind::Str => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                ArgKind::Int => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ArgKind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            };
            r.key_spec_index = if matches!(a.kind, ArgKind::Key) { 0 } else { -1 };
            r.token = a.token.map_or(null(), CStr::as_ptr);
            r.flags = if a.optional { raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int } else { 0 }
                | if a.multiple { raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int } else { 0 };
            r
        })
        .collect();
    // SAFETY: terminator entry.
    args.push(unsafe { std::mem::zeroed() });

    // SAFETY: as above.
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.version = &VERSION;
    info.summary = spec.summary.as_ptr();
    info.complexity = spec.complexity.as_ptr();
    info.since = c"1.0.0".as_ptr();
    info.arity = spec.arity;
    info.key_specs = key_specs.as_mut_ptr();
    info.args = args.as_mut_ptr();
    if rm!(RedisModule_SetCommandInfo(cmd, &info) else raw::REDISMODULE_ERR as c_int)
        != raw::REDISMODULE_OK as c_int
    {
        return Err(format!("RM_SetCommandInfo failed for {:?}", spec.name));
    }
    if let Some(set_acl) = rm::api!(RedisModule_SetCommandACLCategories) {
        if unsafe { set_acl(cmd, spec.acl.as_ptr()) } != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot set ACL categories of {:?}", spec.name));
        }
    }
    Ok(())
}

/// Create every LOCK.* command and describe it; `handlers` gives each command's entry point by
/// name.
pub fn register(ctx: Ctx, handlers: &[(&CStr, Cmd)]) -> Result<(), String> {
    for spec in &SPECS {
        let Some(&(_, handler)) = handlers.iter().find(|(name, _)| *name == spec.name) else {
            return Err(format!("no handler for command {:?}", spec.name));
        };
        let (first, last, step) = match spec.keys {
            Keys::First => (1, 1, 1),
            Keys::Numkeys(_) => (0, 0, 0),
        };
        let ok = rm!(RedisModule_CreateCommand(
            ctx,
            spec.name.as_ptr(),
            Some(handler),
            spec.flags.as_ptr(),
            first,
            last,
            step,
        ) else raw::REDISMODULE_ERR as c_int);
        if ok != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot create command {:?}", spec.name));
        }
        describe(ctx, spec)?;
    }
    Ok(())
}
