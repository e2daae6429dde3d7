//! Replication and persistence (spec section 5): replicas (with and without the module) and the
//! AOF receive the effects of LOCK.* as plain commands (HINCRBY, PEXPIREAT with the absolute
//! deadline, DEL, PUBLISH), never LOCK.* itself, so they reproduce the exact state and deadline.
//!
//! The replication stream is inspected directly with a fake replica (`Tap`) that sends `SYNC`,
//! skips the RDB payload and parses every command the master propagates.

mod common;
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

type Bytes = Vec<u8>;

// ---- helpers ---------------------------------------------------------------------------------

/// What a server holds at one key, as far as a lock is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyState {
    ty: String,
    /// HGETALL for a hash, `[("", value)]` for a string, empty otherwise.
    fields: BTreeMap<Bytes, Bytes>,
    pexpiretime: i64,
}

fn key_state(con: &mut redis::Connection, key: &[u8]) -> KeyState {
    let ty: String = redis::cmd("TYPE").arg(key).query(con).expect("TYPE");
    let fields = match ty.as_str() {
        "hash" => {
            let flat: Vec<Bytes> = redis::cmd("HGETALL").arg(key).query(con).expect("HGETALL");
            flat.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect()
        }
        "string" => {
            let v: Bytes = redis::cmd("GET").arg(key).query(con).expect("GET");
            BTreeMap::from([(Bytes::new(), v)])
        }
        _ => BTreeMap::new(),
    };
    let pexpiretime: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).expect("PEXPIRETIME");
    KeyState { ty, fields, pexpiretime }
}

/// Server clock (TIME) in unix milliseconds, rounded down.
fn server_ms(con: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(con).expect("TIME");
    s * 1000 + us / 1000
}

/// `WAIT n 5000` on the master connection that did the writes must report all `n` replicas
/// caught up. Then, because WAIT only covers that connection's own writes (not writes done by
/// module timers or other clients), also wait until every replica in `replicas` has processed
/// the master's whole replication offset.
fn wait_replicas(master: &mut redis::Connection, n: i64, replicas: &mut [&mut redis::Connection]) {
    // WAIT may count more replicas than asked for: on a connection that has propagated nothing
    // (its write offset is 0) it also counts the tap, whose acknowledged offset stays 0.
    let got: i64 = redis::cmd("WAIT").arg(n).arg(5000).query(master).expect("WAIT");
    assert!(got >= n, "WAIT {n} 5000 returned {got}: replicas did not acknowledge in 5 s");
    for (i, r) in replicas.iter_mut().enumerate() {
        let ok = replica_caught_up(master, r, Duration::from_secs(10));
        assert!(ok, "replica {i} did not reach the master's offset within 10 s");
    }
}

fn dbsize(con: &mut redis::Connection) -> i64 {
    redis::cmd("DBSIZE").query(con).expect("DBSIZE")
}

fn scan_all(con: &mut redis::Connection) -> BTreeSet<Bytes> {
    let mut out = BTreeSet::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<Bytes>) =
            redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(1000).query(con).expect("SCAN");
        out.extend(keys);
        cursor = next;
        if cursor == 0 {
            return out;
        }
    }
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(&b.escape_ascii().collect::<Vec<u8>>()).into_owned()
}

/// Assert that every server holds the same state as the first one at each key; returns the
/// master's states.
fn assert_same_state(
    servers: &mut [(&str, &mut redis::Connection)],
    keys: &BTreeSet<Bytes>,
    ctx: &str,
) -> BTreeMap<Bytes, KeyState> {
    let mut master_states = BTreeMap::new();
    for k in keys {
        let (mname, mcon) = &mut servers[0];
        let want = key_state(mcon, k);
        let mname = mname.to_string();
        for (name, con) in servers.iter_mut().skip(1) {
            let got = key_state(con, k);
            assert_eq!(got, want, "{ctx}: key {} differs between {mname} and {name}", show(k));
        }
        master_states.insert(k.clone(), want);
    }
    master_states
}

fn acquire(con: &mut redis::Connection, key: &[u8], owner: &[u8], lease: i64) -> Option<i64> {
    redis::cmd("LOCK.ACQUIRE").arg(key).arg(owner).arg(lease).query(con).expect("LOCK.ACQUIRE")
}

fn release(con: &mut redis::Connection, key: &[u8], owner: &[u8], lease: Option<i64>) -> Option<i64> {
    let mut c = redis::cmd("LOCK.RELEASE");
    c.arg(key).arg(owner);
    if let Some(l) = lease {
        c.arg(l);
    }
    c.query(con).expect("LOCK.RELEASE")
}

fn renew(con: &mut redis::Connection, key: &[u8], owner: &[u8], lease: i64) -> i64 {
    redis::cmd("LOCK.RENEW").arg(key).arg(owner).arg(lease).query(con).expect("LOCK.RENEW")
}

fn force_release(con: &mut redis::Connection, key: &[u8]) -> i64 {
    redis::cmd("LOCK.FORCERELEASE").arg(key).query(con).expect("LOCK.FORCERELEASE")
}

fn counts(pairs: &[(&[u8], &str)]) -> BTreeMap<Bytes, Bytes> {
    pairs.iter().map(|(o, c)| (o.to_vec(), c.as_bytes().to_vec())).collect()
}

/// A master with the module and two replicas: R1 with the module, R2 without.
struct Trio {
    master: Server,
    r1: Server,
    r2: Server,
}

impl Trio {
    fn start() -> Trio {
        let master = Server::start();
        let r1 = Server::start();
        let r2 = Server::start_opts(Opts::default().without_module());
        r1.replicate_from(&master);
        r2.replicate_from(&master);
        Trio { master, r1, r2 }
    }

    /// A fake replica never acknowledges past offset 0, so once the connection has written
    /// something WAIT counts only R1 and R2 (before that, it counts the tap too).
    fn attach_tap(&self) -> Tap {
        Tap::attach(&self.master)
    }

    /// Wait for both replicas (`m` is the master connection that did the last writes).
    fn sync(&self, m: &mut redis::Connection) {
        let (mut a, mut b) = (self.r1.conn(), self.r2.conn());
        wait_replicas(m, 2, &mut [&mut a, &mut b]);
    }

    /// Sync, then compare `keys` (plus every key SCAN finds anywhere) and DBSIZE on all three
    /// servers. `m` is the master connection that did the last writes. Returns the master's states.
    fn assert_replicas_match(
        &self,
        m: &mut redis::Connection,
        keys: &[&[u8]],
        ctx: &str,
    ) -> BTreeMap<Bytes, KeyState> {
        self.sync(m);
        let (mut a, mut b) = (self.r1.conn(), self.r2.conn());
        let mut all: BTreeSet<Bytes> = keys.iter().map(|k| k.to_vec()).collect();
        all.extend(scan_all(m));
        all.extend(scan_all(&mut a));
        all.extend(scan_all(&mut b));
        let states = assert_same_state(
            &mut [("master", m), ("replica-with-module", &mut a), ("replica-without-module", &mut b)],
            &all,
            ctx,
        );
        let (dm, da, db) = (dbsize(m), dbsize(&mut a), dbsize(&mut b));
        assert_eq!((da, db), (dm, dm), "{ctx}: DBSIZE master/replica1/replica2 = {dm}/{da}/{db}");
        states
    }
}

