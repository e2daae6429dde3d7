//! The fencing-token key of a lock (`LOCK.ACQUIRE ... FENCE`): read and checked before a grant
//! writes anything, then written with its effects. The token itself is chosen in `fence.rs`.

use crate::ffi::rm::{self, Ctx, Key, KeyKind, OwnedStr};
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
        rm::replicate_set(ctx, self.name.ptr(), value.ptr(), deadline);
        rm::notify(ctx, crate::ffi::rm::NOTIFY_STRING, c"set", self.name.ptr());
        if deadline.is_some() {
            rm::notify(ctx, crate::ffi::rm::NOTIFY_GENERIC, c"expire", self.name.ptr());
        }
        rm::signal_modified(ctx, self.name.ptr());
        stats::TOKENS_ISSUED.inc();
        self.value
    }
}

/// The last token issued for lock `lock` (LOCK.INFO's `token`), `-1` when there is none.
/// Read with GET so that a read-only command never converts the stored value.
pub fn last(ctx: Ctx, lock: &[u8]) -> i64 {
    let tname = config::token_key(lock);
    match rm::call_get(ctx, &tname) {
        Some(reply) if reply.is_string() => fence::parse_stored(reply.bytes()).unwrap_or(-1),
        _ => -1,
    }
}
