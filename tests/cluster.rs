//! Redis Cluster and failover: routing of LOCK.* (the `redis` crate's cluster client, and a
//! hand-rolled MOVED/ASK follower where the redirects themselves are under test), release
//! messages in cluster mode (sharded vs global), slot migration of held locks, waiters whose
//! slot moves away, and failover (plain replication and cluster).

mod common;
use common::*;

use redis::{Cmd, Connection, ErrorKind, RedisResult, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CHANNEL_PREFIX: &str = "redisson_lock__channel";

// ---- slots -----------------------------------------------------------------------------------

fn crc16(b: &[u8]) -> u16 {
    let mut c = 0u16;
    for &x in b {
        c ^= (x as u16) << 8;
        for _ in 0..8 {
            c = if c & 0x8000 != 0 { (c << 1) ^ 0x1021 } else { c << 1 };
        }
    }
    c
}

fn slot(k: &[u8]) -> u16 {
    let h = match k.iter().position(|&c| c == b'{') {
        Some(s) => match k[s + 1..].iter().position(|&c| c == b'}') {
            Some(e) if e > 0 => &k[s + 1..s + 1 + e],
            _ => k,
        },
        None => k,
    };
    crc16(h) & 16383
}

fn channel(key: &str) -> String {
    if key.contains('{') {
        format!("{CHANNEL_PREFIX}:{key}")
    } else {
        format!("{CHANNEL_PREFIX}:{{{key}}}")
    }
}

// ---- reply helpers ---------------------------------------------------------------------------

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn pairs(v: &Value) -> Option<Vec<(Value, Value)>> {
    match v {
        Value::Map(m) => Some(m.clone()),
        Value::Array(a) if a.len() % 2 == 0 => {
            Some(a.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect())
        }
        _ => None,
    }
}

/// LOCK.INFO reply as (owners, pttl, waiters).
#[derive(Debug, PartialEq)]
struct LockInfo {
    owners: BTreeMap<Vec<u8>, i64>,
    pttl: i64,
    waiters: i64,
}

fn lock_info_of(v: &Value) -> LockInfo {
    let mut owners = None;
    let mut pttl = None;
    let mut waiters = None;
    for (k, val) in pairs(v).unwrap_or_else(|| panic!("LOCK.INFO reply is not a map: {v:?}")) {
        match bytes(&k).as_deref() {
            Some(b"owners") => {
                let m = pairs(&val).unwrap_or_else(|| panic!("owners is not a map: {val:?}"));
                owners =
                    Some(m.iter().map(|(o, c)| (bytes(o).expect("owner"), int(c).expect("count"))).collect());
            }
            Some(b"pttl") => pttl = int(&val),
            Some(b"waiters") => waiters = int(&val),
            _ => {}
        }
    }
    LockInfo {
        owners: owners.expect("owners field"),
        pttl: pttl.expect("pttl field"),
        waiters: waiters.expect("waiters field"),
    }
}

fn owners(list: &[(&str, i64)]) -> BTreeMap<Vec<u8>, i64> {
    list.iter().map(|(o, c)| (o.as_bytes().to_vec(), *c)).collect()
}

fn hgetall(con: &mut Connection, key: &str) -> BTreeMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(con).expect("HGETALL")
}

fn pexpiretime(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).expect("PEXPIRETIME")
}

fn acquire(key: &str, owner: &str, lease: i64) -> Cmd {
    let mut c = redis::cmd("LOCK.ACQUIRE");
    c.arg(key).arg(owner).arg(lease);
    c
}

fn release(key: &str, owner: &str) -> Cmd {
    let mut c = redis::cmd("LOCK.RELEASE");
    c.arg(key).arg(owner);
    c
}

fn renew(key: &str, owner: &str, lease: i64) -> Cmd {
    let mut c = redis::cmd("LOCK.RENEW");
    c.arg(key).arg(owner).arg(lease);
    c
}

fn info_cmd(key: &str) -> Cmd {
    let mut c = redis::cmd("LOCK.INFO");
    c.arg(key);
    c
}

// ---- pub/sub ---------------------------------------------------------------------------------

/// A subscribed RESP2 connection read by hand (SUBSCRIBE or SSUBSCRIBE).
struct Sub {
    con: Connection,
    what: String,
}

impl Sub {
    fn new(port: u16, kind: &str, channel: &str) -> Sub {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
        let mut con = client.get_connection_with_timeout(Duration::from_secs(5)).expect("connect subscriber");
        con.set_read_timeout(Some(Duration::from_secs(15))).expect("read timeout");
        con.send_packed_command(&redis::cmd(kind).arg(channel).get_packed_command()).expect("send subscribe");
        let ack = con.recv_response().unwrap_or_else(|e| panic!("{kind} {channel} on {port}: {e}"));
        let parts = match &ack {
            Value::Array(a) => a.clone(),
            other => panic!("{kind} ack is not an array: {other:?}"),
        };
        assert_eq!(bytes(&parts[0]), Some(kind.to_lowercase().into_bytes()), "{kind} ack: {ack:?}");
        Sub { con, what: format!("{kind} {channel} on port {port}") }
    }

