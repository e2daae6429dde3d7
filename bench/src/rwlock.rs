//! Scenario "rwlock": the read-write lock's LOCK.* commands against Redisson's read-write lock
//! scripts (our own Lua implementation, `clients/python/src/redislock/lua/rw-*.lua`, run with
//! EVALSHA on the same server in the same run), and a contended workload (8 readers, 2 writers,
//! 1 ms critical sections) waiting with LOCK.* WAIT against Redisson-style pub/sub waiting.
//!
//! Uncontended phases are pipelined over distinct keys (`pipelined.rs`: batches of 32, the
//! server kept busy), LOCK.* and Lua alternating in 7 repetitions; a ratio is the median of
//! the repetitions' ratios.

use crate::pipelined;
use crate::stats::{dist, median, Dist};
use redis::Value;
use serde::Serialize;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use testkit::resp::{Conn, R};

const LEASE: u64 = 30_000;
const READ_ACQUIRE: &str = include_str!("../../clients/python/src/redislock/lua/rw-read-acquire.lua");
const WRITE_ACQUIRE: &str = include_str!("../../clients/python/src/redislock/lua/rw-write-acquire.lua");
/// Redisson 3.22-3.23's unlocks: no latch (the cheapest unlock Redisson ever sent).
const READ_UNLOCK: &str = include_str!("../../clients/python/src/redislock/lua/rw-read-unlock.lua");
const WRITE_UNLOCK: &str = include_str!("../../clients/python/src/redislock/lua/rw-write-unlock.lua");

struct Shas {
    read_acquire: String,
    write_acquire: String,
    read_unlock: String,
    write_unlock: String,
}

fn load(con: &mut redis::Connection) -> Shas {
    let mut l =
        |s: &str| -> String { redis::cmd("SCRIPT").arg("LOAD").arg(s).query(con).expect("SCRIPT LOAD") };
    Shas {
        read_acquire: l(READ_ACQUIRE),
        write_acquire: l(WRITE_ACQUIRE),
        read_unlock: l(READ_UNLOCK),
        write_unlock: l(WRITE_UNLOCK),
    }
}

/// `{k}` or `k` when it has a `{`: Redisson's prefix rule.
fn braced(k: &str) -> String {
    if k.contains('{') {
        k.to_string()
    } else {
        format!("{{{k}}}")
    }
}

fn channel(k: &str) -> String {
    format!("redisson_rwlock:{}", braced(k))
}

fn timeout_prefix(k: &str, owner: &str) -> String {
    format!("{}:{owner}:rwlock_timeout", braced(k))
}

fn lua_read_acquire(sha: &Shas, k: &str, owner: &str) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(&sha.read_acquire).arg(2).arg(k).arg(timeout_prefix(k, owner)).arg(LEASE).arg(owner);
    c.arg(format!("{owner}:write"));
    c
}

fn lua_write_acquire(sha: &Shas, k: &str, owner: &str) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(&sha.write_acquire).arg(1).arg(k).arg(LEASE).arg(format!("{owner}:write"));
    c
}

fn lua_read_unlock(sha: &Shas, k: &str, owner: &str) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(&sha.read_unlock).arg(4).arg(k).arg(channel(k)).arg(timeout_prefix(k, owner)).arg(braced(k));
    c.arg(0).arg(owner).arg("PUBLISH");
    c
}

fn lua_write_unlock(sha: &Shas, k: &str, owner: &str) -> redis::Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(&sha.write_unlock).arg(2).arg(k).arg(channel(k)).arg(1).arg(LEASE).arg(format!("{owner}:write"));
    c.arg("PUBLISH");
    c
}

fn native(cmd: &str, k: &str, owner: &str, access: &str) -> redis::Cmd {
    let mut c = redis::cmd(cmd);
    c.arg(k).arg(owner);
    if cmd == "LOCK.ACQUIRE" {
        c.arg(LEASE);
    }
    c.arg(access);
    c
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    ReadAcquire,
    ReadRelease,
    WriteAcquire,
    WriteRelease,
    /// Release one reader of ten (the nine others' holds are looked at).
    ReadRelease10,
}

