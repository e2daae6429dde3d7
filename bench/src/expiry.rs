//! Scenario "expiry": expiry handoff. A holder takes the lock with a 200 ms lease and never releases;
//! one waiter waits for it. Lateness = waiter's grant time (SystemTime, unix ms) minus the lock's
//! deadline (PEXPIRETIME read right after the holder's acquire). Same machine, same wall clock.

use crate::lua::{self, Client, Shas};
use crate::stats::median;
use rand::Rng;
use redis::Value;
use serde::Serialize;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::resp::Conn;

const HOLD_LEASE: u64 = 200;
const KEY: &str = "b4:lock";

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub strategy: String,
    pub rounds: usize,
    /// grant time minus deadline, milliseconds, one per round
    pub lateness_ms: Vec<f64>,
    pub median_ms: f64,
    pub max_ms: f64,
    pub min_ms: f64,
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1e3
}

pub fn run(port: u16, sha: &Shas, quick: bool) -> Vec<Row> {
    let rounds = if quick { 3 } else { 10 };
    let mut holder = Client::new(crate::connect(port));
    let mut waiter = Client::new(crate::connect(port));
    let mut sub = Conn::new(port);
    let chan = lua::channel(KEY);
    let mut rows = Vec::new();
    for strat in ["LOCK.ACQUIRE WAIT", "Redisson pub/sub", "polling 100 ms"] {
        eprintln!("[expiry] {strat}: {rounds} rounds");
        let mut late = Vec::new();
        for r in 0..rounds {
            let _: () = redis::cmd("DEL").arg(KEY).query(&mut holder.con).expect("DEL");
            let h_owner = lua::owner(4, 1000 + r);
            let w_owner = lua::owner(4, r);
            if strat.starts_with("Redisson") {
                assert!(holder.lua_acquire(sha, KEY, HOLD_LEASE, &h_owner).is_none(), "holder acquire");
            } else {
                let v = holder.call(redis::cmd("LOCK.ACQUIRE").arg(KEY).arg(&h_owner).arg(HOLD_LEASE));
                assert!(matches!(v, Value::Nil), "holder acquire: {v:?}");
            }
            let deadline: i64 = match holder.call(redis::cmd("PEXPIRETIME").arg(KEY)) {
                Value::Int(d) => d,
                v => panic!("PEXPIRETIME: {v:?}"),
            };
            // The waiter starts at a random point of a 100 ms polling period (matters only for
            // polling, whose lateness otherwise depends on the lease being a multiple of 100 ms).
            std::thread::sleep(Duration::from_micros(rand::thread_rng().gen_range(0..100_000)));
            let give_up = Instant::now() + Duration::from_secs(10);
            match strat {
                "LOCK.ACQUIRE WAIT" => {
                    let v = waiter.call(
                        redis::cmd("LOCK.ACQUIRE").arg(KEY).arg(&w_owner).arg(30_000).arg("WAIT").arg(5_000),
                    );
                    assert!(matches!(v, Value::Nil), "WAIT was not granted within 5 s: {v:?}");
                }
                "Redisson pub/sub" => {
                    if waiter.lua_acquire(sha, KEY, 30_000, &w_owner).is_some() {
                        sub.subscribe(chan.as_bytes());
                        loop {
                            let ttl = match waiter.lua_acquire(sha, KEY, 30_000, &w_owner) {
                                None => break,
                                Some(t) => t,
                            };
                            assert!(Instant::now() < give_up, "Redisson-style waiter not granted in 10 s");
                            let wait = if ttl >= 0 {
                                Duration::from_millis(ttl as u64)
                            } else {
                                Duration::from_secs(1)
                            };
                            sub.wait_message(chan.as_bytes(), Instant::now() + wait);
                        }
                        sub.unsubscribe_async(chan.as_bytes());
                    }
                }
                _ => loop {
                    let v = waiter.call(redis::cmd("LOCK.ACQUIRE").arg(KEY).arg(&w_owner).arg(30_000));
                    if matches!(v, Value::Nil) {
                        break;
                    }
                    assert!(Instant::now() < give_up, "polling waiter not granted in 10 s");
                    std::thread::sleep(Duration::from_millis(100));
                },
            }
            late.push(now_ms() - deadline as f64);
        }
        let _: () = redis::cmd("DEL").arg(KEY).query(&mut holder.con).expect("DEL");
        let max = late.iter().cloned().fold(f64::MIN, f64::max);
        let min = late.iter().cloned().fold(f64::MAX, f64::min);
        rows.push(Row {
            strategy: strat.into(),
            rounds,
            median_ms: median(late.clone()),
            max_ms: max,
            min_ms: min,
            lateness_ms: late,
        });
    }
    holder.drain();
    waiter.drain();
    rows
}