    /// The next push (kind, channel, payload); fails the test if none comes within 15 s.
    fn next(&mut self) -> (String, String, String) {
        let v = self.con.recv_response().unwrap_or_else(|e| panic!("{}: no message: {e}", self.what));
        let a = match v {
            Value::Array(a) => a,
            other => panic!("{}: unexpected push {other:?}", self.what),
        };
        let s = |v: &Value| String::from_utf8(bytes(v).unwrap_or_default()).expect("utf8");
        (s(&a[0]), s(&a[1]), a.get(2).map(s).unwrap_or_default())
    }

    /// Nothing was delivered before now: a PING sent now is answered before any later push, and
    /// anything published (on this node) before it would come first.
    fn assert_nothing_yet(&mut self) {
        self.con.send_packed_command(&redis::cmd("PING").get_packed_command()).expect("send PING");
        let got = self.next();
        assert_eq!(got.0, "pong", "{}: expected no message, got {got:?}", self.what);
    }
}

// ---- the cluster -----------------------------------------------------------------------------

/// The result of a command routed through redirects.
struct Routed {
    value: RedisResult<Value>,
    served_by: u16,
    hops: Vec<String>,
}

impl Routed {
    fn ok(self) -> Value {
        match self.value {
            Ok(v) => v,
            Err(e) => panic!("command failed on {} after {:?}: {e}", self.served_by, self.hops),
        }
    }
}

#[derive(Clone, Debug)]
struct NodeLine {
    id: String,
    port: u16,
    master: bool,
    master_id: Option<String>,
    flags: String,
}

fn parse_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let addr = f[1].split('@').next().unwrap();
            let port = addr.rsplit(':').next().unwrap().parse().unwrap_or(0);
            NodeLine {
                id: f[0].to_string(),
                port,
                master: f[2].contains("master"),
                master_id: (f[3] != "-").then(|| f[3].to_string()),
                flags: f[2].to_string(),
            }
        })
        .collect()
}

struct Cluster {
    nodes: Vec<Server>,
    conns: HashMap<u16, Connection>,
    dead: HashSet<u16>,
    /// The redis crate's cluster connection (slot map, MOVED/ASK handled by the client).
    routed: Option<redis::cluster::ClusterConnection>,
}

const CLUSTER_ARGS: &str =
    "--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000";

impl Cluster {
    /// 3 masters + 3 replicas, module on every node, all agreeing and linked.
    fn start() -> Cluster {
        let nodes: Vec<Server> =
            (0..6).map(|_| Server::start_opts(Opts::default().arg(CLUSTER_ARGS))).collect();
        let mut cmd = Command::new("redis-cli");
        cmd.arg("--cluster").arg("create");
        for n in &nodes {
            cmd.arg(format!("127.0.0.1:{}", n.port));
        }
        cmd.args(["--cluster-replicas", "1", "--cluster-yes"]).stdin(Stdio::null());
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn redis-cli --cluster create");
        let status = wait_for(Duration::from_secs(60), || child.try_wait().expect("wait redis-cli"));
        if status.is_none() {
            let _ = child.kill();
        }
        let out = child.wait_with_output().expect("redis-cli output");
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(
            status.is_some_and(|s| s.success()) && text.contains("All 16384 slots covered"),
            "redis-cli --cluster create failed:\n{text}"
        );
        let mut c = Cluster { nodes, conns: HashMap::new(), dead: HashSet::new(), routed: None };
        c.wait_healthy(Duration::from_secs(30), 3);
        c
    }

    fn server(&self, port: u16) -> &Server {
        self.nodes.iter().find(|n| n.port == port).unwrap_or_else(|| panic!("no node on port {port}"))
    }

