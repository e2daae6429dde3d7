//! Scenario "memory": bytes per held lock (MEMORY USAGE of a lock vs the same hash made with
//! HSET; used_memory delta over many locks) and per blocked WAIT client (used_memory delta when
//! the same connections go from idle to blocked).

use crate::lua::{self, Shas};
use serde::Serialize;
use std::time::{Duration, Instant};
use testkit::info_int as info_i64;
use testkit::resp::Conn;

#[derive(Serialize, Clone, Debug)]
pub struct Report {
    /// MEMORY USAGE (SAMPLES 0) of a lock made by LOCK.ACQUIRE, by the Lua acquire script, and of
    /// a hash made by HSET + PEXPIRE with the same key length, field and value
    pub memory_usage_lock_acquire: i64,
    pub memory_usage_lua_acquire: i64,
    pub memory_usage_hset: i64,
    pub locks_counted: usize,
    /// used_memory delta / locks, for locks made each way (includes the key, the expires entry
    /// and dict growth)
    pub used_memory_per_lock_acquire: f64,
    pub used_memory_per_lua_acquire: f64,
    pub used_memory_per_hset_pexpire: f64,
    pub waiters: usize,
    /// used_memory delta per idle connection (after one PING)
    pub used_memory_per_idle_connection: f64,
    /// used_memory delta per connection when those same connections block in LOCK.ACQUIRE WAIT
    pub used_memory_per_blocked_waiter: f64,
    /// used_memory left per waiter once the waiters disconnected and memory settled, relative to
    /// before the connections were opened (what the server keeps: pooled temporary clients)
    pub used_memory_per_waiter_after_leaving: f64,
    /// the same for BLPOP (Redis's own blocking command), as a baseline
    pub used_memory_per_blocked_blpop: f64,
    /// blocked_clients and LOCK.INFO waiters observed while measuring
    pub blocked_clients_seen: i64,
    pub lock_info_waiters_seen: i64,
}

fn used(con: &mut redis::Connection) -> i64 {
    info_i64(con, "memory", "used_memory")
}

/// Wait until used_memory stops moving. clientsCron shrinks the buffers of clients idle for more
/// than 2 s, a few seconds after a state change, and memory is flat before that: so wait at least
/// `min`, then until it is unchanged (±64 B) for 1.5 s, at most `max`.
fn settle(con: &mut redis::Connection, min: Duration, max: Duration) -> i64 {
    let start = Instant::now();
    let mut last = used(con);
    let mut since = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let now = used(con);
        if (now - last).abs() > 64 {
            since = Instant::now();
        }
        last = now;
        let steady = since.elapsed() >= Duration::from_millis(1_500).min(min);
        if (steady && start.elapsed() >= min) || start.elapsed() >= max {
            return now;
        }
    }
}

/// Open `m` connections, PING each, let them settle: returns (connections, used_memory idle).
fn idle_conns(
    port: u16,
    con: &mut redis::Connection,
    m: usize,
    min: Duration,
    max: Duration,
) -> (Vec<Conn>, i64) {
    let mut conns: Vec<Conn> = (0..m).map(|_| Conn::new(port)).collect();
    for c in conns.iter_mut() {
        c.send(&[b"PING"]);
    }
    for c in conns.iter_mut() {
        c.read().expect("PONG");
    }
    let idle = settle(con, min, max);
    (conns, idle)
}

