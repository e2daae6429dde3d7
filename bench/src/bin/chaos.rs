//! chaos: fenced critical sections through repeated master failovers that lose writes.
//!
//!   cargo run --release --manifest-path bench/Cargo.toml --bin chaos -- \
//!       --module /abs/path/libredis_lock.so [--failovers 10] [--clients 4] [--out bench-results]
//!
//! A master and a replica (both with the module) and a few clients that take one lock, then
//! write several times to a protected resource that checks fencing tokens (it accepts a write
//! only with a token at least as high as the highest it has seen). A controller repeatedly
//! makes the replica miss the master's last writes (SIGSTOP + `CLIENT KILL TYPE replica`),
//! kills the master with SIGKILL, resumes and promotes the replica, and attaches a fresh
//! replica. Some critical sections also pause longer than their lease (a GC pause).
//!
//! Run twice: tokens from `LOCK.ACQUIRE ... FENCE`, and tokens from a plain counter (Redisson's
//! `RFencedLock` algorithm, INCR of the token key, our own Lua in `clients/python/src/redislock/lua/fenced-acquire.lua`).
//! For each: failovers, grants, overlapping holders (a client entered while another still
//! believed it held the lock), writes accepted, stale writes rejected, the current holder's
//! writes rejected, and stale writes accepted: writes of a superseded grant (a newer grant has
//! already presented its token to the resource) that the resource let through. Fencing can only
//! act once the resource has seen the newer token, so that is the guarantee measured. With FENCE
//! the last two numbers must be 0 (the program exits non-zero otherwise).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FENCED_LUA: &str = testkit::scripts::FENCED_ACQUIRE;
const LOCK: &str = "chaos:resource";
const TOKEN_KEY: &str = "redisson_lock_token:{chaos:resource}";
const LEASE_MS: i64 = 100;

/// A server of the run (testkit's harness, killed with us) plus signals for the fault script.
struct Node {
    srv: testkit::Server,
    port: u16,
}

impl Node {
    fn start(module: &Path, replica_of: Option<u16>) -> Node {
        let mut opts = testkit::Opts::default().module_path(module).die_with_parent();
        if let Some(p) = replica_of {
            opts = opts.arg(&format!("--replicaof 127.0.0.1 {p}"));
        }
        let srv = testkit::Server::start_opts(opts);
        let port = srv.port;
        let up = wait(Duration::from_secs(20), || {
            let mut c = connect(port).ok()?;
            let info: String = redis::cmd("INFO").arg("replication").query(&mut c).ok()?;
            (replica_of.is_none() || info.contains("master_link_status:up")).then_some(())
        });
        assert!(up.is_some(), "redis-server on {port} did not come up\n{}", srv.log());
        Node { srv, port }
    }

    fn signal(&self, sig: i32) {
        if let Some(pid) = self.srv.pid() {
            // SAFETY: plain kill(2) on our own child process.
            unsafe { libc::kill(pid as i32, sig) };
        }
    }

    fn kill(&mut self) {
        self.srv.kill();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT); // the harness then kills it
    }
}

fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = c.get_connection_with_timeout(Duration::from_millis(500))?;
    con.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(con)
}

fn wait<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Fence,
    Counter,
}

/// The protected resource: accepts a write only with a token >= the highest seen. It also
/// keeps the ground truth the checker cannot see: which grant each write came from.
#[derive(Default)]
struct Resource {
    highest_token: i64,
    /// Grant sequence number of the newest grant that presented a write.
    newest_grant_seen: u64,
    accepted: u64,
    stale_rejected: u64,
    current_rejected: u64,
    stale_accepted: u64,
    /// Clients currently inside a critical section (believing they hold the lock).
    inside: Vec<usize>,
    overlaps: u64,
}

