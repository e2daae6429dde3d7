//! Configs (CONFIG, module arguments, redis.conf lines), publish modes (standalone, replica,
//! cluster), INFO counters and command introspection (COMMAND INFO/DOCS/GETKEYS, MODULE LIST).

mod common;
use common::resp;
use common::*;

use testkit::cmd;

use resp::{Conn, Msg, Sub, R};
use std::time::Duration;

fn ok() -> R {
    R::Simple("OK".into())
}

fn config_get(c: &mut Conn, pattern: &str) -> Vec<(String, String)> {
    let r = cmd!(c, "CONFIG", "GET", pattern);
    let mut v: Vec<_> = r.arr().chunks(2).map(|p| (p[0].str(), p[1].str())).collect();
    v.sort();
    v
}

fn get1(c: &mut Conn, name: &str) -> String {
    let v = config_get(c, name);
    assert_eq!(v.len(), 1, "CONFIG GET {name}: {v:?}");
    v[0].1.clone()
}

/// Take and free a lock once (plus a partial release, a not-owner release, a renewal and a
/// contended acquire, none of which may publish). Exactly one release message is due.
fn one_release(c: &mut Conn, k: &[u8]) {
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", k, "me", 60000), R::Nil);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", k, "me", 60000), R::Nil);
    assert!(cmd!(c, "LOCK.ACQUIRE", k, "other", 60000).int() > 0);
    assert_eq!(cmd!(c, "LOCK.RENEW", k, "me", 60000), R::Int(1));
    assert_eq!(cmd!(c, "LOCK.RELEASE", k, "other"), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RELEASE", k, "me"), R::Int(0));
    assert_eq!(cmd!(c, "LOCK.RELEASE", k, "me"), R::Int(1));
}

fn zero_on(chan: &[u8]) -> Msg {
    (chan.to_vec(), b"0".to_vec())
}

// ---------------------------------------------------------------------------------------------
// Configs
// ---------------------------------------------------------------------------------------------

#[test]
fn config_defaults() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let all = config_get(&mut c, "lock.*");
    assert!(all.contains(&("lock.channel-prefix".into(), PREFIX.into())), "{all:?}");
    assert!(all.contains(&("lock.publish-mode".into(), "auto".into())), "{all:?}");
    assert_eq!(get1(&mut c, "lock.channel-prefix"), PREFIX);
    assert_eq!(get1(&mut c, "lock.publish-mode"), "auto");
}

#[test]
fn config_set_prefix_and_mode() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let custom = prefixed("my-prefix", b"k");
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[channel(b"k"), custom.clone()]);

    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.channel-prefix", "my-prefix"), ok());
    assert_eq!(get1(&mut c, "lock.channel-prefix"), "my-prefix");
    one_release(&mut c, b"k");
    assert_eq!(sub.until_marker(&mut c, "PUBLISH", &custom), vec![zero_on(&custom)]);

    // Invalid values are refused and change nothing.
    for bad in ["bogus", "", "autox", "1", "on"] {
        let r = cmd!(c, "CONFIG", "SET", "lock.publish-mode", bad);
        assert!(r.is_err(), "publish-mode {bad:?} must be refused: {r:?}");
        assert_eq!(get1(&mut c, "lock.publish-mode"), "auto");
    }
    let r = cmd!(c, "CONFIG", "SET", "lock.channel-prefix", "");
    assert!(r.is_err(), "an empty channel-prefix must be refused: {r:?}");
    assert_eq!(get1(&mut c, "lock.channel-prefix"), "my-prefix");

    for mode in ["global", "sharded", "off", "auto"] {
        assert_eq!(cmd!(c, "CONFIG", "SET", "lock.publish-mode", mode), ok());
        assert_eq!(get1(&mut c, "lock.publish-mode"), mode);
    }
    // Both in one CONFIG SET, then back to the default prefix.
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.publish-mode", "global", "lock.channel-prefix", PREFIX), ok());
    assert_eq!(get1(&mut c, "lock.channel-prefix"), PREFIX);
    assert_eq!(get1(&mut c, "lock.publish-mode"), "global");
    one_release(&mut c, b"k");
    assert_eq!(sub.until_marker(&mut c, "PUBLISH", &channel(b"k")), vec![zero_on(&channel(b"k"))]);
}