    fn server_mut(&mut self, port: u16) -> &mut Server {
        self.nodes.iter_mut().find(|n| n.port == port).unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// Every node that was not killed on purpose is still the same process and answers.
    fn assert_all_alive(&mut self) {
        for p in self.alive_ports() {
            self.server_mut(p).assert_alive();
        }
    }

    fn alive_ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).filter(|p| !self.dead.contains(p)).collect()
    }

    /// A cached connection to the node on `port`.
    fn con(&mut self, port: u16) -> &mut Connection {
        if !self.conns.contains_key(&port) {
            let c = self.server(port).conn();
            c.set_read_timeout(Some(Duration::from_secs(15))).expect("read timeout");
            self.conns.insert(port, c);
        }
        self.conns.get_mut(&port).unwrap()
    }

    fn query<T: redis::FromRedisValue>(&mut self, port: u16, cmd: &Cmd) -> T {
        let r = cmd.query(self.con(port));
        r.unwrap_or_else(|e| {
            panic!("{:?} on {port}: {e}", String::from_utf8_lossy(&cmd.get_packed_command()))
        })
    }

    /// Every alive node reports cluster_state:ok, sees `masters` masters and as many replicas,
    /// none failing, and every alive replica's link is up.
    fn wait_healthy(&mut self, limit: Duration, masters: usize) {
        let ports = self.alive_ports();
        let mut last = String::new();
        let ok = wait_for(limit, || {
            for &p in &ports {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(self.con(p)).ok()?;
                if !info.contains("cluster_state:ok") {
                    last = format!("{p}: {info}");
                    return None;
                }
                let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(self.con(p)).ok()?;
                let parsed: Vec<NodeLine> =
                    parse_nodes(&nodes).into_iter().filter(|n| !self.dead.contains(&n.port)).collect();
                let m = parsed.iter().filter(|n| n.master).count();
                let r = parsed.iter().filter(|n| !n.master && n.master_id.is_some()).count();
                if m != masters
                    || r != ports.len() - masters
                    || parsed.iter().any(|n| n.flags.contains("fail") || n.flags.contains("handshake"))
                {
                    last = format!("{p}: {nodes}");
                    return None;
                }
                let repl: String = redis::cmd("INFO").arg("replication").query(self.con(p)).ok()?;
                if repl.contains("role:slave") && !repl.contains("master_link_status:up") {
                    last = format!("{p}: {repl}");
                    return None;
                }
            }
            Some(())
        });
        assert!(ok.is_some(), "cluster not healthy within {limit:?}; last: {last}");
    }

    fn nodes_view(&mut self, port: u16) -> Vec<NodeLine> {
        let text: String = self.query(port, redis::cmd("CLUSTER").arg("NODES"));
        parse_nodes(&text)
    }

    fn id_of(&mut self, port: u16) -> String {
        self.query(port, redis::cmd("CLUSTER").arg("MYID"))
    }

    /// The master serving `slot`, per CLUSTER SLOTS asked to `ask_port`.
    fn owner_of(&mut self, ask_port: u16, slot: u16) -> u16 {
        let v: Value = self.query(ask_port, redis::cmd("CLUSTER").arg("SLOTS"));
        let Value::Array(ranges) = v else { panic!("CLUSTER SLOTS: {v:?}") };
        for r in ranges {
            let Value::Array(r) = r else { continue };
            let (lo, hi) = (int(&r[0]).unwrap(), int(&r[1]).unwrap());
            if (lo..=hi).contains(&(slot as i64)) {
                let Value::Array(m) = &r[2] else { panic!("CLUSTER SLOTS master entry") };
                return int(&m[1]).unwrap() as u16;
            }
        }
        panic!("slot {slot} not covered per {ask_port}");
    }

    fn masters(&mut self) -> Vec<u16> {
        let p = self.alive_ports()[0];
        let mut v: Vec<u16> = self
            .nodes_view(p)
            .into_iter()
            .filter(|n| n.master && !self.dead.contains(&n.port))
            .map(|n| n.port)
            .collect();
        v.sort();
        v
    }

    fn replica_of(&mut self, master_port: u16) -> u16 {
        let view = self.nodes_view(master_port);
        let mid = view.iter().find(|n| n.port == master_port).unwrap().id.clone();
        view.iter()
            .find(|n| n.master_id.as_deref() == Some(mid.as_str()) && !self.dead.contains(&n.port))
            .unwrap_or_else(|| panic!("no replica of {master_port}"))
            .port
    }

    /// Send `cmd` to `start`, following MOVED (retry there) and ASK (ASKING, then the command).
    fn send_from(&mut self, start: u16, cmd: &Cmd) -> Routed {
        let mut port = start;
        let mut asking = false;
        let mut hops = Vec::new();
        for _ in 0..8 {
            let con = self.con(port);
            if asking {
                let _: () = redis::cmd("ASKING").query(con).expect("ASKING");
            }
            let r: RedisResult<Value> = cmd.query(con);
            match &r {
                Err(e) if matches!(e.kind(), ErrorKind::Moved | ErrorKind::Ask) => {
                    let (addr, _) = e.redirect_node().expect("redirect target");
                    hops.push(format!("{} {addr}", e.code().unwrap_or("?")));
                    asking = e.kind() == ErrorKind::Ask;
                    port = addr.rsplit(':').next().unwrap().parse().expect("redirect port");
                }
                Err(e) if e.is_io_error() => {
                    self.conns.remove(&port);
                    return Routed { value: r, served_by: port, hops };
                }
                _ => return Routed { value: r, served_by: port, hops },
            }
        }
        panic!("too many redirects: {hops:?}");
    }

    /// Run `cmd` through the redis crate's cluster client: it routes by the key (the first
    /// argument of a LOCK.* command) and follows MOVED/ASK itself.
    fn routed(&mut self, cmd: &Cmd) -> Value {
        if self.routed.is_none() {
            let nodes: Vec<String> =
                self.alive_ports().iter().map(|p| format!("redis://127.0.0.1:{p}/")).collect();
            let client = redis::cluster::ClusterClient::builder(nodes)
                .response_timeout(Duration::from_secs(15))
                .build()
                .expect("cluster client");
            self.routed = Some(client.get_connection().expect("cluster connection"));
        }
        let con = self.routed.as_mut().expect("cluster connection");
        cmd.query(con).unwrap_or_else(|e| panic!("cluster client: {e}"))
    }

    /// Send `cmd` to a random alive node and follow redirects.
    fn send(&mut self, cmd: &Cmd) -> Routed {
        use rand::seq::SliceRandom;
        let start = *self.alive_ports().choose(&mut rand::thread_rng()).unwrap();
        self.send_from(start, cmd)
    }

    fn kill(&mut self, port: u16) {
        self.conns.remove(&port);
        self.routed = None;
        self.dead.insert(port);
        self.server_mut(port).kill();
    }
}

