//! Spec section 9, no input or configuration stops the server: every server command the module
//! runs itself (`RM_Call`) may be renamed or disabled by the operator (`rename-command`, a common
//! hardening step), and the module then still loads and answers every command, correctly where
//! it can do without that command. In a cluster, a lock name whose token key is on another node
//! is answered without asking that node.

mod common;
use common::resp::{Conn, R};
use common::scripts::{native_opts, script};
use common::waiters::{blocked_acquire as waiter, lock_stat, wait_for_waiters};
use common::*;
use std::time::{Duration, Instant};

/// Redisson's acquire script (research/redisson-sha1.md): runs natively without SCRIPT LOAD.
const ACQUIRE: &str = "dad0f8d619e548e04f21fb48d50be5034df3adae";

/// Every command the module runs with `RM_Call` now (ACL GETUSER, COMMAND INFO, GET, SETRANGE,
/// EVAL, EVALSHA) or did before (MEMORY USAGE, CLUSTER NODES).
const CALLED: [&str; 8] = ["ACL", "COMMAND", "GET", "SETRANGE", "EVAL", "EVALSHA", "MEMORY", "CLUSTER"];

fn a(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn call(c: &mut Conn, args: &[&str]) -> R {
    c.call(&args.iter().map(|s| a(s)).collect::<Vec<_>>())
}

/// A field of a LOCK.INFO reply (RESP2: a flat array of name, value pairs).
fn info_field(r: &R, name: &str) -> R {
    let a = r.arr();
    a.chunks(2)
        .find(|p| p[0].bytes() == name.as_bytes())
        .map(|p| p[1].clone())
        .unwrap_or_else(|| panic!("no {name} in {r:?}"))
}

fn renamed(name: &str, to: &str) -> Opts {
    let mut o = native_opts();
    o.args.extend([String::from("--rename-command"), name.to_string(), to.to_string()]);
    o
}

/// Everything the module does that runs a server command, on a server where `name` is
/// renamed to `to` (`""`: disabled). The server must stay up, and the module answer correctly.
fn exercise(name: &str, to: &str) {
    let what = format!("rename-command {name} {to:?}");
    let mut s = Server::start_opts(renamed(name, to));
    let mut c = Conn::new(s.port);
    c.set_timeout(Duration::from_secs(5));
    let evalsha_runs = name != "EVALSHA";

    // FENCE (token key checks), then LOCK.INFO (reads the token).
    let r = call(&mut c, &["LOCK.ACQUIRE", "k", "o", "60000", "FENCE"]);
    let token = match r.arr() {
        [R::Int(-1), R::Int(t)] if *t > 0 => *t,
        other => panic!("{what}: FENCE acquire: {other:?}"),
    };
    let info = call(&mut c, &["LOCK.INFO", "k"]);
    assert_eq!(info_field(&info, "token"), R::Int(token), "{what}: LOCK.INFO token");

    // A natively run Redisson acquire (ACL and write checks on the way).
    let r = call(&mut c, &["EVALSHA", ACQUIRE, "1", "r", "30000", "java:1"]);
    if evalsha_runs {
        assert_eq!(r, R::Nil, "{what}: native acquire");
        assert_eq!(call(&mut c, &["HGET", "r", "java:1"]), R::Bulk(a("1")), "{what}");
        assert!(lock_stat(&mut c, "redisson_acquire_native") >= 1, "{what}: ran natively");
    } else {
        assert!(r.is_err(), "{what}: a disabled EVALSHA stays disabled: {r:?}");
        assert_eq!(call(&mut c, &["EXISTS", "r"]), R::Int(0), "{what}");
    }
    // EVAL of one of our scripts, registered with lock.redisson-extra-scripts.
    let own = script("acquire");
    let r = c.call(&[a("EVAL"), own.body.to_vec(), a("1"), a("r2"), a("30000"), a("o")]);
    if name == "EVAL" {
        assert!(r.is_err(), "{what}: a disabled EVAL stays disabled: {r:?}");
    } else {
        assert_eq!(r, R::Nil, "{what}: EVAL");
    }

    // Grants after DEL and after expiry (the paths that used MEMORY USAGE and, on 7.2+, the
    // waiting user's ACL).
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "w", "holder", "60000"]), R::Nil);
    let mut w1 = waiter(s.port, "w", "w1", "0");
    wait_for_waiters(&mut c, 1);
    assert_eq!(call(&mut c, &["DEL", "w"]), R::Int(1));
    assert_eq!(w1.read().expect("grant after DEL"), R::Nil, "{what}: granted after DEL");
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "e", "holder", "150"]), R::Nil);
    let mut w2 = waiter(s.port, "e", "w2", "5000");
    let t = Instant::now();
    assert_eq!(w2.read().expect("grant after expiry"), R::Nil, "{what}: granted after expiry");
    assert!(t.elapsed() < Duration::from_secs(2), "{what}: expiry grant took {:?}", t.elapsed());

    // Write refusals are still seen (the probe that asks the server).
    assert_eq!(call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]), R::Simple("OK".into()));
    if evalsha_runs {
        let r = call(&mut c, &["EVALSHA", ACQUIRE, "1", "refused", "30000", "java:1"]);
        assert!(r.err().starts_with("NOREPLICAS"), "{what}: native write refused: {r:?}");
        assert_eq!(call(&mut c, &["EXISTS", "refused"]), R::Int(0), "{what}");
    }
    assert_eq!(call(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "0"]), R::Simple("OK".into()));

    assert_eq!(call(&mut c, &["PING"]), R::Simple("PONG".into()));
    assert_eq!(lock_stat(&mut c, "panics_caught"), 0, "{what}");
    s.assert_alive();
}

