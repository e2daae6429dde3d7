//! Scenario "semaphore": the semaphore's LOCK.SEM* commands against Redisson's
//! permit-expirable semaphore scripts in Lua, Redisson's semaphore and PES scripts run natively
//! against the same scripts in Lua, and a contended semaphore (16 clients, 4 permits, 1 ms
//! critical sections) waiting with LOCK.SEMACQUIRE WAIT against Redisson-style pub/sub waiting.
//!
//! The scripts are our own implementations (`clients/python/src/redislock/lua/pes-*.lua`,
//! `semaphore-*.lua`), registered with `lock.redisson-extra-scripts` so that in `native` mode
//! they take the path of Redisson's SHA1s. Uncontended phases are pipelined over distinct
//! semaphores (`pipelined.rs`), the two sides alternating in 7 repetitions; a ratio is the
//! median of the repetitions' ratios.

use crate::pipelined;
use crate::stats::{dist, median, Dist};
use redis::Value;
use serde::Serialize;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use testkit::resp::{Conn, R};
use testkit::scripts::lua;

const LEASE: i64 = 30_000;
const NO_LEASE: &str = "922337203685477";

/// The operations of the scripts this scenario sends.
const SCRIPTS: [&str; 4] = ["pes-tryacquire", "pes-release", "semaphore-tryacquire", "semaphore-release"];

fn sha(op: &str) -> String {
    sha1_smol::Sha1::from(lua(op).as_bytes()).digest().to_string()
}

fn set_mode(con: &mut redis::Connection, mode: &str) {
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("lock.redisson-scripts").arg(mode).query(con).expect("mode");
}

fn key(i: usize) -> String {
    format!("semb:{i:06}")
}

fn zset(k: &str) -> String {
    format!("{{{k}}}:timeout")
}

fn channel(k: &str) -> String {
    format!("redisson_sc:{{{k}}}")
}

fn id(i: usize) -> Vec<u8> {
    // 16 bytes, as Redisson's ids.
    let mut b = (i as u64).to_le_bytes().to_vec();
    b.extend_from_slice(b"\x9e\x1d\x00\xffpermit");
    b
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    /// LOCK.SEMACQUIRE k lease 1 id vs PES tryAcquire (3.23.4+).
    Acquire,
    /// LOCK.SEMRELEASE k id vs PES release (3.22+).
    Release,
    /// RSemaphore tryAcquire(1).
    SemAcquire,
    /// RSemaphore release(1).
    SemRelease,
}

fn pes_acquire(k: &str, i: usize, now: i64) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(sha("pes-tryacquire")).arg(3).arg(k).arg(zset(k)).arg(channel(k));
    c.arg(1).arg(now + LEASE).arg(now).arg(NO_LEASE).arg("PUBLISH").arg(id(i));
    c
}

fn pes_release(k: &str, i: usize, now: i64) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(sha("pes-release")).arg(3).arg(k).arg(channel(k)).arg(zset(k));
    c.arg(id(i)).arg(1).arg(now).arg("PUBLISH");
    c
}

fn command(op: Op, native_cmd: bool, i: usize, now: i64) -> redis::Cmd {
    let k = key(i);
    match (op, native_cmd) {
        (Op::Acquire, true) => {
            let mut c = redis::cmd("LOCK.SEMACQUIRE");
            c.arg(&k).arg(LEASE).arg(1).arg(id(i));
            c
        }
        (Op::Acquire, false) => pes_acquire(&k, i, now),
        (Op::Release, true) => {
            let mut c = redis::cmd("LOCK.SEMRELEASE");
            c.arg(&k).arg(id(i));
            c
        }
        (Op::Release, false) => pes_release(&k, i, now),
        (Op::SemAcquire, _) => {
            let mut c = redis::cmd("EVALSHA");
            c.arg(sha("semaphore-tryacquire")).arg(1).arg(&k).arg(1);
            c
        }
        (Op::SemRelease, _) => {
            let mut c = redis::cmd("EVALSHA");
            c.arg(sha("semaphore-release")).arg(2).arg(&k).arg(channel(&k)).arg(1).arg("PUBLISH");
            c
        }
    }
}