// ---- fake replica ------------------------------------------------------------------------------

/// A fake replica: sends SYNC, skips the RDB, and forwards each propagated command.
struct Tap {
    rx: mpsc::Receiver<Result<Vec<Bytes>, String>>,
}

fn read_line(r: &mut impl BufRead) -> Result<Bytes, String> {
    let mut line = Vec::new();
    let n = r.read_until(b'\n', &mut line).map_err(|e| format!("read: {e}"))?;
    if n == 0 {
        return Err("connection closed".into());
    }
    Ok(line)
}

fn parse_len(line: &[u8], prefix: u8) -> Result<usize, String> {
    let s = std::str::from_utf8(line).map_err(|_| format!("bad header {}", show(line)))?.trim_end();
    s.strip_prefix(prefix as char)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("expected '{}<len>', got {}", prefix as char, show(line)))
}

/// One RESP array of bulk strings (the replication stream and the AOF use only these).
fn read_command(r: &mut impl BufRead) -> Result<Option<Vec<Bytes>>, String> {
    let mut line = Vec::new();
    let n = r.read_until(b'\n', &mut line).map_err(|e| format!("read: {e}"))?;
    if n == 0 {
        return Ok(None);
    }
    let argc = parse_len(&line, b'*')?;
    let mut argv = Vec::with_capacity(argc);
    for _ in 0..argc {
        let len = parse_len(&read_line(r)?, b'$')?;
        let mut buf = vec![0u8; len + 2];
        r.read_exact(&mut buf).map_err(|e| format!("read bulk: {e}"))?;
        if &buf[len..] != b"\r\n" {
            return Err("bulk string not followed by CRLF".into());
        }
        buf.truncate(len);
        argv.push(buf);
    }
    Ok(Some(argv))
}

