//! Spec section 9, write refusals: while the server refuses client writes (`NOREPLICAS` with
//! min-replicas-to-write unmet, `MISCONF` after a failed background save), LOCK.* commands,
//! natively run Redisson scripts (inside MULTI too) and grants made later write nothing; a
//! pending grant is deferred and made once writes are accepted again. The same calls in Lua
//! (`lock.redisson-scripts lua`) are the baseline.

mod common;
use common::resp::{Conn, R};
use common::scripts::{load_all, native_opts, script, snapshot};
use common::*;
use std::time::Duration;

fn a(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn call(c: &mut Conn, args: &[&str]) -> R {
    c.call(&args.iter().map(|s| a(s)).collect::<Vec<_>>())
}

fn class(r: &R) -> Option<String> {
    match r {
        R::Err(e) => Some(e.split(' ').next().unwrap_or("").to_string()),
        _ => None,
    }
}

fn evalsha(kind: &str, keys: &[&str], args: &[&str]) -> Vec<Vec<u8>> {
    let mut v = vec![a("EVALSHA"), script(kind).sha.into_bytes(), keys.len().to_string().into_bytes()];
    v.extend(keys.iter().map(|k| a(k)));
    v.extend(args.iter().map(|k| a(k)));
    v
}

/// The calls under test and what they must answer while writes are refused (`None`: the
/// read-only path, which still answers like Lua).
fn refused_calls(c: &mut Conn, want: &str, ctx: &str) {
    let before = snapshot(c);
    let cases: Vec<(&str, Vec<Vec<u8>>, bool)> = vec![
        ("native acquire", evalsha("acquire", &["k"], &["30000", "o"]), true),
        ("native fenced acquire", evalsha("fenced-acquire", &["k", "tok"], &["30000", "o"]), true),
        ("native force unlock", evalsha("forceunlock", &["held", "ch"], &["0", "PUBLISH"]), true),
        (
            "native unlock",
            evalsha("unlock-latch", &["mine", "ch", "l"], &["0", "30000", "o", "PUBLISH", "9000"]),
            true,
        ),
        ("native renew", evalsha("renew", &["mine"], &["30000", "o"]), true),
        ("read-only acquire (held)", evalsha("acquire", &["held"], &["30000", "o"]), false),
        ("LOCK.ACQUIRE", vec![a("LOCK.ACQUIRE"), a("k"), a("o"), a("30000")], true),
        ("LOCK.FORCERELEASE", vec![a("LOCK.FORCERELEASE"), a("held")], true),
    ];
    for (what, argv, refused) in cases {
        let r = c.call(&argv);
        if refused {
            assert_eq!(class(&r).as_deref(), Some(want), "{ctx}: {what}: {r:?}");
        } else {
            assert!(matches!(r, R::Int(n) if n > 0), "{ctx}: {what} still answers: {r:?}");
        }
    }
    // Inside MULTI: the native script's write is refused at EXEC, as Lua's is.
    assert_eq!(call(c, &["MULTI"]), R::Simple("OK".into()));
    assert_eq!(c.call(&evalsha("acquire", &["k"], &["30000", "o"])), R::Simple("QUEUED".into()));
    let r = call(c, &["EXEC"]);
    let first = match &r {
        R::Arr(v) => v.first().cloned().unwrap_or(R::Nil),
        other => other.clone(),
    };
    assert_eq!(class(&first).as_deref(), Some(want), "{ctx}: MULTI: {r:?}");
    assert_eq!(snapshot(c), before, "{ctx}: nothing written");
}

fn setup(c: &mut Conn) {
    load_all(c);
    call(c, &["HSET", "held", "x", "1"]);
    call(c, &["PEXPIRE", "held", "100000"]);
    call(c, &["HSET", "mine", "o", "2"]);
}

#[test]
fn min_replicas_refuse_native_scripts_like_lua() {
    for opts in [native_opts(), Opts::default()] {
        let s = Server::start_opts(opts);
        let mut c = Conn::new(s.port);
        setup(&mut c);
        let native = call(&mut c, &["CONFIG", "GET", "lock.redisson-scripts"]).arr()[1].str();
        assert_eq!(call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]), R::Simple("OK".into()));
        refused_calls(&mut c, "NOREPLICAS", &format!("mode {native}"));
        // Writes accepted again: the same calls work.
        assert_eq!(call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "0"]), R::Simple("OK".into()));
        assert_eq!(c.call(&evalsha("acquire", &["k"], &["30000", "o"])), R::Nil, "mode {native}");
        if native == "native" {
            let info = lock_info(&mut s.conn());
            assert!(info["redisson_acquire_native"].parse::<i64>().unwrap() >= 1, "{info:?}");
            assert!(info["writes_refused"].parse::<i64>().unwrap() >= 5, "{info:?}");
        }
    }
}