fn expected(op: Op, native_cmd: bool, v: &R) -> bool {
    match (op, native_cmd) {
        (Op::Acquire, true) => matches!(v, R::Nil),
        (Op::Acquire, false) => matches!(v, R::Bulk(b) if b == b"OK"),
        (Op::Release, _) | (Op::SemAcquire, _) => matches!(v, R::Int(1)),
        (Op::SemRelease, _) => matches!(v, R::Nil),
    }
}

/// One phase of `op` over `n` semaphores: set-up (untimed), timed, FLUSHALL. (ops/s, server µs
/// per call, unexpected replies).
fn phase(
    con: &mut redis::Connection,
    port: u16,
    op: Op,
    native_cmd: bool,
    n: usize,
    stat: &str,
) -> (f64, f64, usize) {
    let now = now_ms();
    let set = |i: usize, p: i64| {
        let mut c = redis::cmd("SET");
        c.arg(key(i)).arg(p);
        c
    };
    let setup: Vec<redis::Cmd> = match op {
        Op::Acquire | Op::SemAcquire => (0..n).map(|i| set(i, 1)).collect(),
        Op::Release => (0..n)
            .flat_map(|i| {
                let mut z = redis::cmd("ZADD");
                z.arg(zset(&key(i))).arg(now + LEASE).arg(id(i));
                [set(i, 0), z]
            })
            .collect(),
        Op::SemRelease => (0..n).map(|i| set(i, 0)).collect(),
    };
    pipelined::untimed(con, &setup);
    let cmds: Vec<redis::Cmd> = (0..n).map(|i| command(op, native_cmd, i, now)).collect();
    let r = pipelined::timed(con, port, &cmds, stat, |v| expected(op, native_cmd, v));
    let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
    r
}

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub op: String,
    /// "LOCK.SEM* vs Lua" or "native vs Lua".
    pub kind: String,
    pub fast_ops_per_sec: f64,
    pub lua_ops_per_sec: f64,
    pub ratio: f64,
    pub fast_server_usec: f64,
    pub lua_server_usec: f64,
    pub unexpected_replies: usize,
}

/// Both sides of one comparison, alternating, `reps` times; the median of the paired ratios.
fn compare(
    con: &mut redis::Connection,
    label: &str,
    kind: &str,
    reps: usize,
    mut side: impl FnMut(&mut redis::Connection, bool) -> (f64, f64, usize),
) -> Row {
    eprintln!("[semaphore] {label} ({kind})");
    let (mut fast, mut slow) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        if rep % 2 == 0 {
            fast.push(side(con, true));
            slow.push(side(con, false));
        } else {
            slow.push(side(con, false));
            fast.push(side(con, true));
        }
    }
    let m = |v: &[(f64, f64, usize)], f: fn(&(f64, f64, usize)) -> f64| median(v.iter().map(f).collect());
    Row {
        op: label.into(),
        kind: kind.into(),
        fast_ops_per_sec: m(&fast, |x| x.0),
        lua_ops_per_sec: m(&slow, |x| x.0),
        ratio: median(fast.iter().zip(&slow).map(|(a, b)| a.0 / b.0).collect()),
        fast_server_usec: m(&fast, |x| x.1),
        lua_server_usec: m(&slow, |x| x.1),
        unexpected_replies: fast.iter().chain(&slow).map(|x| x.2).sum(),
    }
}

fn register(con: &mut redis::Connection) {
    let extra: Vec<String> = SCRIPTS.iter().map(|op| format!("{op}:{}:{}", sha(op), lua(op).len())).collect();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lock.redisson-extra-scripts")
        .arg(extra.join(","))
        .query(con)
        .expect("extra scripts");
    for op in SCRIPTS {
        let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(lua(op)).query(con).expect("SCRIPT LOAD");
    }
}