impl Resource {
    fn write(&mut self, token: i64, grant: u64) {
        // Superseded: a newer holder has already shown its token here.
        let superseded = grant < self.newest_grant_seen;
        self.newest_grant_seen = self.newest_grant_seen.max(grant);
        if token < self.highest_token {
            if superseded {
                self.stale_rejected += 1;
            } else {
                self.current_rejected += 1;
            }
            return;
        }
        self.highest_token = token;
        self.accepted += 1;
        if superseded {
            self.stale_accepted += 1;
        }
    }
}

struct Shared {
    master: AtomicU16,
    stop: AtomicBool,
    grants: AtomicU64,
    resource: Mutex<Resource>,
}

fn acquire(
    con: &mut redis::Connection,
    mode: Mode,
    sha: &str,
    owner: &str,
) -> redis::RedisResult<Option<i64>> {
    let reply: Vec<i64> = match mode {
        Mode::Fence => redis::cmd("LOCK.ACQUIRE")
            .arg(LOCK)
            .arg(owner)
            .arg(LEASE_MS)
            .arg("WAIT")
            .arg(200)
            .arg("FENCE")
            .query(con)?,
        Mode::Counter => redis::cmd("EVALSHA")
            .arg(sha)
            .arg(2)
            .arg(LOCK)
            .arg(TOKEN_KEY)
            .arg(LEASE_MS)
            .arg(owner)
            .query(con)?,
    };
    Ok(match reply.as_slice() {
        [-1, t] if *t > 0 => Some(*t),
        _ => None,
    })
}

fn client(id: usize, mode: Mode, shared: Arc<Shared>, seed: u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let owner = format!("chaos-client-{id}:1");
    let mut con: Option<(u16, redis::Connection, String)> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        let port = shared.master.load(Ordering::Relaxed);
        if con.as_ref().is_none_or(|(p, _, _)| *p != port) {
            con = connect(port).ok().and_then(|mut c| {
                let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(FENCED_LUA).query(&mut c).ok()?;
                Some((port, c, sha))
            });
        }
        let Some((_, c, sha)) = con.as_mut() else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let token = match acquire(c, mode, sha, &owner) {
            Ok(Some(t)) => t,
            Ok(None) => {
                if mode == Mode::Counter {
                    std::thread::sleep(Duration::from_millis(1));
                }
                continue;
            }
            Err(_) => {
                con = None;
                continue;
            }
        };
        let grant = shared.grants.fetch_add(1, Ordering::SeqCst) + 1;
        {
            let mut r = shared.resource.lock().unwrap_or_else(|p| p.into_inner());
            if !r.inside.is_empty() {
                r.overlaps += 1;
            }
            r.inside.push(id);
        }
        // The critical section: three writes; now and then a pause longer than the lease.
        for i in 0..3 {
            let pause = if i == 1 && rng.gen_ratio(1, 15) { 150 } else { rng.gen_range(1..6) };
            std::thread::sleep(Duration::from_millis(pause));
            shared.resource.lock().unwrap_or_else(|p| p.into_inner()).write(token, grant);
        }
        shared.resource.lock().unwrap_or_else(|p| p.into_inner()).inside.retain(|x| *x != id);
        if let Err(_) | Ok(None) = redis::cmd("LOCK.RELEASE").arg(LOCK).arg(&owner).query::<Option<i64>>(c) {
            // Lost the lock (expired or lost in a failover) or the connection: nothing to do.
        }
    }
}

struct Row {
    mode: &'static str,
    failovers: usize,
    grants: u64,
    overlaps: u64,
    accepted: u64,
    stale_rejected: u64,
    current_rejected: u64,
    stale_accepted: u64,
    token_regressions: u64,
}