#[test]
fn a_failed_background_save_refuses_native_writes() {
    for opts in [native_opts(), Opts::default()] {
        let s = Server::start_opts(opts.arg("--enable-protected-configs yes"));
        let mut c = Conn::new(s.port);
        setup(&mut c);
        // A real failed BGSAVE, also as root: the save directory disappears under the server.
        let gone = s.dir().join("gone");
        std::fs::create_dir(&gone).unwrap();
        assert_eq!(call(&mut c, &["CONFIG", "SET", "save", "3600 1"]), R::Simple("OK".into()));
        assert_eq!(call(&mut c, &["CONFIG", "SET", "dir", gone.to_str().unwrap()]), R::Simple("OK".into()));
        std::fs::remove_dir(&gone).unwrap();
        assert!(!call(&mut c, &["BGSAVE"]).is_err());
        wait_for(Duration::from_secs(10), || {
            let p = call(&mut c, &["INFO", "persistence"]).str();
            (p.contains("rdb_last_bgsave_status:err") && p.contains("rdb_bgsave_in_progress:0")).then_some(())
        })
        .expect("BGSAVE failed");
        refused_calls(&mut c, "MISCONF", "after a failed BGSAVE");
        // A good save lifts the refusal.
        assert_eq!(
            call(&mut c, &["CONFIG", "SET", "dir", s.dir().to_str().unwrap()]),
            R::Simple("OK".into())
        );
        assert!(!call(&mut c, &["BGSAVE"]).is_err());
        wait_for(Duration::from_secs(10), || {
            let p = call(&mut c, &["INFO", "persistence"]).str();
            p.contains("rdb_last_bgsave_status:ok").then_some(())
        })
        .expect("BGSAVE ok");
        let r = wait_for(Duration::from_secs(5), || {
            let r = c.call(&evalsha("acquire", &["k"], &["30000", "o"]));
            (r == R::Nil).then_some(r)
        });
        assert!(r.is_some(), "writes accepted again");
    }
}

/// A waiter whose grant comes from a lease expiry while the server refuses writes is not
/// granted: it keeps its place and gets the lock once writes are accepted again.
#[test]
fn a_pending_grant_is_deferred_while_writes_are_refused() {
    for how in ["config", "replica", "oom"] {
        let s = Server::start_opts(native_opts());
        let mut c = Conn::new(s.port);
        assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "g", "holder", "300"]), R::Nil);
        let mut w = Conn::new(s.port);
        w.send(&[a("LOCK.ACQUIRE"), a("g"), a("w"), a("30000"), a("WAIT"), a("20000")]);
        wait_for(Duration::from_secs(5), || (lock_info(&mut s.conn())["waiters"] == "1").then_some(()))
            .expect("waiting");
        if how == "oom" {
            call(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
            call(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
        } else {
            call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
            call(&mut c, &["CONFIG", "SET", "min-replicas-max-lag", "10"]);
        }
        // The lease ends; the grant is put off (the key stays free, nothing written).
        wait_for(Duration::from_secs(5), || {
            (lock_info(&mut s.conn())["grants_deferred"].parse::<i64>().unwrap() > 0).then_some(())
        })
        .expect("grant deferred");
        assert_eq!(call(&mut c, &["EXISTS", "g"]), R::Int(0), "{how}: no grant written");
        assert_eq!(lock_info(&mut s.conn())["waiters"], "1", "{how}: the waiter keeps its place");
        w.set_timeout(Duration::from_millis(200));
        assert!(w.read().is_err(), "{how}: no reply while writes are refused");
        w.set_timeout(Duration::from_secs(30));
        let _replica = match how {
            "replica" => {
                let r = Server::start_opts(Opts::default().without_module());
                r.replicate_from(&s);
                Some(r)
            }
            "oom" => {
                call(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
                None
            }
            _ => {
                call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "0"]);
                None
            }
        };
        let r = w.read().expect("granted once writes are accepted");
        assert_eq!(r, R::Nil, "{how}");
        assert_eq!(call(&mut c, &["HGET", "g", "w"]), R::Bulk(a("1")), "{how}");
    }
}

/// A deferred grant does not stop the wait from timing out as usual.
#[test]
fn a_deferred_waiter_still_times_out() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "g", "holder", "200"]), R::Nil);
    let mut w = Conn::new(s.port);
    w.send(&[a("LOCK.ACQUIRE"), a("g"), a("w"), a("30000"), a("WAIT"), a("1500")]);
    wait_for(Duration::from_secs(5), || (lock_info(&mut s.conn())["waiters"] == "1").then_some(()))
        .expect("waiting");
    call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    let r = w.read().expect("timed out");
    assert_eq!(r, R::Int(-2), "not granted: the PTTL of the free lock");
    assert_eq!(call(&mut c, &["EXISTS", "g"]), R::Int(0));
    let info = lock_info(&mut s.conn());
    assert!(info["grants_deferred"].parse::<i64>().unwrap() > 0, "{info:?}");
    assert_eq!(info["waits_timed_out"], "1", "{info:?}");
}

/// Deferred grants of many keys share one retry timer: the retries stay proportional to the
/// keys and the time, and the server keeps answering.
#[test]
fn many_deferred_grants_retry_at_a_bounded_rate() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    const KEYS: usize = 20;
    let mut waiters = vec![];
    for i in 0..KEYS {
        let k = format!("m{i}");
        assert_eq!(call(&mut c, &["LOCK.ACQUIRE", &k, "holder", "150"]), R::Nil);
        let mut w = Conn::new(s.port);
        w.send(&[a("LOCK.ACQUIRE"), a(&k), a("w"), a("30000"), a("WAIT"), a("1500")]);
        waiters.push(w);
    }
    wait_for(Duration::from_secs(5), || {
        (lock_info(&mut s.conn())["waiters"] == KEYS.to_string()).then_some(())
    })
    .expect("waiting");
    call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    for w in &mut waiters {
        assert_eq!(w.read().expect("timed out"), R::Int(-2));
    }
    let started = std::time::Instant::now();
    assert_eq!(call(&mut c, &["PING"]), R::Simple("PONG".into()));
    assert!(started.elapsed() < Duration::from_millis(500));
    let deferred: i64 = lock_info(&mut s.conn())["grants_deferred"].parse().unwrap();
    // About 1.35 s of refusals, one look per key every 50 ms (plus keyspace-event checks).
    assert!(deferred > 0 && deferred <= (KEYS as i64) * 60, "{deferred} deferrals");
}