pub fn run_uncontended(con: &mut redis::Connection, port: u16, quick: bool) -> Vec<Row> {
    register(con);
    let (n, reps) = if quick { (2_000, 1) } else { (50_000, 7) };
    let mut rows = Vec::new();
    set_mode(con, "lua");
    for (op, label) in [(Op::Acquire, "acquire 1 permit (leased)"), (Op::Release, "release 1 permit")] {
        let stat = if op == Op::Acquire { "lock.semacquire" } else { "lock.semrelease" };
        rows.push(compare(con, label, "LOCK.SEM* vs Lua", reps, |c, fast| {
            phase(c, port, op, fast, n, if fast { stat } else { "evalsha" })
        }));
    }
    for (op, label) in [
        (Op::Acquire, "PES tryAcquire (3.23.4+)"),
        (Op::Release, "PES release (3.22+)"),
        (Op::SemAcquire, "RSemaphore tryAcquire"),
        (Op::SemRelease, "RSemaphore release (3.22+)"),
    ] {
        rows.push(compare(con, label, "native vs Lua", reps, |c, fast| {
            set_mode(c, if fast { "native" } else { "lua" });
            phase(c, port, op, false, n, if fast { "lock.redisson" } else { "evalsha" })
        }));
    }
    set_mode(con, "lua");
    rows
}

// ---- contended: 16 clients, 4 permits ---------------------------------------------------------

#[derive(Serialize, Clone, Debug)]
pub struct ContendedRow {
    pub strategy: String,
    pub seconds: f64,
    pub grants: usize,
    pub wait_ms: Dist,
    pub waits_cut_off: usize,
    /// The most permits out at once, as the clients counted them (must be <= 4).
    pub max_out: i64,
    pub unexpected_replies: usize,
}

const CKEY: &str = "semb:contended";
const PERMITS: i64 = 4;

#[derive(Default)]
struct Out {
    waits: Vec<f64>,
    cut_off: usize,
    bad: usize,
}

fn contender(
    port: u16,
    wait: bool,
    who: usize,
    out_now: Arc<(AtomicI64, AtomicU64)>,
    barrier: Arc<Barrier>,
    dur: Duration,
) -> Out {
    let mut c = crate::connect(port);
    let mut sub = Conn::new(port);
    let chan = channel(CKEY);
    let mut out = Out::default();
    barrier.wait();
    let deadline = Instant::now() + dur;
    let mut round = 0usize;
    while Instant::now() < deadline {
        round += 1;
        let pid = id(who * 1_000_000 + round);
        let t0 = Instant::now();
        let got = if wait {
            let ms = deadline.saturating_duration_since(Instant::now()).as_millis().max(1) as u64;
            let mut cmd = redis::cmd("LOCK.SEMACQUIRE");
            cmd.arg(CKEY).arg(LEASE).arg(1).arg(&pid).arg("WAIT").arg(ms);
            match cmd.query::<Value>(&mut c) {
                Ok(Value::Nil) => true,
                Ok(Value::Int(_)) => false,
                v => {
                    out.bad += 1;
                    eprintln!("  unexpected {v:?}");
                    false
                }
            }
        } else {
            // Redisson: try; subscribe; loop { try; wait for a message or the earliest expiry }.
            let try_once = |c: &mut redis::Connection| -> Option<i64> {
                let n = now_ms();
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(sha("pes-tryacquire")).arg(3).arg(CKEY).arg(zset(CKEY)).arg(channel(CKEY));
                cmd.arg(1).arg(n + LEASE).arg(n).arg(NO_LEASE).arg("PUBLISH").arg(&pid);
                match cmd.query::<Value>(c) {
                    Ok(Value::BulkString(b)) if b == b"OK" => None,
                    Ok(Value::BulkString(b)) => Some(
                        std::str::from_utf8(&b[1..])
                            .ok()
                            .and_then(|s| s.parse::<i64>().ok())
                            .map_or(-1, |e| e - n),
                    ),
                    Ok(Value::Nil) => Some(-1),
                    v => panic!("acquire script replied {v:?}"),
                }
            };
            crate::pubsub_wait::acquire(&mut sub, chan.as_bytes(), deadline, || try_once(&mut c))
        };
        out.waits.push(t0.elapsed().as_secs_f64() * 1e3);
        if !got {
            out.cut_off += 1;
            break;
        }
        let now_out = out_now.0.fetch_add(1, Ordering::SeqCst) + 1;
        out_now.1.fetch_max(now_out as u64, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1));
        out_now.0.fetch_sub(1, Ordering::SeqCst);
        let rel = if wait {
            let mut r = redis::cmd("LOCK.SEMRELEASE");
            r.arg(CKEY).arg(&pid);
            r
        } else {
            let mut r = redis::cmd("EVALSHA");
            r.arg(sha("pes-release")).arg(3).arg(CKEY).arg(channel(CKEY)).arg(zset(CKEY));
            r.arg(&pid).arg(1).arg(now_ms()).arg("PUBLISH");
            r
        };
        match rel.query::<Value>(&mut c) {
            Ok(Value::Int(1)) => {}
            v => {
                out.bad += 1;
                eprintln!("  unexpected release reply {v:?}");
            }
        }
    }
    out
}

