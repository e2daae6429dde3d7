//! Fuzz the fencing-token choice (`redis_lock::logic::fence`) over sequences of what happens to one
//! lock's token key: FENCE grants, Redisson RFencedLock INCRs, the key lost (token-ttl expiry,
//! a failover that lost writes) while the clock moves on, and foreign SETs. Properties:
//! - a token is above the stored value and never below the clock;
//! - `Overflow` exactly when the stored value is `i64::MAX`, `NotInteger` exactly for bytes that
//!   are not a canonical i64;
//! - while the key is never lost or overwritten, every token is above every earlier token;
//! - after the key is lost, the next token is above every earlier token whenever the clock has
//!   passed them (the guarantee's clock assumption).
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::error::Error;
use redis_lock::logic::fence;

#[derive(Arbitrary, Debug)]
enum Op {
    Grant,
    Incr,
    Lose,
    Tick(u32),
    Jump(i64),
    Foreign(Vec<u8>),
}

fuzz_target!(|input: (i64, Vec<Op>)| {
    let (start, ops) = input;
    let mut clock = start;
    let mut stored: Option<i64> = None;
    let mut highest: Option<i64> = None;
    // Whether every earlier token is still reflected in `stored` (no loss, no overwrite).
    let mut intact = true;
    for op in ops.iter().take(200) {
        match op {
            Op::Grant => match fence::next_token(stored, clock) {
                Ok(t) => {
                    assert!(t >= clock, "token {t} below the clock {clock}");
                    if let Some(s) = stored {
                        assert!(t > s, "token {t} not above stored {s}");
                    }
                    if let Some(h) = highest {
                        if intact || clock > h {
                            assert!(t > h, "token {t} not above earlier {h}");
                        }
                    }
                    stored = Some(t);
                    // Earlier tokens are below the stored value again only if this one passed them.
                    intact = highest.is_none_or(|h| t > h);
                    highest = Some(highest.map_or(t, |h| h.max(t)));
                }
                Err(e) => {
                    assert_eq!(e, Error::TokenOverflow);
                    assert_eq!(stored, Some(i64::MAX));
                }
            },
            Op::Incr => {
                if let Some(n) = stored.unwrap_or(0).checked_add(1) {
                    stored = Some(n);
                    highest = Some(highest.map_or(n, |h| h.max(n)));
                }
            }
            Op::Lose => {
                stored = None;
                intact = false;
            }
            Op::Tick(d) => clock = clock.saturating_add(i64::from(*d)),
            Op::Jump(to) => clock = *to,
            Op::Foreign(b) => {
                let parsed = fence::parse_stored(b);
                let canonical = std::str::from_utf8(b)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|n| n.to_string().as_bytes() == b.as_slice());
                assert_eq!(parsed.ok(), canonical, "parse_stored({b:?})");
                if let Some(n) = canonical {
                    stored = Some(n);
                    intact = false;
                }
            }
        }
    }
});
