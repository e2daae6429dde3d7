//! Scenario "cycles": full uncontended lock cycles (acquire + release, each a blocking round trip) per
//! client thread, 1 / 8 / 32 threads, each on its own connection and its own lock.

use crate::lua::{self, Client, Shas};
use crate::stats::{dist, Dist};
use redis::Value;
use serde::Serialize;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const LEASE: u64 = 30_000;

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub implementation: String,
    pub threads: usize,
    pub cycles: usize,
    pub seconds: f64,
    pub cycles_per_sec: f64,
    /// latency of one cycle (acquire sent -> release reply), microseconds
    pub latency_us: Dist,
    pub unexpected_replies: usize,
}

#[derive(Clone, Copy, PartialEq)]
pub enum Impl {
    Native,
    Lua,
}

impl Impl {
    pub fn label(self) -> &'static str {
        match self {
            Impl::Native => "LOCK.ACQUIRE + LOCK.RELEASE",
            Impl::Lua => "Redisson Lua (acquire + unlock + async DEL latch)",
        }
    }
}

fn worker(
    port: u16,
    imp: Impl,
    t: usize,
    sha: Shas,
    barrier: Arc<Barrier>,
    dur: Duration,
) -> (Vec<f64>, usize) {
    let con = crate::connect(port);
    let mut c = Client::new(con);
    let key = format!("b2:lock:{t:03}");
    let chan = lua::channel(&key);
    let owner = lua::owner(2, t);
    let acq = redis::cmd("LOCK.ACQUIRE").arg(&key).arg(&owner).arg(LEASE).clone();
    let rel = redis::cmd("LOCK.RELEASE").arg(&key).arg(&owner).clone();
    let mut lat = Vec::with_capacity(100_000);
    let mut bad = 0;
    barrier.wait();
    let end = Instant::now() + dur;
    while Instant::now() < end {
        let t0 = Instant::now();
        match imp {
            Impl::Native => {
                if !matches!(c.call(&acq), Value::Nil) {
                    bad += 1;
                }
                if !matches!(c.call(&rel), Value::Int(1)) {
                    bad += 1;
                }
            }
            Impl::Lua => {
                if c.lua_acquire(&sha, &key, LEASE, &owner).is_some() {
                    bad += 1;
                }
                if !matches!(c.lua_unlock(&sha, &key, &chan, LEASE, &owner), Value::Int(1)) {
                    bad += 1;
                }
            }
        }
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    c.drain();
    (lat, bad)
}

pub fn run(port: u16, sha: &Shas, quick: bool) -> Vec<Row> {
    let dur = Duration::from_millis(if quick { 300 } else { 2_000 });
    let mut rows = Vec::new();
    for threads in [1usize, 8, 32] {
        for imp in [Impl::Native, Impl::Lua] {
            eprintln!("[cycles] {} threads, {}", threads, imp.label());
            let barrier = Arc::new(Barrier::new(threads + 1));
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let (b, s) = (barrier.clone(), sha.clone());
                    std::thread::spawn(move || worker(port, imp, t, s, b, dur))
                })
                .collect();
            barrier.wait();
            let t0 = Instant::now();
            let mut all = Vec::new();
            let mut bad = 0;
            for h in hs {
                let (l, b) = h.join().expect("cycles worker panicked");
                all.extend(l);
                bad += b;
            }
            let secs = t0.elapsed().as_secs_f64();
            let n = all.len();
            rows.push(Row {
                implementation: imp.label().into(),
                threads,
                cycles: n,
                seconds: secs,
                cycles_per_sec: n as f64 / secs,
                latency_us: dist(all),
                unexpected_replies: bad,
            });
        }
    }
    rows
}