fn contended_one(port: u16, wait: bool, dur: Duration) -> ContendedRow {
    let mut admin = crate::connect(port);
    let _: () = redis::cmd("FLUSHALL").query(&mut admin).expect("FLUSHALL");
    let _: Value = redis::cmd("LOCK.SEMSET").arg(CKEY).arg(PERMITS).query(&mut admin).expect("SEMSET");
    let counter = Arc::new((AtomicI64::new(0), AtomicU64::new(0)));
    let barrier = Arc::new(Barrier::new(17));
    let hs: Vec<_> = (0..16)
        .map(|i| {
            let (c, b) = (counter.clone(), barrier.clone());
            std::thread::spawn(move || contender(port, wait, i, c, b, dur))
        })
        .collect();
    barrier.wait();
    let outs: Vec<Out> = hs.into_iter().map(|h| h.join().expect("contender panicked")).collect();
    let waits: Vec<f64> = outs.iter().flat_map(|o| o.waits.clone()).collect();
    let cut: usize = outs.iter().map(|o| o.cut_off).sum();
    ContendedRow {
        strategy: if wait { "LOCK.SEMACQUIRE WAIT (server FIFO)" } else { "Redisson pub/sub" }.into(),
        seconds: dur.as_secs_f64(),
        grants: waits.len() - cut,
        wait_ms: dist(waits),
        waits_cut_off: cut,
        max_out: counter.1.load(Ordering::SeqCst) as i64,
        unexpected_replies: outs.iter().map(|o| o.bad).sum(),
    }
}

pub fn run_contended(port: u16, quick: bool) -> Vec<ContendedRow> {
    let mut admin = crate::connect(port);
    register(&mut admin);
    set_mode(&mut admin, "lua");
    let dur = Duration::from_millis(if quick { 1_000 } else { 5_000 });
    let mut rows = Vec::new();
    for wait in [true, false] {
        eprintln!("[semaphore] contended 16 clients, 4 permits, {}", if wait { "WAIT" } else { "pub/sub" });
        rows.push(contended_one(port, wait, dur));
    }
    rows
}

pub fn markdown(rows: &[Row], contended: &[ContendedRow]) -> String {
    let mut s = String::from("\n## Semaphore: LOCK.SEM* and native scripts vs Redisson's scripts (Lua)\n\n");
    s.push_str(
        "| operation | comparison | fast ops/s | Lua ops/s | ratio | fast server µs | Lua server µs |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.2}x | {:.2} | {:.2} |\n",
            r.op,
            r.kind,
            r.fast_ops_per_sec,
            r.lua_ops_per_sec,
            r.ratio,
            r.fast_server_usec,
            r.lua_server_usec
        ));
    }
    if !contended.is_empty() {
        s.push_str("\n### Contended: 16 clients, 4 permits, 1 ms critical sections\n\n");
        s.push_str("| waiting | grants | wait p50 / p99 / max ms | waits cut off at the end | most permits out | unexpected replies |\n");
        s.push_str("|---|---|---|---|---|---|\n");
        for r in contended {
            s.push_str(&format!(
                "| {} | {} | {:.2} / {:.2} / {:.2} | {} | {} | {} |\n",
                r.strategy,
                r.grants,
                r.wait_ms.p50,
                r.wait_ms.p99,
                r.wait_ms.max,
                r.waits_cut_off,
                r.max_out,
                r.unexpected_replies
            ));
        }
    }
    s
}
