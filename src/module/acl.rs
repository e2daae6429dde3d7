//! ACL checks for what the module does on a client's behalf beyond the command the server
//! checked: the user and the command names for the checks of a natively run script's path
//! (made by `module/scripts/plan.rs`) and of the EVAL/EVALSHA the client sent, the FENCE token
//! key, and grants made after a wait (where the server re-checks its own blocked commands).
//!
//! Uses `RM_GetCurrentUserName` + `RM_GetModuleUserFromUserName` and the
//! `RM_ACLCheck*Permissions` calls (all Redis 7.0), detected at run time: without them nothing
//! is checked. A user with every permission (`ACL GETUSER`: commands `+@all`, keys `~*`,
//! channels `&*`, no selectors, all databases) is remembered per client, so the default user
//! pays one table look-up; the table is dropped whenever an `ACL`, `AUTH`, `HELLO`, `RESET` or
//! `EXEC` passes the command filter, and never filled inside a transaction or a script.

use crate::ffi::acl as ffi_acl;
pub use crate::ffi::acl::User;
use crate::ffi::blocked::Client;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr, StaticStr};
use crate::logic::error::Error;
use crate::registry::stats;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};

/// The commands checked on a client's behalf (`logic/plan.rs`), their names by index into
/// [`NAMES`].
pub use crate::logic::plan::Cmd;

const NAME_TEXT: [&[u8]; Cmd::ALL.len()] = Cmd::TEXT;

/// The command names (and "px"), created once and never freed.
static NAMES: LazyLock<Vec<StaticStr>> =
    LazyLock::new(|| NAME_TEXT.iter().chain([&b"px"[..]].iter()).map(|n| StaticStr::new(n)).collect());

fn name_str(i: usize) -> RStr {
    NAMES.get(i).map_or(RStr::ABSENT, StaticStr::ptr)
}

pub fn name(cmd: Cmd) -> RStr {
    name_str(cmd as usize)
}

/// The string "px" (SET's option).
pub fn px() -> RStr {
    name_str(NAME_TEXT.len())
}

/// Whether the server has the ACL API.
pub fn available() -> bool {
    ffi_acl::available()
}

/// Whether the server re-checks a blocked client's permissions when it is served (BLPOP gets
/// NOPERM after an ACL change on Redis 7.2+ and Valkey, not on 7.0). Detected by an API of 7.2.
pub fn grants_recheck() -> bool {
    available() && ffi_acl::has_7_2_api()
}

// ---- the per-client cache of unrestricted users ---------------------------------------------

static EPOCH: AtomicU64 = AtomicU64::new(1);
const SLOTS: usize = 256;
/// (client id, epoch << 1 | 1 when its user has every permission) of clients seen lately.
static CACHE: [(AtomicU64, AtomicU64); SLOTS] = [const { (AtomicU64::new(0), AtomicU64::new(0)) }; SLOTS];

#[allow(clippy::indexing_slicing, reason = "i % SLOTS < SLOTS, the array's length")]
fn slot(id: u64) -> &'static (AtomicU64, AtomicU64) {
    let i = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize;
    &CACHE[i % SLOTS]
}

/// Forget every cached answer (a command that can change a client's permissions ran).
pub fn invalidate() {
    EPOCH.fetch_add(1, Ordering::Relaxed);
}

/// Module load and unload: every cached answer and remembered waiting user is dropped.
pub fn reset() {
    FILTER_INSTALLED.store(false, Ordering::Relaxed);
    invalidate();
    WAITING.lock().unwrap_or_else(PoisonError::into_inner).clear();
}

/// Whether the command filter is installed (it then sees every ACL change); set by the filter.
static FILTER_INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The filter says whether it is installed (scripts/filter.rs).
pub fn set_filter_installed(on: bool) {
    FILTER_INSTALLED.store(on, Ordering::Relaxed);
}

fn filter_installed() -> bool {
    FILTER_INSTALLED.load(Ordering::Relaxed)
}