impl Op {
    fn label(self) -> &'static str {
        match self {
            Op::ReadAcquire => "read acquire",
            Op::ReadRelease => "read release (last reader)",
            Op::WriteAcquire => "write acquire",
            Op::WriteRelease => "write release",
            Op::ReadRelease10 => "read release, 10 readers holding",
        }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub op: String,
    pub native_ops_per_sec: f64,
    pub lua_ops_per_sec: f64,
    pub ratio: f64,
    pub native_server_usec: f64,
    pub lua_server_usec: f64,
    pub unexpected_replies: usize,
}

fn key(i: usize) -> String {
    format!("rwb:{i:06}")
}

fn reader(j: usize) -> String {
    format!("6f1c4e2a-77b0-4c1e-9d55-2b8f0c3a9e1d:{}", j + 1)
}

fn cmd_for(op: Op, lua: bool, sha: &Shas, k: &str) -> redis::Cmd {
    let o = reader(0);
    match (op, lua) {
        (Op::ReadAcquire, false) => native("LOCK.ACQUIRE", k, &o, "READ"),
        (Op::ReadAcquire, true) => lua_read_acquire(sha, k, &o),
        (Op::ReadRelease | Op::ReadRelease10, false) => native("LOCK.RELEASE", k, &o, "READ"),
        (Op::ReadRelease | Op::ReadRelease10, true) => lua_read_unlock(sha, k, &o),
        (Op::WriteAcquire, false) => native("LOCK.ACQUIRE", k, &o, "WRITE"),
        (Op::WriteAcquire, true) => lua_write_acquire(sha, k, &o),
        (Op::WriteRelease, false) => native("LOCK.RELEASE", k, &o, "WRITE"),
        (Op::WriteRelease, true) => lua_write_unlock(sha, k, &o),
    }
}

fn expected(op: Op, v: &R) -> bool {
    match op {
        Op::ReadAcquire | Op::WriteAcquire => matches!(v, R::Nil),
        Op::ReadRelease | Op::WriteRelease => matches!(v, R::Int(1)),
        Op::ReadRelease10 => matches!(v, R::Int(0)),
    }
}

/// One repetition of `op` over `n` keys with `lua` or LOCK.*: set-up, timed phase, clean-up.
fn phase(
    con: &mut redis::Connection,
    port: u16,
    sha: &Shas,
    op: Op,
    lua: bool,
    n: usize,
) -> (f64, f64, usize) {
    let keys: Vec<String> = (0..n).map(key).collect();
    let setup: Vec<redis::Cmd> = match op {
        Op::ReadAcquire | Op::WriteAcquire => vec![],
        Op::ReadRelease => keys.iter().map(|k| native("LOCK.ACQUIRE", k, &reader(0), "READ")).collect(),
        Op::WriteRelease => keys.iter().map(|k| native("LOCK.ACQUIRE", k, &reader(0), "WRITE")).collect(),
        Op::ReadRelease10 => keys
            .iter()
            .flat_map(|k| (0..10).map(move |j| native("LOCK.ACQUIRE", k, &reader(j), "READ")))
            .collect(),
    };
    pipelined::untimed(con, &setup);
    let cmds: Vec<redis::Cmd> = keys.iter().map(|k| cmd_for(op, lua, sha, k)).collect();
    let stat = if lua {
        "evalsha"
    } else if matches!(op, Op::ReadAcquire | Op::WriteAcquire) {
        "lock.acquire"
    } else {
        "lock.release"
    };
    let r = pipelined::timed(con, port, &cmds, stat, |v| expected(op, v));
    let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
    r
}

/// A phase of `n` calls; the 10-reader release in rounds of [`pipelined::ten_reader_locks`]
/// locks (each set up untimed), combined over the rounds.
fn rounds(
    con: &mut redis::Connection,
    port: u16,
    sha: &Shas,
    op: Op,
    lua: bool,
    n: usize,
) -> (f64, f64, usize) {
    if op != Op::ReadRelease10 {
        return phase(con, port, sha, op, lua, n);
    }
    pipelined::in_rounds(n, |m| phase(con, port, sha, op, lua, m))
}