impl Tap {
    /// Attach to `master` and return once the initial RDB has been received, so every write
    /// the master performs from now on shows up in the stream.
    fn attach(master: &Server) -> Tap {
        let mut s = TcpStream::connect(("127.0.0.1", master.port)).expect("tap connect");
        s.set_read_timeout(Some(Duration::from_secs(60))).expect("tap timeout");
        // No `REPLCONF capa eof`, so the master sends a disk-based `$<len>` payload.
        s.write_all(b"SYNC\r\n").expect("tap SYNC");
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        std::thread::spawn(move || {
            let mut r = BufReader::new(s);
            let rdb = (|| -> Result<(), String> {
                loop {
                    let line = read_line(&mut r)?;
                    if line == b"\n" || line == b"\r\n" {
                        continue; // keep-alive newlines while the master saves
                    }
                    let len = parse_len(&line, b'$')?;
                    let mut rdb = vec![0u8; len];
                    r.read_exact(&mut rdb).map_err(|e| format!("read RDB: {e}"))?;
                    return Ok(());
                }
            })();
            let ok = rdb.is_ok();
            let _ = ready_tx.send(rdb);
            if !ok {
                return;
            }
            loop {
                match read_command(&mut r) {
                    Ok(Some(cmd)) => {
                        if tx.send(Ok(cmd)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        match ready_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("tap: SYNC failed: {e}\n{}", master.log()),
            Err(_) => panic!("tap: no RDB within 30 s\n{}", master.log()),
        }
        Tap { rx }
    }

    /// Write a unique marker on the master and return every command propagated before it.
    fn drain(&self, master: &mut redis::Connection) -> Vec<Vec<Bytes>> {
        let marker = format!("tap-marker-{}", uuid::Uuid::new_v4());
        let _: () = redis::cmd("SET").arg(&marker).arg(1).query(master).expect("SET marker");
        let _: i64 = redis::cmd("DEL").arg(&marker).query(master).expect("DEL marker");
        let end = Instant::now() + Duration::from_secs(30);
        let mut out = Vec::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Ok(cmd)) => {
                    if cmd.len() == 3 && cmd[0].eq_ignore_ascii_case(b"SET") && cmd[1] == marker.as_bytes() {
                        return out;
                    }
                    out.push(cmd);
                }
                Ok(Err(e)) => panic!("tap: bad replication stream: {e}"),
                Err(_) => panic!("tap: marker not seen within 30 s; got {} commands", out.len()),
            }
        }
    }
}

/// Command names (upper case) with how often each occurs.
fn names(cmds: &[Vec<Bytes>]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for c in cmds {
        *m.entry(String::from_utf8_lossy(&c[0]).to_ascii_uppercase()).or_insert(0) += 1;
    }
    m
}

/// No LOCK.* command, and only the plain commands the spec allows for lock effects.
fn assert_plain_effects(cmds: &[Vec<Bytes>], required: &[&str], ctx: &str) {
    let n = names(cmds);
    for name in n.keys() {
        assert!(!name.starts_with("LOCK."), "{ctx}: {name} was propagated: {n:?}");
    }
    let allowed = ["HINCRBY", "HSET", "PEXPIREAT", "DEL", "UNLINK", "PUBLISH", "SELECT", "MULTI", "EXEC"];
    let allowed_extra = ["PING", "REPLCONF", "SET"]; // keep-alives, WAIT's GETACK, test markers
    for name in n.keys() {
        assert!(
            allowed.contains(&name.as_str()) || allowed_extra.contains(&name.as_str()),
            "{ctx}: unexpected command {name} in the stream: {n:?}"
        );
    }
    for r in required {
        assert!(n.contains_key(*r), "{ctx}: no {r} in the stream: {n:?}");
    }
}

// ---- 1. random sequence, replicas with and without the module --------------------------------

fn test_keys() -> Vec<Bytes> {
    let mut keys: Vec<Bytes> = (0..40).map(|i| format!("rk:{i}").into_bytes()).collect();
    keys.push(b"rk:{tagged}".to_vec());
    keys.push(b"rk with spaces".to_vec());
    for i in 0..8u8 {
        keys.push(vec![b'b', 0, 0xff, 0xfe, b'\r', b'\n', i, 0x80 | i]);
    }
    keys
}

fn test_owners() -> Vec<Bytes> {
    vec![
        b"6f1c2e1a-3b2d-4c52-9a1e-0b7a1c2d3e4f:1".to_vec(),
        b"6f1c2e1a-3b2d-4c52-9a1e-0b7a1c2d3e4f:57".to_vec(),
        vec![0, 0xff, b'o', b'\r', b'\n', 0xc3],
        b"owner with spaces".to_vec(),
        b"5".to_vec(),
    ]
}

fn random_lease(rng: &mut StdRng) -> i64 {
    match rng.gen_range(0..10) {
        0..=2 => rng.gen_range(50..300),
        3..=4 => rng.gen_range(300..3000),
        _ => rng.gen_range(3000..=60000),
    }
}

fn as_opt_int(v: &Value) -> Option<Option<i64>> {
    match v {
        Value::Nil => Some(None),
        Value::Int(i) => Some(Some(*i)),
        _ => None,
    }
}

/// One seeded random LOCK.* command on `con`, with its reply checked for shape.
fn random_op(
    rng: &mut StdRng,
    con: &mut redis::Connection,
    keys: &[Bytes],
    owners: &[Bytes],
    holder: &mut HashMap<usize, usize>,
    ctx: &str,
) {
    let k = rng.gen_range(0..keys.len());
    let o = match holder.get(&k) {
        Some(&h) if rng.gen_bool(0.7) => h,
        _ => rng.gen_range(0..owners.len()),
    };
    let (key, owner) = (&keys[k], &owners[o]);
    let op = rng.gen_range(0..100);
    let mut c;
    let what;
    if op < 40 {
        c = redis::cmd("LOCK.ACQUIRE");
        c.arg(key).arg(owner).arg(random_lease(rng));
        what = "ACQUIRE";
    } else if op < 55 {
        c = redis::cmd("LOCK.RELEASE");
        c.arg(key).arg(owner);
        what = "RELEASE";
    } else if op < 70 {
        c = redis::cmd("LOCK.RELEASE");
        c.arg(key).arg(owner).arg(random_lease(rng));
        what = "RELEASE-LEASE";
    } else if op < 93 {
        c = redis::cmd("LOCK.RENEW");
        c.arg(key).arg(owner).arg(random_lease(rng));
        what = "RENEW";
    } else {
        c = redis::cmd("LOCK.FORCERELEASE");
        c.arg(key);
        what = "FORCERELEASE";
    }
    let v: Value = c.query(con).unwrap_or_else(|e| panic!("{ctx}: {what} {}: {e}", show(key)));
    let r = as_opt_int(&v).unwrap_or_else(|| panic!("{ctx}: {what} {}: unexpected reply {v:?}", show(key)));
    match (what, r) {
        ("ACQUIRE", None) => {
            holder.insert(k, o);
        }
        ("ACQUIRE", Some(pttl)) => {
            assert!((0..=60000).contains(&pttl), "{ctx}: contended ACQUIRE replied PTTL {pttl}")
        }
        ("RELEASE" | "RELEASE-LEASE", None | Some(0)) => {}
        ("RELEASE" | "RELEASE-LEASE", Some(1)) | ("FORCERELEASE", Some(1)) => {
            holder.remove(&k);
        }
        ("RENEW" | "FORCERELEASE", Some(0 | 1)) => {}
        _ => panic!("{ctx}: {what} {}: unexpected reply {v:?}", show(key)),
    }
}

/// After the random run: let every lease that ends within 2 s run out on the master, touch
/// every key so the master deletes what expired (and propagates DEL), then WAIT.
fn settle(trio: &Trio, keys: &BTreeSet<Bytes>) {
    let mut m = trio.master.conn();
    let started = Instant::now();
    // Repeat until no lease ends within the next 3 s, so nothing expires while comparing.
    loop {
        let now = server_ms(&mut m);
        let mut soon = Vec::new();
        for k in keys {
            let pat: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut m).expect("PEXPIRETIME");
            if pat > 0 && pat < now + 3000 {
                soon.push((k, pat));
            }
        }
        if soon.is_empty() {
            break;
        }
        for (k, pat) in soon {
            let gone = wait_for(Duration::from_secs(10), || {
                let e: i64 = redis::cmd("EXISTS").arg(k).query(&mut m).ok()?;
                (e == 0).then_some(())
            });
            assert!(gone.is_some(), "key {} with deadline {pat} did not expire", show(k));
        }
        assert!(started.elapsed() < Duration::from_secs(90), "leases kept ending within 3 s of each other");
    }
    println!("settled in {:?}", started.elapsed());
    for k in keys {
        let _: i64 = redis::cmd("EXISTS").arg(k).query(&mut m).expect("EXISTS");
    }
    trio.sync(&mut m);
}

#[test]
fn random_sequence_replicas_with_and_without_module_match_master() {
    let seed: u64 = std::env::var("LOCK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    println!("random_sequence seed = {seed} (rerun with LOCK_TEST_SEED={seed})");
    let mut trio = Trio::start();
    let tap = trio.attach_tap();
    let keys = test_keys();
    let owners = test_owners();

    // Phase 1: one client, seeded and deterministic.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut m = trio.master.conn();
    let mut holder = HashMap::new();
    for i in 0..3000 {
        random_op(&mut rng, &mut m, &keys, &owners, &mut holder, &format!("seed {seed} op {i}"));
    }

    // Phase 2: concurrent clients with WAIT on a few hot keys, so handoffs, lease-expiry grants
    // and wait timeouts (module timers) are replicated too. Short leases only.
    let hot: Vec<Bytes> = keys[..4].iter().chain(keys[keys.len() - 2..].iter()).cloned().collect();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let client = trio.master.client();
            let hot = hot.clone();
            let owners = owners.clone();
            std::thread::spawn(move || {
                let mut con = client.get_connection().expect("conn");
                con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut rng = StdRng::seed_from_u64(seed ^ (0x9e37_79b9 + t));
                let me = &owners[t as usize % owners.len()];
                for _ in 0..80 {
                    let key = &hot[rng.gen_range(0..hot.len())];
                    let lease = rng.gen_range(50..400);
                    match rng.gen_range(0..10) {
                        0..=5 => {
                            let v: Value = redis::cmd("LOCK.ACQUIRE")
                                .arg(key)
                                .arg(me)
                                .arg(lease)
                                .arg("WAIT")
                                .arg(rng.gen_range(1..250))
                                .query(&mut con)
                                .expect("ACQUIRE WAIT");
                            assert!(as_opt_int(&v).is_some(), "ACQUIRE WAIT replied {v:?}");
                        }
                        6..=7 => {
                            let v: Value =
                                redis::cmd("LOCK.RELEASE").arg(key).arg(me).query(&mut con).expect("RELEASE");
                            assert!(as_opt_int(&v).is_some(), "RELEASE replied {v:?}");
                        }
                        8 => {
                            let _: i64 = redis::cmd("LOCK.RENEW")
                                .arg(key)
                                .arg(me)
                                .arg(lease)
                                .query(&mut con)
                                .expect("RENEW");
                        }
                        _ => {
                            let _: i64 =
                                redis::cmd("LOCK.FORCERELEASE").arg(key).query(&mut con).expect("FORCE");
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("phase-2 client thread panicked");
    }
    trio.master.assert_alive();

    let mut all: BTreeSet<Bytes> = keys.iter().cloned().collect();
    all.extend(scan_all(&mut m));
    settle(&trio, &all);
    let key_refs: Vec<&[u8]> = all.iter().map(|k| k.as_slice()).collect();
    let states = trio.assert_replicas_match(&mut m, &key_refs, &format!("seed {seed}"));
    let held = states.values().filter(|s| s.ty == "hash").count();
    println!("seed {seed}: {held} locks held at the end");
    for (k, s) in &states {
        if s.ty != "none" {
            assert_eq!(s.ty, "hash", "key {} is not a hash", show(k));
            assert!(s.pexpiretime > 0, "held lock {} has no TTL: {s:?}", show(k));
            for (o, c) in &s.fields {
                let c: i64 = std::str::from_utf8(c).unwrap().parse().unwrap();
                assert!(c >= 1, "lock {} owner {} count {c}", show(k), show(o));
            }
        }
    }

    // The run covered what it is meant to cover.
    let info = lock_info(&mut m);
    let expired = info_int(&mut m, "stats", "expired_keys");
    println!("seed {seed}: expired_keys={expired} lock stats {info:?}");
    for f in ["acquires_new", "acquires_reentrant", "acquires_contended", "releases_partial", "releases_full"]
    {
        assert!(stat(&mut m, f) > 0, "seed {seed}: the run never did {f}");
    }
    for f in ["releases_not_owner", "renewals_ok", "renewals_missed", "force_releases", "waits_started"] {
        assert!(stat(&mut m, f) > 0, "seed {seed}: the run never did {f}");
    }
    assert!(expired > 0, "seed {seed}: no lease expired during the run");

    let cmds = tap.drain(&mut m);
    println!("seed {seed}: replication stream {:?}", names(&cmds));
    assert_plain_effects(&cmds, &["HINCRBY", "PEXPIREAT", "DEL", "PUBLISH"], &format!("seed {seed}"));
}

// ---- 3. AOF ----------------------------------------------------------------------------------

fn wait_loaded(s: &Server) {
    let mut c = s.conn();
    let ok = wait_for(Duration::from_secs(20), || {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).ok()?;
        info.contains("loading:0").then_some(())
    });
    assert!(ok.is_some(), "server still loading\n{}", s.log());
}

/// Every command in the *.incr.aof files of `dir`/appendonlydir, and the raw bytes of those files.
fn read_incr_aofs(dir: &Path) -> (Vec<Vec<Bytes>>, Vec<u8>) {
    let aofdir = dir.join("appendonlydir");
    let mut files: Vec<_> = fs::read_dir(&aofdir)
        .unwrap_or_else(|e| panic!("{aofdir:?}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.incr.aof in {aofdir:?}");
    let manifest = fs::read_to_string(aofdir.join("appendonly.aof.manifest")).expect("manifest");
    let mut cmds = Vec::new();
    let mut raw = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(manifest.contains(&name), "{name} not in manifest:\n{manifest}");
        let bytes = fs::read(f).unwrap();
        let mut r = BufReader::new(&bytes[..]);
        while let Some(c) = read_command(&mut r).unwrap_or_else(|e| panic!("{name}: {e}")) {
            cmds.push(c);
        }
        raw.extend_from_slice(&bytes);
    }
    (cmds, raw)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn states_of(s: &Server, keys: &[&[u8]]) -> BTreeMap<Bytes, KeyState> {
    let mut c = s.conn();
    keys.iter().map(|k| (k.to_vec(), key_state(&mut c, k))).collect()
}

#[test]
fn aof_holds_only_plain_effects_and_reloads_exactly_with_and_without_module() {
    let mut s = Server::start_with("--appendonly yes --appendfsync always");
    wait_loaded(&s);
    let mut c = s.conn();
    let bin_key: &[u8] = b"aof\x00\xff{bin}\r\n";
    let bin_owner: &[u8] = b"\x00own\xfe\r\n";
    #[allow(clippy::type_complexity)]
    let (a, b, r, p, f, e, x): (&[u8], &[u8], &[u8], &[u8], &[u8], &[u8], &[u8]) =
        (b"aof:a", bin_key, b"aof:released", b"aof:partial", b"aof:forced", b"aof:expired", b"aof:other");
    let (o1, o2): (&[u8], &[u8]) = (b"uuid-1:1", b"uuid-2:7");

    assert_eq!(acquire(&mut c, a, o1, 60000), None);
    assert_eq!(acquire(&mut c, a, o1, 120000), None); // reentry: count 2, new lease
    assert!(acquire(&mut c, a, o2, 1000).is_some_and(|t| t > 0)); // contended, no write
    assert_eq!(acquire(&mut c, b, bin_owner, 90000), None);
    assert_eq!(renew(&mut c, b, bin_owner, 100000), 1);
    assert_eq!(renew(&mut c, b, o2, 100000), 0);
    assert_eq!(acquire(&mut c, r, o1, 60000), None);
    assert_eq!(release(&mut c, r, o1, None), Some(1)); // DEL + PUBLISH
    assert_eq!(acquire(&mut c, p, o2, 60000), None);
    assert_eq!(acquire(&mut c, p, o2, 60000), None);
    assert_eq!(acquire(&mut c, p, o2, 60000), None);
    assert_eq!(release(&mut c, p, o2, Some(80000)), Some(0)); // HINCRBY -1, PEXPIREAT
    assert_eq!(release(&mut c, p, o2, None), Some(0)); // HINCRBY -1, TTL kept
    assert_eq!(release(&mut c, p, o1, None), None);
    assert_eq!(acquire(&mut c, f, o1, 60000), None);
    assert_eq!(force_release(&mut c, f), 1);
    assert_eq!(acquire(&mut c, e, o1, 50), None);
    let gone = wait_for(Duration::from_secs(5), || {
        let n: i64 = redis::cmd("EXISTS").arg(e).query(&mut c).ok()?;
        (n == 0).then_some(())
    });
    assert!(gone.is_some(), "50 ms lease did not expire");
    let _: () = redis::cmd("SET").arg(x).arg("plain").query(&mut c).unwrap();

    let keys: Vec<&[u8]> = vec![a, b, r, p, f, e, x];
    let before = states_of(&s, &keys);
    assert_eq!(before[a].fields, counts(&[(o1, "2")]));
    assert_eq!(before[b].fields, counts(&[(bin_owner, "1")]));
    assert_eq!(before[p].fields, counts(&[(o2, "1")]));
    for k in [r, f, e] {
        assert_eq!(before[k].ty, "none", "{}", show(k));
    }
    for k in [a, b, p] {
        assert!(before[k].pexpiretime > 0);
    }

    // The AOF holds effects only.
    let (cmds, raw) = read_incr_aofs(s.dir());
    assert_plain_effects(&cmds, &["HINCRBY", "PEXPIREAT", "DEL", "PUBLISH"], "AOF");
    for line in raw.split(|&ch| ch == b'\n') {
        assert!(
            !line.to_ascii_lowercase().windows(5).any(|w| w == b"lock."),
            "AOF line mentions lock.: {}",
            show(line)
        );
    }
    // PEXPIREAT carries the absolute deadline the server reports.
    let last_pexpireat = |k: &[u8]| -> i64 {
        let c = cmds
            .iter()
            .rev()
            .find(|c| c[0].eq_ignore_ascii_case(b"PEXPIREAT") && c[1] == k)
            .unwrap_or_else(|| panic!("no PEXPIREAT for {}", show(k)));
        std::str::from_utf8(&c[2]).unwrap().parse().unwrap()
    };
    for k in [a, b, p] {
        assert_eq!(last_pexpireat(k), before[k].pexpiretime, "{}", show(k));
    }

    // Restart with the module: identical state, deadlines to the millisecond.
    drop(c);
    s.restart("");
    wait_loaded(&s);
    assert_eq!(states_of(&s, &keys), before, "after AOF reload with the module");

    // A server without the module loads the same AOF to the same state.
    let mut plain = Server::start_opts(Opts::default().without_module().arg("--appendonly yes"));
    plain.kill();
    let _ = fs::remove_dir_all(plain.dir().join("appendonlydir"));
    copy_dir(&s.dir().join("appendonlydir"), &plain.dir().join("appendonlydir"));
    plain.restart("");
    wait_loaded(&plain);
    assert_eq!(states_of(&plain, &keys), before, "after AOF reload without the module");
    // Redis 8 loads modules of its own (vectorset...): only ours must be absent.
    let mods: Vec<Value> = redis::cmd("MODULE").arg("LIST").query(&mut plain.conn()).unwrap();
    assert!(!format!("{mods:?}").contains("\"lock\""), "the plain server has the lock module: {mods:?}");

    // After BGREWRITEAOF (RDB preamble base) plus more effects: still exact.
    let mut c = s.conn();
    let _: Value = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    let done = wait_for(Duration::from_secs(20), || {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).ok()?;
        (info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")).then_some(())
    });
    assert!(done.is_some(), "AOF rewrite did not finish\n{}", s.log());
    assert_eq!(renew(&mut c, a, o1, 70000), 1);
    assert_eq!(release(&mut c, b, bin_owner, None), Some(1));
    let after = states_of(&s, &keys);
    assert_eq!(after[b].ty, "none");
    drop(c);
    s.restart("");
    wait_loaded(&s);
    assert_eq!(states_of(&s, &keys), after, "after rewrite + reload");
    let (cmds, _) = read_incr_aofs(s.dir());
    assert_plain_effects(&cmds, &["PEXPIREAT", "DEL"], "AOF after rewrite");
}

// ---- 4. MULTI/EXEC and scripts ---------------------------------------------------------------

fn exec(con: &mut redis::Connection, cmds: Vec<redis::Cmd>) -> Vec<Value> {
    let mut p = redis::pipe();
    p.atomic();
    for c in cmds {
        p.add_command(c);
    }
    p.query(con).expect("MULTI/EXEC")
}

fn lcmd(name: &str, args: &[&[u8]]) -> redis::Cmd {
    let mut c = redis::cmd(name);
    for a in args {
        c.arg(*a);
    }
    c
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        _ => panic!("expected an integer, got {v:?}"),
    }
}

#[test]
fn multi_exec_and_scripts_reply_correctly_and_replicate_effects() {
    let trio = Trio::start();
    let tap = trio.attach_tap();
    let mut m = trio.master.conn();
    let (k1, k2, k3, k4): (&[u8], &[u8], &[u8], &[u8]) = (b"tx:a", b"tx:\x00b\xff", b"lua:a", b"lua:b");
    let (a, b): (&[u8], &[u8]) = (b"owner-a:1", b"owner-b\x00:2");

    // MULTI: acquire, reentry, renew, partial release with lease.
    let r = exec(
        &mut m,
        vec![
            lcmd("LOCK.ACQUIRE", &[k1, a, b"10000"]),
            lcmd("LOCK.ACQUIRE", &[k1, a, b"20000"]),
            lcmd("LOCK.RENEW", &[k1, a, b"30000"]),
            lcmd("LOCK.RELEASE", &[k1, a, b"40000"]),
            lcmd("LOCK.RENEW", &[k1, b, b"30000"]),
            lcmd("LOCK.RELEASE", &[k1, b]),
        ],
    );
    assert_eq!(r[..3], [Value::Nil, Value::Nil, Value::Int(1)]);
    assert_eq!(r[3..], [Value::Int(0), Value::Int(0), Value::Nil]);
    let st = trio.assert_replicas_match(&mut m, &[k1], "after MULTI 1");
    assert_eq!(st[k1].fields, counts(&[(a, "1")]));
    let pttl: i64 = redis::cmd("PTTL").arg(k1).query(&mut m).unwrap();
    assert!(pttl > 30000 && pttl <= 40000, "lease after MULTI: {pttl}");

    // MULTI: contended acquire, acquire WAIT (must not block), full release, new owner.
    let mut mb = trio.master.conn();
    mb.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let r = exec(
        &mut mb,
        vec![
            lcmd("LOCK.ACQUIRE", &[k1, b, b"5000"]),
            lcmd("LOCK.ACQUIRE", &[k1, b, b"5000", b"WAIT", b"0"]),
            lcmd("LOCK.ACQUIRE", &[k1, b, b"5000", b"WAIT", b"3000"]),
            lcmd("LOCK.RELEASE", &[k1, a]),
            lcmd("LOCK.ACQUIRE", &[k1, b, b"50000"]),
            lcmd("LOCK.ACQUIRE", &[k2, b, b"25000"]),
            lcmd("LOCK.FORCERELEASE", &[k2]),
            lcmd("LOCK.ACQUIRE", &[k2, a, b"26000"]),
        ],
    );
    for (i, v) in r[..3].iter().enumerate() {
        let t = int(v);
        assert!(t > 0 && t <= 40000, "contended reply {i} in MULTI: {t}");
    }
    assert_eq!(r[3..], [Value::Int(1), Value::Nil, Value::Nil, Value::Int(1), Value::Nil]);
    let st = trio.assert_replicas_match(&mut m, &[k1, k2], "after MULTI 2");
    assert_eq!(st[k1].fields, counts(&[(b, "1")]));
    assert_eq!(st[k2].fields, counts(&[(a, "1")]));
    assert_eq!(stat(&mut m, "waits_started"), 0, "a WAIT inside MULTI blocked");
    assert_eq!(stat(&mut m, "waiters"), 0);

    // EVAL: acquire, reentry, renew, partial release with lease, in one script.
    let script = "local r = {}
        r[1] = redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], ARGV[2])
        r[2] = redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], ARGV[2])
        r[3] = redis.call('LOCK.RENEW', KEYS[1], ARGV[1], ARGV[3])
        r[4] = redis.call('LOCK.RELEASE', KEYS[1], ARGV[1], ARGV[4])
        r[5] = redis.call('LOCK.RENEW', KEYS[1], ARGV[5], ARGV[3])
        r[6] = redis.call('HGET', KEYS[1], ARGV[1])
        return r";
    let v: Vec<Value> = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg(k3)
        .arg(a)
        .arg(15000)
        .arg(35000)
        .arg(45000)
        .arg(b)
        .query(&mut m)
        .unwrap();
    // Lua turns a nil reply into false, which EVAL returns as nil.
    assert_eq!(
        v,
        vec![
            Value::Nil,
            Value::Nil,
            Value::Int(1),
            Value::Int(0),
            Value::Int(0),
            Value::BulkString(b"1".to_vec())
        ]
    );
    let st = trio.assert_replicas_match(&mut m, &[k3], "after EVAL 1");
    assert_eq!(st[k3].fields, counts(&[(a, "1")]));
    let pttl: i64 = redis::cmd("PTTL").arg(k3).query(&mut m).unwrap();
    assert!(pttl > 35000 && pttl <= 45000, "lease after EVAL: {pttl}");

    // EVAL: single-call scripts, as a client library would send them.
    let acq = "return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], ARGV[2])";
    let rel = "return redis.call('LOCK.RELEASE', KEYS[1], ARGV[1])";
    let v: Option<i64> = redis::cmd("EVAL").arg(acq).arg(1).arg(k4).arg(b).arg(12345).query(&mut m).unwrap();
    assert_eq!(v, None);
    let v: Option<i64> = redis::cmd("EVAL").arg(acq).arg(1).arg(k4).arg(a).arg(1000).query(&mut m).unwrap();
    assert!(v.is_some_and(|t| t > 0 && t <= 12345), "contended ACQUIRE in EVAL: {v:?}");
    let v: Option<i64> = redis::cmd("EVAL").arg(rel).arg(1).arg(k4).arg(a).query(&mut m).unwrap();
    assert_eq!(v, None, "RELEASE by a non-owner in EVAL");
    trio.assert_replicas_match(&mut m, &[k4], "after EVAL 2");
    let v: Option<i64> = redis::cmd("EVAL").arg(rel).arg(1).arg(k4).arg(b).query(&mut m).unwrap();
    assert_eq!(v, Some(1));
    let st = trio.assert_replicas_match(&mut m, &[k4], "after EVAL 3");
    assert_eq!(st[k4].ty, "none");

    // WAIT inside EVAL does not block: it replies the PTTL at once.
    let wait_script = "return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], ARGV[2], 'WAIT', ARGV[3])";
    for timeout in ["0", "3000"] {
        let v: Value = redis::cmd("EVAL")
            .arg(wait_script)
            .arg(1)
            .arg(k3)
            .arg(b)
            .arg(1000)
            .arg(timeout)
            .query(&mut mb)
            .expect("EVAL with WAIT must reply at once");
        let t = int(&v);
        assert!(t > 0 && t <= 45000, "ACQUIRE WAIT {timeout} in EVAL: {t}");
    }
    assert_eq!(stat(&mut m, "waits_started"), 0, "a WAIT inside EVAL blocked");
    assert_eq!(stat(&mut m, "waiters"), 0);

    // EVAL_RO cannot run the write commands; nothing changes.
    let ro: redis::RedisResult<Value> =
        redis::cmd("EVAL_RO").arg(acq).arg(1).arg(b"ro:k").arg(a).arg(1000).query(&mut m);
    assert!(ro.is_err(), "LOCK.ACQUIRE ran inside EVAL_RO: {ro:?}");

    let st = trio.assert_replicas_match(&mut m, &[k1, k2, k3, k4, b"ro:k"], "final");
    assert_eq!(st[b"ro:k".as_slice()].ty, "none");

    let cmds = tap.drain(&mut m);
    assert_plain_effects(&cmds, &["HINCRBY", "PEXPIREAT", "DEL", "PUBLISH", "MULTI", "EXEC"], "MULTI/EVAL");
}

// ---- 5. exact deadlines on replicas ----------------------------------------------------------

#[test]
fn replica_pexpiretime_equals_master_exactly() {
    let trio = Trio::start();
    let mut m = trio.master.conn();
    let key: &[u8] = b"exact:\x00\xff{deadline}";
    let (a, b): (&[u8], &[u8]) = (b"uuid-exact:1", b"uuid-other:9");

    // (description, command, lease the deadline must be based on (None = unchanged), count)
    type Step<'a> = (&'a str, Box<dyn Fn(&mut redis::Connection)>, Option<i64>, Option<&'a str>);
    let steps: Vec<Step> = vec![
        ("acquire", Box::new(move |c| assert_eq!(acquire(c, key, a, 45001), None)), Some(45001), Some("1")),
        ("reentry", Box::new(move |c| assert_eq!(acquire(c, key, a, 70003), None)), Some(70003), Some("2")),
        ("reentry", Box::new(move |c| assert_eq!(acquire(c, key, a, 20007), None)), Some(20007), Some("3")),
        (
            "release with lease",
            Box::new(move |c| assert_eq!(release(c, key, a, Some(33333)), Some(0))),
            Some(33333),
            Some("2"),
        ),
        ("renew", Box::new(move |c| assert_eq!(renew(c, key, a, 55555), 1)), Some(55555), Some("2")),
        ("renew by other", Box::new(move |c| assert_eq!(renew(c, key, b, 1000), 0)), None, Some("2")),
        (
            "contended acquire",
            Box::new(move |c| assert!(acquire(c, key, b, 1000).is_some_and(|t| t > 0))),
            None,
            Some("2"),
        ),
        (
            "release without lease",
            Box::new(move |c| assert_eq!(release(c, key, a, None), Some(0))),
            None,
            Some("1"),
        ),
        ("renew short", Box::new(move |c| assert_eq!(renew(c, key, a, 9999), 1)), Some(9999), Some("1")),
        ("release", Box::new(move |c| assert_eq!(release(c, key, a, None), Some(1))), None, None),
        ("acquire again", Box::new(move |c| assert_eq!(acquire(c, key, b, 61111), None)), Some(61111), None),
    ];
    let mut prev: Option<i64> = None;
    for (what, run, lease, count) in steps {
        let t0 = server_ms(&mut m);
        run(&mut m);
        let t1 = server_ms(&mut m);
        let st = trio.assert_replicas_match(&mut m, &[key], what);
        let s = &st[key];
        match (what, lease) {
            ("release", _) => assert_eq!(s.ty, "none", "{what}"),
            (_, Some(l)) => {
                assert!(
                    s.pexpiretime >= t0 + l && s.pexpiretime <= t1 + l,
                    "{what}: deadline {} not in [{}, {}] (lease {l})",
                    s.pexpiretime,
                    t0 + l,
                    t1 + l
                );
            }
            (_, None) => assert_eq!(Some(s.pexpiretime), prev, "{what} changed the deadline"),
        }
        match (what, count) {
            ("release", _) => {}
            ("acquire again", _) => assert_eq!(s.fields, counts(&[(b, "1")])),
            (_, Some(n)) => assert_eq!(s.fields, counts(&[(a, n)]), "{what}"),
            _ => {}
        }
        prev = (s.pexpiretime > 0).then_some(s.pexpiretime);
    }
}

// ---- handoffs and module-timer grants replicate too -------------------------------------------

/// Block `owner` on `key` with WAIT on its own connection; the reply comes back on the handle.
fn spawn_waiter(
    s: &Server,
    key: &'static [u8],
    owner: &'static [u8],
    lease: i64,
    timeout: i64,
) -> std::thread::JoinHandle<Value> {
    let client = s.client();
    std::thread::spawn(move || {
        let mut c = client.get_connection().expect("conn");
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        redis::cmd("LOCK.ACQUIRE")
            .arg(key)
            .arg(owner)
            .arg(lease)
            .arg("WAIT")
            .arg(timeout)
            .query(&mut c)
            .expect("ACQUIRE WAIT")
    })
}

fn wait_waiters(con: &mut redis::Connection, n: i64) {
    let ok = wait_for(Duration::from_secs(10), || (stat(con, "waiters") == n).then_some(()));
    assert!(ok.is_some(), "waiters never reached {n}");
}

#[test]
fn handoffs_and_expiry_grants_replicate_exactly() {
    let trio = Trio::start();
    let tap = trio.attach_tap();
    let mut m = trio.master.conn();
    let (a, b): (&'static [u8], &'static [u8]) = (b"holder-a:1", b"waiter-b\x00:2");

    // Handoff inside LOCK.RELEASE.
    let k: &'static [u8] = b"h:release";
    assert_eq!(acquire(&mut m, k, a, 60000), None);
    let w = spawn_waiter(&trio.master, k, b, 41000, 20000);
    wait_waiters(&mut m, 1);
    let t0 = server_ms(&mut m);
    assert_eq!(release(&mut m, k, a, None), Some(1));
    assert_eq!(w.join().unwrap(), Value::Nil);
    let t1 = server_ms(&mut m);
    let st = trio.assert_replicas_match(&mut m, &[k], "handoff by RELEASE");
    assert_eq!(st[k].fields, counts(&[(b, "1")]));
    assert!((t0 + 41000..=t1 + 41000).contains(&st[k].pexpiretime), "{:?}", st[k]);

    // Handoff inside LOCK.FORCERELEASE.
    let k: &'static [u8] = b"h:force";
    assert_eq!(acquire(&mut m, k, a, 60000), None);
    let w = spawn_waiter(&trio.master, k, b, 42000, 20000);
    wait_waiters(&mut m, 1);
    assert_eq!(force_release(&mut m, k), 1);
    assert_eq!(w.join().unwrap(), Value::Nil);
    let st = trio.assert_replicas_match(&mut m, &[k], "handoff by FORCERELEASE");
    assert_eq!(st[k].fields, counts(&[(b, "1")]));

    // Grant on lease expiry (module timer).
    let k: &'static [u8] = b"h:expiry";
    assert_eq!(acquire(&mut m, k, a, 300), None);
    let w = spawn_waiter(&trio.master, k, b, 43000, 20000);
    assert_eq!(w.join().unwrap(), Value::Nil);
    let st = trio.assert_replicas_match(&mut m, &[k], "grant after lease expiry");
    assert_eq!(st[k].fields, counts(&[(b, "1")]));

    // Grant after a plain DEL (keyspace event, then a timer).
    let k: &'static [u8] = b"h:del";
    assert_eq!(acquire(&mut m, k, a, 60000), None);
    let w = spawn_waiter(&trio.master, k, b, 44000, 20000);
    wait_waiters(&mut m, 1);
    let _: i64 = redis::cmd("DEL").arg(k).query(&mut m).unwrap();
    assert_eq!(w.join().unwrap(), Value::Nil);
    let st = trio.assert_replicas_match(&mut m, &[k], "grant after DEL");
    assert_eq!(st[k].fields, counts(&[(b, "1")]));

    // A wait that times out changes nothing anywhere.
    let k: &'static [u8] = b"h:timeout";
    assert_eq!(acquire(&mut m, k, a, 60000), None);
    let before = trio.assert_replicas_match(&mut m, &[k], "before timeout");
    let w = spawn_waiter(&trio.master, k, b, 45000, 100);
    let v = w.join().unwrap();
    assert!(matches!(v, Value::Int(t) if t > 0), "timed-out wait replied {v:?}");
    let after = trio.assert_replicas_match(&mut m, &[k], "after timeout");
    assert_eq!(after[k], before[k]);

    let cmds = tap.drain(&mut m);
    assert_plain_effects(&cmds, &["HINCRBY", "PEXPIREAT", "DEL"], "handoffs");
}

/// Effects propagated through the command's own argv (see src/replicate.rs): `PEXPIREAT ... NX`
/// when the key had no TTL, `... XX` when it had one, `DEL k k`, `PUBLISH`; each must leave a
/// replica without the module exactly like the master, including on keys another client made.
#[test]
fn effects_through_the_command_argv_replicate_exactly() {
    let mut master = Server::start_opts(common::scripts::native_opts());
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let tap = Tap::attach(&master);
    let mut m = master.conn();
    let mut r = replica.conn();
    // Each command with the effects it must propagate (`<d>` = an absolute deadline, `<t>` = a
    // token): the forms that fit the command's argv, and RM_Replicate's for the others.
    let acquire = common::scripts::script("acquire").sha;
    let unlock = common::scripts::script("unlock").sha;
    let unlock_r = format!("EVALSHA {unlock} 2 r redisson_lock__channel:{{r}} 0 30000 o PUBLISH");
    let acquire_r = format!("EVALSHA {acquire} 1 r 30000 o");
    let cmds: Vec<(&str, &str)> = vec![
        // Redisson's scripts run natively: 6 slots (acquire), 9 slots (unlock).
        (&acquire_r, "HSET r o 1 o 1 | PEXPIREAT r <d> NX NX NX"),
        (&acquire_r, "HSET r o 2 o 2 | PEXPIREAT r <d> XX XX XX"),
        (&unlock_r, "HINCRBY r o -1 | PEXPIREAT r <d> XX XX XX XX XX XX"),
        (&unlock_r, "DEL r r r r r r r r | PUBLISH redisson_lock__channel:{r} 0"),
        ("LOCK.ACQUIRE new o 40000", "HINCRBY new o 1 | PEXPIREAT new <d> NX"),
        ("LOCK.ACQUIRE new o 50000", "HINCRBY new o 1 | PEXPIREAT new <d> XX"),
        ("HSET foreign o 1", "HSET foreign o 1"), // a lock without TTL, made by someone else
        ("LOCK.ACQUIRE foreign o 60000", "HINCRBY foreign o 1 | PEXPIREAT foreign <d> NX"),
        ("LOCK.RENEW new o 70000", "PEXPIREAT new <d> XX"),
        ("LOCK.RELEASE new o 80000", "HINCRBY new o -1 | PEXPIREAT new <d> XX"),
        ("LOCK.RELEASE new o", "DEL new new | PUBLISH redisson_lock__channel:{new} 0"),
        ("LOCK.FORCERELEASE foreign", "DEL foreign | PUBLISH redisson_lock__channel:{foreign} 0"),
        ("LOCK.ACQUIRE w o 30000 WAIT 10", "HSET w o 1 o 1 | PEXPIREAT w <d> NX NX NX"),
        ("LOCK.ACQUIRE w o 31000 WAIT 10", "HSET w o 2 o 2 | PEXPIREAT w <d> XX XX XX"),
        (
            "LOCK.ACQUIRE w o 32000 FENCE",
            "HINCRBY w o 1 | PEXPIREAT w <d> XX XX | SET redisson_lock_token:{w} <t>",
        ),
        (
            "LOCK.ACQUIRE f o 33000 WAIT 10 FENCE",
            "HINCRBY f o 1 | PEXPIREAT f <d> NX NX NX NX | SET redisson_lock_token:{f} <t>",
        ),
        ("LOCK.RELEASE w o 34000", "HINCRBY w o -1 | PEXPIREAT w <d> XX"),
        ("LOCK.RELEASE w o", "HINCRBY w o -1"),
        ("LOCK.RELEASE w o", "DEL w w | PUBLISH redisson_lock__channel:{w} 0"),
        ("LOCK.FORCERELEASE f", "DEL f | PUBLISH redisson_lock__channel:{f} 0"),
        ("LOCK.ACQUIRE w o 30000 WAIT 10", "HSET w o 1 o 1 | PEXPIREAT w <d> NX NX NX"),
    ];
    check_effects(&tap, &mut m, &mut r, &cmds);
    let ttl: i64 = redis::cmd("PEXPIRETIME").arg("foreign").query(&mut r).unwrap();
    assert_eq!(ttl, -2, "foreign was force-released");
    let exp: i64 = redis::cmd("PEXPIRETIME").arg("w").query(&mut r).unwrap();
    assert!(exp > 0, "w has its lease on the replica");
    master.assert_alive();
}

/// The read-write lock's effects: a new lock's mode and first hold in one HSET, each read hold's
/// timeout key as `SET ... PXAT` (padded with NX / XX like PEXPIREAT), releases as HDEL / DEL
/// of the hash and the hold's key together.
#[test]
fn read_write_lock_effects_replicate_exactly() {
    let master = Server::start();
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let tap = Tap::attach(&master);
    let mut m = master.conn();
    let mut r = replica.conn();
    let cmds: Vec<(&str, &str)> = vec![
        (
            "LOCK.ACQUIRE rw o 30000 READ",
            "HSET rw mode read o 1 | SET {rw}:o:rwlock_timeout:1 1 PXAT <d> | PEXPIREAT rw <d> NX NX",
        ),
        (
            "LOCK.ACQUIRE rw o 40000 WAIT 10 READ",
            "HINCRBY rw o 1 | SET {rw}:o:rwlock_timeout:2 1 PXAT <d> NX NX | PEXPIREAT rw <d> XX XX XX XX",
        ),
        ("LOCK.ACQUIRE rw p 20000 READ", "HINCRBY rw p 1 | SET {rw}:p:rwlock_timeout:1 1 PXAT <d>"),
        ("LOCK.RENEW rw p 50000 READ", "PEXPIREAT {rw}:p:rwlock_timeout:1 <d> XX XX | PEXPIREAT rw <d> XX XX"),
        (
            "LOCK.RELEASE rw o READ",
            "HINCRBY rw o -1 | DEL {rw}:o:rwlock_timeout:2 {rw}:o:rwlock_timeout:2 {rw}:o:rwlock_timeout:2 | PEXPIREAT rw <d> XX",
        ),
        (
            "LOCK.RELEASE rw o READ",
            "HDEL rw o o | DEL {rw}:o:rwlock_timeout:1 {rw}:o:rwlock_timeout:1 {rw}:o:rwlock_timeout:1 | PEXPIREAT rw <d> XX",
        ),
        ("LOCK.RELEASE rw p READ", "DEL rw {rw}:p:rwlock_timeout:1 {rw}:p:rwlock_timeout:1 | PUBLISH redisson_rwlock:{rw} 0"),
        ("LOCK.ACQUIRE rw o 30000 WRITE", "HSET rw mode write o:write 1 | PEXPIREAT rw <d> NX NX"),
        ("LOCK.RELEASE rw o WRITE", "DEL rw rw rw | PUBLISH redisson_rwlock:{rw} 1"),
    ];
    check_effects(&tap, &mut m, &mut r, &cmds);
}

/// Run each command on the master and compare what it propagates (as shapes: `<d>` an absolute
/// deadline, `<t>` a token) with the expected effects, then the replica's keys with the
/// master's.
fn check_effects(tap: &Tap, m: &mut redis::Connection, r: &mut redis::Connection, cmds: &[(&str, &str)]) {
    let shape = |cmd: &[Bytes]| -> String {
        let word = |(i, a): (usize, &Bytes)| {
            let t = String::from_utf8_lossy(a).into_owned();
            match t.parse::<i64>() {
                Ok(n) if n > 1_000_000_000_000_000 => "<t>".to_string(),
                Ok(n) if n > 1_000_000_000_000 && (i == 2 || i == 4) => "<d>".to_string(),
                _ if i == 0 => t.to_ascii_uppercase(),
                _ => t,
            }
        };
        cmd.iter().enumerate().map(word).collect::<Vec<_>>().join(" ")
    };
    for (c, want) in cmds {
        let mut q = redis::Cmd::new();
        for a in c.split(' ') {
            q.arg(a);
        }
        let _: Value = q.query(m).expect("command");
        let got: Vec<String> = tap
            .drain(m)
            .iter()
            .filter(|x| {
                !["MULTI", "EXEC", "SELECT", "PING", "REPLCONF"]
                    .iter()
                    .any(|n| x[0].eq_ignore_ascii_case(n.as_bytes()))
            })
            .filter(|x| !x.get(1).is_some_and(|k| k.starts_with(b"tap-marker-")))
            .map(|x| shape(x))
            .collect();
        assert_eq!(got.join(" | "), *want, "effects of {c}");
        wait_replicas(m, 1, &mut [r]);
        let rw = ["rw", "{rw}:o:rwlock_timeout:1", "{rw}:o:rwlock_timeout:2", "{rw}:p:rwlock_timeout:1"];
        let plain = ["new", "foreign", "w", "f", "r", "redisson_lock_token:{w}", "redisson_lock_token:{f}"];
        for k in plain.iter().chain(rw.iter()) {
            assert_eq!(key_state(r, k.as_bytes()), key_state(m, k.as_bytes()), "{k} after {c:?}");
        }
    }
}

/// With `lock.argv-reuse no` every effect goes through `RM_Replicate` in its plain form (no
/// padding, no NX/XX), and a replica without the module still ends exactly like the master.
#[test]
fn argv_reuse_off_replicates_plain_effects() {
    let mut master = Server::start_opts(common::scripts::native_opts().module_arg("argv-reuse no"));
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let tap = Tap::attach(&master);
    let mut m = master.conn();
    let mut r = replica.conn();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("lock.argv-reuse").query(&mut m).unwrap();
    assert_eq!(got, ["lock.argv-reuse", "no"]);
    let acquire = common::scripts::script("acquire").sha;
    let unlock = common::scripts::script("unlock").sha;
    let unlock_r = format!("EVALSHA {unlock} 2 r redisson_lock__channel:{{r}} 0 30000 o PUBLISH");
    let acquire_r = format!("EVALSHA {acquire} 1 r 30000 o");
    let cmds: Vec<(&str, &str)> = vec![
        (&acquire_r, "HINCRBY r o 1 | PEXPIREAT r <d>"),
        (&acquire_r, "HINCRBY r o 1 | PEXPIREAT r <d>"),
        (&unlock_r, "HINCRBY r o -1 | PEXPIREAT r <d>"),
        (&unlock_r, "DEL r | PUBLISH redisson_lock__channel:{r} 0"),
        ("LOCK.ACQUIRE new o 40000", "HINCRBY new o 1 | PEXPIREAT new <d>"),
        ("LOCK.ACQUIRE new o 50000", "HINCRBY new o 1 | PEXPIREAT new <d>"),
        ("HSET foreign o 1", "HSET foreign o 1"),
        ("LOCK.ACQUIRE foreign o 60000", "HINCRBY foreign o 1 | PEXPIREAT foreign <d>"),
        ("LOCK.RENEW new o 70000", "PEXPIREAT new <d>"),
        ("LOCK.RELEASE new o 80000", "HINCRBY new o -1 | PEXPIREAT new <d>"),
        ("LOCK.RELEASE new o", "DEL new | PUBLISH redisson_lock__channel:{new} 0"),
        ("LOCK.FORCERELEASE foreign", "DEL foreign | PUBLISH redisson_lock__channel:{foreign} 0"),
        ("LOCK.ACQUIRE w o 30000 WAIT 10", "HINCRBY w o 1 | PEXPIREAT w <d>"),
        ("LOCK.ACQUIRE w o 32000 FENCE", "HINCRBY w o 1 | PEXPIREAT w <d> | SET redisson_lock_token:{w} <t>"),
        ("LOCK.RELEASE w o", "HINCRBY w o -1"),
        ("LOCK.RELEASE w o", "DEL w | PUBLISH redisson_lock__channel:{w} 0"),
    ];
    check_effects(&tap, &mut m, &mut r, &cmds);
    // Back on at run time: the padded forms again.
    let _: () = redis::cmd("CONFIG").arg("SET").arg("lock.argv-reuse").arg("yes").query(&mut m).unwrap();
    check_effects(
        &tap,
        &mut m,
        &mut r,
        &[("LOCK.ACQUIRE w o 30000 WAIT 10", "HSET w o 1 o 1 | PEXPIREAT w <d> NX NX NX")],
    );
    master.assert_alive();
}
