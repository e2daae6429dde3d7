//! Scenario "uncontended": uncontended server cost and throughput, pipelined and unpipelined.
//! LOCK.ACQUIRE / LOCK.RELEASE vs Redisson's Lua scripts (EVALSHA) vs SET PX / DEL.
//! Every acquire creates a lock (distinct keys; acquire all, then release all).

use crate::lua::{self, Shas};
use crate::stats::median;
use redis::Value;
use serde::Serialize;
use std::time::Instant;
use testkit::{cmdstat, cpu_seconds, reset_stats};

pub const LEASE: u64 = 30_000;

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    NativeAcquire,
    LuaAcquire,
    SetPx,
    NativeRelease,
    LuaUnlock,
    LuaUnlockNoLatch,
    Del,
}

impl Kind {
    pub fn op(self) -> &'static str {
        match self {
            Kind::NativeAcquire | Kind::LuaAcquire | Kind::SetPx => "acquire",
            _ => "release",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Kind::NativeAcquire => "LOCK.ACQUIRE",
            Kind::LuaAcquire => "Lua acquire (Redisson)",
            Kind::SetPx => "SET k v PX (floor)",
            Kind::NativeRelease => "LOCK.RELEASE",
            Kind::LuaUnlock => "Lua unlock + DEL latch (Redisson 3.24+)",
            Kind::LuaUnlockNoLatch => "Lua unlock, no latch (Redisson 3.22)",
            Kind::Del => "DEL (floor)",
        }
    }
    /// The command whose `usec_per_call` is the server cost of one operation.
    fn stat_name(self) -> &'static str {
        match self {
            Kind::NativeAcquire => "lock.acquire",
            Kind::NativeRelease => "lock.release",
            Kind::LuaAcquire | Kind::LuaUnlock | Kind::LuaUnlockNoLatch => "evalsha",
            Kind::SetPx => "set",
            Kind::Del => "del",
        }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub op: String,
    pub implementation: String,
    pub mode: String,
    pub pipeline: usize,
    pub ops_per_phase: usize,
    pub samples: usize,
    /// median over samples
    pub ops_per_sec: f64,
    /// `usec_per_call` of the top-level command (lock.acquire / evalsha / set / ...), median
    pub server_usec_per_call: f64,
    /// server CPU (user+sys from INFO cpu) per operation, incl. networking and parsing, median
    pub server_cpu_usec_per_op: f64,
    pub unexpected_replies: usize,
}

#[derive(Serialize, Clone, Debug)]
pub struct Ratios {
    pub mode: String,
    pub acquire_vs_lua_throughput: f64,
    pub acquire_vs_set_throughput: f64,
    pub acquire_vs_lua_server_usec: f64,
    pub acquire_vs_lua_server_cpu: f64,
    pub release_vs_lua_throughput: f64,
    pub release_vs_lua_no_latch_throughput: f64,
    pub release_vs_del_throughput: f64,
    pub release_vs_lua_server_usec: f64,
}

struct Sample {
    ops_per_sec: f64,
    usec_per_call: f64,
    cpu_usec_per_op: f64,
    bad: usize,
}

fn key(i: usize) -> String {
    format!("b1:lock:{i:06}")
}

/// Packed bytes of one operation and the number of replies it produces.
fn pack(kind: Kind, i: usize, owner: &str, sha: &Shas) -> (Vec<u8>, usize) {
    let k = key(i);
    match kind {
        Kind::NativeAcquire => {
            (redis::cmd("LOCK.ACQUIRE").arg(&k).arg(owner).arg(LEASE).get_packed_command(), 1)
        }
        Kind::LuaAcquire => (lua::acquire_cmd(&sha.acquire, &k, LEASE, owner).get_packed_command(), 1),
        Kind::SetPx => (redis::cmd("SET").arg(&k).arg(owner).arg("PX").arg(LEASE).get_packed_command(), 1),
        Kind::NativeRelease => (redis::cmd("LOCK.RELEASE").arg(&k).arg(owner).get_packed_command(), 1),
        Kind::LuaUnlock => {
            let latch = lua::latch_key(&k, &lua::request_id());
            let mut b = lua::unlock_cmd(&sha.unlock, &k, &lua::channel(&k), &latch, LEASE, owner)
                .get_packed_command();
            b.extend_from_slice(&redis::cmd("DEL").arg(&latch).get_packed_command());
            (b, 2)
        }
        Kind::LuaUnlockNoLatch => (
            lua::unlock_no_latch_cmd(&sha.unlock_no_latch, &k, &lua::channel(&k), LEASE, owner)
                .get_packed_command(),
            1,
        ),
        Kind::Del => (redis::cmd("DEL").arg(&k).get_packed_command(), 1),
    }
}

fn expected(kind: Kind, v: &Value) -> bool {
    match kind {
        Kind::NativeAcquire | Kind::LuaAcquire => matches!(v, Value::Nil),
        Kind::SetPx => matches!(v, Value::Okay) || matches!(v, Value::SimpleString(s) if s == "OK"),
        _ => matches!(v, Value::Int(1)),
    }
}

