//! Spec section 9, the module's own limits: no input stalls the server (timer periods capped
//! and re-armed), a WAIT of any accepted size waits, bounded memory per waiter and per Redisson
//! turn (configs, INFO), a clean MODULE UNLOAD + LOAD, and known EVALSHAs running natively for
//! every input the script accepts (lease <= 0, odd latch values) without SCRIPT LOAD.

mod common;
use common::resp::{Conn, R};
use common::scripts::{assert_same_keyspace, load_all, native_opts, script};
use common::*;
use std::time::{Duration, Instant};

macro_rules! cmd {
    ($c:expr, $($a:expr),+ $(,)?) => { $c.call(&[$(crate::common::resp::Arg::arg(&$a)),+]) };
}

/// Redisson's own scripts (research/redisson-sha1.md): acquire, unlock with latch, renew.
const ACQUIRE: &str = "dad0f8d619e548e04f21fb48d50be5034df3adae";
const UNLOCK_LATCH: &str = "6866459238a13a701d42f4971f12d9f3a50e2442";
const RENEW: &str = "8e19a1ddbdee9138df9f32a480c57addab4353d1";
const FENCED: &str = "49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45";

/// The server answers PING within a second on a fresh connection.
fn answers_within_a_second(s: &Server, what: &str) {
    let mut c = Conn::new(s.port);
    c.set_timeout(Duration::from_secs(1));
    let t = Instant::now();
    c.send(&[b"PING".to_vec()]);
    match c.read() {
        Ok(R::Simple(p)) if p == "PONG" => {}
        other => panic!("{what}: the server did not answer PING within 1 s: {other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(1), "{what}: PING took {:?}", t.elapsed());
}

/// The server keeps answering PING (each within a second) for 300 ms: a timer loop that
/// starts a moment after a command shows up here.
fn keeps_answering(s: &Server, what: &str) {
    let end = Instant::now() + Duration::from_millis(300);
    while Instant::now() < end {
        answers_within_a_second(s, what);
    }
}

/// A connection that sends `LOCK.ACQUIRE key owner 1000 WAIT timeout` and stays blocked.
fn blocked_waiter(s: &Server, key: &str, owner: &str, timeout: &str) -> Conn {
    let mut w = Conn::new(s.port);
    w.set_timeout(Duration::from_secs(5));
    w.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        key.into(),
        owner.into(),
        b"1000".to_vec(),
        b"WAIT".to_vec(),
        timeout.into(),
    ]);
    w
}

/// Wait until `n` clients wait; every INFO must be answered within a second.
fn wait_for_waiters(s: &Server, n: i64) {
    let mut c = Conn::new(s.port);
    c.set_timeout(Duration::from_secs(1));
    let mut now = || {
        c.send(&[b"INFO".to_vec(), b"lock".to_vec()]);
        let text = match c.read() {
            Ok(r) => r.str(),
            Err(e) => panic!("the server did not answer INFO within 1 s: {e}"),
        };
        text.lines().find_map(|l| l.strip_prefix("lock_waiters:")).and_then(|v| v.trim().parse::<i64>().ok())
    };
    let ok = wait_for(Duration::from_secs(5), || (now() == Some(n)).then_some(()));
    assert!(ok.is_some(), "expected {n} waiters, INFO says {:?}", now());
}

fn info(c: &mut Conn, field: &str) -> i64 {
    let text = cmd!(c, "INFO", "lock").str();
    let key = format!("lock_{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no INFO field {field}"))
}

/// `hold` takes lock `k` (on `c`), a client then waits on it, and `then` runs; the server must
/// keep answering, and the waiter is granted once the key is deleted.
fn never_stalls(what: &str, hold: &[&str], then: &[&str]) {
    let s = Server::start_opts(Opts::default().module_arg("redisson-scripts native"));
    let mut c = Conn::new(s.port);
    c.set_timeout(Duration::from_secs(5));
    let words = |v: &[&str]| v.iter().map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
    assert_eq!(c.call(&words(hold)), R::Nil, "{what}: lock taken");
    let mut w = blocked_waiter(&s, "k", "w", "0");
    wait_for_waiters(&s, 1);
    if !then.is_empty() {
        assert_eq!(c.call(&words(then)), R::Int(1), "{what}");
    }
    keeps_answering(&s, what);
    assert_eq!(cmd!(c, "DEL", "k"), R::Int(1));
    assert_eq!(w.read().expect("grant after DEL"), R::Nil, "{what}: granted after DEL");
    assert_eq!(cmd!(c, "HGET", "k", "w").str(), "1");
    answers_within_a_second(&s, what);
    assert_eq!(info(&mut c, "panics_caught"), 0);
}

