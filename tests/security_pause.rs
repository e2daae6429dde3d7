//! Spec section 9, write refusals, pauses included: while the server keeps its dataset still
//! (`CLIENT PAUSE WRITE` or `ALL`, `FAILOVER`), a grant that would be made outside a command
//! (lease expiry, a lapsed Redisson turn) is not made; the waiter keeps its place, is granted
//! once the pause ends, and a wait that times out during the pause still times out on time.
//! With the AOF on or a replica attached, a write propagated during a pause aborts the server
//! (`propagatePendingCommands` asserts it never happens), so these tests run with both.

mod common;
use common::resp::{Conn, R};
use common::waiters::{blocked_acquire as waiter, lock_stat, wait_for_waiters};
use common::*;
use std::time::{Duration, Instant};

/// Redisson's acquire script (research/redisson-sha1.md): runs natively without SCRIPT LOAD.
const ACQUIRE: &str = "dad0f8d619e548e04f21fb48d50be5034df3adae";

fn a(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn call(c: &mut Conn, args: &[&str]) -> R {
    c.call(&args.iter().map(|s| a(s)).collect::<Vec<_>>())
}

/// The AOF's text (written with `appendfsync always`).
fn aof(s: &Server) -> String {
    let mut out = String::new();
    let mut files = vec![];
    for dir in [s.dir().to_path_buf(), s.dir().join("appendonlydir")] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            files.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_file()));
        }
    }
    for f in files {
        out.push_str(&String::from_utf8_lossy(&std::fs::read(f).unwrap_or_default()));
    }
    out
}

fn server_with_aof() -> Server {
    Server::start_opts(
        Opts::default().module_arg("redisson-scripts native").arg("--appendonly yes --appendfsync always"),
    )
}

/// A lease that runs out during a pause: the waiter is granted when the pause ends, not before.
#[test]
fn a_lease_expiring_during_a_pause_is_granted_after_it() {
    for mode in ["WRITE", "ALL"] {
        let mut s = server_with_aof();
        let mut c = Conn::new(s.port);
        let mut replica = Server::start_opts(Opts::default().without_module());
        replica.replicate_from(&s);
        assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "k", "holder", "300"]), R::Nil);
        let mut w = waiter(s.port, "k", "w", "0");
        wait_for_waiters(&mut c, 1);
        assert_eq!(call(&mut c, &["CLIENT", "PAUSE", "1500", mode]), R::Simple("OK".into()));
        let paused = Instant::now();
        // The lease ends 300 ms in; nothing may be granted while the pause lasts.
        let early = w.read_until(paused + Duration::from_millis(1300));
        assert_eq!(early, None, "{mode}: granted during the pause");
        let r = w.read_until(paused + Duration::from_secs(5));
        let took = paused.elapsed();
        assert_eq!(r, Some(R::Nil), "{mode}: granted once the pause ended");
        assert!(took >= Duration::from_millis(1450), "{mode}: granted {took:?} into a 1.5 s pause");
        assert!(took < Duration::from_millis(2500), "{mode}: granted {took:?} after the pause began");
        assert_eq!(call(&mut c, &["HGET", "k", "w"]), R::Bulk(a("1")));
        assert!(lock_stat(&mut c, "grants_deferred") >= 1, "{mode}");
        assert!(aof(&s).contains("PEXPIREAT"), "{mode}: the grant reached the AOF");
        s.assert_alive();
        replica.assert_alive();
        let synced = wait_for(Duration::from_secs(5), || {
            let mut rc = Conn::new(replica.port);
            (call(&mut rc, &["HGET", "k", "w"]) == R::Bulk(a("1"))).then_some(())
        });
        assert!(synced.is_some(), "{mode}: the replica got the grant");
    }
}

/// A Redisson script owner's turn lapses during a pause: the next LOCK.* waiter is granted only
/// after the pause (the turn's end and the grant are timer work).
#[test]
fn a_turn_lapsing_during_a_pause_grants_after_it() {
    let mut s = server_with_aof();
    let mut c = Conn::new(s.port);
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "k", "holder", "60000"]), R::Nil);
    let mut w1 = waiter(s.port, "k", "w1", "0");
    wait_for_waiters(&mut c, 1);
    // The script owner fails while w1 waits: it gets a place behind w1.
    assert!(call(&mut c, &["EVALSHA", ACQUIRE, "1", "k", "30000", "java:1"]).int() > 0);
    let mut w2 = waiter(s.port, "k", "w2", "0");
    wait_for_waiters(&mut c, 2);
    assert_eq!(lock_stat(&mut c, "script_turns_waiting"), 1);
    assert_eq!(call(&mut c, &["LOCK.RELEASE", "k", "holder"]), R::Int(1));
    assert_eq!(w1.read().expect("hand-off"), R::Nil);
    // w1 releases: the lock is kept for java:1's turn (200 ms), which it never takes.
    let mut c1 = Conn::new(s.port);
    assert_eq!(call(&mut c1, &["LOCK.RELEASE", "k", "w1"]), R::Int(1));
    assert_eq!(call(&mut c, &["CLIENT", "PAUSE", "1200", "WRITE"]), R::Simple("OK".into()));
    let paused = Instant::now();
    assert_eq!(w2.read_until(paused + Duration::from_millis(1000)), None, "granted during the pause");
    assert_eq!(w2.read_until(paused + Duration::from_secs(5)), Some(R::Nil), "granted after it");
    assert!(paused.elapsed() >= Duration::from_millis(1150), "granted {:?} into the pause", paused.elapsed());
    assert_eq!(call(&mut c, &["HGET", "k", "w2"]), R::Bulk(a("1")));
    s.assert_alive();
}