/// Whether `name` (a command name as the client sent it) can change permissions: ACL, AUTH,
/// HELLO, RESET, EXEC (a transaction may hold an ACL SETUSER queued earlier).
pub fn changes_permissions(name: &[u8]) -> bool {
    match name.len() {
        3 => name.eq_ignore_ascii_case(b"ACL"),
        4 => name.eq_ignore_ascii_case(b"AUTH") || name.eq_ignore_ascii_case(b"EXEC"),
        5 => name.eq_ignore_ascii_case(b"HELLO") || name.eq_ignore_ascii_case(b"RESET"),
        _ => false,
    }
}

/// `ACL GETUSER <name>`: commands `+@all`, keys `~*`, channels `&*`, no selectors, and (Valkey
/// 9) databases `alldbs`.
fn has_every_permission(ctx: Ctx, user: RStr) -> bool {
    // Without an answer (ACL renamed or disabled) the user is checked for real on every call.
    let Ok(r) = crate::ffi::call::acl_getuser(ctx, user) else { return false };
    if !r.is_array() {
        return false;
    }
    let n = r.len();
    let (mut commands, mut keys, mut channels, mut selectors) = (false, false, false, false);
    let mut i = 0;
    while i + 1 < n {
        let (Some(k), Some(v)) = (r.elem(i), r.elem(i + 1)) else { return false };
        match k.bytes() {
            b"commands" => commands = v.bytes() == b"+@all",
            b"keys" => keys = v.bytes() == b"~*",
            b"channels" => channels = v.bytes() == b"&*",
            b"selectors" => selectors = v.is_array() && v.len() == 0,
            b"databases" if v.bytes() != b"alldbs" => return false,
            _ => {}
        }
        i += 2;
    }
    commands && keys && channels && selectors
}

/// Users (by name) found to have every permission, for the epoch `.0`: `ACL GETUSER` costs
/// about 770 000 instructions on 7.0 (it describes every command rule), so it runs once per
/// user and permission change, not once per client.
type Users = (u64, Vec<(Vec<u8>, bool)>);
static USERS: Mutex<Users> = Mutex::new((0, Vec::new()));

fn unrestricted_name(ctx: Ctx, name: &OwnedStr, epoch: u64) -> bool {
    let n = name.bytes();
    {
        let u = USERS.lock().unwrap_or_else(PoisonError::into_inner);
        if u.0 == epoch {
            if let Some((_, all)) = u.1.iter().find(|(x, _)| x == n) {
                return *all;
            }
        }
    }
    let all = has_every_permission(ctx, name.ptr());
    let mut u = USERS.lock().unwrap_or_else(PoisonError::into_inner);
    if u.0 != epoch {
        *u = (epoch, Vec::new());
    }
    if u.1.len() < 64 {
        u.1.push((n.to_vec(), all));
    }
    all
}

/// The calling client's user when its permissions must be checked; `None` for a user with
/// every permission, a client without a user (the AOF, a master link) or a server without the
/// ACL API.
///
/// The cache is used only while the command filter is installed (`native`): only then does the
/// module see the commands that change permissions. Otherwise every call checks for real.
pub fn calling_user(ctx: Ctx) -> Option<User> {
    if !available() {
        return None;
    }
    if !filter_installed() {
        let name = ffi_acl::current_user_name(ctx)?;
        return Some(User::from_name(name));
    }
    let id = ffi_acl::client_id(ctx);
    let epoch = EPOCH.load(Ordering::Relaxed);
    let s = slot(id);
    let known = (id != 0 && s.0.load(Ordering::Relaxed) == id)
        .then(|| s.1.load(Ordering::Relaxed))
        .filter(|v| v >> 1 == epoch);
    if known.is_some_and(|v| v & 1 == 1) {
        return None;
    }
    let name = ffi_acl::current_user_name(ctx)?;
    // Inside MULTI/EXEC or a script, permissions may change between two commands of the same
    // execution unit (an `ACL SETUSER` queued in the transaction, which the filter saw before
    // EXEC invalidated the cache) without the filter seeing it again: nothing is cached there,
    // and the user is checked for real. (A cached answer read there is safe: EXEC invalidated
    // everything before the transaction ran, and nothing is filled inside it. The context flags
    // are read only here, off the cached path: see `rm::ctx_flags`.)
    if known.is_some() || rm::flag(ctx, crate::ffi::rm::CTX_MULTI | crate::ffi::rm::CTX_LUA) {
        return Some(User::from_name(name)); // restricted, known, or inside a transaction
    }
    let all = unrestricted_name(ctx, &name, epoch);
    if id != 0 {
        s.0.store(id, Ordering::Relaxed);
        s.1.store(epoch << 1 | u64::from(all), Ordering::Relaxed);
    }
    if all {
        return None;
    }
    Some(User::from_name(name))
}