pub fn run_uncontended(con: &mut redis::Connection, port: u16, quick: bool) -> Vec<Row> {
    let sha = load(con);
    let (n, reps) = if quick { (2_000, 1) } else { (20_000, 7) };
    let mut rows = Vec::new();
    for op in [Op::ReadAcquire, Op::ReadRelease, Op::WriteAcquire, Op::WriteRelease, Op::ReadRelease10] {
        eprintln!("[rwlock] {}: {n} ops per phase, {reps} rep(s)", op.label());
        let (mut nat, mut lua) = (Vec::new(), Vec::new());
        let mut bad = 0;
        for rep in 0..reps {
            // Each side goes first in every other repetition (no order effect in the pairs).
            let (a, b) = if rep % 2 == 0 {
                let a = rounds(con, port, &sha, op, false, n);
                (a, rounds(con, port, &sha, op, true, n))
            } else {
                let b = rounds(con, port, &sha, op, true, n);
                (rounds(con, port, &sha, op, false, n), b)
            };
            bad += a.2 + b.2;
            nat.push(a);
            lua.push(b);
        }
        let m = |v: &[(f64, f64, usize)], f: fn(&(f64, f64, usize)) -> f64| median(v.iter().map(f).collect());
        // The ratio of each repetition's two phases (seconds apart), then their median: the
        // machine's slow drifts cancel out.
        let ratio = median(nat.iter().zip(&lua).map(|(a, b)| a.0 / b.0).collect());
        rows.push(Row {
            op: op.label().into(),
            native_ops_per_sec: m(&nat, |x| x.0),
            lua_ops_per_sec: m(&lua, |x| x.0),
            ratio,
            native_server_usec: m(&nat, |x| x.1),
            lua_server_usec: m(&lua, |x| x.1),
            unexpected_replies: bad,
        });
    }
    rows
}

// ---- contended: 8 readers, 2 writers ---------------------------------------------------------

#[derive(Serialize, Clone, Debug)]
pub struct ContendedRow {
    pub strategy: String,
    pub seconds: f64,
    pub read_grants: usize,
    pub write_grants: usize,
    /// Waits of each role, including those still running when the run ended.
    pub read_wait_ms: Dist,
    pub write_wait_ms: Dist,
    /// Waits cut off by the end of the run (clients that never got the lock in time).
    pub waits_cut_off: usize,
    /// The larger of the two roles' p99: the tail a client of either role must expect.
    pub worst_role_p99_ms: f64,
    /// A writer beside a reader or another writer, as the clients saw it (must be 0).
    pub exclusion_violations: u64,
    pub unexpected_replies: usize,
}

const CKEY: &str = "rwb:contended";

#[derive(Default)]
struct Out {
    /// Every wait, granted or still running at the end (then counted as long as it had lasted).
    waits: Vec<f64>,
    cut_off: usize,
    bad: usize,
}

/// Readers inside (>= 0) or -1000 while a writer is inside.
struct Gate {
    inside: AtomicI64,
    violations: AtomicU64,
}