fn wait_blocked(con: &mut redis::Connection, m: usize) -> i64 {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let blocked = info_i64(con, "clients", "blocked_clients");
        if blocked >= m as i64 || Instant::now() > end {
            if blocked < m as i64 {
                eprintln!("  warning: only {blocked} of {m} clients blocked");
            }
            return blocked;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_unblocked(con: &mut redis::Connection) {
    let end = Instant::now() + Duration::from_secs(30);
    while info_i64(con, "clients", "blocked_clients") > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn mem_usage(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("MEMORY").arg("USAGE").arg(key).arg("SAMPLES").arg(0).query(con).expect("MEMORY USAGE")
}

fn flush(con: &mut redis::Connection) {
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(con).expect("FLUSHALL");
}

fn bulk(con: &mut redis::Connection, n: usize, f: impl Fn(&str) -> Vec<redis::Cmd>) {
    let mut i = 0;
    while i < n {
        let mut p = redis::pipe();
        for j in i..(i + 256).min(n) {
            for c in f(&format!("b5:m:{j:07}")) {
                p.add_command(c).ignore();
            }
        }
        let _: () = p.query(con).expect("bulk pipeline");
        i += 256;
    }
}

pub fn run(port: u16, sha: &Shas, quick: bool, waiters: Option<usize>) -> Report {
    let mut con = crate::connect(port);
    flush(&mut con);
    let owner = lua::owner(5, 0);
    let lease = 600_000u64;

    // (1) one lock, three ways, same key length / field / value
    let _: redis::Value =
        redis::cmd("LOCK.ACQUIRE").arg("b5:lock:a").arg(&owner).arg(lease).query(&mut con).unwrap();
    let _: redis::Value = lua::acquire_cmd(&sha.acquire, "b5:lock:b", lease, &owner).query(&mut con).unwrap();
    let _: () = redis::cmd("HSET").arg("b5:lock:c").arg(&owner).arg(1).query(&mut con).unwrap();
    let _: () = redis::cmd("PEXPIRE").arg("b5:lock:c").arg(lease).query(&mut con).unwrap();
    let mu_native = mem_usage(&mut con, "b5:lock:a");
    let mu_lua = mem_usage(&mut con, "b5:lock:b");
    let mu_hset = mem_usage(&mut con, "b5:lock:c");
    flush(&mut con);

    // (2) used_memory over many locks
    let n = if quick { 10_000 } else { 100_000 };
    eprintln!("[memory] used_memory over {n} locks, three ways");
    let mut per = Vec::new();
    for way in 0..3 {
        flush(&mut con);
        std::thread::sleep(Duration::from_millis(100));
        let before = used(&mut con);
        match way {
            0 => {
                bulk(&mut con, n, |k| vec![redis::cmd("LOCK.ACQUIRE").arg(k).arg(&owner).arg(lease).clone()])
            }
            1 => bulk(&mut con, n, |k| vec![lua::acquire_cmd(&sha.acquire, k, lease, &owner)]),
            _ => bulk(&mut con, n, |k| {
                vec![
                    redis::cmd("HSET").arg(k).arg(&owner).arg(1).clone(),
                    redis::cmd("PEXPIRE").arg(k).arg(lease).clone(),
                ]
            }),
        }
        // let serverCron finish incremental rehashing of the grown dicts
        std::thread::sleep(Duration::from_millis(if quick { 200 } else { 500 }));
        let after = used(&mut con);
        let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert_eq!(dbsize as usize, n, "every lock created");
        per.push((after - before) as f64 / n as f64);
    }
    flush(&mut con);

    // (3) blocked waiters: the same connections idle, then blocked; BLPOP as Redis's own baseline
    let m = waiters.unwrap_or(if quick { 200 } else { 2_000 });
    let (min, max) = if quick {
        (Duration::from_millis(300), Duration::from_secs(1))
    } else {
        (Duration::from_millis(4_500), Duration::from_secs(15))
    };
    eprintln!("[memory] {m} idle connections, then the same {m} blocked in WAIT; then the same with BLPOP");
    let base = settle(&mut con, min, max);
    let (mut conns, idle) = idle_conns(port, &mut con, m, min, max);
    let key = "b5:wait";
    let _: redis::Value = redis::cmd("LOCK.ACQUIRE").arg(key).arg(&owner).arg(lease).query(&mut con).unwrap();
    for (i, c) in conns.iter_mut().enumerate() {
        let w = format!("{owner}-w{i}");
        c.send(&[b"LOCK.ACQUIRE" as &[u8], key.as_bytes(), w.as_bytes(), b"600000", b"WAIT", b"0"]);
    }
    let blocked = wait_blocked(&mut con, m);
    let blocked_mem = settle(&mut con, min, max);
    let info: redis::Value = redis::cmd("LOCK.INFO").arg(key).query(&mut con).unwrap();
    let waiters = lock_info_waiters(&info);
    drop(conns);
    wait_unblocked(&mut con);
    flush(&mut con);
    // Redis frees the temporary clients of module blocking lazily: wait up to a minute.
    let left = settle(&mut con, min.max(Duration::from_secs(5)), max.max(Duration::from_secs(60)));

    let (mut conns, idle2) = idle_conns(port, &mut con, m, min, max);
    for c in conns.iter_mut() {
        c.send(&[b"BLPOP" as &[u8], b"b5:list", b"0"]);
    }
    wait_blocked(&mut con, m);
    let blpop_mem = settle(&mut con, min, max);
    drop(conns);
    wait_unblocked(&mut con);
    flush(&mut con);
    Report {
        memory_usage_lock_acquire: mu_native,
        memory_usage_lua_acquire: mu_lua,
        memory_usage_hset: mu_hset,
        locks_counted: n,
        used_memory_per_lock_acquire: per[0],
        used_memory_per_lua_acquire: per[1],
        used_memory_per_hset_pexpire: per[2],
        waiters: m,
        used_memory_per_idle_connection: (idle - base) as f64 / m as f64,
        used_memory_per_blocked_waiter: (blocked_mem - idle) as f64 / m as f64,
        used_memory_per_waiter_after_leaving: (left - base) as f64 / m as f64,
        used_memory_per_blocked_blpop: (blpop_mem - idle2) as f64 / m as f64,
        blocked_clients_seen: blocked,
        lock_info_waiters_seen: waiters,
    }
}

fn lock_info_waiters(v: &redis::Value) -> i64 {
    use redis::Value;
    let items: Vec<(Value, Value)> = match v {
        Value::Map(m) => m.clone(),
        Value::Array(a) => {
            a.chunks(2).filter(|c| c.len() == 2).map(|c| (c[0].clone(), c[1].clone())).collect()
        }
        _ => return -1,
    };
    for (k, val) in items {
        let name = match &k {
            Value::BulkString(b) => String::from_utf8_lossy(b).to_string(),
            Value::SimpleString(s) => s.clone(),
            _ => continue,
        };
        if name == "waiters" {
            if let Value::Int(n) = val {
                return n;
            }
        }
    }
    -1
}