// ---- tests -----------------------------------------------------------------------------------

#[test]
fn slot_function_matches_server() {
    let mut c = Cluster::start();
    let p = c.nodes[0].port;
    for k in ["123456789", "foo", "bar", "{mig}a", "x{y}z", "route-lock-17", "{}a", "a{}b{c}"] {
        let s: u16 = c.query(p, redis::cmd("CLUSTER").arg("KEYSLOT").arg(k));
        assert_eq!(slot(k.as_bytes()), s, "slot of {k}");
        // A key with a `{` but no valid hash tag ("{}a") gets a channel in another slot, as in
        // Redisson; every other key's channel shares its slot.
        let valid_tag = k.find('{').is_some_and(|o| k[o + 1..].find('}').is_some_and(|e| e > 0));
        if valid_tag || !k.contains('{') {
            let cs: u16 = c.query(p, redis::cmd("CLUSTER").arg("KEYSLOT").arg(channel(k)));
            assert_eq!(cs, s, "the release channel of {k} is in the key's slot");
        }
    }

    // Many keys across slots: every command is routed by MOVED to the slot's master.
    let masters = c.masters();
    assert_eq!(masters.len(), 3);
    let mut served: HashMap<u16, usize> = HashMap::new();
    let mut moved = 0usize;
    let mut slots = HashSet::new();
    for i in 0..300 {
        let key = format!("route-lock-{i}");
        let (o1, o2) = (format!("owner-a-{i}:1"), format!("owner-b-{i}:7"));
        let s = slot(key.as_bytes());
        slots.insert(s);
        let owner_port = c.owner_of(p, s);

        let r = c.send(&acquire(&key, &o1, 30000));
        assert_eq!(r.served_by, owner_port, "{key}: served by the slot owner, hops {:?}", r.hops);
        assert!(r.hops.iter().all(|h| h == &format!("MOVED 127.0.0.1:{owner_port}")), "{:?}", r.hops);
        moved += r.hops.len();
        *served.entry(r.served_by).or_default() += 1;
        assert_eq!(r.ok(), Value::Nil, "{key}: new lock");

        let r = c.send(&acquire(&key, &o2, 30000));
        assert_eq!(r.served_by, owner_port);
        let pttl = int(&r.ok()).expect("contended reply is the PTTL");
        assert!(pttl > 0 && pttl <= 30000, "{key}: pttl {pttl}");

        assert_eq!(c.routed(&acquire(&key, &o1, 30000)), Value::Nil, "{key}: reentry");
        assert_eq!(c.routed(&renew(&key, &o1, 40000)), Value::Int(1), "{key}: renew by owner");
        assert_eq!(c.routed(&renew(&key, &o2, 40000)), Value::Int(0), "{key}: renew by other");

        let r = c.send(&info_cmd(&key));
        assert_eq!(r.served_by, owner_port);
        let info = lock_info_of(&r.ok());
        assert_eq!(info.owners, owners(&[(&o1, 2)]), "{key}");
        assert!(info.pttl > 30000 && info.pttl <= 40000, "{key}: pttl {}", info.pttl);
        assert_eq!(info.waiters, 0);

        assert_eq!(c.routed(&release(&key, &o2)), Value::Nil, "{key}: release by non-owner");
        assert_eq!(c.routed(&release(&key, &o1)), Value::Int(0), "{key}: partial release");
        let r = c.send(&release(&key, &o1));
        assert_eq!(r.served_by, owner_port);
        assert_eq!(r.ok(), Value::Int(1), "{key}: full release");
        assert_eq!(c.routed(&release(&key, &o1)), Value::Nil, "{key}: release of a free lock");
        assert_eq!(c.routed(&info_cmd(&key)), Value::Nil, "{key}: LOCK.INFO of a free lock");
        let exists: i64 = c.query(owner_port, redis::cmd("EXISTS").arg(&key));
        assert_eq!(exists, 0);
    }
    assert!(slots.len() > 250, "keys spread over {} slots", slots.len());
    assert_eq!(served.len(), 3, "every master served keys: {served:?}");
    assert!(moved > 100, "commands were redirected with MOVED ({moved} times)");
    c.assert_all_alive();
}