#[test]
fn every_command_the_module_calls_may_be_renamed_or_disabled() {
    for name in CALLED {
        exercise(name, "");
        exercise(name, &format!("{name}_renamed"));
    }
}

/// The switch to `native` at run time reads which EVAL names the server resolves; with
/// COMMAND renamed it asks EVAL and EVALSHA themselves.
#[test]
fn native_at_run_time_without_the_command_command() {
    for (name, to) in [("COMMAND", ""), ("EVALSHA", ""), ("COMMAND", "cmd_x")] {
        let mut o = Opts::default();
        o.args.extend(["--rename-command", name, to].map(String::from));
        if to.is_empty() && name == "EVALSHA" {
            o.args.extend(["--rename-command", "COMMAND", ""].map(String::from));
        }
        let s = Server::start_opts(o);
        let mut c = Conn::new(s.port);
        let ok = call(&mut c, &["CONFIG", "SET", "lock.redisson-scripts", "native"]);
        assert_eq!(ok, R::Simple("OK".into()), "{name} {to:?}");
        let r = call(&mut c, &["EVALSHA", ACQUIRE, "1", "r", "30000", "java:1"]);
        if name == "EVALSHA" {
            assert!(r.is_err(), "a disabled EVALSHA stays disabled: {r:?}");
            let r = call(&mut c, &["LOCK.REDISSON", ACQUIRE, "1", "r", "30000", "java:1"]);
            assert!(r.is_err(), "not revived through LOCK.REDISSON either: {r:?}");
            assert_eq!(call(&mut c, &["EXISTS", "r"]), R::Int(0));
        } else {
            assert_eq!(r, R::Nil, "{name} {to:?}");
            assert_eq!(lock_stat(&mut c, "redisson_acquire_native"), 1, "{name} {to:?}");
        }
    }
}

// ---- cluster ---------------------------------------------------------------------------------

const CLUSTER_ARGS: [&str; 6] =
    ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"];

fn cluster_node(extra: &[&str]) -> Server {
    let mut o = Opts::default();
    o.args.extend(CLUSTER_ARGS.iter().chain(extra).map(|s| s.to_string()));
    Server::start_opts(o)
}

fn wait_cluster_ok(c: &mut Conn, cluster_cmd: &str) {
    let ok = wait_for(Duration::from_secs(20), || {
        call(c, &[cluster_cmd, "INFO"]).str().contains("cluster_state:ok").then_some(())
    });
    assert!(ok.is_some(), "cluster not ok: {}", call(c, &[cluster_cmd, "INFO"]).str());
}

