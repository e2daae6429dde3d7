//! Scenario "redisson": Redisson's lock scripts run natively (`lock.redisson-scripts native`).
//!
//! - The same script sent with EVALSHA, run in Lua (`lua`) and natively (`native`), switched at
//!   run time on one server: throughput (batches of 32, 4 unanswered: `pipelined.rs`) and server µs/call (`evalsha` vs
//!   `lock.redisson` in INFO commandstats) for the acquire, the 3.24+ unlock with its latch and
//!   a 100-key batched watchdog renewal. The scripts are our own implementations of Redisson's
//!   (`clients/python/src/redislock/lua/`), registered with `lock.redisson-extra-scripts` so they take the code path of
//!   Redisson's SHA1s.
//! - Every other command pays nothing: `SET` throughput with the filter installed (`native`)
//!   and not (`lua`), and callgrind instructions per `SET` inside `call()` in both modes.
//! - Fair mixed fleets: 4 Redisson-style clients (scripts + pub/sub waiting) and 4
//!   `LOCK.ACQUIRE ... WAIT` clients on one lock, per-client grants and Jain fairness, in both
//!   modes.

use crate::pipelined;
use crate::stats::{jain, median};
use redis::Value;
use serde::Serialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::resp::{Conn, R};
use testkit::{cmdstat, reset_stats};

const ACQUIRE: &[u8] = testkit::scripts::ACQUIRE.as_bytes();
const UNLOCK: &[u8] = testkit::scripts::UNLOCK_LATCH.as_bytes();
const RENEW_BATCH: &[u8] = testkit::scripts::RENEW_BATCH.as_bytes();
/// The read-write lock's scripts (3.44+ unlocks, with latch and nil for a missing lock).
const RW_READ_ACQUIRE: &[u8] = testkit::scripts::RW_SOURCES[0].1.as_bytes();
const RW_READ_UNLOCK: &[u8] = testkit::scripts::RW_SOURCES[4].1.as_bytes();
const RW_WRITE_ACQUIRE: &[u8] = testkit::scripts::RW_SOURCES[12].1.as_bytes();
const RW_WRITE_UNLOCK: &[u8] = testkit::scripts::RW_SOURCES[16].1.as_bytes();
/// Readers holding each lock of the "read unlock, 10 readers" phase.
const READERS: usize = 10;
const LEASE: i64 = 30_000;
const BATCH: usize = 100;

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub op: String,
    pub mode: String,
    pub ops_per_sec: f64,
    pub server_usec_per_call: f64,
}

#[derive(Serialize, Clone, Debug)]
pub struct Ratio {
    pub op: String,
    pub throughput: f64,
    pub server_usec: f64,
}

#[derive(Serialize, Clone, Debug)]
pub struct Fairness {
    pub mode: String,
    pub wait_grants: Vec<u64>,
    pub script_grants: Vec<u64>,
    pub jain: f64,
}

#[derive(Serialize, Clone, Debug, Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
    /// (mode, SET ops/s)
    pub set_ops: Vec<(String, f64)>,
    /// native / lua - 1, in %
    pub set_diff_pct: f64,
    /// (mode, instructions per SET inside processCommand()), two runs per mode; empty without
    /// valgrind
    pub set_instructions: Vec<(String, f64)>,
    pub fairness: Vec<Fairness>,
}