/// A lease whose deadline in µs overflows, then a waiter: the lease timer used to wrap.
#[test]
fn a_huge_lease_with_a_waiter_never_stalls_the_server() {
    never_stalls("huge lease + WAIT 0", &["LOCK.ACQUIRE", "k", "holder", "18446744073709551"], &[]);
}

/// Any client's PEXPIRE of a huge value on a lock with a waiter.
#[test]
fn a_huge_pexpire_with_a_waiter_never_stalls_the_server() {
    never_stalls(
        "PEXPIRE huge with a waiter",
        &["LOCK.ACQUIRE", "k", "holder", "30000"],
        &["PEXPIRE", "k", "18446744073000000"],
    );
}

/// Redisson's acquire, run natively, with that lease.
#[test]
fn a_native_acquire_with_a_huge_lease_never_stalls_the_server() {
    never_stalls(
        "native acquire, huge lease",
        &["EVALSHA", ACQUIRE, "1", "k", "18446744073709551", "java:1"],
        &[],
    );
}

#[test]
fn a_huge_wait_waits() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", "holder", 30000), R::Nil);
    let mut w = Conn::new(s.port);
    let id = cmd!(w, "CLIENT", "ID").int();
    w.set_timeout(Duration::from_millis(1100));
    w.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"k".to_vec(),
        b"w".to_vec(),
        b"1000".to_vec(),
        b"WAIT".to_vec(),
        b"18446744073709551".to_vec(),
    ]);
    match w.read() {
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
        other => panic!("a WAIT of 18446744073709551 ms ended within 1.1 s: {other:?}"),
    }
    assert_eq!(info(&mut c, "waiters"), 1);
    answers_within_a_second(&s, "huge WAIT");
    w.set_timeout(Duration::from_secs(5));
    assert_eq!(cmd!(c, "CLIENT", "UNBLOCK", id), R::Int(1));
    let pttl = w.read().expect("reply after CLIENT UNBLOCK").int();
    assert!((25_000..=30_000).contains(&pttl), "CLIENT UNBLOCK replies the PTTL: {pttl}");
    assert_eq!(info(&mut c, "waiters"), 0);
}

#[test]
fn waiter_and_turn_memory_is_bounded() {
    let s = Server::start_opts(Opts::default().module_arg("redisson-scripts native max-script-turns 50"));
    let mut c = Conn::new(s.port);
    let get = |c: &mut Conn, name: &str| cmd!(c, "CONFIG", "GET", format!("lock.{name}")).arr()[1].str();
    assert_eq!(get(&mut c, "max-script-turns"), "50", "module argument");
    assert_eq!(get(&mut c, "max-waiters"), "100000");
    assert_eq!(get(&mut c, "max-waiter-bytes"), "65536");

    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", "holder", 60000), R::Nil);
    let _w = blocked_waiter(&s, "k", "w", "0");
    wait_for_waiters(&s, 1);
    // 3 000 failed Redisson acquires with 20 KB owners: at most 50 turns are kept.
    let mut p = Conn::new(s.port);
    for chunk in 0..30 {
        for i in 0..100 {
            let owner = format!("{:020000}", chunk * 100 + i);
            p.send(&[
                b"EVALSHA".to_vec(),
                ACQUIRE.into(),
                b"1".to_vec(),
                b"k".to_vec(),
                b"30000".to_vec(),
                owner.into(),
            ]);
        }
        for _ in 0..100 {
            let pttl = p.read().expect("acquire reply").int();
            assert!(pttl > 0, "the lock is held: {pttl}");
        }
    }
    assert_eq!(info(&mut c, "script_turns_waiting"), 50);
    assert_eq!(info(&mut c, "script_turns_refused"), 2950);
    // Owners once per entry (50 turns, the waiter "w"), the name "k" once for the key.
    assert_eq!(info(&mut c, "waiter_bytes"), 50 * 20_000 + 1 + 1);
    assert_eq!(info(&mut c, "redisson_acquire_native"), 3000);

    // lock.max-waiters: a WAIT beyond it is served as without WAIT (the PTTL at once).
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.max-waiters", 1), R::Simple("OK".into()));
    assert_eq!(get(&mut c, "max-waiters"), "1");
    let pttl = cmd!(c, "LOCK.ACQUIRE", "k", "w2", 1000, "WAIT", 5000).int();
    assert!(pttl > 0, "{pttl}");
    assert_eq!(info(&mut c, "waits_refused"), 1);
    let fenced = cmd!(c, "LOCK.ACQUIRE", "k", "w2", 1000, "WAIT", 0, "FENCE");
    assert!(matches!(fenced.arr(), [R::Int(p), R::Int(-1)] if *p > 0), "{fenced:?}");
    assert_eq!(info(&mut c, "waits_refused"), 2);
    // lock.max-waiter-bytes: a waiter whose owner id and lock name together are longer is not
    // kept either (here 11 bytes: the name "k" and a 10-byte owner).
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.max-waiters", 10), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.max-waiter-bytes", 11), R::Simple("OK".into()));
    assert!(cmd!(c, "LOCK.ACQUIRE", "k", "0123456789a", 1000, "WAIT", 5000).int() > 0);
    assert_eq!(info(&mut c, "waits_refused"), 3);
    assert_eq!(info(&mut c, "waiters"), 1);
    // Within the bounds a WAIT still blocks.
    let _w2 = blocked_waiter(&s, "k", "0123456789", "0");
    wait_for_waiters(&s, 2);
    answers_within_a_second(&s, "after the limits");
}

