//! Fencing tokens (`LOCK.ACQUIRE ... FENCE`): how the next token is chosen.
//!
//! Pure: the glue (`token.rs`) reads the token key and the clock, asks [`next_token`], and writes
//! the answer. A token is `max(stored + 1, clock in microseconds)`:
//! - `stored + 1` keeps tokens strictly increasing while the key survives (and after a Redisson
//!   `RFencedLock` client INCRs the same key);
//! - the clock keeps them increasing when the key is gone or stale: after `lock.token-ttl`
//!   expired it, or after a failover promoted a replica that never received the newest token.
//!   The new master's clock has moved on by at least the time the failover took, so its first
//!   token is above every token the old master issued, unless its clock is behind the old
//!   master's by more than that.

use super::error::Error;

/// The stored token, as SET or INCR wrote it (Redis's integer rules).
pub fn parse_stored(raw: &[u8]) -> Result<i64, Error> {
    crate::logic::args::parse_i64(raw).ok_or(Error::TokenNotInteger)
}

/// The token to issue after `stored` (`None`: no token key) at wall-clock time `now_us`.
pub fn next_token(stored: Option<i64>, now_us: i64) -> Result<i64, Error> {
    match stored {
        None => Ok(now_us),
        Some(s) => s.checked_add(1).map(|after| after.max(now_us)).ok_or(Error::TokenOverflow),
    }
}

/// Where the token of lock `key` lives: `<prefix>:{key}` (same rule, same slot as the channel).
pub fn token_key(prefix: &[u8], key: &[u8]) -> Vec<u8> {
    crate::logic::args::derived_name(prefix, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_follow_the_clock_and_never_go_back() {
        assert_eq!(next_token(None, 1_700_000_000_000_000), Ok(1_700_000_000_000_000));
        // A counter far behind the clock (Redisson INCRs from 0) jumps to the clock.
        assert_eq!(next_token(Some(41), 1_700_000_000_000_000), Ok(1_700_000_000_000_000));
        // Tokens issued faster than the clock ticks, or a clock that stepped back: stored + 1.
        assert_eq!(next_token(Some(1_700_000_000_000_000), 1_700_000_000_000_000), Ok(1_700_000_000_000_001));
        assert_eq!(next_token(Some(1_800_000_000_000_000), 1_700_000_000_000_000), Ok(1_800_000_000_000_001));
        assert_eq!(next_token(Some(-7), 5), Ok(5));
        assert_eq!(next_token(Some(i64::MAX), 5), Err(Error::TokenOverflow));
        assert_eq!(next_token(Some(i64::MAX - 1), 5), Ok(i64::MAX));
    }

    #[test]
    fn stored_tokens_are_redis_integers() {
        assert_eq!(parse_stored(b"12"), Ok(12));
        assert_eq!(parse_stored(b"-3"), Ok(-3));
        for bad in [&b""[..], b"1.5", b" 1", b"01", b"abc", b"9223372036854775808"] {
            assert_eq!(parse_stored(bad), Err(Error::TokenNotInteger), "{bad:?}");
        }
        assert!(Error::TokenOverflow.reply().starts_with("ERR "));
        assert!(Error::TokenNotInteger.reply().starts_with("ERR "));
    }

    #[test]
    fn token_keys_share_the_lock_slot() {
        assert_eq!(
            token_key(b"redisson_lock_token", b"orders:42"),
            b"redisson_lock_token:{orders:42}".to_vec()
        );
        assert_eq!(token_key(b"t", b"{user1}:lock"), b"t:{user1}:lock".to_vec());
    }
}
