//! Fair mixed fleets: Redisson-style clients (their lock scripts run natively, pub/sub waiting)
//! and LOCK.* `WAIT` clients on one lock. Without the module seeing Redisson's failed acquires,
//! WAIT handoffs never free the lock nor publish, and the Redisson waiters starve; with
//! `native`, a failed Redisson acquire takes a place in the FIFO, and when its turn comes the
//! lock is freed, `0` is published and the lock is kept for that owner for a short time.

mod common;
use common::scripts::{load_all, native_opts, script};
use common::*;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LOCK: &str = "fair";
const CHANNEL: &str = "redisson_lock__channel:{fair}";

fn conn(port: u16) -> redis::Connection {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let con = c.get_connection_with_timeout(Duration::from_secs(5)).unwrap();
    con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    con
}

fn hold() {
    std::thread::sleep(Duration::from_millis(1));
}

/// A LOCK.* client: block in the queue, hold, release.
fn wait_client(port: u16, id: usize, stop: Arc<AtomicBool>) -> usize {
    let mut c = conn(port);
    let owner = format!("wait-client-{id}:1");
    let mut grants = 0;
    while !stop.load(Ordering::Relaxed) {
        let r: Option<i64> = redis::cmd("LOCK.ACQUIRE")
            .arg(LOCK)
            .arg(&owner)
            .arg(30000)
            .arg("WAIT")
            .arg(200)
            .query(&mut c)
            .unwrap();
        if r.is_none() {
            grants += 1;
            hold();
            let _: Option<i64> = redis::cmd("LOCK.RELEASE").arg(LOCK).arg(&owner).query(&mut c).unwrap();
        }
    }
    grants
}

/// A Redisson-style client: the acquire script; on failure wait for the release message or the
/// PTTL, then retry; unlock with the 3.24+ unlock script and delete the latch, as Redisson does.
fn script_client(port: u16, id: usize, stop: Arc<AtomicBool>) -> usize {
    let (acquire, unlock) = (script("acquire").sha, script("unlock-latch").sha);
    let mut c = conn(port);
    let mut sub = conn(port);
    let mut ps = sub.as_pubsub();
    ps.subscribe(CHANNEL).unwrap();
    let owner = format!("11111111-2222-3333-4444-55555555555{id}:1");
    let mut grants = 0;
    while !stop.load(Ordering::Relaxed) {
        let r: Option<i64> = redis::cmd("EVALSHA")
            .arg(&acquire)
            .arg(1)
            .arg(LOCK)
            .arg(30000)
            .arg(&owner)
            .query(&mut c)
            .unwrap();
        match r {
            None => {
                grants += 1;
                hold();
                // A request id of this client's own, as Redisson's (a random one per unlock):
                // two clients sharing ids answer each other's unlocks from the latch.
                let latch = format!("redisson_unlock_latch:{{{LOCK}}}:{id:016x}{grants:016x}");
                let _: Option<i64> = redis::cmd("EVALSHA")
                    .arg(&unlock)
                    .arg(3)
                    .arg(LOCK)
                    .arg(CHANNEL)
                    .arg(&latch)
                    .arg(0)
                    .arg(30000)
                    .arg(&owner)
                    .arg("PUBLISH")
                    .arg(13500)
                    .query(&mut c)
                    .unwrap();
                let _: i64 = redis::cmd("DEL").arg(&latch).query(&mut c).unwrap();
            }
            Some(pttl) => {
                let wait = Duration::from_millis(pttl.clamp(1, 200) as u64);
                ps.set_read_timeout(Some(wait)).unwrap();
                let _ = ps.get_message();
            }
        }
    }
    grants
}

fn jain(xs: &[usize]) -> f64 {
    let sum: f64 = xs.iter().map(|x| *x as f64).sum();
    let sq: f64 = xs.iter().map(|x| (*x as f64).powi(2)).sum();
    if sq == 0.0 {
        0.0
    } else {
        sum * sum / (xs.len() as f64 * sq)
    }
}

/// Per-client grants after `secs` of 4 WAIT clients + 4 script clients: (wait, script).
fn run(opts: Opts, secs: u64) -> (Vec<usize>, Vec<usize>, Server) {
    let s = Server::start_opts(opts);
    load_all(&mut resp::Conn::new(s.port));
    let stop = Arc::new(AtomicBool::new(false));
    let port = s.port;
    let waits: Vec<_> = (0..4)
        .map(|i| {
            let st = Arc::clone(&stop);
            std::thread::spawn(move || wait_client(port, i, st))
        })
        .collect();
    let scripts: Vec<_> = (0..4)
        .map(|i| {
            let st = Arc::clone(&stop);
            std::thread::spawn(move || script_client(port, i, st))
        })
        .collect();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let w: Vec<usize> = waits.into_iter().map(|t| t.join().unwrap()).collect();
    let r: Vec<usize> = scripts.into_iter().map(|t| t.join().unwrap()).collect();
    (w, r, s)
}

#[test]
fn script_clients_get_turns_beside_wait_clients() {
    let (w, r, s) = run(native_opts(), 3);
    let all: Vec<usize> = w.iter().chain(&r).copied().collect();
    let j = jain(&all);
    eprintln!("native: WAIT clients {w:?}, script clients {r:?}, Jain fairness {j:.3}");
    assert!(r.iter().all(|g| *g > 0), "every script client got the lock: {r:?}");
    let share = r.iter().sum::<usize>() as f64 / all.iter().sum::<usize>() as f64;
    assert!(share > 0.25, "script clients' share {share:.2} of grants (fair: 0.5)");
    let mut c = s.conn();
    assert!(stat(&mut c, "script_turns_given") > 0);
    assert!(stat(&mut c, "script_turns_taken") > 0);
    assert_eq!(stat(&mut c, "panics_caught"), 0);
}

#[test]
fn without_native_scripts_the_script_clients_starve() {
    // The same fleet with the scripts in Lua: shown, not required, as the reason for turns.
    let lua =
        Opts::default().module_arg(&format!("redisson-extra-scripts {}", common::scripts::extra_spec()));
    let (w, r, _s) = run(lua, 2);
    let all: Vec<usize> = w.iter().chain(&r).copied().collect();
    eprintln!("lua: WAIT clients {w:?}, script clients {r:?}, Jain fairness {:.3}", jain(&all));
    assert!(w.iter().sum::<usize>() > 0);
}