#[test]
fn unload_and_reload_start_afresh() {
    let s = Server::start_opts(Opts::default().module_arg("redisson-scripts native"));
    let mut c = Conn::new(s.port);
    let path = module_path().to_string_lossy().into_owned();
    let cycle = |c: &mut Conn, round: usize| {
        // A lock taken natively, and a DEL that wakes a waiter (keyspace subscription).
        assert_eq!(cmd!(c, "EVALSHA", ACQUIRE, 1, format!("held{round}"), 60000, "java:1"), R::Nil);
        assert_eq!(info(c, "redisson_acquire_native"), 1, "round {round}: native, counted afresh");
        assert_eq!(cmd!(c, "LOCK.ACQUIRE", "w", "holder", 60000), R::Nil);
        let mut w = blocked_waiter(&s, "w", "waiter", "0");
        wait_for_waiters(&s, 1);
        assert_eq!(cmd!(c, "DEL", "w"), R::Int(1));
        assert_eq!(w.read().expect("woken by DEL"), R::Nil, "round {round}: DEL wakes the waiter");
        assert_eq!(cmd!(c, "DEL", "w"), R::Int(1));
        assert_eq!(info(c, "waits_granted"), 1, "round {round}");
        assert_eq!(info(c, "acquires_new"), 1, "round {round}");
    };
    cycle(&mut c, 0);
    for round in 1..=2 {
        assert_eq!(cmd!(c, "MODULE", "UNLOAD", "lock"), R::Simple("OK".into()), "round {round}");
        assert!(cmd!(c, "EVALSHA", ACQUIRE, 1, "x", 1000, "o").is_err(), "unloaded: NOSCRIPT again");
        assert_eq!(cmd!(c, "MODULE", "LOAD", &path, "redisson-scripts", "native"), R::Simple("OK".into()));
        assert_eq!(cmd!(c, "CONFIG", "GET", "lock.redisson-scripts").arr()[1].str(), "native");
        cycle(&mut c, round);
        // The filter can be switched off and on again (its handle is this instance's).
        assert_eq!(cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "lua"), R::Simple("OK".into()));
        assert!(cmd!(c, "EVALSHA", ACQUIRE, 1, "y", 1000, "o").is_err(), "lua: NOSCRIPT");
        assert_eq!(cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "native"), R::Simple("OK".into()));
        assert_eq!(cmd!(c, "CONFIG", "SET", "lock.max-waiters", 7), R::Simple("OK".into()));
    }
    // Unload with the filter off, load with the default config.
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "lua"), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "MODULE", "UNLOAD", "lock"), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "MODULE", "LOAD", &path), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "CONFIG", "GET", "lock.max-waiters").arr()[1].str(), "100000", "defaults again");
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "native"), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "EVALSHA", ACQUIRE, 1, "z", 1000, "o"), R::Nil);
    assert_eq!(info(&mut c, "waiters"), 0);
    answers_within_a_second(&s, "after reloads");
}