#[test]
fn module_arguments_set_configs() {
    let s = Server::start_opts(Opts::default().module_arg("publish-mode global channel-prefix foo"));
    let mut c = Conn::new(s.port);
    assert_eq!(get1(&mut c, "lock.publish-mode"), "global");
    assert_eq!(get1(&mut c, "lock.channel-prefix"), "foo");
    let foo = prefixed("foo", b"k");
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[foo.clone(), channel(b"k")]);
    let mut ssub = Sub::new(s.port, "SSUBSCRIBE", std::slice::from_ref(&foo));
    one_release(&mut c, b"k");
    assert_eq!(sub.until_marker(&mut c, "PUBLISH", &foo), vec![zero_on(&foo)]);
    assert_eq!(ssub.until_marker(&mut c, "SPUBLISH", &foo), vec![]);
}

#[test]
fn module_load_at_runtime_with_arguments() {
    let s = Server::start_opts(Opts::default().without_module());
    let mut c = Conn::new(s.port);
    let path = module_path();
    let path = path.to_str().unwrap();
    let r = cmd!(c, "MODULE", "LOAD", path, "publish-mode", "bogus");
    assert!(r.is_err(), "an invalid publish-mode module argument must fail the load: {r:?}");
    assert_eq!(config_get(&mut c, "lock.*"), vec![]);
    assert_eq!(cmd!(c, "MODULE", "LOAD", path, "channel-prefix", "bar", "publish-mode", "sharded"), ok());
    assert_eq!(get1(&mut c, "lock.publish-mode"), "sharded");
    assert_eq!(get1(&mut c, "lock.channel-prefix"), "bar");
    let bar = prefixed("bar", b"k");
    let mut ssub = Sub::new(s.port, "SSUBSCRIBE", std::slice::from_ref(&bar));
    one_release(&mut c, b"k");
    assert_eq!(ssub.until_marker(&mut c, "SPUBLISH", &bar), vec![zero_on(&bar)]);
}

#[test]
fn redis_conf_lines_set_configs() {
    // Command-line form of a redis.conf line after loadmodule.
    let s = Server::start_opts(Opts::default().arg("--lock.publish-mode off --lock.channel-prefix zz"));
    let mut c = Conn::new(s.port);
    assert_eq!(get1(&mut c, "lock.publish-mode"), "off");
    assert_eq!(get1(&mut c, "lock.channel-prefix"), "zz");
    let zz = prefixed("zz", b"k");
    let mut all = Sub::new(s.port, "PSUBSCRIBE", &[b"*".to_vec()]);
    let mut ssub = Sub::new(s.port, "SSUBSCRIBE", &[zz.clone(), channel(b"k")]);
    one_release(&mut c, b"k");
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", "me", 1000), R::Nil);
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "k"), R::Int(1));
    assert_eq!(all.until_marker(&mut c, "PUBLISH", b"marker"), vec![], "publish-mode off");
    assert_eq!(ssub.until_marker(&mut c, "SPUBLISH", &zz), vec![], "publish-mode off");

    // A real config file (included), with loadmodule and the lock.* lines.
    let conf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        conf.path(),
        format!(
            "loadmodule {}\nlock.channel-prefix fromfile\nlock.publish-mode global\n",
            module_path().display()
        ),
    )
    .unwrap();
    let s2 = Server::start_opts(
        Opts::default().without_module().arg(&format!("--include {}", conf.path().display())),
    );
    let mut c2 = Conn::new(s2.port);
    assert_eq!(get1(&mut c2, "lock.publish-mode"), "global");
    assert_eq!(get1(&mut c2, "lock.channel-prefix"), "fromfile");
    let ff = prefixed("fromfile", b"k");
    let mut sub = Sub::new(s2.port, "SUBSCRIBE", std::slice::from_ref(&ff));
    one_release(&mut c2, b"k");
    assert_eq!(sub.until_marker(&mut c2, "PUBLISH", &ff), vec![zero_on(&ff)]);
    // CONFIG REWRITE is not exercised: the file belongs to this test only.
}

// ---------------------------------------------------------------------------------------------
// Publish modes
// ---------------------------------------------------------------------------------------------