#[test]
fn release_message_sharded_by_default_global_when_configured() {
    let mut c = Cluster::start();
    let key = "pubsub-lock";
    let ch = channel(key);
    let s = slot(key.as_bytes());
    let p0 = c.nodes[0].port;
    let master = c.owner_of(p0, s);
    let replica = c.replica_of(master);
    let other = *c.masters().iter().find(|&&m| m != master).unwrap();

    let mut ssub_m = Sub::new(master, "SSUBSCRIBE", &ch);
    let mut ssub_r = Sub::new(replica, "SSUBSCRIBE", &ch);
    let mut sub_m = Sub::new(master, "SUBSCRIBE", &ch);
    let mut sub_o = Sub::new(other, "SUBSCRIBE", &ch);

    // auto (default) in cluster mode: sharded publish.
    let mode: Vec<String> = c.query(master, redis::cmd("CONFIG").arg("GET").arg("lock.publish-mode"));
    assert_eq!(mode, vec!["lock.publish-mode".to_string(), "auto".into()]);
    assert_eq!(c.routed(&acquire(key, "o:1", 30000)), Value::Nil);
    assert_eq!(c.routed(&acquire(key, "o:1", 30000)), Value::Nil);
    assert_eq!(c.routed(&release(key, "o:1")), Value::Int(0));
    ssub_m.assert_nothing_yet(); // a partial release publishes nothing
    assert_eq!(c.routed(&release(key, "o:1")), Value::Int(1));
    assert_eq!(ssub_m.next(), ("smessage".into(), ch.clone(), "0".into()), "SSUBSCRIBE on the shard master");
    assert_eq!(ssub_r.next(), ("smessage".into(), ch.clone(), "0".into()), "SSUBSCRIBE on the shard replica");
    sub_m.assert_nothing_yet(); // no classic PUBLISH in auto mode on a cluster
    ssub_m.assert_nothing_yet(); // exactly one message

    // global: classic PUBLISH, which the cluster bus broadcasts to every node.
    for p in c.alive_ports() {
        let _: () = c.query(p, redis::cmd("CONFIG").arg("SET").arg("lock.publish-mode").arg("global"));
    }
    assert_eq!(c.routed(&acquire(key, "o:2", 30000)), Value::Nil);
    assert_eq!(c.routed(&release(key, "o:2")), Value::Int(1));
    assert_eq!(sub_m.next(), ("message".into(), ch.clone(), "0".into()), "SUBSCRIBE on the shard master");
    // Global mode does not use sharded publish.
    ssub_m.assert_nothing_yet();
    // Markers published after the release travel the same links in order: if the auto-mode
    // release had leaked to classic subscribers elsewhere, or the global one to sharded
    // subscribers, an extra "0" would come before the marker.
    let _: i64 = c.query(master, redis::cmd("PUBLISH").arg(&ch).arg("end"));
    let _: i64 = c.query(master, redis::cmd("SPUBLISH").arg(&ch).arg("end"));
    assert_eq!(sub_o.next(), ("message".into(), ch.clone(), "0".into()), "SUBSCRIBE on another shard");
    assert_eq!(sub_o.next(), ("message".into(), ch.clone(), "end".into()), "one message on another shard");
    assert_eq!(
        ssub_r.next(),
        ("smessage".into(), ch.clone(), "end".into()),
        "nothing sharded in global mode"
    );
    assert_eq!(sub_m.next(), ("message".into(), ch.clone(), "end".into()));
    assert_eq!(ssub_m.next(), ("smessage".into(), ch.clone(), "end".into()));
}

fn setslot(c: &mut Cluster, port: u16, slot: u16, how: &str, id: &str) -> RedisResult<()> {
    redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg(how).arg(id).query(c.con(port))
}

fn migrate(c: &mut Cluster, from: u16, to: u16, keys: &[&str]) {
    let mut m = redis::cmd("MIGRATE");
    m.arg("127.0.0.1").arg(to).arg("").arg(0).arg(5000).arg("KEYS");
    for k in keys {
        m.arg(*k);
    }
    let r: String = c.query(from, &m);
    assert_eq!(r, "OK", "MIGRATE {keys:?}");
}

