//! Blocked `LOCK.ACQUIRE ... WAIT` clients and the `INFO lock` counters that show them, over
//! the raw client ([`crate::resp::Conn`]), for tests that must see every reply as sent.

use crate::resp::Conn;
use crate::server::wait_for;
use std::time::Duration;

/// One integer of `INFO lock` (`field` without its `lock_` prefix); panics when it is missing.
pub fn lock_stat(c: &mut Conn, field: &str) -> i64 {
    let text = c.call(&[&b"INFO"[..], b"lock"]).str();
    let key = format!("lock_{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no INFO field {field}"))
}

/// Wait until `n` clients wait on locks (`lock_waiters`), within 5 s; panics otherwise.
pub fn wait_for_waiters(c: &mut Conn, n: i64) {
    let ok = wait_for(Duration::from_secs(5), || (lock_stat(c, "waiters") == n).then_some(()));
    assert!(ok.is_some(), "expected {n} waiters, INFO says {}", lock_stat(c, "waiters"));
}

/// A new connection that sent `LOCK.ACQUIRE key owner 30000 WAIT timeout` and waits for its
/// reply (read it with a 10 s timeout).
pub fn blocked_acquire(port: u16, key: &str, owner: &str, timeout: &str) -> Conn {
    let mut w = Conn::new(port);
    w.set_timeout(Duration::from_secs(10));
    w.send(&["LOCK.ACQUIRE", key, owner, "30000", "WAIT", timeout]);
    w
}