/// After one release, what a SUBSCRIBE and an SSUBSCRIBE client on the channel received.
fn deliveries(s: &Server, c: &mut Conn, k: &[u8]) -> (Vec<Msg>, Vec<Msg>) {
    let ch = channel(k);
    let mut sub = Sub::new(s.port, "SUBSCRIBE", std::slice::from_ref(&ch));
    let mut ssub = Sub::new(s.port, "SSUBSCRIBE", std::slice::from_ref(&ch));
    one_release(c, k);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", k, "me", 1000), R::Nil);
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", k), R::Int(1));
    (sub.until_marker(c, "PUBLISH", &ch), ssub.until_marker(c, "SPUBLISH", &ch))
}

#[test]
fn publish_modes_on_a_standalone_server() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    for k in [&b"k"[..], b"user{7}:lock"] {
        let two = vec![zero_on(&channel(k)), zero_on(&channel(k))];
        for (mode, classic, sharded) in [
            ("auto", two.clone(), vec![]),
            ("global", two.clone(), vec![]),
            ("sharded", vec![], two.clone()),
            ("off", vec![], vec![]),
        ] {
            assert_eq!(cmd!(c, "CONFIG", "SET", "lock.publish-mode", mode), ok());
            let (got_classic, got_sharded) = deliveries(&s, &mut c, k);
            assert_eq!(got_classic, classic, "mode {mode}: SUBSCRIBE client");
            assert_eq!(got_sharded, sharded, "mode {mode}: SSUBSCRIBE client");
        }
    }
}

fn replica_pair() -> (Server, Server) {
    let master = Server::start();
    let replica = Server::start();
    replica.replicate_from(&master);
    (master, replica)
}

#[test]
fn replica_subscribers_get_exactly_one_message_per_release() {
    let (master, replica) = replica_pair();
    let mut c = Conn::new(master.port);
    let mut rc = Conn::new(replica.port);
    for (mode, kind, pubcmd) in [
        ("auto", "SUBSCRIBE", "PUBLISH"),
        ("global", "SUBSCRIBE", "PUBLISH"),
        ("sharded", "SSUBSCRIBE", "SPUBLISH"),
    ] {
        assert_eq!(cmd!(c, "CONFIG", "SET", "lock.publish-mode", mode), ok());
        for k in [&b"k"[..], b"user{7}:lock"] {
            let ch = channel(k);
            let mut on_replica = Sub::new(replica.port, kind, std::slice::from_ref(&ch));
            let mut on_master = Sub::new(master.port, kind, std::slice::from_ref(&ch));
            one_release(&mut c, k);
            assert_eq!(cmd!(c, "LOCK.ACQUIRE", k, "me", 60000), R::Nil);
            assert_eq!(cmd!(c, "LOCK.FORCERELEASE", k), R::Int(1));
            assert_eq!(cmd!(c, "LOCK.FORCERELEASE", k), R::Int(0));
            assert_eq!(cmd!(c, "LOCK.RELEASE", k, "me"), R::Nil);
            let want = vec![zero_on(&ch), zero_on(&ch)];
            // The marker is published on the master and reaches the replica through the
            // replication stream, after everything the module propagated before it.
            assert_eq!(on_replica.until_marker(&mut c, pubcmd, &ch), want, "mode {mode}: replica subscriber");
            assert_eq!(on_master.until_marker(&mut c, pubcmd, &ch), want, "mode {mode}: master subscriber");
            assert_eq!(cmd!(rc, "EXISTS", k), R::Int(0));
        }
    }
    // Mode off: nothing on either side.
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.publish-mode", "off"), ok());
    let mut on_replica = Sub::new(replica.port, "PSUBSCRIBE", &[b"*".to_vec()]);
    one_release(&mut c, b"k");
    assert_eq!(on_replica.until_marker(&mut c, "PUBLISH", b"marker"), vec![]);
}

