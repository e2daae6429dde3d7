//! The LOCK.* commands, shared by the kinds they serve: each entry point parses its arguments
//! once (`logic/command_args.rs`) and hands the command to the plain lock (no `READ` /
//! `WRITE`) or to the read-write lock (`module/rwlock/commands.rs`); FORCERELEASE and INFO go
//! by what the key holds. The rows (COMMAND DOCS, flags, key positions) sit beside them.

use crate::ffi::command::{entry, run};
use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{Ctx, RStr};
use crate::logic::command_args as cargs;
use crate::logic::error::Error;
use crate::module::lock::commands as lock;
use crate::module::rwlock::commands as rwlock;
use crate::registry::cmdinfo::{
    arg, opt, Arg, ArgKind, Keys, Spec, RO_ACCESS, RW_ACCESS_DELETE, RW_ACCESS_UPDATE, RW_UPDATE,
};

/// argv[1] and argv[2]: the key and owner strings (arity was checked by the parser).
fn key_owner(strs: &[RStr]) -> Result<(RStr, RStr), Error> {
    match strs {
        [k, o, ..] => Ok((*k, *o)),
        _ => Err(Error::Arity),
    }
}

/// The key of a command that takes nothing else (FORCERELEASE, INFO).
fn only_key(strs: &[RStr], argv: &[&[u8]]) -> Result<RStr, Error> {
    cargs::key_only(argv)?;
    strs.first().copied().ok_or(Error::Arity)
}

fn acquire(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let a = cargs::acquire(argv)?;
    let (name, owner) = key_owner(strs)?;
    match a.access {
        None => lock::acquire(ctx, name, owner, &a),
        Some(access) => rwlock::acquire(ctx, name, owner, &a, access),
    }
}

fn release(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let a = cargs::release(argv)?;
    let (name, owner) = key_owner(strs)?;
    match a.access {
        None => lock::release(ctx, name, owner, &a),
        Some(access) => rwlock::release(ctx, name, owner, &a, access),
    }
}

fn renew(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let a = cargs::renew(argv)?;
    let (name, owner) = key_owner(strs)?;
    match a.access {
        None => lock::renew(ctx, name, owner, &a),
        Some(access) => rwlock::renew(ctx, name, owner, &a, access),
    }
}

fn force_release(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let name = only_key(strs, argv)?;
    let key = Key::write(ctx, name);
    if key.kind() == KeyKind::Hash && lock::is_rwlock(&key) {
        rwlock::force_release(ctx, &key, name)
    } else {
        lock::force_release(ctx, &key, name)
    }
}

fn info(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let name = only_key(strs, argv)?;
    let key = Key::read(ctx, name);
    if key.kind() == KeyKind::Hash && lock::is_rwlock(&key) {
        rwlock::info(ctx, &key, name)
    } else {
        lock::info(ctx, &key, name)
    }
}

entry!(acquire_cmd, |ctx, argv| run(ctx, argv, acquire));
entry!(release_cmd, |ctx, argv| run(ctx, argv, release));
entry!(renew_cmd, |ctx, argv| run(ctx, argv, renew));
entry!(force_release_cmd, |ctx, argv| run(ctx, argv, force_release));
entry!(info_cmd, |ctx, argv| run(ctx, argv, info));

/// `READ | WRITE`: a read-write lock's hold.
const ACCESS: [Arg; 2] =
    [arg(c"read", ArgKind::PureToken).token(c"READ"), arg(c"write", ArgKind::PureToken).token(c"WRITE")];

/// The LOCK.* commands: entry point, registration flags, key positions, COMMAND DOCS.
pub const COMMANDS: [Spec; 5] = [
    Spec {
        name: c"lock.acquire",
        handler: acquire_cmd,
        flags: c"write deny-oom",
        acl: c"write blocking",
        arity: -4,
        summary:
            c"Acquires (or re-enters) a lock for an owner with a lease, or a read or write hold of a read-write lock; optionally waits in a FIFO queue and issues a fencing token",
        complexity: c"O(1)",
        key_flags: RW_ACCESS_UPDATE,
        keys: Keys::First,
        args: &[
            arg(c"key", ArgKind::Key),
            arg(c"owner", ArgKind::Str),
            arg(c"lease-ms", ArgKind::Int),
            opt(c"timeout-ms", ArgKind::Int, Some(c"WAIT")),
            opt(c"fence", ArgKind::PureToken, Some(c"FENCE")),
            opt(c"access", ArgKind::OneOf(&ACCESS), None),
        ],
    },
    Spec {
        name: c"lock.release",
        handler: release_cmd,
        flags: c"write",
        acl: c"write fast",
        arity: -3,
        summary: c"Releases one hold of a lock (READ / WRITE: of a read-write lock); frees it (or hands it to the next waiters) on the last hold",
        complexity: c"O(1); O(N) with READ, N the read holds of every owner (their timeout keys are looked at)",
        key_flags: RW_ACCESS_DELETE,
        keys: Keys::First,
        args: &[
            arg(c"key", ArgKind::Key),
            arg(c"owner", ArgKind::Str),
            opt(c"lease-ms", ArgKind::Int, None),
            opt(c"access", ArgKind::OneOf(&ACCESS), None),
        ],
    },
    Spec {
        name: c"lock.renew",
        handler: renew_cmd,
        flags: c"write fast",
        acl: c"write fast",
        arity: -4,
        summary: c"Resets the lease of a lock held by the owner (watchdog renewal); READ renews the owner's read holds of a read-write lock, WRITE its write hold",
        complexity: c"O(1); O(N) with READ, N the owner's read holds",
        key_flags: RW_UPDATE,
        keys: Keys::First,
        args: &[
            arg(c"key", ArgKind::Key),
            arg(c"owner", ArgKind::Str),
            arg(c"lease-ms", ArgKind::Int),
            opt(c"access", ArgKind::OneOf(&ACCESS), None),
        ],
    },
    Spec {
        name: c"lock.forcerelease",
        handler: force_release_cmd,
        flags: c"write fast",
        acl: c"write fast",
        arity: 2,
        summary: c"Frees a lock or a read-write lock whoever holds it (or hands it to the next waiters)",
        complexity: c"O(1); O(N) for a read-write lock, N its read holds",
        key_flags: RW_ACCESS_DELETE,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key)],
    },
    Spec {
        name: c"lock.info",
        handler: info_cmd,
        flags: c"readonly fast",
        acl: c"read fast",
        arity: 2,
        summary: c"Returns a lock's owners with hold counts (a read-write lock's mode, readers and writer), its PTTL, the waiting clients and its last fencing token",
        complexity: c"O(N) where N is the number of owner fields (1 for a Redisson lock)",
        key_flags: RO_ACCESS,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key)],
    },
];