// ---- errors ---------------------------------------------------------------------------------

fn denied() -> &'static str {
    stats::ACL_DENIED.inc();
    ""
}

/// EVAL / EVALSHA itself (with the script's keys) is not allowed: Lua's class, NOPERM.
pub fn eval_denied(user: &User, evalsha: bool) -> Error {
    denied();
    Error::EvalDenied { user: user.name().to_string(), evalsha }
}

/// A command inside the script is not allowed: the `ERR` class Lua gives.
pub fn inner_denied(user: &User, cmd: RStr) -> Error {
    denied();
    Error::ScriptDenied {
        user: user.name().to_string(),
        cmd: String::from_utf8_lossy(rm::bytes(&cmd)).to_ascii_lowercase(),
    }
}

/// The FENCE token key of lock `lock` may be written by the calling user.
pub fn may_write_token(ctx: Ctx, lock: &[u8]) -> Result<(), Error> {
    let Some(user) = calling_user(ctx) else { return Ok(()) };
    let t = OwnedStr::new(&crate::registry::config::token_key(lock));
    if user.may_write(t.ptr()) {
        Ok(())
    } else {
        denied();
        Err(Error::TokenDenied)
    }
}

/// May the calling user write `key` (a key a command derives, such as a read hold's timeout
/// key)? Counted as a denial when not.
pub fn may_write(ctx: Ctx, key: &[u8]) -> bool {
    let Some(user) = calling_user(ctx) else { return true };
    let k = OwnedStr::new(key);
    let ok = user.may_write(k.ptr());
    if !ok {
        denied();
    }
    ok
}

/// A command that may free a lock publishes `channel` (unless `lock.publish-mode off`): the
/// calling user must be allowed to publish there. `Err` before anything is written.
pub fn may_publish_on(ctx: Ctx, channel: &[u8]) -> Result<(), Error> {
    if crate::registry::config::mode() == crate::registry::config::PublishMode::Off {
        return Ok(());
    }
    let Some(user) = calling_user(ctx) else { return Ok(()) };
    let channel = OwnedStr::new(channel);
    if user.may_publish(channel.ptr()) {
        Ok(())
    } else {
        denied();
        Err(Error::PublishDenied)
    }
}

/// May `user` (the caller, looked up once by a command that checks several names) write
/// `key`? Counted as a denial when not.
pub fn user_may_write(user: Option<&User>, key: &[u8]) -> bool {
    let Some(user) = user else { return true };
    let k = OwnedStr::new(key);
    let ok = user.may_write(k.ptr());
    if !ok {
        denied();
    }
    ok
}

/// May `user` publish on `channel` (always, with `lock.publish-mode off`)? Counted as a denial
/// when not.
pub fn user_may_publish(user: Option<&User>, channel: &[u8]) -> bool {
    if crate::registry::config::mode() == crate::registry::config::PublishMode::Off {
        return true;
    }
    let Some(user) = user else { return true };
    let c = OwnedStr::new(channel);
    let ok = user.may_publish(c.ptr());
    if !ok {
        denied();
    }
    ok
}

/// May the calling user read `key` (LOCK.INFO's token key)?
pub fn may_read(ctx: Ctx, key: &[u8]) -> bool {
    let Some(user) = calling_user(ctx) else { return true };
    let k = OwnedStr::new(key);
    user.may_read(k.ptr())
}

