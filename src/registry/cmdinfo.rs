//! The LOCK.* command table: registration flags and key positions, COMMAND DOCS / COMMAND INFO
//! metadata (summary, complexity, arity, key specs, arguments), ACL categories. Registered by
//! ffi/command_info.rs.

use crate::ffi::rm::{KEY_ACCESS, KEY_DELETE, KEY_RO, KEY_RW, KEY_UPDATE};
use std::ffi::{c_int, CStr};

#[derive(Clone, Copy)]
pub enum ArgKind {
    Key,
    Str,
    Int,
    /// A flag given by its token alone (`FENCE`).
    PureToken,
}

pub struct Arg {
    pub name: &'static CStr,
    pub kind: ArgKind,
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
}

const fn arg(name: &'static CStr, kind: ArgKind) -> Arg {
    Arg { name, kind, token: None, optional: false, multiple: false }
}

const fn opt(name: &'static CStr, kind: ArgKind, token: Option<&'static CStr>) -> Arg {
    Arg { name, kind, token, optional: true, multiple: false }
}

/// Where the command's keys are.
#[derive(Clone, Copy)]
pub enum Keys {
    /// Exactly one key, the first argument.
    First,
    /// `numkeys` at this argv index, then that many keys (the EVAL layout).
    Numkeys(c_int),
}

pub struct Spec {
    pub name: &'static CStr,
    pub flags: &'static CStr,
    pub acl: &'static CStr,
    pub arity: c_int,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub key_flags: u32,
    pub keys: Keys,
    pub args: &'static [Arg],
}

const RW_UPDATE: u32 = KEY_RW | KEY_UPDATE;
const RW_ACCESS_UPDATE: u32 = RW_UPDATE | KEY_ACCESS;
const RW_ACCESS_DELETE: u32 = KEY_RW | KEY_ACCESS | KEY_DELETE;
const RO_ACCESS: u32 = KEY_RO | KEY_ACCESS;

/// Every LOCK.* command: registration flags, key positions, COMMAND DOCS.
pub const SPECS: [Spec; 6] = [
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
