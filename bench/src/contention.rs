//! Scenario "contention": N clients contending for ONE lock, for a fixed duration, three waiting strategies:
//! (a) LOCK.ACQUIRE ... WAIT (server-side FIFO, handoff inside the release),
//! (b) Redisson: acquire script; on failure SUBSCRIBE, acquire again, then wait for a message or
//!     the returned PTTL and retry; the holder unlocks with the Lua script that publishes "0",
//! (c) polling: LOCK.ACQUIRE without WAIT every 100 ms until it succeeds (like redis-py's Lock).
//!
//! Timing: all clients are threads of this process, so the releaser's release-reply time and the
//! next holder's grant time come from one monotonic clock (Instant).

use crate::lua::{self, Client, Shas};
use crate::stats::{dist, jain, Dist};
use redis::Value;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use testkit::resp::Conn;

const LEASE: u64 = 30_000;
const KEY: &str = "b3:lock";
const POLL: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Strategy {
    Wait,
    Redisson,
    Polling,
}

impl Strategy {
    pub fn label(self) -> &'static str {
        match self {
            Strategy::Wait => "LOCK.ACQUIRE WAIT",
            Strategy::Redisson => "Redisson pub/sub",
            Strategy::Polling => "polling 100 ms",
        }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub strategy: String,
    pub clients: usize,
    pub critical_section_ms: u64,
    pub seconds: f64,
    /// grants inside the measured window (a client re-taking the lock it just released counts)
    pub grants: usize,
    pub grants_per_sec: f64,
    /// grants to a different client than the previous holder
    pub handoffs: usize,
    pub handoffs_per_sec: f64,
    /// from the start of an acquire attempt to the grant reply, milliseconds
    pub wait_ms: Dist,
    /// attempts still waiting when the run ended (cut off at the deadline), and the longest one
    pub waits_cut_off: usize,
    pub longest_cut_off_ms: f64,
    pub per_client_min: u64,
    pub per_client_max: u64,
    pub jain_fairness: f64,
    /// grant time of holder i+1 minus release-reply time of holder i, microseconds (can be
    /// negative: with a server-side handoff the grant may arrive before the releaser's reply)
    pub idle_gap_us: Dist,
    pub unexpected_replies: usize,
    /// commands the clients sent per grant (all clients, all commands incl. SUBSCRIBE, latch DEL)
    pub commands_per_grant: f64,
}

struct Shared {
    seq: AtomicU64,
}