#[test]
fn cluster_mode_auto_publishes_sharded() {
    let s = Server::start_with("--cluster-enabled yes --cluster-config-file nodes.conf");
    let mut c = Conn::new(s.port);
    assert_eq!(cmd!(c, "CLUSTER", "ADDSLOTSRANGE", 0, 16383), ok());
    let up = wait_for(Duration::from_secs(20), || {
        cmd!(c, "CLUSTER", "INFO").str().contains("cluster_state:ok").then_some(())
    });
    assert!(up.is_some(), "cluster did not reach cluster_state:ok");
    assert_eq!(get1(&mut c, "lock.publish-mode"), "auto");
    for k in [&b"k"[..], b"user{7}:lock", b"x{}y"] {
        let two = vec![zero_on(&channel(k)), zero_on(&channel(k))];
        let (classic, sharded) = deliveries(&s, &mut c, k);
        assert_eq!(classic, vec![], "auto in cluster mode must not PUBLISH");
        assert_eq!(sharded, two, "auto in cluster mode must SPUBLISH");
        for (mode, classic_want, sharded_want) in
            [("global", two.clone(), vec![]), ("sharded", vec![], two.clone()), ("off", vec![], vec![])]
        {
            assert_eq!(cmd!(c, "CONFIG", "SET", "lock.publish-mode", mode), ok());
            let (classic, sharded) = deliveries(&s, &mut c, k);
            assert_eq!(classic, classic_want, "mode {mode} in cluster mode: SUBSCRIBE client");
            assert_eq!(sharded, sharded_want, "mode {mode} in cluster mode: SSUBSCRIBE client");
        }
        assert_eq!(cmd!(c, "CONFIG", "SET", "lock.publish-mode", "auto"), ok());
    }
}

// ---------------------------------------------------------------------------------------------
// INFO counters
// ---------------------------------------------------------------------------------------------

const COUNTERS: [&str; 20] = [
    "acquires_new",
    "acquires_reentrant",
    "acquires_contended",
    "releases_partial",
    "releases_full",
    "releases_not_owner",
    "renewals_ok",
    "renewals_missed",
    "force_releases",
    "force_releases_missed",
    "release_messages",
    "waits_started",
    "waits_granted",
    "waits_timed_out",
    "waits_cancelled",
    "waits_failed",
    "handoffs",
    "grants_after_free",
    "errors",
    "panics_caught",
];

fn counters(c: &mut Conn) -> std::collections::BTreeMap<String, i64> {
    let info = cmd!(c, "INFO", "lock").str();
    let mut m = std::collections::BTreeMap::new();
    for l in info.lines() {
        if let Some((k, v)) = l.split_once(':') {
            if let Some(k) = k.strip_prefix("lock_") {
                m.insert(k.to_string(), v.trim().parse::<i64>().unwrap_or_else(|_| panic!("{l}")));
            }
        }
    }
    for name in COUNTERS.iter().chain(&["waiters", "keys_with_waiters"]) {
        assert!(m.contains_key(*name), "INFO lock has no lock_{name}:\n{info}");
    }
    m
}

fn assert_deltas(c: &mut Conn, before: &std::collections::BTreeMap<String, i64>, want: &[(&str, i64)]) {
    let after = counters(c);
    for name in COUNTERS {
        let d = after[name] - before[name];
        let w = want.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v);
        assert_eq!(d, w, "lock_{name} delta");
    }
}

