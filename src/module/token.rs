//! The fencing-token key of a lock (`LOCK.ACQUIRE ... FENCE`): read and checked before a grant
//! writes anything, then written with its effects; and the INCR of Redisson's fenced scripts.
//! The token itself is chosen in `fence.rs`.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr};
use crate::logic::error::Error;
use crate::logic::fence;
use crate::registry::config;
use crate::registry::stats;
use std::time::{SystemTime, UNIX_EPOCH};

/// A token chosen for a grant, not written yet (or, `keep`, the stored token of a reentrant
/// acquire, which is replied as is and not written).
pub struct Pending {
    key: Key,
    name: OwnedStr,
    value: i64,
    keep: bool,
}

/// Wall-clock microseconds since the unix epoch.
fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_micros()).ok())
        .unwrap_or(0)
}

/// Read the token key of lock `lock` (in the context's db) and choose the next token. An `Err`
/// is the error reply; nothing has been written. For an acquire that is `reentrant` (the owner
/// already holds the lock) the stored token is kept when there is one.
pub fn prepare_for(ctx: Ctx, lock: &[u8], reentrant: bool) -> Result<Pending, Error> {
    let tname = config::token_key(lock);
    if crate::module::cluster::enabled()
        && crate::module::cluster::key_slot(&tname) != crate::module::cluster::key_slot(lock)
    {
        return Err(Error::TokenCrossSlot);
    }
    let name = OwnedStr::new(&tname);
    let key = Key::write(ctx, name.ptr());
    let stored = match key.kind() {
        KeyKind::Empty => None,
        _ if key.is_string() => {
            Some(key.string_get(fence::parse_stored).unwrap_or(Err(Error::TokenNotInteger))?)
        }
        _ => return Err(Error::WrongType),
    };
    if let (true, Some(s)) = (reentrant, stored) {
        return Ok(Pending { key, name, value: s, keep: true });
    }
    let value = fence::next_token(stored, now_us())?;
    Ok(Pending { key, name, value, keep: false })
}

impl Pending {
    /// Store the token as a decimal string (with `lock.token-ttl` as its TTL), replicated as
    /// `SET key token [PXAT deadline]` with the keyspace events SET fires. Returns the token.
    /// A kept token (reentry) is returned without writing anything.
    pub fn write(self, ctx: Ctx, now_ms: i64) -> i64 {
        if self.keep {
            return self.value;
        }
        let value = OwnedStr::from_i64(self.value);
        self.key.string_set(value.ptr());
        let ttl = config::token_ttl();
        let deadline = (ttl > 0).then(|| now_ms.saturating_add(ttl));
        if let Some(d) = deadline {
            self.key.set_deadline(d, now_ms);
        }
        crate::ffi::replicate::replicate_set(ctx, self.name.ptr(), value.ptr(), deadline);
        rm::notify(ctx, crate::ffi::rm::NOTIFY_STRING, c"set", self.name.ptr());
        if deadline.is_some() {
            rm::notify(ctx, crate::ffi::rm::NOTIFY_GENERIC, c"expire", self.name.ptr());
        }
        rm::signal_modified(ctx, self.name.ptr());
        stats::TOKENS_ISSUED.inc();
        self.value
    }
}

/// A Redisson fenced script's `INCR` of the token counter at `name` (open as `key`): the counter
/// becomes `value`, its TTL kept; replicated as INCR, with its events.
pub fn incr(ctx: Ctx, key: &Key, name: crate::ffi::rm::RStr, value: i64, now: i64) {
    let ttl = key.deadline();
    key.string_set(OwnedStr::from_i64(value).ptr());
    if let Some(d) = ttl {
        key.set_deadline(d, now);
    }
    crate::ffi::replicate::replicate_incr(ctx, name);
    rm::notify(ctx, crate::ffi::rm::NOTIFY_STRING, c"incrby", name);
    rm::signal_modified(ctx, name);
}

/// The last token issued for lock `lock` as LOCK.INFO shows it: `Some(-1)` when there is
/// none, `None` when the calling user may not read the token key (LOCK.INFO then shows nil).
/// Read with GET so that a read-only command never converts the stored value; where GET is
/// renamed or disabled, the key is read directly (which may change its internal encoding,
/// never its value).
pub fn last(ctx: Ctx, lock: &[u8]) -> Option<i64> {
    let tname = config::token_key(lock);
    // A name whose token key is in another slot never has a token (FENCE refuses it, and
    // Redisson's fenced scripts get CROSSSLOT): nothing to read on this node.
    if crate::module::cluster::enabled()
        && crate::module::cluster::key_slot(&tname) != crate::module::cluster::key_slot(lock)
    {
        return Some(-1);
    }
    if !crate::module::acl::may_read(ctx, &tname) {
        return None;
    }
    let stored = match crate::ffi::call::get(ctx, &tname) {
        Ok(reply) if reply.is_string() => fence::parse_stored(reply.bytes()).ok(),
        Ok(_) => None,
        Err(_) => {
            let name = OwnedStr::new(&tname);
            Key::read(ctx, name.ptr()).string_get(fence::parse_stored).and_then(Result::ok)
        }
    };
    Some(stored.unwrap_or(-1))
}
