//! Running a server command from the module (`RM_Call`), in one place.
//!
//! `RM_Call` returns NULL when it does not run the command at all: a name the server does not
//! know (`rename-command X ""` or renamed to another name), wrong arity, a key of a slot this
//! cluster node does not serve, a cluster that is down, an ACL or script-mode refusal without
//! the `E` flag. Every call goes through [`call`], which checks for that before anything else
//! touches the reply, and tells the caller why the command did not run. With `E` the server
//! answers an unknown name with an error reply instead of NULL; [`call`] reports it as
//! [`NotRun::Unknown`] all the same, so no caller mistakes a renamed command for its answer.
//! `tests/architecture.rs` checks that no other file calls `RM_Call`.

use crate::ffi::rm::{rm, Ctx, OwnedStr, RStr};
use redis_module::raw;
use std::ffi::{c_int, CStr};
use std::ptr::null_mut;

/// Why a command did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRun {
    /// The server knows no command by that name (renamed or disabled).
    Unknown,
    /// The key is in a slot this cluster node does not serve (or is moving).
    NotLocal,
    /// The cluster is down.
    ClusterDown,
    /// Any other refusal before the command ran (the `errno` RM_Call set).
    Other(c_int),
}

/// How the command runs: the `RM_Call` format flags besides the argv (`v`).
#[derive(Clone, Copy, Default)]
pub struct How {
    /// `!`: replicate the command's effects.
    pub replicate: bool,
    /// `C`: check the calling user's ACL.
    pub as_user: bool,
    /// `0`: reply in the calling client's protocol.
    pub client_protocol: bool,
    /// `E`: errors (refusals included) as error replies.
    pub errors_as_replies: bool,
    /// `M`: refuse `deny-oom` commands under `maxmemory`, as for a client.
    pub respect_oom: bool,
    /// `S`: script mode (a write is refused as in a script: min-replicas, disk error, read-only).
    pub script: bool,
}

impl How {
    fn format(self) -> [u8; 8] {
        let mut f = [0u8; 8];
        let flags = [
            (self.replicate, b'!'),
            (self.as_user, b'C'),
            (self.client_protocol, b'0'),
            (self.errors_as_replies, b'E'),
            (self.respect_oom, b'M'),
            (self.script, b'S'),
            (true, b'v'),
        ];
        for (slot, c) in f.iter_mut().zip(flags.iter().filter(|(on, _)| *on).map(|(_, c)| *c)) {
            *slot = c;
        }
        f // at most 7 flags: the last byte stays the terminating NUL
    }
}

fn errno_location() -> *mut c_int {
    // SAFETY: glibc's thread-local errno; always a valid pointer on this thread.
    unsafe { libc::__errno_location() }
}

/// Run `cmd` with `args` (the arguments after the name) as `how` says. `Err` when the command
/// did not run; the reply otherwise (an error reply is a reply: the command ran and failed, or
/// with `E`, the server refused it for a reason other than its name).
pub fn call(ctx: Ctx, cmd: &CStr, how: How, args: &[RStr]) -> Result<CallReply, NotRun> {
    let fmt = how.format();
    // SAFETY: errno is this thread's; cleared so that an error reply can be told apart.
    unsafe { *errno_location() = 0 };
    let p = rm!(RedisModule_Call(
        ctx.0,
        cmd.as_ptr(),
        fmt.as_ptr().cast(),
        args.as_ptr().cast_mut().cast::<*mut raw::RedisModuleString>(),
        args.len()
    ) else null_mut());
    // SAFETY: as above.
    let errno = unsafe { *errno_location() };
    let why = match errno {
        libc::ENOENT => NotRun::Unknown,
        libc::EPERM => NotRun::NotLocal,
        libc::ENETDOWN | libc::EROFS => NotRun::ClusterDown,
        e => NotRun::Other(e),
    };
    if p.is_null() {
        return Err(why);
    }
    let reply = CallReply { ptr: p, owned: true };
    // With `E`, an unknown name comes back as an error reply with errno ENOENT.
    if reply.is_error() && why == NotRun::Unknown {
        return Err(why);
    }
    Ok(reply)
}

// ---- the commands the module runs --------------------------------------------------------
//
// Each may be renamed or disabled by the server's configuration; every caller has an answer
// for that (tests/security_calls.rs renames each in turn).

/// `EVAL` / `EVALSHA` with `args` (script or SHA1, numkeys, keys, args), as the calling user
/// would run it: its effects replicated, its ACL, its protocol, errors as replies, OOM rules as
/// for a client (7.2+ lets module calls ignore them otherwise).
pub fn script(ctx: Ctx, evalsha: bool, args: &[RStr]) -> Result<CallReply, NotRun> {
    let cmd = if evalsha { c"EVALSHA" } else { c"EVAL" };
    let how = How {
        replicate: true,
        as_user: true,
        client_protocol: true,
        errors_as_replies: true,
        respect_oom: true,
        ..How::default()
    };
    call(ctx, cmd, how, args)
}