#[test]
fn info_counters_exact_deltas() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let info = cmd!(c, "INFO", "lock").str();
    assert!(info.contains("# lock_stats"), "INFO section name: {info}");
    assert!(cmd!(c, "INFO", "everything").str().contains("lock_acquires_new:"), "INFO everything");
    assert!(cmd!(c, "INFO", "lock_stats").str().contains("lock_acquires_new:"), "INFO lock_stats");

    let before = counters(&mut c);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", "a", 10000), R::Nil); // new
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", "a", 10000), R::Nil); // reentrant
    assert!(cmd!(c, "LOCK.ACQUIRE", "k", "b", 10000).int() > 0); // contended
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "b"), R::Nil); // not owner
    assert_eq!(cmd!(c, "LOCK.RELEASE", "absent", "a"), R::Nil); // not owner
    assert_eq!(cmd!(c, "LOCK.RENEW", "k", "a", 10000), R::Int(1)); // renewal ok
    assert_eq!(cmd!(c, "LOCK.RENEW", "k", "b", 10000), R::Int(0)); // missed
    assert_eq!(cmd!(c, "LOCK.RENEW", "absent", "a", 10000), R::Int(0)); // missed
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "a"), R::Int(0)); // partial
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "a"), R::Int(1)); // full + message
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "k"), R::Int(0)); // force missed
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", "a", 10000), R::Nil); // new
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "k"), R::Int(1)); // force + message
    assert_eq!(cmd!(c, "LOCK.INFO", "k"), R::Nil);
    assert!(cmd!(c, "LOCK.ACQUIRE", "k", "a", 0).is_err()); // error
    assert!(cmd!(c, "LOCK.ACQUIRE", "k", "a", 10, "NOPE").is_err()); // error
    assert_eq!(cmd!(c, "SET", "str", "v"), ok());
    assert!(cmd!(c, "LOCK.RELEASE", "str", "a").is_err()); // error (WRONGTYPE)
    assert_deltas(
        &mut c,
        &before,
        &[
            ("acquires_new", 2),
            ("acquires_reentrant", 1),
            ("acquires_contended", 1),
            ("releases_partial", 1),
            ("releases_full", 1),
            ("releases_not_owner", 2),
            ("renewals_ok", 1),
            ("renewals_missed", 2),
            ("force_releases", 1),
            ("force_releases_missed", 1),
            ("release_messages", 2),
            ("errors", 3),
        ],
    );

    // Waits: one timeout, one handoff, two cancellations (CLIENT UNBLOCK, disconnect).
    let before = counters(&mut c);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "w", "holder", 60000), R::Nil);
    let p = cmd!(c, "LOCK.ACQUIRE", "w", "late", 1000, "WAIT", 50).int();
    assert!(p > 0 && p <= 60000, "timed-out waiter gets the PTTL: {p}");
    let port = s.port;
    let granted = std::thread::spawn(move || {
        let mut w = Conn::new(port);
        cmd!(w, "LOCK.ACQUIRE", "w", "next", 60000, "WAIT", 0)
    });
    let waiting = |c: &mut Conn, n: i64| {
        wait_for(Duration::from_secs(10), || (counters(c)["waiters"] == n).then_some(()))
            .unwrap_or_else(|| panic!("lock_waiters never reached {n}"));
    };
    waiting(&mut c, 1);
    assert_eq!(counters(&mut c)["keys_with_waiters"], 1);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "w", "holder"), R::Int(1)); // handoff, no message
    assert_eq!(granted.join().unwrap(), R::Nil);
    assert_eq!(cmd!(c, "HGET", "w", "next"), R::Bulk(b"1".to_vec()));
    waiting(&mut c, 0);
    assert_eq!(counters(&mut c)["keys_with_waiters"], 0);

    let mut w1 = Conn::new(s.port);
    let id1 = cmd!(w1, "CLIENT", "ID").int();
    w1.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"w".to_vec(),
        b"w1".to_vec(),
        b"1000".to_vec(),
        b"WAIT".to_vec(),
        b"0".to_vec(),
    ]);
    waiting(&mut c, 1);
    assert_eq!(cmd!(c, "CLIENT", "UNBLOCK", id1), R::Int(1));
    let r = w1.read().unwrap();
    assert!(!matches!(r, R::Nil), "an unblocked waiter is not granted: {r:?}");
    waiting(&mut c, 0);
    let mut w2 = Conn::new(s.port);
    w2.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"w".to_vec(),
        b"w2".to_vec(),
        b"1000".to_vec(),
        b"WAIT".to_vec(),
        b"0".to_vec(),
    ]);
    waiting(&mut c, 1);
    drop(w2);
    waiting(&mut c, 0);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "w", "next"), R::Int(1)); // full, message
    assert_deltas(
        &mut c,
        &before,
        &[
            ("acquires_new", 1),
            ("acquires_contended", 4),
            ("releases_full", 2),
            ("waits_started", 4),
            ("waits_timed_out", 1),
            ("waits_granted", 1),
            ("handoffs", 1),
            ("waits_cancelled", 2),
            ("release_messages", 1),
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// COMMAND INFO / DOCS / GETKEYS, MODULE LIST
// ---------------------------------------------------------------------------------------------

/// RESP2 flat map -> (name, value) lookup.
fn field<'a>(flat: &'a [R], name: &str) -> Option<&'a R> {
    flat.chunks(2).find(|p| p[0].str() == name).map(|p| &p[1])
}

