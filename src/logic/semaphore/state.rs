//! The semaphore's rules, pure: what its key holds, where a permit's lease ends, whether an
//! acquire takes its permits, what it replies when it does not, and what a new total makes
//! available. LOCK.SEM* and the grants after a wait decide with these functions.

use crate::logic::args::{parse_i64, LEASE};
use crate::logic::error::Error;
use crate::logic::semaphore::names::NO_LEASE;

/// The available permits as `K` holds them: none without the key, else a decimal integer (it
/// may be negative: Redisson's `addPermits` takes a negative delta).
pub fn available(raw: Option<&[u8]>) -> Result<i64, Error> {
    match raw {
        None => Ok(0),
        Some(b) => parse_i64(b).ok_or(Error::SemNotInteger),
    }
}

/// The zset score of a permit taken at `now` for `lease_ms` (0: no lease, [`NO_LEASE`]). A
/// lease must end before the no-lease score, so the two cannot be confused.
pub fn lease_end(now: i64, lease_ms: i64) -> Result<i64, Error> {
    if lease_ms == 0 {
        return Ok(NO_LEASE);
    }
    match now.checked_add(lease_ms) {
        Some(end) if end < NO_LEASE && lease_ms > 0 => Ok(end),
        _ => Err(Error::Overflow(LEASE)),
    }
}

/// Whether a held permit's score means it has run out at `now` (Redisson reclaims scores
/// `<= now`).
pub fn expired(score: i64, now: i64) -> bool {
    score <= now
}

/// Whether an acquire of `n` permits takes them now: enough are available and nobody waits
/// ahead of it (no barging past a queued waiter).
pub fn takes(available: i64, n: i64, queued: bool) -> bool {
    !queued && available >= n
}

/// What an acquire that took nothing replies: the ms until the earliest held permit's lease
/// ends, or -1 when no held permit will return by itself (none held, or none with a lease).
pub fn busy_reply(earliest: Option<i64>, now: i64) -> i64 {
    match earliest {
        Some(score) if score < NO_LEASE => score.saturating_sub(now).max(0),
        _ => -1,
    }
}

/// The available count after `LOCK.SEMSET` sets the total (available + held) to `permits`
/// while `held` permits are out: what is not held is available (negative while more are held
/// than the new total allows; they stay with their holders).
pub fn after_set(permits: i64, held: i64) -> i64 {
    permits.saturating_sub(held)
}

/// The available count after `n` permits return to `available`.
pub fn after_return(available: i64, n: i64) -> i64 {
    available.saturating_add(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_an_integer_or_nothing() {
        assert_eq!(available(None), Ok(0));
        assert_eq!(available(Some(b"4")), Ok(4));
        assert_eq!(available(Some(b"-3")), Ok(-3));
        for bad in [&b"1e+20"[..], b"1.5", b"", b"x", b" 1"] {
            assert_eq!(available(Some(bad)), Err(Error::SemNotInteger), "{bad:?}");
        }
    }

    #[test]
    fn leases_end_before_the_no_lease_score() {
        assert_eq!(lease_end(1000, 0), Ok(NO_LEASE));
        assert_eq!(lease_end(1000, 50), Ok(1050));
        assert_eq!(lease_end(1000, NO_LEASE - 1000), Err(Error::Overflow(LEASE)));
        assert_eq!(lease_end(1000, NO_LEASE - 1001), Ok(NO_LEASE - 1));
        assert_eq!(lease_end(i64::MAX, 1), Err(Error::Overflow(LEASE)));
        assert_eq!(lease_end(0, -1), Err(Error::Overflow(LEASE)));
    }

    #[test]
    fn acquires_take_all_or_nothing_and_never_barge() {
        assert!(takes(4, 4, false));
        assert!(!takes(3, 4, false));
        assert!(!takes(4, 1, true));
        assert!(!takes(-2, 1, false));
        assert!(expired(10, 10) && !expired(11, 10));
    }

    #[test]
    fn busy_replies() {
        assert_eq!(busy_reply(None, 5), -1);
        assert_eq!(busy_reply(Some(NO_LEASE), 5), -1);
        assert_eq!(busy_reply(Some(105), 5), 100);
        assert_eq!(busy_reply(Some(3), 5), 0);
        assert_eq!(busy_reply(Some(i64::MIN), i64::MAX), 0);
    }

    #[test]
    fn totals() {
        assert_eq!(after_set(4, 0), 4);
        assert_eq!(after_set(4, 6), -2);
        assert_eq!(after_set(0, i64::MAX), -i64::MAX);
        assert_eq!(after_return(i64::MAX, 1), i64::MAX);
        assert_eq!(after_return(-2, 3), 1);
    }
}