/// A LOCK.RELEASE / FORCERELEASE that frees lock `lock` publishes its release message (unless
/// `lock.publish-mode off`): the calling user must be allowed to publish on that channel, as a
/// Redisson unlock script's PUBLISH is (checked whether or not the lock is then handed to a
/// waiter, as for the script). `Err` before anything is written.
pub fn may_publish_release(ctx: Ctx, lock: &[u8]) -> Result<(), Error> {
    if crate::registry::config::mode() == crate::registry::config::PublishMode::Off {
        return Ok(());
    }
    let Some(user) = calling_user(ctx) else { return Ok(()) };
    let channel = OwnedStr::new(&crate::registry::config::channel(lock));
    if user.may_publish(channel.ptr()) {
        Ok(())
    } else {
        denied();
        Err(Error::PublishDenied)
    }
}

// ---- waiting users ---------------------------------------------------------------------------

/// The user of each blocked client (by handle) and, when it had every permission at the time,
/// the cache epoch then (valid while the filter watches ACL changes).
type Waiting = HashMap<Client, (Vec<u8>, Option<u64>)>;
static WAITING: LazyLock<Mutex<Waiting>> = LazyLock::new(Default::default);

/// Remember the user of a client that starts waiting.
pub fn remember_waiter(ctx: Ctx, handle: Client) {
    if !grants_recheck() {
        return;
    }
    let unrestricted = filter_installed() && calling_user(ctx).is_none();
    let since = unrestricted.then(|| EPOCH.load(Ordering::Relaxed));
    if let Some(name) = ffi_acl::current_user_name(ctx) {
        let name = name.bytes().to_vec();
        WAITING.lock().unwrap_or_else(PoisonError::into_inner).insert(handle, (name, since));
    }
}

/// The waiter left (granted, timed out, cancelled, failed).
pub fn forget_waiter(handle: Client) {
    if !grants_recheck() {
        return;
    }
    let gone = WAITING.lock().unwrap_or_else(PoisonError::into_inner).remove(&handle);
    drop(gone);
}

/// The remembered user of waiter `handle` (read before the waiter leaves the table).
pub fn waiter_user(handle: Client) -> Option<WaiterUser> {
    if !grants_recheck() {
        return None;
    }
    WAITING.lock().unwrap_or_else(PoisonError::into_inner).get(&handle).cloned().map(WaiterUser)
}

/// A waiting client's user, as remembered at block time.
pub struct WaiterUser((Vec<u8>, Option<u64>));

/// May the waiter (its user `who`) still take lock `key` (and write `token` with FENCE)? As the
/// server would re-check its blocked command: LOCK.ACQUIRE with its key, and the token key.
pub fn waiter_may_take(who: Option<WaiterUser>, key: &[u8], owner: &[u8], token: Option<&[u8]>) -> bool {
    let o = OwnedStr::new(owner);
    waiter_may(who, Cmd::LockAcquire, key, o.ptr(), token)
}

/// May the waiter (its user `who`) still run `cmd` on `key` (a LOCK.SEMACQUIRE grant), and
/// write the key the grant derives (the permit zset)?
pub fn waiter_may_run(who: Option<WaiterUser>, cmd: Cmd, key: &[u8], derived: Option<&[u8]>) -> bool {
    let zero = OwnedStr::from_i64(0);
    waiter_may(who, cmd, key, zero.ptr(), derived)
}

/// The check of [`waiter_may_take`] and [`waiter_may_run`]: `cmd key arg 1 1`, then `derived`.
fn waiter_may(who: Option<WaiterUser>, cmd: Cmd, key: &[u8], arg: RStr, derived: Option<&[u8]>) -> bool {
    let Some(WaiterUser((user_name, since))) = who else { return true };
    // Unrestricted at block time and no permission change seen since.
    if since.is_some_and(|e| filter_installed() && e == EPOCH.load(Ordering::Relaxed)) {
        return true;
    }
    let user_name = OwnedStr::new(&user_name);
    let user = User::from_name(user_name);
    let k = OwnedStr::new(key);
    let one = OwnedStr::from_i64(1);
    let argv = [name(cmd), k.ptr(), arg, one.ptr(), one.ptr()];
    let argv = if cmd == Cmd::LockAcquire { argv.get(..4).unwrap_or(&argv) } else { &argv[..] };
    let ok = user.may_run(argv)
        && derived.is_none_or(|t| {
            let t = OwnedStr::new(t);
            user.may_write(t.ptr())
        });
    if !ok {
        denied();
    }
    ok
}