/// Whether the server runs a command named `EVAL` (`evalsha` false) or `EVALSHA`, asked by
/// running it with an argument it rejects before doing anything (`EVAL "" x`: numkeys is not
/// an integer; `EVALSHA "" x`: not a SHA1). For servers where `COMMAND` itself is renamed.
pub fn runs_eval(ctx: Ctx, evalsha: bool) -> bool {
    let cmd = if evalsha { c"EVALSHA" } else { c"EVAL" };
    let (empty, x) = (OwnedStr::new(b""), OwnedStr::new(b"x"));
    call(ctx, cmd, How::default(), &[empty.ptr(), x.ptr()]).is_ok()
}

/// `COMMAND INFO EVAL EVALSHA`.
pub fn command_info_eval(ctx: Ctx) -> Result<CallReply, NotRun> {
    let args = [OwnedStr::new(b"INFO"), OwnedStr::new(b"EVAL"), OwnedStr::new(b"EVALSHA")];
    call(ctx, c"COMMAND", How::default(), &args.each_ref().map(OwnedStr::ptr))
}

/// A write that never writes, in script mode with errors as replies: the server first says
/// whether it refuses writes now (min-replicas, disk error, read-only replica), then the
/// command fails on its arguments. `SETRANGE key -1 x` (offset out of range) where the server
/// has SETRANGE, else `LOCK.RENEW key probe x` (lease not an integer), the module's own write
/// command, which no configuration can rename.
pub fn write_probe(ctx: Ctx, key: RStr) -> Result<CallReply, NotRun> {
    let how = How { script: true, errors_as_replies: true, ..How::default() };
    let (minus_one, x) = (OwnedStr::new(b"-1"), OwnedStr::new(b"x"));
    match call(ctx, c"SETRANGE", how, &[key, minus_one.ptr(), x.ptr()]) {
        Err(NotRun::Unknown) => {
            let probe = OwnedStr::new(b"probe");
            call(ctx, c"LOCK.RENEW", how, &[key, probe.ptr(), x.ptr()])
        }
        r => r,
    }
}

/// Whether this cluster node would serve `key` to a client now, as the server decides for a
/// command (`Err(NotLocal)`: another node's slot, or a slot migrating or importing;
/// `Err(ClusterDown)`): `LOCK.RENEW key probe x`, which fails on its lease argument before
/// reading anything.
pub fn key_is_local(ctx: Ctx, key: RStr) -> Result<(), NotRun> {
    let (probe, x) = (OwnedStr::new(b"probe"), OwnedStr::new(b"x"));
    call(ctx, c"LOCK.RENEW", How::default(), &[key, probe.ptr(), x.ptr()]).map(drop)
}

/// `GET key` (reads without converting the value's encoding).
pub fn get(ctx: Ctx, key: &[u8]) -> Result<CallReply, NotRun> {
    let k = OwnedStr::new(key);
    call(ctx, c"GET", How::default(), &[k.ptr()])
}

/// `ACL GETUSER user`.
pub fn acl_getuser(ctx: Ctx, user: RStr) -> Result<CallReply, NotRun> {
    let sub = OwnedStr::new(b"GETUSER");
    call(ctx, c"ACL", How::default(), &[sub.ptr(), user])
}

/// The reply of a command run with [`call`], freed on drop (an element borrowed from an array
/// is not). Never null.
pub struct CallReply {
    ptr: *mut raw::RedisModuleCallReply,
    owned: bool,
}

impl CallReply {
    pub fn kind(&self) -> c_int {
        rm!(RedisModule_CallReplyType(self.ptr) else 0)
    }
    pub fn is_error(&self) -> bool {
        self.kind() == raw::REDISMODULE_REPLY_ERROR as c_int
    }
    /// Reply to the client with this reply, as is.
    pub fn reply_with(&self, ctx: Ctx) {
        rm!(RedisModule_ReplyWithCallReply(ctx.0, self.ptr) else 0);
    }
    pub fn is_string(&self) -> bool {
        self.kind() == raw::REDISMODULE_REPLY_STRING as c_int
    }
    pub fn is_array(&self) -> bool {
        self.kind() == raw::REDISMODULE_REPLY_ARRAY as c_int
    }
    /// The bytes of a string, status or error reply (empty for other types).
    pub fn bytes(&self) -> &[u8] {
        let mut len = 0usize;
        let p = rm!(RedisModule_CallReplyStringPtr(self.ptr, &mut len) else std::ptr::null());
        if p.is_null() {
            return &[];
        }
        // SAFETY: `len` readable bytes owned by the reply, which outlives the borrow.
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    }
    pub fn len(&self) -> usize {
        rm!(RedisModule_CallReplyLength(self.ptr) else 0)
    }
    pub fn elem(&self, i: usize) -> Option<CallReply> {
        let p = rm!(RedisModule_CallReplyArrayElement(self.ptr, i) else null_mut());
        if p.is_null() {
            None
        } else {
            Some(CallReply { ptr: p, owned: false })
        }
    }
}

impl Drop for CallReply {
    fn drop(&mut self) {
        if self.owned && !self.ptr.is_null() {
            rm!(RedisModule_FreeCallReply(self.ptr) else ());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(&How::default().format(), b"v\0\0\0\0\0\0\0");
        let all = How {
            replicate: true,
            as_user: true,
            client_protocol: true,
            errors_as_replies: true,
            respect_oom: true,
            script: true,
        };
        assert_eq!(&all.format(), b"!C0EMSv\0");
    }
}