#[test]
fn command_info_docs_getkeys_and_module_list() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let specs: [(&str, i64, &[&str], &[&str]); 5] = [
        ("lock.acquire", -4, &["write", "denyoom"], &["readonly", "pubsub"]),
        ("lock.release", -3, &["write"], &["readonly", "pubsub", "denyoom"]),
        ("lock.renew", -4, &["write"], &["readonly", "pubsub"]),
        ("lock.forcerelease", 2, &["write"], &["readonly", "pubsub"]),
        ("lock.info", 2, &["readonly"], &["write", "pubsub", "denyoom"]),
    ];
    for (name, arity, must, must_not) in specs {
        let r = cmd!(c, "COMMAND", "INFO", name);
        let e = r.arr()[0].arr().to_vec();
        assert_eq!(e[0].str(), name);
        assert_eq!(e[1].int(), arity, "{name} arity");
        let flags: Vec<String> = e[2].arr().iter().map(R::str).collect();
        for f in must {
            assert!(flags.iter().any(|x| x == f), "{name} flags {flags:?} lack {f}");
        }
        for f in must_not {
            assert!(!flags.iter().any(|x| x == f), "{name} flags {flags:?} must not have {f}");
        }
        assert_eq!((e[3].int(), e[4].int(), e[5].int()), (1, 1, 1), "{name} first/last/step");
        let key_specs = e[8].arr();
        assert_eq!(key_specs.len(), 1, "{name} key specs: {key_specs:?}");
        let ks = key_specs[0].arr();
        let bs = field(ks, "begin_search").expect("begin_search").arr();
        assert_eq!(field(bs, "type").unwrap().str(), "index", "{name}");
        assert_eq!(field(field(bs, "spec").unwrap().arr(), "index").unwrap().int(), 1, "{name}");
        let fk = field(ks, "find_keys").expect("find_keys").arr();
        assert_eq!(field(fk, "type").unwrap().str(), "range", "{name}");
        let range = field(fk, "spec").unwrap().arr();
        assert_eq!(field(range, "lastkey").unwrap().int(), 0, "{name}");
        assert_eq!(field(range, "keystep").unwrap().int(), 1, "{name}");
        let kflags: Vec<String> = field(ks, "flags").unwrap().arr().iter().map(R::str).collect();
        let rw = if name == "lock.info" { "RO" } else { "RW" };
        assert!(kflags.iter().any(|f| f == rw), "{name} key spec flags {kflags:?} lack {rw}");

        let d = cmd!(c, "COMMAND", "DOCS", name);
        let d = d.arr();
        assert_eq!(d[0].str(), name, "COMMAND DOCS {name}");
        let doc = d[1].arr();
        let summary = field(doc, "summary").unwrap_or_else(|| panic!("{name} has no summary")).str();
        assert!(summary.len() > 10, "{name} summary {summary:?}");
        let args = field(doc, "arguments").unwrap_or_else(|| panic!("{name} has no arguments")).arr();
        let arg_names: Vec<String> = args.iter().map(|a| field(a.arr(), "name").unwrap().str()).collect();
        assert_eq!(arg_names[0], "key", "{name} arguments {arg_names:?}");
        assert_eq!(field(args[0].arr(), "type").unwrap().str(), "key");
    }
    let names = |c: &mut Conn, name: &str| -> Vec<String> {
        let r = cmd!(c, "COMMAND", "DOCS", name);
        let doc = r.arr()[1].arr().to_vec();
        field(&doc, "arguments")
            .unwrap()
            .arr()
            .iter()
            .map(|a| field(a.arr(), "name").unwrap().str())
            .collect()
    };
    assert_eq!(names(&mut c, "lock.acquire")[..3], ["key", "owner", "lease-ms"]);
    assert_eq!(names(&mut c, "lock.release")[..2], ["key", "owner"]);
    assert_eq!(names(&mut c, "lock.renew"), ["key", "owner", "lease-ms", "access"]);

    for call in [
        vec!["COMMAND", "GETKEYS", "LOCK.ACQUIRE", "k", "o", "1"],
        vec!["COMMAND", "GETKEYS", "LOCK.ACQUIRE", "k", "o", "1", "WAIT", "5"],
        vec!["COMMAND", "GETKEYS", "LOCK.RELEASE", "k", "o"],
        vec!["COMMAND", "GETKEYS", "LOCK.RELEASE", "k", "o", "5"],
        vec!["COMMAND", "GETKEYS", "LOCK.RENEW", "k", "o", "5"],
        vec!["COMMAND", "GETKEYS", "LOCK.FORCERELEASE", "k"],
        vec!["COMMAND", "GETKEYS", "LOCK.INFO", "k"],
    ] {
        let a: Vec<Vec<u8>> = call.iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(c.call(&a), R::Arr(vec![R::Bulk(b"k".to_vec())]), "{call:?}");
    }

    let r = cmd!(c, "MODULE", "LIST");
    let names: Vec<String> = r.arr().iter().filter_map(|m| field(m.arr(), "name").map(R::str)).collect();
    assert!(names.iter().any(|n| n == "lock"), "MODULE LIST: {names:?}");
}
