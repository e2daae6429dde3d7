//! Command registration from the table in registry/cmdinfo.rs: `RM_CreateCommand`, then COMMAND
//! DOCS / COMMAND INFO metadata through the raw `RM_SetCommandInfo` (7.0), and ACL categories on
//! servers that have `RM_SetCommandACLCategories` (7.2+).

use crate::ffi::rm::{self, rm, Ctx};
use crate::registry::cmdinfo::{Arg, ArgKind, Keys, Spec};
use redis_module::raw;
use std::ffi::{c_int, CStr};
use std::ptr::{null, null_mut};

static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

fn describe(ctx: Ctx, spec: &Spec) -> Result<(), String> {
    let cmd = rm!(RedisModule_GetCommand(ctx.0, spec.name.as_ptr()) else null_mut());
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

    // Sub-argument arrays (a OneOf's), kept alive until RM_SetCommandInfo copied them.
    let mut subs: Vec<Vec<raw::RedisModuleCommandArg>> = Vec::new();
    let mut args = command_args(spec.args, &mut subs);
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

/// The C description of `list` (zero-terminated); a OneOf's alternatives go to `subs`.
fn command_args(
    list: &[Arg],
    subs: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> Vec<raw::RedisModuleCommandArg> {
    let mut out: Vec<raw::RedisModuleCommandArg> = list
        .iter()
        .map(|a| {
            // SAFETY: a plain C struct; all-zero is its "unset" value.
            let mut r: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
            r.name = a.name.as_ptr();
            r.type_ = match a.kind {
                ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                ArgKind::Str => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                ArgKind::Int => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ArgKind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                ArgKind::OneOf(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            };
            if let ArgKind::OneOf(alternatives) = a.kind {
                let mut sub = command_args(alternatives, subs);
                r.subargs = sub.as_mut_ptr();
                // The Vec's heap buffer does not move when the Vec itself is moved.
                subs.push(sub);
            }
            r.key_spec_index = if matches!(a.kind, ArgKind::Key) { 0 } else { -1 };
            r.token = a.token.map_or(null(), CStr::as_ptr);
            r.flags = if a.optional { raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int } else { 0 }
                | if a.multiple { raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int } else { 0 };
            r
        })
        .collect();
    // SAFETY: terminator entry.
    out.push(unsafe { std::mem::zeroed() });
    out
}

/// Create each command of `specs` (its row's entry point) and describe it.
pub fn register(ctx: Ctx, specs: &[&Spec]) -> Result<(), String> {
    for spec in specs {
        let (first, last, step) = match spec.keys {
            Keys::First => (1, 1, 1),
            Keys::Numkeys(_) => (0, 0, 0),
        };
        let ok = rm!(RedisModule_CreateCommand(
            ctx.0,
            spec.name.as_ptr(),
            Some(spec.handler),
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
