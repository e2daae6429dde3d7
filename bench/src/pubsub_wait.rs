//! Redisson-style waiting, for the contended scenarios: try; on failure subscribe to the
//! object's channel; then try again after each message, or after the wait the failed try
//! replied (its PTTL or the earliest lease end), until the deadline.

use std::time::{Duration, Instant};
use testkit::resp::Conn;

/// Wait as a Redisson client does. `try_once` is an acquire: `None` when it took the object,
/// else the ms to wait at most before trying again (< 0: until a message). Whether it took it
/// before `deadline`.
pub fn acquire(
    sub: &mut Conn,
    chan: &[u8],
    deadline: Instant,
    mut try_once: impl FnMut() -> Option<i64>,
) -> bool {
    if try_once().is_none() {
        return true;
    }
    sub.subscribe(chan);
    let got = loop {
        let Some(ttl) = try_once() else { break true };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break false;
        }
        let w = if ttl >= 0 { Duration::from_millis(ttl as u64).min(left) } else { left };
        sub.wait_message(chan, Instant::now() + w);
    };
    sub.unsubscribe_async(chan);
    got
}