fn slot(key: &[u8]) -> u16 {
    let mut crc = 0u16;
    let tagged = key.iter().position(|&c| c == b'{').and_then(|o| {
        let rest = &key[o + 1..];
        rest.iter().position(|&c| c == b'}').filter(|&e| e > 0).map(|e| &rest[..e])
    });
    for &b in tagged.unwrap_or(key) {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc & 16383
}

/// One node serving every slot, with CLUSTER renamed (a cluster cannot be set up with it
/// disabled): grants made outside a command (after DEL, after expiry) still check that the
/// node serves the key, without the CLUSTER command.
#[test]
fn a_cluster_node_without_the_cluster_command_grants_waiters() {
    let to = "CLUSTER_renamed";
    let s = cluster_node(&["--rename-command", "CLUSTER", to]);
    let mut c = Conn::new(s.port);
    assert_eq!(call(&mut c, &[to, "ADDSLOTSRANGE", "0", "16383"]), R::Simple("OK".into()));
    wait_cluster_ok(&mut c, to);
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "{a}w", "holder", "60000"]), R::Nil);
    let mut w1 = waiter(s.port, "{a}w", "w1", "0");
    wait_for_waiters(&mut c, 1);
    assert_eq!(call(&mut c, &["DEL", "{a}w"]), R::Int(1));
    assert_eq!(w1.read().expect("grant after DEL"), R::Nil);
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "{a}e", "holder", "150"]), R::Nil);
    let mut w2 = waiter(s.port, "{a}e", "w2", "5000");
    assert_eq!(w2.read().expect("grant after expiry"), R::Nil);
    assert_eq!(call(&mut c, &["HGET", "{a}e", "w2"]), R::Bulk(a("1")));
    assert_eq!(lock_stat(&mut c, "panics_caught"), 0);
}

/// Two masters. A name with an empty hash tag (`app:{}N`) hashes whole, and its token key
/// (`redisson_lock_token:app:{}N`) lands on the other node: LOCK.INFO by a restricted user must
/// answer (token -1: FENCE refuses such names) without asking the other node.
#[test]
fn lock_info_of_a_name_whose_token_key_is_on_another_node() {
    let n1 = cluster_node(&[]);
    let n2 = cluster_node(&[]);
    let (mut c1, mut c2) = (Conn::new(n1.port), Conn::new(n2.port));
    assert_eq!(call(&mut c1, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]), R::Simple("OK".into()));
    assert_eq!(call(&mut c2, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]), R::Simple("OK".into()));
    assert_eq!(
        call(&mut c1, &["CLUSTER", "MEET", "127.0.0.1", &n2.port.to_string()]),
        R::Simple("OK".into())
    );
    wait_cluster_ok(&mut c1, "CLUSTER");
    wait_cluster_ok(&mut c2, "CLUSTER");
    // A name served by node 1 whose token key is served by node 2.
    let name = (0..10_000)
        .map(|i| format!("app:{{}}{i}"))
        .find(|n| slot(n.as_bytes()) < 8192 && slot(format!("redisson_lock_token:{n}").as_bytes()) >= 8192)
        .expect("a name split across the nodes");
    let ok = R::Simple("OK".into());
    let user = ["ACL", "SETUSER", "app", "on", "nopass", "-@all", "+lock.acquire", "+lock.info", "~app:*"];
    assert_eq!(call(&mut c1, &user), ok);
    let mut u = Conn::new(n1.port);
    assert_eq!(call(&mut u, &["AUTH", "app", "x"]), ok);
    assert_eq!(call(&mut u, &["LOCK.ACQUIRE", &name, "o", "60000"]), R::Nil);
    let info = call(&mut u, &["LOCK.INFO", &name]);
    assert_eq!(info_field(&info, "token"), R::Int(-1), "{name}");
    let r = call(&mut u, &["LOCK.ACQUIRE", &name, "o", "60000", "FENCE"]);
    assert!(r.err().starts_with("NOPERM"), "the user may not write token keys: {r:?}");
    // The admin too, and a grant after DEL on a two-node cluster.
    let r = call(&mut c1, &["LOCK.ACQUIRE", &name, "o", "60000", "FENCE"]);
    assert!(r.err().starts_with("CROSSSLOT"), "{r:?}");
    let info = call(&mut c1, &["LOCK.INFO", &name]);
    assert_eq!(info_field(&info, "token"), R::Int(-1));
    let mut w = waiter(n1.port, &name, "w", "0");
    wait_for_waiters(&mut c1, 1);
    assert_eq!(call(&mut c1, &["DEL", &name]), R::Int(1));
    assert_eq!(w.read().expect("grant after DEL"), R::Nil);
    for c in [&mut c1, &mut c2] {
        assert_eq!(call(c, &["PING"]), R::Simple("PONG".into()));
        assert_eq!(lock_stat(c, "panics_caught"), 0);
    }
}