impl Gate {
    fn enter(&self, write: bool) {
        let prev = if write {
            self.inside.fetch_sub(1000, Ordering::SeqCst)
        } else {
            self.inside.fetch_add(1, Ordering::SeqCst)
        };
        if prev < 0 || (write && prev != 0) {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn leave(&self, write: bool) {
        if write {
            self.inside.fetch_add(1000, Ordering::SeqCst);
        } else {
            self.inside.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn contender(
    port: u16,
    wait: bool,
    write: bool,
    id: usize,
    gate: Arc<Gate>,
    barrier: Arc<Barrier>,
    dur: Duration,
) -> Out {
    let mut c = crate::connect(port);
    let mut sub = Conn::new(port);
    let sha = load(&mut c);
    let owner = reader(100 + id);
    let access = if write { "WRITE" } else { "READ" };
    let chan = channel(CKEY);
    let mut out = Out::default();
    barrier.wait();
    let deadline = Instant::now() + dur;
    while Instant::now() < deadline {
        let t0 = Instant::now();
        let got = if wait {
            let ms = deadline.saturating_duration_since(Instant::now()).as_millis().max(1) as u64;
            let mut cmd = redis::cmd("LOCK.ACQUIRE");
            cmd.arg(CKEY).arg(&owner).arg(LEASE).arg("WAIT").arg(ms).arg(access);
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
            let try_once = |c: &mut redis::Connection| -> Option<i64> {
                let cmd = if write {
                    lua_write_acquire(&sha, CKEY, &owner)
                } else {
                    lua_read_acquire(&sha, CKEY, &owner)
                };
                match cmd.query::<Value>(c) {
                    Ok(Value::Nil) => None,
                    Ok(Value::Int(t)) => Some(t),
                    v => panic!("acquire script replied {v:?}"),
                }
            };
            crate::pubsub_wait::acquire(&mut sub, chan.as_bytes(), deadline, || try_once(&mut c))
        };
        if !got {
            // Still waiting when the run ended: a wait at least this long (a starved client's).
            out.waits.push(t0.elapsed().as_secs_f64() * 1e3);
            out.cut_off += 1;
            break;
        }
        out.waits.push(t0.elapsed().as_secs_f64() * 1e3);
        gate.enter(write);
        std::thread::sleep(Duration::from_millis(1));
        gate.leave(write);
        let rel = if wait {
            native("LOCK.RELEASE", CKEY, &owner, access)
        } else if write {
            lua_write_unlock(&sha, CKEY, &owner)
        } else {
            lua_read_unlock(&sha, CKEY, &owner)
        };
        match rel.query::<Value>(&mut c) {
            Ok(Value::Int(0 | 1)) => {}
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
    let gate = Arc::new(Gate { inside: AtomicI64::new(0), violations: AtomicU64::new(0) });
    let barrier = Arc::new(Barrier::new(11));
    let hs: Vec<_> = (0..10)
        .map(|i| {
            let (g, b) = (gate.clone(), barrier.clone());
            let write = i >= 8;
            std::thread::spawn(move || (write, contender(port, wait, write, i, g, b, dur)))
        })
        .collect();
    barrier.wait();
    let outs: Vec<(bool, Out)> = hs.into_iter().map(|h| h.join().expect("contender panicked")).collect();
    let pick = |w: bool| {
        outs.iter().filter(|(x, _)| *x == w).flat_map(|(_, o)| o.waits.clone()).collect::<Vec<f64>>()
    };
    let cut = |w: bool| outs.iter().filter(|(x, _)| *x == w).map(|(_, o)| o.cut_off).sum::<usize>();
    let (r, w) = (pick(false), pick(true));
    let (rd, wd) = (dist(r.clone()), dist(w.clone()));
    ContendedRow {
        strategy: if wait { "LOCK.ACQUIRE WAIT (server FIFO)" } else { "Redisson pub/sub" }.into(),
        seconds: dur.as_secs_f64(),
        read_grants: r.len() - cut(false),
        write_grants: w.len() - cut(true),
        worst_role_p99_ms: rd.p99.max(wd.p99),
        read_wait_ms: rd,
        write_wait_ms: wd,
        waits_cut_off: outs.iter().map(|(_, o)| o.cut_off).sum(),
        exclusion_violations: gate.violations.load(Ordering::Relaxed),
        unexpected_replies: outs.iter().map(|(_, o)| o.bad).sum(),
    }
}

pub fn run_contended(port: u16, quick: bool) -> Vec<ContendedRow> {
    let dur = Duration::from_millis(if quick { 1_000 } else { 5_000 });
    let mut rows = Vec::new();
    for wait in [true, false] {
        eprintln!("[rwlock] contended 8 readers + 2 writers, {}", if wait { "WAIT" } else { "pub/sub" });
        rows.push(contended_one(port, wait, dur));
    }
    rows
}

pub fn markdown(rows: &[Row], contended: &[ContendedRow]) -> String {
    let mut s = String::from("\n## Read-write lock: LOCK.* vs Redisson's scripts (Lua)\n\n");
    s.push_str("| operation | LOCK.* ops/s | Lua ops/s | ratio | LOCK.* server µs | Lua server µs |\n");
    s.push_str("|---|---|---|---|---|---|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.0} | {:.0} | {:.2}x | {:.2} | {:.2} |\n",
            r.op, r.native_ops_per_sec, r.lua_ops_per_sec, r.ratio, r.native_server_usec, r.lua_server_usec
        ));
    }
    if !contended.is_empty() {
        s.push_str("\n### Contended: 8 readers + 2 writers, 1 ms critical sections\n\n");
        s.push_str("| waiting | read grants | write grants | read wait p50 / p99 ms | write wait p50 / p99 ms | worst role p99 ms | waits cut off at the end | exclusion violations |\n");
        s.push_str("|---|---|---|---|---|---|---|---|\n");
        for r in contended {
            s.push_str(&format!(
                "| {} | {} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {} | {} |\n",
                r.strategy,
                r.read_grants,
                r.write_grants,
                r.read_wait_ms.p50,
                r.read_wait_ms.p99,
                r.write_wait_ms.p50,
                r.write_wait_ms.p99,
                r.worst_role_p99_ms,
                r.waits_cut_off,
                r.exclusion_violations
            ));
        }
    }
    s
}