#[test]
fn slot_migration_keeps_locks_and_routes_with_ask() {
    let mut c = Cluster::start();
    let keys = ["{mig}a", "{mig}b", "{mig}c"];
    let s = slot(b"{mig}");
    let p0 = c.nodes[0].port;
    let source = c.owner_of(p0, s);
    let masters = c.masters();
    let target = *masters.iter().find(|&&m| m != source).unwrap();
    let third = *masters.iter().find(|&&m| m != source && m != target).unwrap();
    let (source_id, target_id) = (c.id_of(source), c.id_of(target));

    assert_eq!(c.routed(&acquire(keys[0], "alice:1", 60000)), Value::Nil);
    assert_eq!(c.routed(&acquire(keys[1], "bob:1", 50000)), Value::Nil);
    for _ in 0..3 {
        assert_eq!(c.routed(&acquire(keys[1], "bob:1", 70000)), Value::Nil);
    }
    assert_eq!(c.routed(&acquire(keys[2], "carol:2", 80000)), Value::Nil);

    // Open the migration and move a and b; c stays on the source for now.
    setslot(&mut c, target, s, "IMPORTING", &source_id).expect("IMPORTING");
    setslot(&mut c, source, s, "MIGRATING", &target_id).expect("MIGRATING");
    let before_ab: Vec<_> =
        keys[..2].iter().map(|k| (hgetall(c.con(source), k), pexpiretime(c.con(source), k))).collect();
    migrate(&mut c, source, target, &keys[..2]);

    // A moved key asked at the source: ASK, then ASKING + the command works at the target.
    let r = c.send_from(source, &info_cmd(keys[0]));
    assert_eq!(r.hops, vec![format!("ASK 127.0.0.1:{target}")]);
    assert_eq!(r.served_by, target);
    let info = lock_info_of(&r.ok());
    assert_eq!(info.owners, owners(&[("alice:1", 1)]));
    // Without ASKING the target still redirects to the slot's owner.
    let e = info_cmd(keys[0]).query::<Value>(c.con(target)).expect_err("no ASKING: MOVED");
    assert_eq!(e.kind(), ErrorKind::Moved, "{e}");
    // A write to a key absent from the source is ASKed to the target and done there.
    let r = c.send_from(source, &acquire("{mig}new", "dave:1", 90000));
    assert_eq!(r.hops, vec![format!("ASK 127.0.0.1:{target}")]);
    assert_eq!(r.ok(), Value::Nil);
    // A key still on the source is served there, no redirect.
    let r = c.send_from(source, &acquire(keys[2], "carol:2", 80000));
    assert!(r.hops.is_empty(), "{:?}", r.hops);
    assert_eq!(r.served_by, source);
    assert_eq!(r.ok(), Value::Nil);
    let before_c = (hgetall(c.con(source), keys[2]), pexpiretime(c.con(source), keys[2]));
    migrate(&mut c, source, target, &keys[2..]);
    let left: i64 = c.query(source, redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(s));
    assert_eq!(left, 0);

    for p in [target, source, third] {
        setslot(&mut c, p, s, "NODE", &target_id).unwrap_or_else(|e| panic!("SETSLOT NODE on {p}: {e}"));
    }

    // Same owners, counts and deadlines on the target. MIGRATE sends a relative TTL that RESTORE
    // adds to its own clock, so the deadline can only move later by the transfer time.
    let mut before = before_ab;
    before.push(before_c);
    for (k, (h, pt)) in keys.iter().zip(&before) {
        assert_eq!(&hgetall(c.con(target), k), h, "{k}: hash after migration");
        let after = pexpiretime(c.con(target), k);
        assert!(after >= *pt && after - pt < 2000, "{k}: PEXPIRETIME {pt} before, {after} after migration");
    }
    assert_eq!(before[0].0, BTreeMap::from([("alice:1".to_string(), "1".to_string())]));
    assert_eq!(before[1].0, BTreeMap::from([("bob:1".to_string(), "4".to_string())]));
    assert_eq!(before[2].0, BTreeMap::from([("carol:2".to_string(), "2".to_string())]));

    // Routed commands now go to the target via MOVED and behave as before the move.
    let r = c.send_from(source, &info_cmd(keys[1]));
    assert_eq!(r.hops, vec![format!("MOVED 127.0.0.1:{target}")]);
    assert_eq!(lock_info_of(&r.ok()).owners, owners(&[("bob:1", 4)]));
    let r = c.send_from(source, &release(keys[1], "bob:1"));
    assert_eq!(r.hops, vec![format!("MOVED 127.0.0.1:{target}")]);
    assert_eq!(r.ok(), Value::Int(0));
    assert_eq!(c.routed(&release(keys[1], "alice:1")), Value::Nil);
    assert_eq!(c.routed(&renew(keys[0], "alice:1", 60000)), Value::Int(1));
    let pttl = int(&c.routed(&acquire(keys[0], "bob:1", 60000))).expect("contended: PTTL");
    assert!(pttl > 0 && pttl <= 60000, "pttl {pttl}");
    let mut sub = Sub::new(target, "SSUBSCRIBE", &channel(keys[0]));
    let r = c.send_from(source, &release(keys[0], "alice:1"));
    assert_eq!(r.served_by, target);
    assert_eq!(r.ok(), Value::Int(1));
    assert_eq!(sub.next(), ("smessage".into(), channel(keys[0]), "0".into()));
    assert_eq!(c.routed(&release(keys[2], "carol:2")), Value::Int(0));
    assert_eq!(c.routed(&release(keys[2], "carol:2")), Value::Int(1));
    assert_eq!(c.routed(&release("{mig}new", "dave:1")), Value::Int(1));
    c.assert_all_alive();
}

/// What a blocked waiter got, and when.
type WaiterResult = (Result<Value, String>, Duration);

fn spawn_waiter(port: u16, key: &str, owner: &str, lease: i64, wait_ms: i64) -> mpsc::Receiver<WaiterResult> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut con = client.get_connection_with_timeout(Duration::from_secs(5)).expect("waiter connection");
    con.set_read_timeout(Some(Duration::from_secs(40))).expect("read timeout");
    let mut cmd = acquire(key, owner, lease);
    cmd.arg("WAIT").arg(wait_ms);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let t = Instant::now();
        let r: RedisResult<Value> = cmd.query(&mut con);
        let _ = tx.send((r.map_err(|e| e.to_string()), t.elapsed()));
        // keep the connection open until the test has looked at the server
        std::thread::sleep(Duration::from_secs(2));
    });
    rx
}

