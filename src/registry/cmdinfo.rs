//! What a command's table row holds: its entry point, registration flags and key positions,
//! COMMAND DOCS / COMMAND INFO metadata (summary, complexity, arity, key specs, arguments), ACL
//! categories. Each row sits beside its handler (`module/commands.rs`, `module/scripts/native.rs`); `lib.rs` lists
//! the rows and ffi/command_info.rs registers them.

use crate::ffi::command::Entry;
use crate::ffi::rm::{KEY_ACCESS, KEY_DELETE, KEY_RO, KEY_RW, KEY_UPDATE};
use std::ffi::{c_int, CStr};

#[derive(Clone, Copy)]
pub enum ArgKind {
    Key,
    Str,
    Int,
    /// A flag given by its token alone (`FENCE`).
    PureToken,
    /// One of these arguments (`READ | WRITE`).
    OneOf(&'static [Arg]),
}

pub struct Arg {
    pub name: &'static CStr,
    pub kind: ArgKind,
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
}

pub const fn arg(name: &'static CStr, kind: ArgKind) -> Arg {
    Arg { name, kind, token: None, optional: false, multiple: false }
}

impl Arg {
    /// The same argument introduced by `token`.
    pub const fn token(self, token: &'static CStr) -> Arg {
        Arg { token: Some(token), ..self }
    }
}

pub const fn opt(name: &'static CStr, kind: ArgKind, token: Option<&'static CStr>) -> Arg {
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
    /// The command's C entry point (made by `ffi::command::entry!`).
    pub handler: Entry,
    pub flags: &'static CStr,
    pub acl: &'static CStr,
    pub arity: c_int,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub key_flags: u32,
    pub keys: Keys,
    pub args: &'static [Arg],
}

pub const RW_UPDATE: u32 = KEY_RW | KEY_UPDATE;
pub const RW_ACCESS_UPDATE: u32 = RW_UPDATE | KEY_ACCESS;
pub const RW_ACCESS_DELETE: u32 = KEY_RW | KEY_ACCESS | KEY_DELETE;
pub const RO_ACCESS: u32 = KEY_RO | KEY_ACCESS;
