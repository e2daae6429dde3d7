//! Fuzz the timer arithmetic (`redis_lock::logic::timing`) over the whole accepted range of leases,
//! timeouts and expiries (any i64 deadline, any clock). Properties:
//! - every period handed to `RM_CreateTimer` is in `0..=MAX_PERIOD_MS` (expiry periods in
//!   `1..=MAX_PERIOD_MS`: never a 0 ms loop), so `now_us + period * 1000` cannot overflow;
//! - a simulated timer that fires after each period and re-arms as `on_fire` says reaches its
//!   deadline exactly (never acts early), and stops after a bounded number of re-arms;
//! - a key still held past its deadline is looked at again after `RECHECK_MS`, not at once.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::timing::{
    expiry_period_us, on_fire, period, period_us, Fired, MAX_PERIOD_MS, RECHECK_MS, REDIS_7_0_LIMIT_MS,
};

#[derive(Arbitrary, Debug)]
struct Input {
    deadline: i64,
    now: i64,
    now_us: i64,
    /// Clock drift per firing (a timer may fire a little late), 0..=255 ms.
    late: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let Input { deadline, now, now_us, late } = input;
    let p = period(deadline, now);
    assert!((0..=MAX_PERIOD_MS).contains(&p), "period {p}");
    let pu = period_us(deadline, now_us);
    assert!((0..=MAX_PERIOD_MS).contains(&pu), "period_us {pu}");
    let e = expiry_period_us(deadline, now_us);
    assert!((1..=MAX_PERIOD_MS).contains(&e), "expiry period {e}");
    if now_us >= deadline.saturating_add(1).saturating_mul(1000) {
        assert_eq!(e, RECHECK_MS, "a key held past its deadline is rechecked, not spun");
    }
    // Redis adds period * 1000 to a microsecond clock: that must fit for any clock value of
    // this era (< 2^62 µs); Redis 7.0 computes period * 1000 in a 32-bit int.
    assert!((1i64 << 62).checked_add(p * 1000).is_some());
    for q in [p, pu, e] {
        assert!(q <= REDIS_7_0_LIMIT_MS && i32::try_from(q * 1000).is_ok(), "period {q} wraps on Redis 7.0");
    }

    // Fire/re-arm simulation on a clock that starts at `now` (kept where the deadline can be
    // reached within the bound below).
    let span = deadline.saturating_sub(now);
    if !(0..=MAX_PERIOD_MS.saturating_mul(64)).contains(&span) {
        return;
    }
    let mut clock = now;
    let mut armed = period(deadline, clock);
    let mut fires = 0u32;
    loop {
        let lag = i64::from(late.get(fires as usize).copied().unwrap_or(0));
        clock = clock.saturating_add(armed).saturating_add(lag);
        fires += 1;
        assert!(fires <= 70, "no end after {fires} timers (deadline {deadline}, start {now})");
        match on_fire(deadline, clock) {
            Fired::Due => {
                assert!(clock >= deadline, "acted early: {clock} < {deadline}");
                break;
            }
            Fired::Rearm(next) => {
                assert!(clock < deadline);
                assert!((1..=MAX_PERIOD_MS).contains(&next));
                armed = next;
            }
        }
    }
});