fn sha(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Our scripts, by operation name.
const SCRIPTS: [(&str, &[u8]); 7] = [
    ("acquire", ACQUIRE),
    ("unlock-latch", UNLOCK),
    ("renew-batch", RENEW_BATCH),
    ("rw-read-acquire", RW_READ_ACQUIRE),
    ("rw-read-unlock-latch-nil", RW_READ_UNLOCK),
    ("rw-write-acquire", RW_WRITE_ACQUIRE),
    ("rw-write-unlock-latch-nil", RW_WRITE_UNLOCK),
];

/// `lock.redisson-extra-scripts` for our scripts.
fn extra() -> String {
    SCRIPTS.iter().map(|(k, b)| format!("{k}:{}:{}", sha(b), b.len())).collect::<Vec<_>>().join(",")
}

fn set_mode(con: &mut redis::Connection, mode: &str) {
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("lock.redisson-scripts").arg(mode).query(con).expect("mode");
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    Acquire,
    Unlock,
    RenewBatch,
    Set,
    ReadAcquire,
    ReadUnlock,
    WriteAcquire,
    WriteUnlock,
    /// The first of [`READERS`] readers of lock j unlocks (the others stay: reply 0).
    ReadUnlockOfTen,
}

/// `{K}` of lock `k` (no `{` in the bench's names).
fn rw_prefix(k: &str, owner: &str) -> String {
    format!("{{{k}}}:{owner}:rwlock_timeout")
}

fn reader(r: usize) -> String {
    format!("6e1d2b3c-4d5e-4f60-8a7b-9c8d7e6f5a4b:{}", r + 1)
}

fn key(i: usize) -> String {
    format!("rs:lock:{i:06}")
}

const OWNER: &str = "6e1d2b3c-4d5e-4f60-8a7b-9c8d7e6f5a4b:1";

/// The unlock latch of call `j` of phase `op`: a name of its own per phase, so an unlock never
/// finds the latch an earlier phase's unlock left on the same key (Redisson 3.44+ then replies
/// from the latch and unlocks nothing).
fn latch(k: &str, op: Op, j: usize) -> String {
    format!("redisson_unlock_latch:{{{k}}}:{:016x}{j:016x}", op as usize)
}

fn command(op: Op, j: usize) -> redis::Cmd {
    let mut c = redis::cmd(if op == Op::Set { "SET" } else { "EVALSHA" });
    match op {
        Op::Acquire => c.arg(sha(ACQUIRE)).arg(1).arg(key(j)).arg(LEASE).arg(OWNER),
        Op::Unlock => {
            let k = key(j);
            c.arg(sha(UNLOCK))
                .arg(3)
                .arg(&k)
                .arg(format!("redisson_lock__channel:{{{k}}}"))
                .arg(latch(&k, op, j))
                .arg(0)
                .arg(LEASE)
                .arg(OWNER)
                .arg("PUBLISH")
                .arg(16000)
        }
        Op::RenewBatch => {
            c.arg(sha(RENEW_BATCH)).arg(BATCH);
            for b in 0..BATCH {
                c.arg(key(b));
            }
            c.arg(LEASE);
            for _ in 0..BATCH {
                c.arg(OWNER);
            }
            &mut c
        }
        Op::Set => c.arg(key(j)).arg("v"),
        Op::ReadAcquire => c
            .arg(sha(RW_READ_ACQUIRE))
            .arg(2)
            .arg(key(j))
            .arg(rw_prefix(&key(j), OWNER))
            .arg(LEASE)
            .arg(OWNER)
            .arg(format!("{OWNER}:write")),
        Op::ReadUnlock | Op::ReadUnlockOfTen => {
            let (k, owner) = (key(j), if op == Op::ReadUnlock { OWNER.to_string() } else { reader(0) });
            c.arg(sha(RW_READ_UNLOCK))
                .arg(5)
                .arg(&k)
                .arg(format!("redisson_rwlock:{{{k}}}"))
                .arg(rw_prefix(&k, &owner))
                .arg(format!("{{{k}}}"))
                .arg(latch(&k, op, j))
                .arg(0)
                .arg(owner)
                .arg("PUBLISH")
                .arg(16000)
        }
        Op::WriteAcquire => {
            c.arg(sha(RW_WRITE_ACQUIRE)).arg(1).arg(key(j)).arg(LEASE).arg(format!("{OWNER}:write"))
        }
        Op::WriteUnlock => {
            let k = key(j);
            c.arg(sha(RW_WRITE_UNLOCK))
                .arg(3)
                .arg(&k)
                .arg(format!("redisson_rwlock:{{{k}}}"))
                .arg(latch(&k, op, j))
                .arg(1)
                .arg(LEASE)
                .arg(format!("{OWNER}:write"))
                .arg("PUBLISH")
                .arg(16000)
        }
    };
    c
}

/// [`READERS`] readers on each of locks 0..n (LOCK.ACQUIRE ... READ, pipelined).
fn ten_readers(port: u16, n: usize) {
    let mut raw = Conn::new(port);
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let mut buf = Vec::new();
        for j in chunk {
            for r in 0..READERS {
                let c = redis::cmd("LOCK.ACQUIRE").arg(key(*j)).arg(reader(r)).arg(LEASE).arg("READ").clone();
                buf.extend_from_slice(&c.get_packed_command());
            }
        }
        raw.send_raw(&buf);
        for _ in 0..chunk.len() * READERS {
            let v = raw.read().expect("reply");
            assert_eq!(v, R::Nil, "a reader joins");
        }
    }
}