#[test]
fn waiter_on_a_migrating_slot_is_never_granted_on_the_old_node() {
    let mut c = Cluster::start();
    let key = "{wm}lock";
    let s = slot(key.as_bytes());
    let p0 = c.nodes[0].port;
    let source = c.owner_of(p0, s);
    let masters = c.masters();
    let target = *masters.iter().find(|&&m| m != source).unwrap();
    let third = *masters.iter().find(|&&m| m != source && m != target).unwrap();
    let (source_id, target_id) = (c.id_of(source), c.id_of(target));

    assert_eq!(c.routed(&acquire(key, "holder:1", 60000)), Value::Nil);
    let rx = spawn_waiter(source, key, "waiter:1", 30000, 8000);
    let queued = wait_for(Duration::from_secs(10), || {
        let v: Value = info_cmd(key).query(c.con(source)).ok()?;
        (lock_info_of(&v).waiters == 1).then_some(())
    });
    assert!(queued.is_some(), "the waiter blocked on the source");

    setslot(&mut c, target, s, "IMPORTING", &source_id).expect("IMPORTING");
    setslot(&mut c, source, s, "MIGRATING", &target_id).expect("MIGRATING");
    let before = (hgetall(c.con(source), key), pexpiretime(c.con(source), key));
    migrate(&mut c, source, target, &[key]);
    // MIGRATE deleted the key on the source: a "del" event the module reacts to within one
    // event-loop iteration. Give it a round trip, then look at the source's slot.
    let _: String = c.query(source, &redis::cmd("PING"));
    let _: String = c.query(source, &redis::cmd("PING"));
    let left_while_migrating: i64 = c.query(source, redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(s));
    // For the report only (no timing assertion): did the waiter hear back before the slot's
    // ownership changed?
    let early = rx.try_recv().ok();
    let replied_before_setslot_node = early.is_some();

    let mut setslot_errors = Vec::new();
    for p in [target, source, third] {
        if let Err(e) = setslot(&mut c, p, s, "NODE", &target_id) {
            setslot_errors.push(format!("SETSLOT NODE on {p}: {e}"));
        }
    }
    let on_target = (hgetall(c.con(target), key), pexpiretime(c.con(target), key));
    let r = c.send(&release(key, "holder:1"));
    let release_served_by = r.served_by;
    let release_reply = r.value.map_err(|e| e.to_string());

    let got =
        early.ok_or(mpsc::RecvTimeoutError::Timeout).or_else(|_| rx.recv_timeout(Duration::from_secs(20)));
    let left_after: i64 = c.query(source, redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(s));
    let granted_on_source = stat(c.con(source), "waits_granted");
    let waiters_on_source = stat(c.con(source), "waiters");
    let exists_on_target: i64 = c.query(target, redis::cmd("EXISTS").arg(key));
    eprintln!(
        "waiter on a migrated slot: reply {got:?} (before SETSLOT NODE: {replied_before_setslot_node}); keys left in slot on source while migrating \
         {left_while_migrating}, after {left_after}; waits_granted on source {granted_on_source}; \
         waiters on source {waiters_on_source}; SETSLOT errors {setslot_errors:?}; target state \
         {on_target:?} (before {before:?}); release on {release_served_by}: {release_reply:?}; \
         key exists on target after release: {exists_on_target}"
    );

    let (reply, took) = got.expect("the waiter got a reply within the bound");
    assert_ne!(
        reply,
        Ok(Value::Nil),
        "the waiter was granted the lock on the node that no longer owns the slot"
    );
    assert!(took < Duration::from_secs(15), "reply after {took:?}");
    // The module tells the waiter at once that the slot moved (README: waiters get TRYAGAIN).
    match &reply {
        Err(e) => assert!(e.to_uppercase().contains("TRYAGAIN"), "waiter error: {e}"),
        Ok(v) => panic!("the waiter should get TRYAGAIN, got {v:?}"),
    }
    assert!(took < Duration::from_secs(5), "TRYAGAIN after {took:?}, not at once");
    assert_eq!(left_while_migrating, 0, "the source recreated the migrated lock");
    assert_eq!(left_after, 0, "the source holds keys of a slot it gave away");
    assert_eq!(granted_on_source, 0, "waits_granted on the source");
    assert_eq!(waiters_on_source, 0, "no waiter left on the source");
    assert!(setslot_errors.is_empty(), "{setslot_errors:?}");
    assert_eq!(on_target.0, before.0, "the holder's lock moved intact");
    assert_eq!(release_served_by, target);
    assert_eq!(release_reply, Ok(Value::Int(1)));
    assert_eq!(exists_on_target, 0);
    c.assert_all_alive();
}