/// `[-1, token]` -> token.
fn token_of(r: &R) -> i64 {
    match r.arr() {
        [R::Int(-1), R::Int(t)] => *t,
        other => panic!("expected [-1, token], got {other:?}"),
    }
}

#[test]
fn known_evalsha_runs_without_the_script_loaded() {
    let s = Server::start_opts(Opts::default().module_arg("redisson-scripts native"));
    let mut c = Conn::new(s.port);
    // lease <= 0: the script's PEXPIRE deletes the lock it just wrote.
    for lease in ["0", "-1", "-9223372036854775808"] {
        assert_eq!(cmd!(c, "EVALSHA", ACQUIRE, 1, "a", lease, "o"), R::Nil, "lease {lease}");
        assert_eq!(cmd!(c, "EXISTS", "a"), R::Int(0), "lease {lease}");
    }
    assert_eq!(cmd!(c, "EVALSHA", ACQUIRE, 1, "a", 30000, "o"), R::Nil);
    assert_eq!(cmd!(c, "EVALSHA", ACQUIRE, 1, "a", 0, "o"), R::Nil, "reentrant, lease 0");
    assert_eq!(cmd!(c, "EXISTS", "a"), R::Int(0));
    // The fenced acquire still INCRs.
    assert_eq!(token_of(&cmd!(c, "EVALSHA", FENCED, 2, "f", "tok", 0, "o")), 1);
    assert_eq!(cmd!(c, "EXISTS", "f"), R::Int(0));
    // Held by another owner: the lease is never used, even when it is not a number.
    assert_eq!(cmd!(c, "EVALSHA", ACQUIRE, 1, "a", 30000, "o"), R::Nil);
    assert!(cmd!(c, "EVALSHA", ACQUIRE, 1, "a", "soon", "other").int() > 0);
    // Renew with lease 0 deletes; unlock's re-arm with lease 0 deletes.
    assert_eq!(cmd!(c, "EVALSHA", RENEW, 1, "a", 0, "o"), R::Int(1));
    assert_eq!(cmd!(c, "EXISTS", "a"), R::Int(0));
    for _ in 0..2 {
        assert_eq!(cmd!(c, "EVALSHA", ACQUIRE, 1, "u", 30000, "o"), R::Nil);
    }
    let unlock = |c: &mut Conn, latch: &str, lease: &str| {
        cmd!(c, "EVALSHA", UNLOCK_LATCH, 3, "u", "chan", latch, 0, lease, "o", "PUBLISH", 13500)
    };
    assert_eq!(unlock(&mut c, "l0", "0"), R::Int(0));
    assert_eq!(cmd!(c, "EXISTS", "u"), R::Int(0));
    assert_eq!(cmd!(c, "GET", "l0").str(), "0");
    // Latch values converted as Lua's tonumber does.
    for (v, want) in [
        ("1", R::Int(1)),
        ("1.5", R::Int(1)),
        (" 7 ", R::Int(7)),
        ("0x10", R::Int(16)),
        ("1e2", R::Int(100)),
        ("-2.9", R::Int(-2)),
        ("abc", R::Nil),
        ("", R::Nil),
        ("1 2", R::Nil),
    ] {
        assert_eq!(cmd!(c, "SET", "latch", v), R::Simple("OK".into()));
        assert_eq!(unlock(&mut c, "latch", "30000"), want, "latch value {v:?}");
    }
    let lua = info(&mut c, "redisson_unlock_latch_lua") + info(&mut c, "redisson_acquire_lua");
    assert_eq!(lua, 0, "everything above ran natively");
    // What the module must leave to Lua gets NOSCRIPT when the script is not loaded.
    assert_eq!(cmd!(c, "SET", "str", "v"), R::Simple("OK".into()));
    let r = cmd!(c, "EVALSHA", ACQUIRE, 1, "str", 30000, "o");
    assert!(r.is_err() && r.err().starts_with("NOSCRIPT"), "{r:?}");
}