/// A wait that ends during a pause still ends on time (a reply is not a write).
#[test]
fn a_wait_times_out_on_time_during_a_pause() {
    let mut s = server_with_aof();
    let mut c = Conn::new(s.port);
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "k", "holder", "200"]), R::Nil);
    let mut w = waiter(s.port, "k", "w", "600");
    wait_for_waiters(&mut c, 1);
    let start = Instant::now();
    assert_eq!(call(&mut c, &["CLIENT", "PAUSE", "2000", "WRITE"]), R::Simple("OK".into()));
    let r = w.read_until(start + Duration::from_millis(1500)).expect("a timely reply");
    assert!(matches!(r, R::Int(_)), "timed out, not granted: {r:?}");
    assert!(start.elapsed() < Duration::from_millis(1200), "replied after {:?}", start.elapsed());
    assert_eq!(call(&mut c, &["HEXISTS", "k", "w"]), R::Int(0));
    assert_eq!(call(&mut c, &["CLIENT", "UNPAUSE"]), R::Simple("OK".into()));
    s.assert_alive();
}

/// `FAILOVER` pauses writes on the master until its replica has caught up. With the replica
/// stopped (SIGSTOP) the pause lasts until the failover times out; a lease that ends meanwhile
/// is granted only after the failover gave up and writes resumed.
#[test]
fn a_failover_pause_defers_grants() {
    let mut s = server_with_aof();
    let mut c = Conn::new(s.port);
    let mut replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&s);
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "k", "holder", "300"]), R::Nil);
    let mut w = waiter(s.port, "k", "w", "0");
    wait_for_waiters(&mut c, 1);
    let pid = replica.pid().expect("replica pid").to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill").args([sig, &pid]).status().expect("kill");
        assert!(ok.success());
    };
    signal("-STOP");
    // Something for the replica to catch up on, so the master must wait for it.
    assert_eq!(call(&mut c, &["SET", "x", "1"]), R::Simple("OK".into()));
    assert_eq!(call(&mut c, &["FAILOVER", "TIMEOUT", "1500"]), R::Simple("OK".into()));
    let start = Instant::now();
    let early = w.read_until(start + Duration::from_millis(1200));
    signal("-CONT");
    assert_eq!(early, None, "granted while the failover paused writes");
    assert_eq!(
        w.read_until(start + Duration::from_secs(8)),
        Some(R::Nil),
        "granted after the failover gave up"
    );
    assert_eq!(call(&mut c, &["HGET", "k", "w"]), R::Bulk(a("1")));
    s.assert_alive();
    replica.assert_alive();
}

/// A grant put off by a write refusal (min-replicas-to-write unmet) is retried on a timer; the
/// refusal lifted during a pause (CONFIG SET is allowed then) must not let it through before the
/// pause ends. With and without the AOF: without it the server would not abort, but a write
/// made during a pause breaks the pause's promise all the same.
#[test]
fn a_deferred_grant_released_during_a_pause_waits_for_its_end() {
    for aof_on in [true, false] {
        let mut s = if aof_on { server_with_aof() } else { Server::start() };
        let mut c = Conn::new(s.port);
        assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "k", "holder", "200"]), R::Nil);
        let mut w = waiter(s.port, "k", "w", "0");
        wait_for_waiters(&mut c, 1);
        assert_eq!(call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]), R::Simple("OK".into()));
        let deferred =
            wait_for(Duration::from_secs(3), || (lock_stat(&mut c, "grants_deferred") > 0).then_some(()));
        assert!(deferred.is_some(), "the grant was put off (aof {aof_on})");
        assert_eq!(call(&mut c, &["CLIENT", "PAUSE", "1200", "WRITE"]), R::Simple("OK".into()));
        let paused = Instant::now();
        assert_eq!(call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "0"]), R::Simple("OK".into()));
        assert_eq!(
            w.read_until(paused + Duration::from_millis(1000)),
            None,
            "granted during the pause (aof {aof_on})"
        );
        assert_eq!(
            w.read_until(paused + Duration::from_secs(5)),
            Some(R::Nil),
            "granted after it (aof {aof_on})"
        );
        assert!(
            paused.elapsed() >= Duration::from_millis(1150),
            "granted {:?} into the pause",
            paused.elapsed()
        );
        assert_eq!(call(&mut c, &["HGET", "k", "w"]), R::Bulk(a("1")));
        s.assert_alive();
    }
}