fn run(module: &Path, mode: Mode, failovers: usize, clients: usize) -> Row {
    let mut master = Node::start(module, None);
    let mut replica = Node::start(module, Some(master.port));
    let shared = Arc::new(Shared {
        master: AtomicU16::new(master.port),
        stop: AtomicBool::new(false),
        grants: AtomicU64::new(0),
        resource: Mutex::new(Resource::default()),
    });
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let s = Arc::clone(&shared);
            std::thread::spawn(move || client(i, mode, s, 7 + i as u64))
        })
        .collect();
    let mut regressions = 0;
    for n in 0..failovers {
        std::thread::sleep(Duration::from_millis(300));
        // The replica falls behind: stopped, and its link cut (a stopped replica still has the
        // stream in its socket buffer and would apply it on SIGCONT).
        replica.signal(libc::SIGSTOP);
        let mut m = connect(master.port).expect("master");
        let _: redis::RedisResult<i64> =
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica").query(&mut m);
        let cut = wait(Duration::from_secs(10), || {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut m).ok()?;
            info.contains("connected_slaves:0").then_some(())
        });
        assert!(cut.is_some(), "replica link not cut");
        std::thread::sleep(Duration::from_millis(200));
        let before: Option<i64> = redis::cmd("GET").arg(TOKEN_KEY).query(&mut m).ok().flatten();
        master.kill();
        replica.signal(libc::SIGCONT);
        let mut r = connect(replica.port).expect("replica");
        let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut r).expect("REPLICAOF NO ONE");
        let after: Option<i64> = redis::cmd("GET").arg(TOKEN_KEY).query(&mut r).ok().flatten();
        if after < before {
            regressions += 1;
        }
        eprintln!(
            "  failover {}: token key on the dead master {before:?}, on the promoted replica {after:?}",
            n + 1
        );
        shared.master.store(replica.port, Ordering::Relaxed);
        master = replica;
        replica = Node::start(module, Some(master.port));
    }
    std::thread::sleep(Duration::from_millis(300));
    shared.stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let r = shared.resource.lock().unwrap_or_else(|p| p.into_inner());
    Row {
        mode: match mode {
            Mode::Fence => "LOCK.ACQUIRE ... FENCE",
            Mode::Counter => "plain counter (RFencedLock INCR)",
        },
        failovers,
        grants: shared.grants.load(Ordering::Relaxed),
        overlaps: r.overlaps,
        accepted: r.accepted,
        stale_rejected: r.stale_rejected,
        current_rejected: r.current_rejected,
        stale_accepted: r.stale_accepted,
        token_regressions: regressions,
    }
}

fn main() {
    let mut module = None;
    let mut failovers = 10;
    let mut clients = 4;
    let mut out = PathBuf::from("bench-results");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--module" => module = Some(PathBuf::from(val())),
            "--failovers" => failovers = val().parse().expect("--failovers N"),
            "--clients" => clients = val().parse().expect("--clients N"),
            "--out" => out = PathBuf::from(val()),
            other => panic!("unknown argument {other}"),
        }
    }
    let module =
        std::fs::canonicalize(module.expect("--module /abs/path/libredis_lock.so")).expect("module path");
    let mut rows = vec![];
    for mode in [Mode::Fence, Mode::Counter] {
        eprintln!(
            "chaos: {} failovers, {clients} clients, tokens from {}",
            failovers,
            if mode == Mode::Fence { "FENCE" } else { "INCR" }
        );
        rows.push(run(&module, mode, failovers, clients));
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| tokens | failovers | token key went back | grants | overlapping holders | writes accepted | \
         stale writes rejected | current holder's writes rejected | stale writes accepted |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.mode,
            r.failovers,
            r.token_regressions,
            r.grants,
            r.overlaps,
            r.accepted,
            r.stale_rejected,
            r.current_rejected,
            r.stale_accepted
        );
    }
    println!("{md}");
    if std::fs::create_dir_all(&out).is_ok() {
        let _ = std::fs::write(out.join("chaos.md"), &md);
    }
    if rows.first().is_some_and(|r| r.stale_accepted > 0 || r.current_rejected > 0) {
        eprintln!("FENCE let a stale write through, or refused the current holder");
        std::process::exit(1);
    }
}