/// Odd leases and latch values through our own scripts: native (not loaded) vs Lua (loaded).
#[test]
fn odd_inputs_match_lua_without_script_load() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    load_all(&mut a);
    let (acq, unl, ren, fen) = (
        script("acquire").sha,
        script("unlock-latch").sha,
        script("renew-batch").sha,
        script("fenced-acquire").sha,
    );
    let cases: Vec<Vec<String>> = vec![
        vec!["EVALSHA", &acq, "1", "a", "0", "o"],
        vec!["EVALSHA", &acq, "1", "a", "30000", "o"],
        vec!["EVALSHA", &acq, "1", "a", "x", "p"],
        vec!["EVALSHA", &acq, "1", "a", "-3", "o"],
        vec!["EVALSHA", &fen, "2", "f", "t", "0", "o"],
        vec!["EVALSHA", &fen, "2", "f", "t", "30000", "o"],
        vec!["EVALSHA", &fen, "2", "f", "t", "-1", "o"],
        vec!["EVALSHA", &acq, "1", "r", "30000", "o"],
        vec!["EVALSHA", &acq, "1", "s", "30000", "o"],
        vec!["EVALSHA", &ren, "2", "r", "s", "0", "o", "o"],
        vec!["EVALSHA", &acq, "1", "u", "30000", "o"],
        vec!["EVALSHA", &acq, "1", "u", "30000", "o"],
        vec!["EVALSHA", &unl, "3", "u", "c", "l1", "0", "-1", "o", "PUBLISH", "13500"],
        vec!["SET", "l2", "0x1F"],
        vec!["EVALSHA", &unl, "3", "u", "c", "l2", "0", "1000", "o", "PUBLISH", "13500"],
        vec!["SET", "l2", "  -12.75e1\t"],
        vec!["EVALSHA", &unl, "3", "u", "c", "l2", "0", "1000", "o", "PUBLISH", "13500"],
        vec!["SET", "l2", ".5"],
        vec!["EVALSHA", &unl, "3", "u", "c", "l2", "0", "1000", "o", "PUBLISH", "13500"],
        vec!["SET", "l2", "1x"],
        vec!["EVALSHA", &unl, "3", "u", "c", "l2", "0", "1000", "o", "PUBLISH", "13500"],
        // Not the owner: the latch TTL is never used.
        vec!["EVALSHA", &unl, "3", "u", "c", "l3", "0", "1000", "nobody", "PUBLISH", "0"],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect();
    for argv in &cases {
        let v: Vec<Vec<u8>> = argv.iter().map(|s| s.clone().into_bytes()).collect();
        let (ra, rb) = (a.call(&v), b.call(&v));
        let same = match (&ra, &rb) {
            (R::Int(x), R::Int(y)) if *x > 1000 => (x - y).abs() <= 50,
            _ => ra == rb,
        };
        assert!(same, "{argv:?}\n lua:    {ra:?}\n native: {rb:?}");
    }
    assert_same_keyspace(&mut a, &mut b, 100, "after odd inputs");
    let lua_runs: i64 = cmd!(b, "INFO", "lock")
        .str()
        .lines()
        .filter(|l| l.starts_with("lock_redisson_") && l.contains("_lua:"))
        .filter_map(|l| l.split_once(':').and_then(|(_, v)| v.trim().parse::<i64>().ok()))
        .sum();
    assert_eq!(lua_runs, 0, "every case ran natively (none was loaded on the native server)");
}

/// CPU ticks (user + system, 1/100 s) the process `pid` has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/pid/stat");
    // Fields after the command name (which may contain spaces, inside parentheses).
    let rest = stat.rsplit_once(')').expect("stat format").1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// CPU ticks the server uses in `d` of doing nothing.
fn idle_ticks(s: &Server, d: Duration) -> u64 {
    let pid = s.pid().expect("server pid");
    let before = cpu_ticks(pid);
    std::thread::sleep(d);
    cpu_ticks(pid) - before
}