fn expected(op: Op, v: &R) -> bool {
    match op {
        Op::Acquire => matches!(v, R::Nil),
        Op::Unlock => matches!(v, R::Int(1)),
        Op::RenewBatch => matches!(v, R::Arr(a) if a.len() == BATCH && a.iter().all(|x| *x == R::Int(1))),
        Op::Set => matches!(v, R::Simple(s) if s == "OK"),
        Op::ReadAcquire | Op::WriteAcquire => matches!(v, R::Nil),
        Op::ReadUnlock | Op::WriteUnlock => matches!(v, R::Int(1)),
        Op::ReadUnlockOfTen => matches!(v, R::Int(0)),
    }
}

/// One pipelined phase of `n` calls (packed in advance so the timed loop is only socket I/O,
/// read with the raw client, the server kept busy: `pipelined.rs`); returns (calls/s, server µs
/// per call).
fn phase(con: &mut redis::Connection, port: u16, op: Op, n: usize, stat: &str) -> (f64, f64) {
    let batches = pipelined::batches((0..n).map(|j| command(op, j).get_packed_command()));
    reset_stats(con);
    let (secs, bad) = pipelined::run(port, &batches, |v| expected(op, v));
    assert_eq!(bad, 0, "unexpected replies in the redisson scenario ({op:?})");
    let (calls, usec) = cmdstat(con, stat);
    (n as f64 / secs, if calls > 0 { usec as f64 / calls as f64 } else { f64::NAN })
}

/// `calls` unlocks of one reader of ten, in rounds of [`pipelined::ten_reader_locks`] locks
/// (each round set up untimed after a FLUSHALL); (calls/s, server µs per call) over the rounds.
fn ten_reader_phase(con: &mut redis::Connection, port: u16, calls: usize, stat: &str) -> (f64, f64) {
    let (per_sec, per_call, _) = pipelined::in_rounds(calls, |m| {
        let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
        ten_readers(port, m);
        let (x, xu) = phase(con, port, Op::ReadUnlockOfTen, m, stat);
        (x, xu, 0)
    });
    let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
    (per_sec, per_call)
}

/// The read-write lock's phases, by name (the last one has its own target: >= 3x).
pub const RW_OPS: [&str; 5] = [
    "rw read acquire",
    "rw read unlock (3.44+, last reader)",
    "rw write acquire",
    "rw write unlock (3.44+)",
    "rw read unlock, 10 readers holding",
];

fn script_phases(con: &mut redis::Connection, port: u16, quick: bool, report: &mut Report) {
    // Phases of about a second each, alternating modes, seven times (medians): shorter ones
    // moved the ratios by ±30% on a 2-core machine with other load.
    let n = if quick { 2_000 } else { 100_000 };
    let renews = if quick { 200 } else { 10_000 };
    let tens = if quick { 200 } else { 20_000 };
    let reps = if quick { 1 } else { 7 };
    // (op, mode, calls/s, µs/call, repetition)
    let mut samples: Vec<(&str, &str, f64, f64, usize)> = Vec::new();
    for rep in 0..reps {
        // Each mode goes first in every other repetition (no order effect in the pairs).
        let order = if rep % 2 == 0 { ["lua", "native"] } else { ["native", "lua"] };
        for mode in order {
            set_mode(con, mode);
            let stat = if mode == "lua" { "evalsha" } else { "lock.redisson" };
            let (a, au) = phase(con, port, Op::Acquire, n, stat);
            let (u, uu) = phase(con, port, Op::Unlock, n, stat);
            let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
            for b in 0..BATCH {
                let _: Value =
                    redis::cmd("LOCK.ACQUIRE").arg(key(b)).arg(OWNER).arg(LEASE).query(con).expect("acquire");
            }
            let (r, ru) = phase(con, port, Op::RenewBatch, renews, stat);
            let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
            samples.push(("acquire", mode, a, au, rep));
            samples.push(("unlock (3.24+, latch)", mode, u, uu, rep));
            samples.push(("renew-batch (100 keys)", mode, r, ru, rep));
            for (name, op) in [
                (RW_OPS[0], Op::ReadAcquire),
                (RW_OPS[1], Op::ReadUnlock),
                (RW_OPS[2], Op::WriteAcquire),
                (RW_OPS[3], Op::WriteUnlock),
            ] {
                let (x, xu) = phase(con, port, op, n, stat);
                if matches!(op, Op::ReadUnlock | Op::WriteUnlock) {
                    // The unlocks freed their locks (not replied from a latch).
                    let left: i64 = redis::cmd("EXISTS")
                        .arg(key(0))
                        .arg(key(n / 2))
                        .arg(key(n - 1))
                        .query(con)
                        .expect("EXISTS");
                    assert_eq!(left, 0, "{name} ({mode}) left its locks");
                }
                samples.push((name, mode, x, xu, rep));
            }
            let (x, xu) = ten_reader_phase(con, port, tens, stat);
            samples.push((RW_OPS[4], mode, x, xu, rep));
        }
    }
    let ops = ["acquire", "unlock (3.24+, latch)", "renew-batch (100 keys)"];
    for op in ops.into_iter().chain(RW_OPS) {
        type Sample<'a> = (&'a str, &'a str, f64, f64, usize);
        let of = |mode: &str| samples.iter().filter(|s| s.0 == op && s.1 == mode).collect::<Vec<_>>();
        let med = |mode: &str, f: fn(&Sample) -> f64| median(of(mode).into_iter().map(f).collect());
        // Ratios of the two modes within each repetition (seconds apart), then their median:
        // the machine's slow drifts cancel out.
        let paired = |f: fn(&Sample) -> f64| {
            median(of("native").iter().zip(of("lua")).map(|(n, l)| f(n) / f(l)).collect())
        };
        let rows: Vec<Row> = ["lua", "native"]
            .iter()
            .map(|m| Row {
                op: op.into(),
                mode: (*m).into(),
                ops_per_sec: med(m, |s| s.2),
                server_usec_per_call: med(m, |s| s.3),
            })
            .collect();
        report.ratios.push(Ratio {
            op: op.into(),
            throughput: paired(|s| s.2),
            server_usec: paired(|s| s.3),
        });
        report.rows.extend(rows);
    }
}