#[derive(Default)]
struct Out {
    grants: Vec<(u64, Instant, f64)>,
    releases: Vec<(u64, Instant)>,
    /// wait that ended at the deadline without a grant, ms
    cut_off: Option<f64>,
    sent: u64,
    bad: usize,
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[allow(clippy::too_many_arguments)]
fn client(
    port: u16,
    strat: Strategy,
    id: usize,
    cs: Duration,
    sha: Shas,
    shared: Arc<Shared>,
    barrier: Arc<Barrier>,
    deadline_after: Duration,
) -> Out {
    let mut c = Client::new(crate::connect(port));
    let mut sub = if strat == Strategy::Redisson { Some(Conn::new(port)) } else { None };
    let owner = lua::owner(3, id);
    let chan = lua::channel(KEY);
    let mut out = Out::default();
    barrier.wait();
    let deadline = Instant::now() + deadline_after;
    loop {
        if Instant::now() >= deadline {
            break;
        }
        let t0 = Instant::now();
        let acquired = match strat {
            Strategy::Wait => {
                let ms = remaining(deadline).as_millis().max(1) as u64;
                let cmd =
                    redis::cmd("LOCK.ACQUIRE").arg(KEY).arg(&owner).arg(LEASE).arg("WAIT").arg(ms).clone();
                match c.call(&cmd) {
                    Value::Nil => true,
                    Value::Int(_) => false,
                    v => {
                        eprintln!("  unexpected WAIT reply {v:?}");
                        out.bad += 1;
                        false
                    }
                }
            }
            Strategy::Polling => loop {
                let cmd = redis::cmd("LOCK.ACQUIRE").arg(KEY).arg(&owner).arg(LEASE).clone();
                match c.call(&cmd) {
                    Value::Nil => break true,
                    Value::Int(_) => {}
                    v => {
                        eprintln!("  unexpected reply {v:?}");
                        out.bad += 1;
                    }
                }
                let r = remaining(deadline);
                if r.is_zero() {
                    break false;
                }
                std::thread::sleep(POLL.min(r));
            },
            Strategy::Redisson => {
                let sub = sub.as_mut().unwrap();
                // RedissonLock.lock(): EVAL; SUBSCRIBE; loop { EVAL; wait message or ttl }.
                match c.lua_acquire(&sha, KEY, LEASE, &owner) {
                    None => true,
                    Some(_) => {
                        sub.subscribe(chan.as_bytes());
                        let got = loop {
                            let ttl = match c.lua_acquire(&sha, KEY, LEASE, &owner) {
                                None => break true,
                                Some(t) => t,
                            };
                            let r = remaining(deadline);
                            if r.is_zero() {
                                break false;
                            }
                            let wait = if ttl >= 0 { Duration::from_millis(ttl as u64).min(r) } else { r };
                            sub.wait_message(chan.as_bytes(), Instant::now() + wait);
                        };
                        sub.unsubscribe_async(chan.as_bytes());
                        got
                    }
                }
            }
        };
        if !acquired {
            out.cut_off = Some(t0.elapsed().as_secs_f64() * 1e3);
            break;
        }
        let tg = Instant::now();
        // Grants are totally ordered in real time (holder i got its reply before it sent the
        // release that let holder i+1 in), so a counter taken here numbers them in lock order.
        let seq = shared.seq.fetch_add(1, Ordering::SeqCst);
        out.grants.push((seq, tg, (tg - t0).as_secs_f64() * 1e3));
        if !cs.is_zero() {
            std::thread::sleep(cs);
        }
        let ok = match strat {
            Strategy::Redisson => matches!(c.lua_unlock(&sha, KEY, &chan, LEASE, &owner), Value::Int(1)),
            _ => {
                let cmd = redis::cmd("LOCK.RELEASE").arg(KEY).arg(&owner).clone();
                matches!(c.call(&cmd), Value::Int(1))
            }
        };
        out.releases.push((seq, Instant::now()));
        if !ok {
            out.bad += 1;
        }
    }
    c.drain();
    out.sent = c.sent + sub.map_or(0, |s| s.sent);
    out
}

fn signed_us(a: Instant, b: Instant) -> f64 {
    if a >= b {
        (a - b).as_secs_f64() * 1e6
    } else {
        -((b - a).as_secs_f64() * 1e6)
    }
}

pub fn run_one(port: u16, sha: &Shas, strat: Strategy, n: usize, cs_ms: u64, dur: Duration) -> Row {
    let mut admin = crate::connect(port);
    let _: () = redis::cmd("DEL").arg(KEY).query(&mut admin).expect("DEL");
    let shared = Arc::new(Shared { seq: AtomicU64::new(0) });
    let barrier = Arc::new(Barrier::new(n + 1));
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let (s, b, sh) = (shared.clone(), barrier.clone(), sha.clone());
            std::thread::spawn(move || client(port, strat, i, Duration::from_millis(cs_ms), sh, s, b, dur))
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let window_end = start + dur;
    let outs: Vec<Out> = hs.into_iter().map(|h| h.join().expect("contention client panicked")).collect();
    let total_calls: u64 = outs.iter().map(|o| o.sent).sum();
    let exists: i64 = redis::cmd("EXISTS").arg(KEY).query(&mut admin).expect("EXISTS");
    if exists != 0 {
        eprintln!("  warning: lock still held after the run");
        let _: () = redis::cmd("DEL").arg(KEY).query(&mut admin).expect("DEL");
    }
    let mut per_client = Vec::new();
    let mut waits = Vec::new();
    let mut grant_at = std::collections::HashMap::new();
    let mut release_at = std::collections::HashMap::new();
    let mut holder_of = std::collections::HashMap::new();
    let mut bad = 0;
    let mut cut = Vec::new();
    for (ci, o) in outs.iter().enumerate() {
        let mut cnt = 0u64;
        for &(seq, tg, w) in &o.grants {
            if tg <= window_end {
                cnt += 1;
                waits.push(w);
                grant_at.insert(seq, tg);
                holder_of.insert(seq, ci);
            }
        }
        if let Some(c) = o.cut_off {
            cut.push(c);
        }
        for &(seq, tr) in &o.releases {
            release_at.insert(seq, tr);
        }
        bad += o.bad;
        per_client.push(cnt);
    }
    let mut gaps = Vec::new();
    for (&seq, &tg) in &grant_at {
        if seq == 0 {
            continue;
        }
        if let Some(&tr) = release_at.get(&(seq - 1)) {
            gaps.push(signed_us(tg, tr));
        }
    }
    let grants = grant_at.len();
    let handoffs = holder_of
        .iter()
        .filter(|(&seq, &c)| seq > 0 && holder_of.get(&(seq - 1)).is_some_and(|&p| p != c))
        .count();
    Row {
        strategy: strat.label().into(),
        clients: n,
        critical_section_ms: cs_ms,
        seconds: dur.as_secs_f64(),
        grants,
        grants_per_sec: grants as f64 / dur.as_secs_f64(),
        handoffs,
        handoffs_per_sec: handoffs as f64 / dur.as_secs_f64(),
        wait_ms: dist(waits),
        waits_cut_off: cut.len(),
        longest_cut_off_ms: cut.iter().cloned().fold(0.0, f64::max),
        per_client_min: per_client.iter().copied().min().unwrap_or(0),
        per_client_max: per_client.iter().copied().max().unwrap_or(0),
        jain_fairness: jain(&per_client),
        idle_gap_us: dist(gaps),
        unexpected_replies: bad,
        commands_per_grant: if grants > 0 { total_calls as f64 / grants as f64 } else { f64::NAN },
    }
}

pub fn run(port: u16, sha: &Shas, quick: bool) -> Vec<Row> {
    let dur = Duration::from_millis(if quick { 500 } else { 3_000 });
    let mut rows = Vec::new();
    for cs in [0u64, 1] {
        for n in [2usize, 8, 32] {
            for strat in [Strategy::Wait, Strategy::Redisson, Strategy::Polling] {
                eprintln!("[contention] {} clients, cs {} ms, {}", n, cs, strat.label());
                rows.push(run_one(port, sha, strat, n, cs, dur));
            }
        }
    }
    rows
}