/// Long timers leave an idle server idle. Redis 7.0's event loop re-arms the module timer
/// event with `retval * 1000` computed in a 32-bit int (ae.c before upstream PR 12474): when a
/// module timer fires and the next one is more than ~35.8 minutes away, the product wraps, the
/// next fire time lands in the past (on a host up for longer than the wrap), and the loop polls
/// with a zero timeout, a core at 100%. Each case makes a timer fire (the keyspace event of a
/// LOCK.RENEW or PEXPIRE wakes the module) while a lease, expiry or WAIT timeout from 30 minutes
/// to years is pending.
#[test]
fn long_timers_leave_an_idle_server_idle() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let baseline = idle_ticks(&s, Duration::from_millis(1000));
    const MIN: i64 = 60_000;
    let year = 365 * 24 * 60 * MIN;
    // (what, the lease a LOCK.RENEW sets, or a PEXPIRE, after the waiter blocked; its timeout)
    let cases: [(&str, &str, i64, i64); 8] = [
        ("renew 30 min", "LOCK.RENEW", 30 * MIN, 0),
        ("renew 36 min", "LOCK.RENEW", 36 * MIN, 0),
        ("renew 58.3 min (3 500 000 ms)", "LOCK.RENEW", 3_500_000, 0),
        ("renew 71.6 min (wraps to -1 s)", "LOCK.RENEW", 4_294_000, 0),
        ("renew 1 day", "LOCK.RENEW", 24 * 60 * MIN, 0),
        ("PEXPIRE 10 years", "PEXPIRE", 10 * year, 0),
        ("WAIT 50 min", "LOCK.RENEW", 10 * year, 50 * MIN),
        ("WAIT 1 year", "LOCK.RENEW", 10 * year, year),
    ];
    for (what, cmd, lease, timeout) in cases {
        assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", "holder", 60_000), R::Nil, "{what}");
        let mut w = blocked_waiter(&s, "k", "w", &timeout.to_string());
        wait_for_waiters(&s, 1);
        let r = if cmd == "PEXPIRE" {
            cmd!(c, "PEXPIRE", "k", lease)
        } else {
            cmd!(c, cmd, "k", "holder", lease)
        };
        assert_eq!(r, R::Int(1), "{what}");
        let ticks = idle_ticks(&s, Duration::from_millis(1500));
        assert!(
            ticks <= baseline + 30,
            "{what}: {ticks} CPU ticks in 1.5 s idle (baseline {baseline} in 1 s)"
        );
        answers_within_a_second(&s, what);
        assert_eq!(cmd!(c, "DEL", "k"), R::Int(1));
        assert_eq!(w.read().expect("granted after DEL"), R::Nil, "{what}");
        assert_eq!(cmd!(c, "DEL", "k"), R::Int(1));
    }
}

/// A failed Redisson acquire on a key with WAIT clients looks up the owner's place in line in
/// O(1): with 10 000 turns queued it costs what it costs with 10 (it scanned every turn,
/// comparing owners: 248 µs per call at 10 000 turns with 16-byte owners). Measured inside the
/// server (commandstats), with a wide margin.
#[test]
fn a_failed_acquire_costs_the_same_with_ten_thousand_turns() {
    let s = Server::start_opts(Opts::default().module_arg("redisson-scripts native"));
    let mut c = Conn::new(s.port);
    let usec_per_call = |c: &mut Conn, turns: usize, key: &str| -> f64 {
        assert_eq!(cmd!(c, "LOCK.ACQUIRE", key, "holder", 600_000), R::Nil);
        let _w = blocked_waiter(&s, key, "w", "0");
        let mut p = Conn::new(s.port);
        // `turns` owners take a place each (pipelined), then 2 000 acquires of other owners are
        // measured (a lookup that finds nothing walked the whole line).
        let owner = |i: usize| format!("{i:016}");
        let send_all = |p: &mut Conn, range: std::ops::Range<usize>| {
            for chunk in range.collect::<Vec<_>>().chunks(500) {
                for i in chunk {
                    p.send(&[
                        b"EVALSHA".to_vec(),
                        ACQUIRE.into(),
                        b"1".to_vec(),
                        key.into(),
                        b"30000".to_vec(),
                        owner(*i).into(),
                    ]);
                }
                for _ in chunk {
                    assert!(p.read().expect("acquire reply").int() > 0);
                }
            }
        };
        send_all(&mut p, 0..turns);
        assert_eq!(info(c, "script_turns_waiting"), turns as i64);
        assert_eq!(cmd!(c, "CONFIG", "RESETSTAT"), R::Simple("OK".into()));
        send_all(&mut p, 20_000..22_000);
        let stats = cmd!(c, "INFO", "commandstats").str();
        let line =
            stats.lines().find(|l| l.starts_with("cmdstat_lock.redisson:")).expect("lock.redisson stats");
        let usec: f64 = line
            .split(',')
            .find_map(|f| f.strip_prefix("usec_per_call="))
            .and_then(|v| v.parse().ok())
            .expect("usec_per_call");
        assert_eq!(cmd!(c, "DEL", key), R::Int(1));
        usec
    };
    let few = usec_per_call(&mut c, 10, "few");
    let many = usec_per_call(&mut c, 10_000, "many");
    eprintln!("failed acquire: {few} µs with 10 turns, {many} µs with 10 000 turns");
    assert!(many < few * 4.0 + 10.0, "{many} µs per failed acquire with 10 000 turns, {few} µs with 10");
}