fn set_phases(con: &mut redis::Connection, port: u16, quick: bool, report: &mut Report) {
    let n = if quick { 5_000 } else { 100_000 };
    let reps = if quick { 1 } else { 5 };
    let mut by_mode: Vec<(&str, Vec<f64>)> = vec![("lua", vec![]), ("native", vec![])];
    for _ in 0..reps {
        for (mode, v) in by_mode.iter_mut() {
            set_mode(con, mode);
            v.push(phase(con, port, Op::Set, n, "set").0);
        }
    }
    let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
    report.set_ops = by_mode
        .into_iter()
        .map(|(m, v)| (format!("filter {}", if m == "lua" { "off (lua)" } else { "on (native)" }), median(v)))
        .collect();
    report.set_diff_pct = (report.set_ops[1].1 / report.set_ops[0].1 - 1.0) * 100.0;
}

/// Instructions per `SET` inside `processCommand()` (where the filter runs, and the command in
/// it), under callgrind, with the filter off and on; two server processes each (the hash seed
/// differs per process, so two runs of one mode show the noise).
fn set_instructions(redis_bin: &str, module: &Path, quick: bool) -> Vec<(String, f64)> {
    let have =
        Command::new("valgrind").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    if !have {
        eprintln!("[redisson] valgrind not found: no callgrind numbers");
        return vec![];
    }
    let n = if quick { 2_000 } else { 20_000 };
    let mut out = vec![];
    for (run, mode) in ["lua", "native", "lua", "native"].into_iter().enumerate() {
        let dir = std::env::temp_dir().join(format!("lock-bench-cg-{}-{run}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(0);
        let cg = dir.join("callgrind.out");
        let mut child = Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg("--toggle-collect=processCommand")
            .arg(format!("--callgrind-out-file={}", cg.display()))
            .arg(redis_bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--loadmodule")
            .arg(module)
            .args(["redisson-scripts", mode])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("valgrind");
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut con = loop {
            if let Ok(c) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            {
                break c;
            }
            assert!(Instant::now() < deadline, "redis-server under callgrind did not start");
            std::thread::sleep(Duration::from_millis(200));
        };
        let _ = phase(&mut con, port, Op::Set, n, "set");
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut con);
        let _ = child.wait();
        let text = std::fs::read_to_string(&cg).unwrap_or_default();
        // `summary:`/`totals:` = instructions collected inside processCommand() over the whole
        // run: the n SETs plus a few commands of the harness (INFO, CONFIG RESETSTAT), counted
        // alike in both modes.
        let total = text
            .lines()
            .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        out.push((
            format!("filter {}", if mode == "lua" { "off (lua)" } else { "on (native)" }),
            total / n as f64,
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
    out
}

fn conn(port: u16) -> redis::Connection {
    crate::connect(port)
}

fn fairness(port: u16, mode: &str, secs: u64) -> Fairness {
    let mut con = conn(port);
    set_mode(&mut con, mode);
    let stop = Arc::new(AtomicBool::new(false));
    let lock = "rs:fair";
    let channel = "redisson_lock__channel:{rs:fair}";
    let waits: Vec<_> = (0..4)
        .map(|i| {
            let st = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut c = conn(port);
                let owner = format!("wait-{i}:1");
                let mut grants = 0u64;
                while !st.load(Ordering::Relaxed) {
                    let r: Option<i64> = redis::cmd("LOCK.ACQUIRE")
                        .arg(lock)
                        .arg(&owner)
                        .arg(LEASE)
                        .arg("WAIT")
                        .arg(200)
                        .query(&mut c)
                        .expect("acquire");
                    if r.is_none() {
                        grants += 1;
                        std::thread::sleep(Duration::from_millis(1));
                        let _: Option<i64> =
                            redis::cmd("LOCK.RELEASE").arg(lock).arg(&owner).query(&mut c).expect("release");
                    }
                }
                grants
            })
        })
        .collect();
    let scripts: Vec<_> = (0..4)
        .map(|i| {
            let st = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut c = conn(port);
                let mut sub = conn(port);
                let mut ps = sub.as_pubsub();
                ps.subscribe(channel).expect("subscribe");
                let owner = format!("6e1d2b3c-4d5e-4f60-8a7b-9c8d7e6f5a4{i}:1");
                let mut grants = 0u64;
                while !st.load(Ordering::Relaxed) {
                    let r: Option<i64> = redis::cmd("EVALSHA")
                        .arg(sha(ACQUIRE))
                        .arg(1)
                        .arg(lock)
                        .arg(LEASE)
                        .arg(&owner)
                        .query(&mut c)
                        .expect("acquire");
                    match r {
                        None => {
                            grants += 1;
                            std::thread::sleep(Duration::from_millis(1));
                            // A request id of this client's own (see tests/redisson_fairness.rs).
                            let latch = format!("redisson_unlock_latch:{{{lock}}}:{i:016x}{grants:016x}");
                            let _: Option<i64> = redis::cmd("EVALSHA")
                                .arg(sha(UNLOCK))
                                .arg(3)
                                .arg(lock)
                                .arg(channel)
                                .arg(&latch)
                                .arg(0)
                                .arg(LEASE)
                                .arg(&owner)
                                .arg("PUBLISH")
                                .arg(16000)
                                .query(&mut c)
                                .expect("unlock");
                            let _: i64 = redis::cmd("DEL").arg(&latch).query(&mut c).expect("DEL latch");
                        }
                        Some(pttl) => {
                            ps.set_read_timeout(Some(Duration::from_millis(pttl.clamp(1, 200) as u64)))
                                .expect("timeout");
                            let _ = ps.get_message();
                        }
                    }
                }
                grants
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let wait_grants: Vec<u64> = waits.into_iter().map(|t| t.join().unwrap_or(0)).collect();
    let script_grants: Vec<u64> = scripts.into_iter().map(|t| t.join().unwrap_or(0)).collect();
    let all: Vec<u64> = wait_grants.iter().chain(&script_grants).copied().collect();
    let _: () = redis::cmd("FLUSHALL").query(&mut con).expect("FLUSHALL");
    Fairness { mode: mode.into(), jain: jain(&all), wait_grants, script_grants }
}

/// `full`: also the SET, callgrind and fairness phases (not only native vs Lua per script).
pub fn run(port: u16, redis_bin: &str, module: &Path, quick: bool, full: bool) -> Report {
    let mut con = conn(port);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lock.redisson-extra-scripts")
        .arg(extra())
        .query(&mut con)
        .expect("extra scripts");
    for (_, body) in SCRIPTS {
        let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(body).query(&mut con).expect("SCRIPT LOAD");
    }
    let mut report = Report::default();
    eprintln!("[redisson] EVALSHA in Lua vs native");
    script_phases(&mut con, port, quick, &mut report);
    if !full {
        set_mode(&mut con, "lua");
        return report;
    }
    eprintln!("[redisson] SET with the filter off and on");
    set_phases(&mut con, port, quick, &mut report);
    eprintln!("[redisson] callgrind: instructions per SET, filter off and on");
    report.set_instructions = set_instructions(redis_bin, module, quick);
    let secs = if quick { 1 } else { 4 };
    for mode in ["lua", "native"] {
        eprintln!("[redisson] fairness, 4 Redisson-style + 4 WAIT clients, {mode}");
        report.fairness.push(fairness(port, mode, secs));
    }
    set_mode(&mut con, "lua");
    report
}