#[test]
fn cluster_failover_keeps_locks() {
    let mut c = Cluster::start();
    let key = "failover-lock";
    let s = slot(key.as_bytes());
    let p0 = c.nodes[0].port;
    let master = c.owner_of(p0, s);
    let replica = c.replica_of(master);

    assert_eq!(c.routed(&acquire(key, "o:1", 60000)), Value::Nil);
    assert_eq!(c.routed(&acquire(key, "o:1", 60000)), Value::Nil);
    // The writes went through the cluster client's connection, and WAIT only covers the calling
    // connection's own writes: wait for the replica's offset to reach the master's instead.
    let mut m = c.server(master).conn();
    let caught_up = replica_caught_up(&mut m, c.con(replica), Duration::from_secs(10));
    assert!(caught_up, "the replica reached the master's offset");
    let h = hgetall(c.con(master), key);
    let pt = pexpiretime(c.con(master), key);
    assert_eq!(h, BTreeMap::from([("o:1".to_string(), "2".to_string())]));

    c.kill(master);
    let others: Vec<u16> = c.alive_ports();
    let mut last = String::new();
    let promoted = wait_for(Duration::from_secs(30), || {
        let repl: String = redis::cmd("INFO").arg("replication").query(c.con(replica)).ok()?;
        if !repl.contains("role:master") {
            last = repl;
            return None;
        }
        for &p in &others {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(c.con(p)).ok()?;
            if !info.contains("cluster_state:ok") {
                last = format!("{p}: {info}");
                return None;
            }
        }
        Some(())
    });
    assert!(promoted.is_some(), "replica {replica} not promoted within 30 s: {last}");
    let owners_seen = wait_for(Duration::from_secs(10), || {
        let all = others.clone().into_iter().all(|p| c.owner_of(p, s) == replica);
        all.then_some(())
    });
    assert!(owners_seen.is_some(), "every node routes the slot to the promoted replica");

    assert_eq!(hgetall(c.con(replica), key), h, "owner and count after failover");
    assert_eq!(pexpiretime(c.con(replica), key), pt, "deadline after failover");
    let r = c.send(&info_cmd(key));
    assert_eq!(r.served_by, replica);
    assert_eq!(lock_info_of(&r.ok()).owners, owners(&[("o:1", 2)]));
    let pttl = int(&c.routed(&acquire(key, "other:1", 60000))).expect("contended");
    assert!(pttl > 0 && pttl <= 60000);
    assert_eq!(c.routed(&renew(key, "o:1", 45000)), Value::Int(1));
    assert_eq!(c.routed(&release(key, "o:1")), Value::Int(0));
    let mut sub = Sub::new(replica, "SSUBSCRIBE", &channel(key));
    let r = c.send(&release(key, "o:1"));
    assert_eq!(r.served_by, replica);
    assert_eq!(r.ok(), Value::Int(1));
    assert_eq!(sub.next(), ("smessage".into(), channel(key), "0".into()));
    assert_eq!(c.routed(&acquire(key, "other:1", 60000)), Value::Nil);
    c.server_mut(replica).assert_alive();
}

#[test]
fn replica_promoted_with_replicaof_no_one_keeps_locks() {
    let mut master = Server::start();
    let replica = Server::start();
    replica.replicate_from(&master);
    let mut m = master.conn();
    let key = "promote-lock";
    assert_eq!(acquire(key, "uuid-1:42", 60000).query::<Value>(&mut m).unwrap(), Value::Nil);
    assert_eq!(acquire(key, "uuid-1:42", 60000).query::<Value>(&mut m).unwrap(), Value::Nil);
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(1000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let h = hgetall(&mut m, key);
    let pt = pexpiretime(&mut m, key);
    assert_eq!(h, BTreeMap::from([("uuid-1:42".to_string(), "2".to_string())]));

    master.kill();
    let mut r = replica.conn();
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut r).unwrap();
    let repl: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
    assert!(repl.contains("role:master"), "{repl}");

    assert_eq!(hgetall(&mut r, key), h, "owner and count on the promoted replica");
    assert_eq!(pexpiretime(&mut r, key), pt, "the same absolute deadline");
    let info = lock_info_of(&info_cmd(key).query::<Value>(&mut r).unwrap());
    assert_eq!(info.owners, owners(&[("uuid-1:42", 2)]));
    assert_eq!(info.waiters, 0);

    assert_eq!(renew(key, "uuid-1:42", 30000).query::<Value>(&mut r).unwrap(), Value::Int(1));
    let pt2 = pexpiretime(&mut r, key);
    assert!(pt2 < pt, "renewed to a shorter lease: {pt2} vs {pt}");
    assert_eq!(renew(key, "someone:1", 30000).query::<Value>(&mut r).unwrap(), Value::Int(0));
    assert_eq!(release(key, "uuid-1:42").query::<Value>(&mut r).unwrap(), Value::Int(0));
    assert_eq!(hgetall(&mut r, key), BTreeMap::from([("uuid-1:42".to_string(), "1".to_string())]));
    assert_eq!(pexpiretime(&mut r, key), pt2, "partial release keeps the TTL");

    let mut sub = Sub::new(replica.port, "SUBSCRIBE", &channel(key));
    assert_eq!(release(key, "uuid-1:42").query::<Value>(&mut r).unwrap(), Value::Int(1));
    assert_eq!(sub.next(), ("message".into(), channel(key), "0".into()));
    let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut r).unwrap();
    assert_eq!(exists, 0);
    assert_eq!(release(key, "uuid-1:42").query::<Value>(&mut r).unwrap(), Value::Nil);
    assert_eq!(acquire(key, "uuid-2:1", 10000).query::<Value>(&mut r).unwrap(), Value::Nil);
}