/// The lock name is kept once per key, however many waiters and turns it has, and counts
/// towards `lock.max-waiter-bytes` (each turn kept a copy: 300 turns on a 1 MB name took 300 MB).
#[test]
fn a_long_lock_name_is_kept_once() {
    let s =
        Server::start_opts(Opts::default().module_arg("redisson-scripts native max-waiter-bytes 2000000"));
    let mut c = Conn::new(s.port);
    let name = "n".repeat(1 << 20);
    let used = |c: &mut Conn| -> i64 {
        cmd!(c, "INFO", "memory")
            .str()
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", &name, "holder", 600_000), R::Nil);
    let before = used(&mut c);
    let _w = blocked_waiter(&s, &name, "w", "0");
    wait_for_waiters(&s, 1);
    let mut p = Conn::new(s.port);
    for i in 0..300 {
        p.send(&[
            b"EVALSHA".to_vec(),
            ACQUIRE.into(),
            b"1".to_vec(),
            name.clone().into(),
            b"30000".to_vec(),
            format!("java:{i}").into(),
        ]);
    }
    for _ in 0..300 {
        assert!(p.read().expect("acquire reply").int() > 0);
    }
    assert_eq!(info(&mut c, "script_turns_waiting"), 300);
    let owners: i64 = 1 + (0..300).map(|i| format!("java:{i}").len() as i64).sum::<i64>();
    assert_eq!(info(&mut c, "waiter_bytes"), (1 << 20) + owners, "the name once, each owner once");
    let grown = used(&mut c) - before;
    assert!(grown < 16 << 20, "used_memory grew by {grown} bytes for 300 turns on a 1 MB name");
    // With the default bound (65 536 bytes, name + owner) such a name waits as without WAIT.
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.max-waiter-bytes", 65_536), R::Simple("OK".into()));
    let refused = info(&mut c, "waits_refused");
    assert!(cmd!(c, "LOCK.ACQUIRE", &name, "w2", 1000, "WAIT", 5000).int() > 0);
    assert_eq!(info(&mut c, "waits_refused"), refused + 1);
    assert!(cmd!(c, "EVALSHA", ACQUIRE, 1, &name, 30000, "java:new").int() > 0);
    assert_eq!(info(&mut c, "script_turns_waiting"), 300, "no new turn for a name beyond the bound");
}

/// WAIT blocks only on a master: on a replica (writable or not) nothing grants its waiters but
/// replication, so it answers at once, as without WAIT (a writable replica blocked forever).
#[test]
fn wait_on_a_replica_answers_at_once() {
    let master = Server::start();
    let mut m = Conn::new(master.port);
    assert_eq!(cmd!(m, "LOCK.ACQUIRE", "k", "holder", 60000), R::Nil);
    for read_only in ["yes", "no"] {
        let replica = Server::start_opts(Opts::default().arg(&format!("--replica-read-only {read_only}")));
        replica.replicate_from(&master);
        let mut r = Conn::new(replica.port);
        let synced = wait_for(Duration::from_secs(5), || (cmd!(r, "EXISTS", "k") == R::Int(1)).then_some(()));
        assert!(synced.is_some(), "replicated");
        for timeout in ["0", "2000"] {
            r.set_timeout(Duration::from_secs(1));
            let t = Instant::now();
            let reply = cmd!(r, "LOCK.ACQUIRE", "k", "w", 1000, "WAIT", timeout);
            if read_only == "yes" {
                assert!(reply.err().starts_with("READONLY"), "{reply:?}");
            } else {
                assert!(reply.int() > 0, "the PTTL at once: {reply:?}");
            }
            assert!(
                t.elapsed() < Duration::from_millis(500),
                "replica-read-only {read_only}: {:?}",
                t.elapsed()
            );
        }
        assert_eq!(info(&mut r, "waiters"), 0);
    }
}
