//! Timer arithmetic (pure): what period to pass to `RM_CreateTimer` for a deadline, and what to
//! do when a timer fires.
//!
//! Redis adds a timer's period to its monotonic clock in microseconds (`ustime() + period*1000`
//! in a signed 64-bit number): a period near `i64::MAX / 1000` ms wraps into the past, so the
//! timer fires at once, and a handler that re-arms it loops forever without serving clients.
//! Redis 7.0 (ae.c before upstream PR 12474, fixed in 7.2) is far tighter: when its module-timer
//! event re-arms itself for the nearest module timer, it computes `retval * 1000` in a 32-bit
//! `int`, so a next timer more than 2 147 483 ms (about 35.8 minutes) away wraps, and the event
//! loop then polls with a zero timeout, spinning a core while idle.
//! Every period the module hands to Redis therefore comes from [`period`], which caps it at
//! [`MAX_PERIOD_MS`], well below both: a deadline further away takes several timers, each re-armed by
//! [`on_fire`] until the deadline is reached. A timer never acts before its deadline, and a key
//! that is still held past its deadline (an expiry Redis has not performed yet) is looked at
//! again after [`RECHECK_MS`], never in a 0 ms loop.

/// Longest period passed to `RM_CreateTimer` (ten minutes): below Redis 7.0's 32-bit limit of
/// about 35.8 minutes with a wide margin, and a long timer costs one wake-up every ten minutes.
pub const MAX_PERIOD_MS: i64 = 600_000;

/// Redis 7.0's limit (see above): the longest period its event loop re-arms without wrapping.
pub const REDIS_7_0_LIMIT_MS: i64 = i32::MAX as i64 / 1000;

/// Delay before a key found held past its deadline is examined again (Redis expires keys
/// lazily and in its cron; a 0 ms period would spin the event loop).
pub const RECHECK_MS: i64 = 10;

/// The period for a timer that must fire no earlier than unix-ms `deadline`, given the current
/// time `now_ms`: `deadline - now` clamped to `0..=MAX_PERIOD_MS`.
pub fn period(deadline: i64, now_ms: i64) -> i64 {
    deadline.saturating_sub(now_ms).clamp(0, MAX_PERIOD_MS)
}

/// Like [`period`], with the remaining time measured from a microsecond clock and rounded up,
/// so the timer is not a fraction of a millisecond early.
pub fn period_us(deadline_ms: i64, now_us: i64) -> i64 {
    let due_us = deadline_ms.saturating_mul(1000);
    let diff_ms = due_us.saturating_sub(now_us).saturating_add(999).div_euclid(1000);
    diff_ms.clamp(0, MAX_PERIOD_MS)
}

/// What a fired timer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fired {
    /// The deadline is reached: act now.
    Due,
    /// Too early (a capped period, or the clock): arm again with this period (>= 1 ms).
    Rearm(i64),
}

/// A timer for unix-ms `deadline` fired at `now_ms`.
pub fn on_fire(deadline: i64, now_ms: i64) -> Fired {
    if now_ms >= deadline {
        Fired::Due
    } else {
        Fired::Rearm(period(deadline, now_ms).max(1))
    }
}

/// The period to look at a lock again whose lease deadline (unix ms) is `deadline`, at
/// `now_us` (unix µs): a key is expired from `deadline + 1` ms on; a key seen at or past that
/// point (still held: Redis has not expired it yet) is looked at again after [`RECHECK_MS`].
/// Always in `1..=MAX_PERIOD_MS`.
pub fn expiry_period_us(deadline: i64, now_us: i64) -> i64 {
    let due = deadline.saturating_add(1);
    if now_us >= due.saturating_mul(1000) {
        RECHECK_MS
    } else {
        period_us(due, now_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_well_below_redis_7_0s_limit() {
        assert_eq!(REDIS_7_0_LIMIT_MS, 2_147_483);
        const { assert!(MAX_PERIOD_MS * 3 < REDIS_7_0_LIMIT_MS) };
        // The product Redis 7.0 computes in an int must not wrap for any period we pass.
        assert!(i32::try_from(MAX_PERIOD_MS * 1000).is_ok());
    }

    #[test]
    fn periods_are_capped_and_never_negative() {
        assert_eq!(period(1_000, 400), 600);
        assert_eq!(period(400, 1_000), 0);
        assert_eq!(period(i64::MAX, 0), MAX_PERIOD_MS);
        assert_eq!(period(i64::MAX, i64::MIN), MAX_PERIOD_MS);
        assert_eq!(period(i64::MIN, i64::MAX), 0);
        assert_eq!(period_us(2, 1_000), 1, "rounded up");
        assert_eq!(period_us(2, 1_001), 1);
        assert_eq!(period_us(2, 2_000), 0);
        assert_eq!(period_us(i64::MAX, 0), MAX_PERIOD_MS);
        assert_eq!(period_us(i64::MIN, i64::MAX), 0);
    }

    #[test]
    fn timers_rearm_until_due_and_never_fire_early() {
        assert_eq!(on_fire(100, 100), Fired::Due);
        assert_eq!(on_fire(100, 150), Fired::Due);
        assert_eq!(on_fire(100, 99), Fired::Rearm(1));
        assert_eq!(on_fire(i64::MAX, 0), Fired::Rearm(MAX_PERIOD_MS));
        // Simulate a wait of 10 hours: a re-arm every ten minutes, then due, never early.
        let (deadline, mut now, mut fires) = (36_000_000 + 5, 5, 0);
        loop {
            now += period(deadline, now);
            fires += 1;
            match on_fire(deadline, now) {
                Fired::Due => break,
                Fired::Rearm(p) => assert!(p >= 1),
            }
        }
        assert_eq!((now, fires), (deadline, 60));
    }

    #[test]
    fn held_keys_past_their_deadline_are_rechecked_not_spun() {
        assert_eq!(expiry_period_us(100, 50_000), 51);
        assert_eq!(expiry_period_us(100, 100_000), 1);
        assert_eq!(expiry_period_us(100, 100_999), 1);
        assert_eq!(expiry_period_us(100, 101_000), RECHECK_MS);
        assert_eq!(expiry_period_us(i64::MAX, 0), MAX_PERIOD_MS);
        assert_eq!(expiry_period_us(18_446_744_073_709_551, 1_700_000_000_000_000), MAX_PERIOD_MS);
        assert_eq!(expiry_period_us(i64::MAX, i64::MAX), RECHECK_MS);
        assert_eq!(expiry_period_us(i64::MIN, i64::MIN), RECHECK_MS);
    }
}