fn phase(con: &mut redis::Connection, kind: Kind, n: usize, depth: usize, owner: &str, sha: &Shas) -> Sample {
    // Pre-pack everything so the timed loop is only socket I/O.
    let mut batches: Vec<(Vec<u8>, usize)> = Vec::with_capacity(n / depth + 1);
    let mut i = 0;
    while i < n {
        let mut buf = Vec::new();
        let mut replies = 0;
        for j in i..(i + depth).min(n) {
            let (b, r) = pack(kind, j, owner, sha);
            buf.extend_from_slice(&b);
            replies += r;
        }
        batches.push((buf, replies));
        i += depth;
    }
    reset_stats(con);
    let cpu0 = cpu_seconds(con);
    let t0 = Instant::now();
    let mut bad = 0;
    for (buf, replies) in &batches {
        con.send_packed_command(buf).expect("send");
        for r in 0..*replies {
            let v = con.recv_response();
            // For the latched unlock the second reply is the DEL of the latch (1 as well).
            let ok = match &v {
                Ok(v) => {
                    expected(kind, v) || (kind == Kind::LuaUnlock && r % 2 == 1 && matches!(v, Value::Int(1)))
                }
                Err(_) => false,
            };
            if !ok {
                if bad < 3 {
                    eprintln!("  unexpected reply for {:?}: {v:?}", kind);
                }
                bad += 1;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_seconds(con);
    let (calls, usec) = cmdstat(con, kind.stat_name());
    // Top-level calls only: in the Del phase no script runs, so `del` counts only our DELs; for the
    // latched unlock `evalsha` excludes the latch DEL (reported in the throughput, not here).
    let per_call = if calls > 0 { usec as f64 / calls as f64 } else { f64::NAN };
    Sample {
        ops_per_sec: n as f64 / secs,
        usec_per_call: per_call,
        cpu_usec_per_op: (cpu1 - cpu0) * 1e6 / n as f64,
        bad,
    }
}

pub fn run(con: &mut redis::Connection, sha: &Shas, quick: bool) -> (Vec<Row>, Vec<Ratios>) {
    let owner = lua::owner(1, 0);
    // Several short interleaved repetitions, median of each: a burst of load from elsewhere on
    // the machine then hits every variant alike instead of one whole phase.
    let reps = if quick { 1 } else { 5 };
    let modes: [(&str, usize, usize); 2] = if quick {
        [("pipelined", 32, 4_000), ("unpipelined", 1, 1_000)]
    } else {
        [("pipelined", 32, 50_000), ("unpipelined", 1, 10_000)]
    };
    // The pairs run back to back: the release phase frees what the acquire phase created.
    let pairs = [
        (Kind::NativeAcquire, Kind::NativeRelease),
        (Kind::LuaAcquire, Kind::LuaUnlock),
        (Kind::LuaAcquire, Kind::LuaUnlockNoLatch),
        (Kind::SetPx, Kind::Del),
    ];
    let kinds = [
        Kind::NativeAcquire,
        Kind::LuaAcquire,
        Kind::SetPx,
        Kind::NativeRelease,
        Kind::LuaUnlock,
        Kind::LuaUnlockNoLatch,
        Kind::Del,
    ];
    let mut rows = Vec::new();
    let mut ratios = Vec::new();
    for (mode, depth, n) in modes {
        eprintln!("[uncontended] {mode}: {n} ops per phase, {reps} rep(s)");
        let mut samples: Vec<(Kind, Sample)> = Vec::new();
        for _ in 0..reps {
            for (a, r) in pairs {
                let sa = phase(con, a, n, depth, &owner, sha);
                samples.push((a, sa));
                let sr = phase(con, r, n, depth, &owner, sha);
                samples.push((r, sr));
            }
        }
        let dbsize: i64 = redis::cmd("DBSIZE").query(con).expect("DBSIZE");
        if dbsize != 0 {
            eprintln!("  warning: {dbsize} keys left after scenario 1 ({mode})");
            let _: () = redis::cmd("FLUSHALL").query(con).expect("FLUSHALL");
        }
        let mut by_kind = std::collections::HashMap::new();
        for k in kinds {
            let s: Vec<&Sample> = samples.iter().filter(|(kk, _)| *kk == k).map(|(_, s)| s).collect();
            let row = Row {
                op: k.op().into(),
                implementation: k.label().into(),
                mode: mode.into(),
                pipeline: depth,
                ops_per_phase: n,
                samples: s.len(),
                ops_per_sec: median(s.iter().map(|x| x.ops_per_sec).collect()),
                server_usec_per_call: median(s.iter().map(|x| x.usec_per_call).collect()),
                server_cpu_usec_per_op: median(s.iter().map(|x| x.cpu_usec_per_op).collect()),
                unexpected_replies: s.iter().map(|x| x.bad).sum(),
            };
            by_kind.insert(format!("{k:?}"), row.clone());
            rows.push(row);
        }
        let g = |k: Kind| by_kind[&format!("{k:?}")].clone();
        ratios.push(Ratios {
            mode: mode.into(),
            acquire_vs_lua_throughput: g(Kind::NativeAcquire).ops_per_sec / g(Kind::LuaAcquire).ops_per_sec,
            acquire_vs_set_throughput: g(Kind::NativeAcquire).ops_per_sec / g(Kind::SetPx).ops_per_sec,
            acquire_vs_lua_server_usec: g(Kind::NativeAcquire).server_usec_per_call
                / g(Kind::LuaAcquire).server_usec_per_call,
            acquire_vs_lua_server_cpu: g(Kind::NativeAcquire).server_cpu_usec_per_op
                / g(Kind::LuaAcquire).server_cpu_usec_per_op,
            release_vs_lua_throughput: g(Kind::NativeRelease).ops_per_sec / g(Kind::LuaUnlock).ops_per_sec,
            release_vs_lua_no_latch_throughput: g(Kind::NativeRelease).ops_per_sec
                / g(Kind::LuaUnlockNoLatch).ops_per_sec,
            release_vs_del_throughput: g(Kind::NativeRelease).ops_per_sec / g(Kind::Del).ops_per_sec,
            release_vs_lua_server_usec: g(Kind::NativeRelease).server_usec_per_call
                / g(Kind::LuaUnlockNoLatch).server_usec_per_call,
        });
    }
    (rows, ratios)
}
