//! Spec section 9, ACL: a natively run Redisson script is allowed exactly when the script would
//! be; FENCE checks the token key; grants re-check the waiter's permissions where the server
//! re-checks BLPOP; disabled EVAL/EVALSHA stay disabled.
//!
//! Attacker's view: users with `-@write`, `-del`, `-incr`, `-publish -spublish`,
//! `-eval -evalsha`, only `+@read +@scripting`, key and channel patterns, run the same scripts
//! on a `native` server and on a `lua` server (the baseline): the native server errs iff Lua
//! errs, with the same error class; replies, keyspace and published messages are identical
//! when both succeed, and a refused native call changes nothing (Lua may have written part of a
//! path before its denied call; section 9 says the module writes nothing).

mod common;
use common::resp::{Conn, Sub, R};
use common::scripts::{load_all, native_opts, script, snapshot};
use common::*;
use std::time::Duration;

fn a(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn call(c: &mut Conn, args: &[&str]) -> R {
    c.call(&args.iter().map(|s| a(s)).collect::<Vec<_>>())
}

/// (major, minor) of the Redis API the server implements (Valkey reports 7.2.4).
fn api_version(c: &mut Conn) -> (u32, u32) {
    let info = call(c, &["INFO", "server"]).str();
    let v = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .expect("redis_version")
        .trim()
        .to_string();
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn class(r: &R) -> Option<String> {
    match r {
        R::Err(e) => Some(e.split(' ').next().unwrap_or("").to_string()),
        _ => None,
    }
}

/// Equal, except PTTLs measured a moment apart.
fn same_reply(x: &R, y: &R) -> bool {
    match (x, y) {
        (R::Int(p), R::Int(q)) => (p - q).abs() <= 1000,
        (R::Arr(p), R::Arr(q)) => p.len() == q.len() && p.iter().zip(q).all(|(p, q)| same_reply(p, q)),
        _ => x == y,
    }
}

const USERS: [(&str, &str); 11] = [
    ("full", "+@all ~* &*"),
    ("nowrite", "+@all -@write ~* &*"),
    ("nodel", "+@all -del ~* &*"),
    ("noincr", "+@all -incr ~* &*"),
    ("nopexpire", "+@all -pexpire ~* &*"),
    ("nopub", "+@all -publish -spublish ~* &*"),
    ("noeval", "+@all -eval -evalsha ~* &*"),
    ("readscript", "+@read +@scripting ~* &*"),
    ("nochannel", "+@all ~* resetchannels"),
    ("notoken", "+@all ~[a-s]* &*"),
    ("readkeys", "+@all %R~* &*"),
];

fn add_users(c: &mut Conn) {
    for (name, rules) in USERS {
        let mut args = vec!["ACL", "SETUSER", name, "reset", "on", ">pw"];
        args.extend(rules.split(' '));
        assert_eq!(call(c, &args), R::Simple("OK".into()), "{name}");
    }
}

fn login(port: u16, user: &str) -> Conn {
    let mut c = Conn::new(port);
    assert_eq!(call(&mut c, &["AUTH", user, "pw"]), R::Simple("OK".into()));
    c
}

/// A case: keyspace set-up (as admin) and the script call (kind, keys, args).
struct Case {
    what: &'static str,
    setup: &'static [&'static [&'static str]],
    kind: &'static str,
    keys: &'static [&'static str],
    args: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case { what: "acquire free", setup: &[], kind: "acquire", keys: &["k"], args: &["30000", "o"] },
    Case {
        what: "acquire held by another (read-only path)",
        setup: &[&["HSET", "k", "x", "1"], &["PEXPIRE", "k", "100000"]],
        kind: "acquire",
        keys: &["k"],
        args: &["30000", "o"],
    },
    Case {
        what: "acquire reentrant",
        setup: &[&["HSET", "k", "o", "1"]],
        kind: "acquire",
        keys: &["k"],
        args: &["30000", "o"],
    },
    Case {
        what: "fenced acquire",
        setup: &[],
        kind: "fenced-acquire",
        keys: &["f", "tok"],
        args: &["30000", "o"],
    },
    Case {
        what: "fenced acquire plain",
        setup: &[],
        kind: "fenced-acquire-plain",
        keys: &["f", "tok"],
        args: &["30000", "o"],
    },
    Case {
        what: "unlock with latch, full release",
        setup: &[&["HSET", "u", "o", "1"]],
        kind: "unlock-latch",
        keys: &["u", "ch", "latch"],
        args: &["0", "30000", "o", "PUBLISH", "10000"],
    },
    Case {
        what: "unlock with latch, partial",
        setup: &[&["HSET", "u", "o", "2"]],
        kind: "unlock-latch",
        keys: &["u", "ch", "latch"],
        args: &["0", "30000", "o", "PUBLISH", "10000"],
    },
    Case {
        what: "unlock, latch present (read-only path)",
        setup: &[&["HSET", "u", "o", "1"], &["SET", "latch", "1"]],
        kind: "unlock-latch",
        keys: &["u", "ch", "latch"],
        args: &["0", "30000", "o", "PUBLISH", "10000"],
    },
    Case {
        what: "unlock SPUBLISH, full release",
        setup: &[&["HSET", "u", "o", "1"]],
        kind: "unlock",
        keys: &["u", "ch"],
        args: &["0", "30000", "o", "SPUBLISH"],
    },
    Case {
        what: "unlock, not the owner (read-only path)",
        setup: &[&["HSET", "u", "x", "1"]],
        kind: "unlock-publish",
        keys: &["u", "ch"],
        args: &["0", "30000", "o"],
    },
    Case {
        what: "force unlock",
        setup: &[&["HSET", "d", "x", "1"]],
        kind: "forceunlock",
        keys: &["d", "ch"],
        args: &["0", "PUBLISH"],
    },
    Case {
        what: "force unlock of nothing",
        setup: &[],
        kind: "forceunlock-publish",
        keys: &["d", "ch"],
        args: &["0"],
    },
    Case {
        what: "force unlock of a list (any type)",
        setup: &[&["RPUSH", "d", "a", "b"]],
        kind: "forceunlock-publish",
        keys: &["d", "ch"],
        args: &["0"],
    },
    Case {
        what: "renew",
        setup: &[&["HSET", "r", "o", "1"]],
        kind: "renew",
        keys: &["r"],
        args: &["30000", "o"],
    },
    Case {
        what: "renew batch",
        setup: &[&["HSET", "r", "o", "1"]],
        kind: "renew-batch",
        keys: &["r", "r2"],
        args: &["30000", "o", "o"],
    },
];

struct Side {
    _s: Server,
    admin: Conn,
    users: Vec<(String, Conn)>,
    sub: Sub,
    ssub: Sub,
}

fn side(opts: Opts) -> Side {
    let s = Server::start_opts(opts);
    let mut admin = Conn::new(s.port);
    load_all(&mut admin);
    add_users(&mut admin);
    let users = USERS.iter().map(|(n, _)| (n.to_string(), login(s.port, n))).collect();
    let sub = Sub::new(s.port, "SUBSCRIBE", &[a("ch")]);
    let ssub = Sub::new(s.port, "SSUBSCRIBE", &[a("ch")]);
    Side { admin, users, sub, ssub, _s: s }
}

impl Side {
    fn run(&mut self, user: &str, case: &Case) -> (R, Vec<u8>, Vec<u8>) {
        call(&mut self.admin, &["FLUSHALL"]);
        for cmd in case.setup {
            assert!(!call(&mut self.admin, cmd).is_err());
        }
        let sha = script(case.kind).sha;
        let mut argv = vec![a("EVALSHA"), sha.into_bytes(), case.keys.len().to_string().into_bytes()];
        argv.extend(case.keys.iter().map(|k| a(k)));
        argv.extend(case.args.iter().map(|k| a(k)));
        let c = &mut self.users.iter_mut().find(|(n, _)| n == user).expect("user").1;
        let r = c.call(&argv);
        let msgs = self.sub.until_marker(&mut self.admin, "PUBLISH", b"ch");
        let smsgs = self.ssub.until_marker(&mut self.admin, "SPUBLISH", b"ch");
        let show = |m: Vec<(Vec<u8>, Vec<u8>)>| m.into_iter().flat_map(|(c, p)| [c, p].concat()).collect();
        (r, show(msgs), show(smsgs))
    }
}

#[test]
fn native_scripts_obey_acl_rules_like_lua() {
    let mut native = side(native_opts());
    let mut lua = side(Opts::default());
    let categories = api_version(&mut native.admin) >= (7, 2);
    let mut refused_both = 0;
    let mut partial_lua = vec![];
    for (user, _) in USERS {
        for case in CASES {
            let ctx = format!("user {user}, {}", case.what);
            // The state before, as the native server has it.
            call(&mut native.admin, &["FLUSHALL"]);
            for cmd in case.setup {
                call(&mut native.admin, cmd);
            }
            let before = snapshot(&mut native.admin);
            let (rl, ml, sl) = lua.run(user, case);
            let (rn, mn, sn) = native.run(user, case);
            if user == "readscript" && !categories {
                // Redis 7.0 puts module commands in no ACL category: +@scripting does not cover
                // LOCK.REDISSON, so the server refuses it before the module runs (docs/security.md).
                assert_eq!(class(&rn).as_deref(), Some("NOPERM"), "{ctx}: {rn:?}");
                assert!(mn.is_empty() && sn.is_empty(), "{ctx}");
                continue;
            }
            assert_eq!(class(&rn), class(&rl), "{ctx}: native {rn:?} vs lua {rl:?}");
            if class(&rn).is_some() {
                refused_both += 1;
                let after = snapshot(&mut native.admin);
                assert_eq!(
                    before.keys().collect::<Vec<_>>(),
                    after.keys().collect::<Vec<_>>(),
                    "{ctx}: keys"
                );
                for (k, v) in &before {
                    assert_eq!((&v.ty, &v.content), (&after[k].ty, &after[k].content), "{ctx}");
                }
                assert!(mn.is_empty() && sn.is_empty(), "{ctx}: a refused call published {mn:?} {sn:?}");
                let content = |m: &std::collections::BTreeMap<Vec<u8>, scripts::KeyState>| {
                    m.iter().map(|(k, v)| (k.clone(), v.ty.clone(), v.content.clone())).collect::<Vec<_>>()
                };
                if content(&snapshot(&mut lua.admin)) != content(&before) || !ml.is_empty() || !sl.is_empty()
                {
                    partial_lua.push(ctx.clone());
                }
            } else {
                assert!(same_reply(&rn, &rl), "{ctx}: replies {rn:?} vs {rl:?}");
                assert_eq!((mn, sn), (ml, sl), "{ctx}: published messages");
                scripts::assert_same_keyspace(&mut native.admin, &mut lua.admin, 1000, &ctx);
            }
        }
    }
    assert!(refused_both >= 30, "the matrix must refuse calls: {refused_both}");
    eprintln!("refused on both: {refused_both}; Lua wrote part of the path first: {partial_lua:?}");
    let info = lock_info(&mut native._s.conn());
    assert!(info["acl_denials"].parse::<i64>().unwrap() > 0, "{info:?}");
}

#[test]
fn fence_checks_the_token_key() {
    let s = Server::start();
    let mut admin = Conn::new(s.port);
    // Lock keys a..s allowed, the token key (redisson_lock_token:{...}) not.
    let rules = ["ACL", "SETUSER", "notoken", "on", ">pw", "+@all", "~[a-q]*", "&*"];
    assert_eq!(call(&mut admin, &rules), R::Simple("OK".into()));
    let mut u = login(s.port, "notoken");
    let r = call(&mut u, &["LOCK.ACQUIRE", "lk", "o", "30000", "FENCE"]);
    assert_eq!(class(&r).as_deref(), Some("NOPERM"), "{r:?}");
    assert_eq!(call(&mut admin, &["EXISTS", "lk", "redisson_lock_token:{lk}"]), R::Int(0), "nothing written");
    // Without FENCE the same user may take the lock.
    assert_eq!(call(&mut u, &["LOCK.ACQUIRE", "lk", "o", "30000"]), R::Nil);
    // A FENCE acquire that would wait is refused up front too (its grant would write the token).
    let r = call(&mut u, &["LOCK.ACQUIRE", "lk", "w", "30000", "WAIT", "5000", "FENCE"]);
    assert_eq!(class(&r).as_deref(), Some("NOPERM"), "{r:?}");
    // A user allowed the token key gets the token.
    assert_eq!(call(&mut admin, &["LOCK.ACQUIRE", "lk2", "o", "30000", "FENCE"]).arr()[0], R::Int(-1));
}

/// BLPOP re-checks permissions when served on Redis 7.2+ and Valkey, not on 7.0.
fn server_rechecks_blpop(port: u16) -> bool {
    let mut admin = Conn::new(port);
    call(&mut admin, &["ACL", "SETUSER", "bl", "reset", "on", ">pw", "+@all", "~*", "&*"]);
    let mut b = login(port, "bl");
    b.send(&[a("BLPOP"), a("blist"), a("10")]);
    wait_for(Duration::from_secs(5), || {
        (info_int_conn(&mut admin, "clients", "blocked_clients") == 1).then_some(())
    })
    .expect("BLPOP blocked");
    call(&mut admin, &["ACL", "SETUSER", "bl", "resetkeys", "~other*"]);
    call(&mut admin, &["RPUSH", "blist", "x"]);
    let r = b.read().expect("BLPOP reply");
    class(&r).as_deref() == Some("NOPERM")
}

fn info_int_conn(c: &mut Conn, section: &str, field: &str) -> i64 {
    let info = call(c, &["INFO", section]).str();
    info.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field}"))
}

#[test]
fn grants_recheck_acl_where_the_server_does() {
    for native in [false, true] {
        let s = Server::start_opts(if native { native_opts() } else { Opts::default() });
        let rechecks = server_rechecks_blpop(s.port);
        let mut admin = Conn::new(s.port);
        let v = api_version(&mut admin);
        assert_eq!(rechecks, v >= (7, 2), "BLPOP re-check expected from 7.2 on ({v:?})");
        for fence in [false, true] {
            call(&mut admin, &["ACL", "SETUSER", "w", "reset", "on", ">pw", "+@all", "~*", "&*"]);
            assert_eq!(call(&mut admin, &["LOCK.ACQUIRE", "g", "holder", "30000"]), R::Nil);
            let mut w = login(s.port, "w");
            // Warm the per-client cache of an unrestricted user (native).
            assert_eq!(call(&mut w, &["LOCK.ACQUIRE", "other", "w", "1000"]), R::Nil);
            let mut args = vec![a("LOCK.ACQUIRE"), a("g"), a("w"), a("30000"), a("WAIT"), a("10000")];
            if fence {
                args.push(a("FENCE"));
            }
            w.send(&args);
            wait_for(Duration::from_secs(5), || (lock_info(&mut s.conn())["waiters"] == "1").then_some(()))
                .expect("waiting");
            // Revoke: the lock key (or only the token key) is out of reach now.
            let rule = if fence { "~[a-q]*" } else { "~zzz*" };
            call(&mut admin, &["ACL", "SETUSER", "w", "resetkeys", rule]);
            assert_eq!(call(&mut admin, &["LOCK.RELEASE", "g", "holder"]), R::Int(1));
            let r = w.read().expect("reply");
            let ctx = format!("native {native}, fence {fence}, {v:?}");
            if rechecks {
                assert_eq!(class(&r).as_deref(), Some("NOPERM"), "{ctx}: {r:?}");
                assert_eq!(call(&mut admin, &["EXISTS", "g"]), R::Int(0), "{ctx}: no grant");
            } else {
                assert!(class(&r).is_none(), "{ctx}: 7.0 grants like BLPOP serves: {r:?}");
                assert_eq!(call(&mut admin, &["LOCK.FORCERELEASE", "g"]), R::Int(1));
            }
            call(&mut admin, &["DEL", "g", "other", "redisson_lock_token:{g}"]);
        }
    }
}

#[test]
fn disabled_eval_commands_stay_disabled() {
    let sha = "149c5a8bf18676fd99e9e6e24923bd64d9b62f94";
    let mut opts = native_opts();
    for a in ["--rename-command", "EVALSHA", "", "--rename-command", "EVAL", "myeval"] {
        opts.args.push(a.to_string());
    }
    let s = Server::start_opts(opts);
    let mut c = Conn::new(s.port);
    let r = call(&mut c, &["EVALSHA", sha, "1", "k", "30000", "o"]);
    assert!(r.err().to_lowercase().contains("unknown command"), "{r:?}");
    let r = call(&mut c, &["EVAL", "return 1", "0"]);
    assert!(r.err().to_lowercase().contains("unknown command"), "{r:?}");
    let r = call(&mut c, &["LOCK.REDISSON", sha, "1", "k", "30000", "o"]);
    assert!(r.is_err(), "direct LOCK.REDISSON of a disabled EVALSHA: {r:?}");
    let body = std::str::from_utf8(script("acquire").body).unwrap().to_string();
    let r = call(&mut c, &["LOCK.REDISSON", &body, "1", "k", "30000", "o"]);
    assert!(r.is_err(), "direct LOCK.REDISSON of a renamed EVAL: {r:?}");
    assert_eq!(call(&mut c, &["EXISTS", "k"]), R::Int(0), "nothing written");
    // The renamed name runs Lua: the script body works, a known SHA1 is not known to it.
    assert_eq!(call(&mut c, &["myeval", &body, "1", "k", "30000", "o"]), R::Nil);
    assert_eq!(call(&mut c, &["HGET", "k", "o"]), R::Bulk(a("1")));
    let native_runs: i64 = lock_info(&mut s.conn())["redisson_acquire_native"].parse().unwrap();
    assert_eq!(native_runs, 0, "the renamed EVAL ran in Lua");
}

/// The per-client cache of unrestricted users never outlives a permission change.
#[test]
fn acl_changes_take_effect_at_once() {
    let s = Server::start_opts(native_opts());
    let mut admin = Conn::new(s.port);
    load_all(&mut admin);
    call(&mut admin, &["ACL", "SETUSER", "u", "on", ">pw", "+@all", "~*", "&*"]);
    call(&mut admin, &["ACL", "SETUSER", "r", "on", ">pw", "+@all", "-hincrby", "~*", "&*"]);
    let acquire = |c: &mut Conn, k: &str| c.call(&scripts_argv("acquire", &[k], &["30000", "o"]));
    let mut u = login(s.port, "u");
    assert_eq!(acquire(&mut u, "a1"), R::Nil, "unrestricted (now cached)");
    // ACL SETUSER from another connection.
    call(&mut admin, &["ACL", "SETUSER", "u", "-hincrby"]);
    assert_eq!(class(&acquire(&mut u, "a2")).as_deref(), Some("ERR"), "revoked at once");
    call(&mut admin, &["ACL", "SETUSER", "u", "+hincrby"]);
    assert_eq!(acquire(&mut u, "a3"), R::Nil);
    // AUTH as another user on the same connection.
    assert_eq!(call(&mut u, &["AUTH", "r", "pw"]), R::Simple("OK".into()));
    assert_eq!(class(&acquire(&mut u, "a4")).as_deref(), Some("ERR"), "after AUTH");
    assert_eq!(call(&mut u, &["AUTH", "u", "pw"]), R::Simple("OK".into()));
    assert_eq!(acquire(&mut u, "a5"), R::Nil);
    // A transaction that revokes, then runs the script.
    assert_eq!(call(&mut admin, &["MULTI"]), R::Simple("OK".into()));
    call(&mut admin, &["ACL", "SETUSER", "u", "-hincrby"]);
    let mut v = login(s.port, "u");
    assert_eq!(acquire(&mut v, "a6"), R::Nil, "before EXEC");
    call(&mut admin, &["EXEC"]);
    assert_eq!(class(&acquire(&mut v, "a7")).as_deref(), Some("ERR"), "after EXEC");
    assert_eq!(call(&mut admin, &["EXISTS", "a2", "a4", "a7"]), R::Int(0), "refused calls wrote nothing");
}

fn scripts_argv(kind: &str, keys: &[&str], args: &[&str]) -> Vec<Vec<u8>> {
    let mut v = vec![a("EVALSHA"), script(kind).sha.into_bytes(), keys.len().to_string().into_bytes()];
    v.extend(keys.iter().map(|k| a(k)));
    v.extend(args.iter().map(|k| a(k)));
    v
}

/// Renames are read at load: switching to `native` at run time does not revive them either.
#[test]
fn disabled_evalsha_stays_disabled_when_native_is_switched_on_later() {
    let sha = "149c5a8bf18676fd99e9e6e24923bd64d9b62f94";
    let mut opts = Opts::default().module_arg(&format!("redisson-extra-scripts {}", scripts::extra_spec()));
    for a in ["--rename-command", "EVALSHA", ""] {
        opts.args.push(a.to_string());
    }
    let s = Server::start_opts(opts);
    let mut c = Conn::new(s.port);
    assert_eq!(call(&mut c, &["CONFIG", "SET", "lock.redisson-scripts", "native"]), R::Simple("OK".into()));
    let r = call(&mut c, &["EVALSHA", sha, "1", "k", "30000", "o"]);
    assert!(r.err().to_lowercase().contains("unknown command"), "{r:?}");
    assert_eq!(call(&mut c, &["EXISTS", "k"]), R::Int(0));
    // EVAL still resolves and runs natively.
    let body = std::str::from_utf8(script("acquire").body).unwrap().to_string();
    assert_eq!(call(&mut c, &["EVAL", &body, "1", "k", "30000", "o"]), R::Nil);
    assert_eq!(lock_info(&mut s.conn())["redisson_acquire_native"], "1");
}

/// Permissions changed inside MULTI/EXEC take effect for every later native script: the
/// per-user cache is neither read nor filled inside the transaction (an acquire queued before
/// the `ACL SETUSER` filled it with the old, unrestricted answer, and every default-user
/// client then kept running acquires that Lua refuses). The same sequence on a `lua` server is
/// the baseline.
#[test]
fn acl_changes_inside_multi_are_seen_by_later_native_scripts() {
    let acquire = |key: &str| scripts_argv("acquire", &[key], &["30000", "o"]);
    let mut replies = Vec::new();
    for opts in [native_opts(), Opts::default()] {
        let s = Server::start_opts(opts);
        let mut c = Conn::new(s.port);
        load_all(&mut c);
        assert_eq!(call(&mut c, &["MULTI"]), R::Simple("OK".into()));
        assert_eq!(c.call(&acquire("k1")), R::Simple("QUEUED".into()));
        let r = call(&mut c, &["ACL", "SETUSER", "default", "-hincrby", "-pexpire"]);
        assert_eq!(r, R::Simple("QUEUED".into()));
        assert_eq!(c.call(&acquire("k2")), R::Simple("QUEUED".into()));
        let exec = call(&mut c, &["EXEC"]);
        // After EXEC, on this connection and on a new one.
        let same_conn = c.call(&acquire("k3"));
        let mut other = Conn::new(s.port);
        let new_conn = other.call(&acquire("k4"));
        let keys = snapshot(&mut other);
        replies.push((exec, same_conn, new_conn, keys));
    }
    let (native, lua) = (&replies[0], &replies[1]);
    let exec_classes = |r: &R| r.arr().iter().map(class).collect::<Vec<_>>();
    assert_eq!(exec_classes(&native.0), exec_classes(&lua.0), "inside EXEC: {:?} vs {:?}", native.0, lua.0);
    for (what, n, l) in [("same connection", &native.1, &lua.1), ("new connection", &native.2, &lua.2)] {
        assert!(l.is_err(), "Lua refuses after the change ({what}): {l:?}");
        assert_eq!(class(n), class(l), "{what}: native {n:?}, Lua {l:?}");
    }
    assert!(
        !native.3.contains_key(&b"k3"[..]) && !native.3.contains_key(&b"k4"[..]),
        "{:?}",
        native.3.keys()
    );
}

/// LOCK.INFO shows the fencing token only to users who may read the token key (others get nil
/// for `token`, the rest of the reply unchanged).
#[test]
fn lock_info_shows_the_token_only_to_readers_of_the_token_key() {
    let s = Server::start();
    let mut admin = Conn::new(s.port);
    let r = call(&mut admin, &["LOCK.ACQUIRE", "app:x", "o", "60000", "FENCE"]);
    let token = r.arr()[1].int();
    let ok = R::Simple("OK".into());
    let u = ["ACL", "SETUSER", "app", "on", "nopass", "-@all", "+lock.acquire", "+lock.info", "~app:*"];
    assert_eq!(call(&mut admin, &u), ok);
    let r = [
        "ACL",
        "SETUSER",
        "reader",
        "on",
        "nopass",
        "-@all",
        "+lock.info",
        "~app:*",
        "%R~redisson_lock_token:*",
    ];
    assert_eq!(call(&mut admin, &r), ok);
    let token_of = |c: &mut Conn| {
        let info = call(c, &["LOCK.INFO", "app:x"]);
        let pairs = info.arr().chunks(2).map(|p| (p[0].str(), p[1].clone())).collect::<Vec<_>>();
        assert!(pairs.iter().any(|(k, v)| k == "pttl" && v.int() > 0), "{info:?}");
        pairs.into_iter().find(|(k, _)| k == "token").map(|(_, v)| v).expect("a token field")
    };
    assert_eq!(token_of(&mut admin), R::Int(token));
    assert_eq!(token_of(&mut login(s.port, "reader")), R::Int(token));
    let mut app = login(s.port, "app");
    assert_eq!(
        call(&mut app, &["GET", "redisson_lock_token:{app:x}"]).err().split(' ').next(),
        Some("NOPERM")
    );
    assert_eq!(token_of(&mut app), R::Nil, "the token is not shown to a user who may not read it");
}

/// A LOCK.RELEASE or FORCERELEASE that frees the lock publishes its release message: the user
/// must be allowed that channel, as a Redisson unlock script's PUBLISH is (NOPERM, nothing
/// changed). A partial release publishes nothing and needs no channel; `lock.publish-mode off`
/// publishes nothing either.
#[test]
fn releases_follow_the_users_channel_permissions() {
    let s = Server::start();
    let mut admin = Conn::new(s.port);
    let ok = R::Simple("OK".into());
    for (user, chans) in [("nochan", "resetchannels"), ("chan", "&redisson_lock__channel:*")] {
        let u = ["ACL", "SETUSER", user, "on", "nopass", "+@all", "~app:*", "resetchannels", chans];
        assert_eq!(call(&mut admin, &u), ok);
    }
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[a("redisson_lock__channel:{app:r}")]);
    let mut no = login(s.port, "nochan");
    assert_eq!(call(&mut no, &["LOCK.ACQUIRE", "app:r", "o", "60000"]), R::Nil);
    assert_eq!(call(&mut no, &["LOCK.ACQUIRE", "app:r", "o", "60000"]), R::Nil);
    assert_eq!(
        call(&mut no, &["LOCK.RELEASE", "app:r", "o"]),
        R::Int(0),
        "a partial release publishes nothing"
    );
    let before = snapshot(&mut admin);
    for cmd in [&["LOCK.RELEASE", "app:r", "o"][..], &["LOCK.FORCERELEASE", "app:r"][..]] {
        let r = call(&mut no, cmd);
        assert_eq!(class(&r).as_deref(), Some("NOPERM"), "{cmd:?}: {r:?}");
    }
    assert_eq!(snapshot(&mut admin), before, "a refused release changes nothing");
    // A waiter would have been handed the lock: refused all the same (as the script is).
    let mut w = Conn::new(s.port);
    w.send(&[a("LOCK.ACQUIRE"), a("app:r"), a("w"), a("60000"), a("WAIT"), a("0")]);
    let queued = wait_for(Duration::from_secs(5), || {
        (info_int_conn(&mut admin, "lock", "lock_waiters") == 1).then_some(())
    });
    assert!(queued.is_some());
    assert_eq!(class(&call(&mut no, &["LOCK.RELEASE", "app:r", "o"])).as_deref(), Some("NOPERM"));
    assert_eq!(call(&mut admin, &["HGET", "app:r", "o"]), R::Bulk(a("1")));
    // With the channel: released, handed to the waiter.
    let mut yes = login(s.port, "chan");
    assert_eq!(call(&mut yes, &["LOCK.RELEASE", "app:r", "o"]), R::Int(1));
    assert_eq!(w.read().expect("handed over"), R::Nil);
    assert_eq!(call(&mut yes, &["LOCK.FORCERELEASE", "app:r"]), R::Int(1));
    let msgs = sub.until_marker(&mut admin, "PUBLISH", b"redisson_lock__channel:{app:r}");
    assert_eq!(msgs.len(), 1, "one release message, from the force release: {msgs:?}");
    // publish-mode off: nothing to publish, nothing to check.
    assert_eq!(call(&mut admin, &["CONFIG", "SET", "lock.publish-mode", "off"]), ok);
    assert_eq!(call(&mut no, &["LOCK.ACQUIRE", "app:r", "o", "60000"]), R::Nil);
    assert_eq!(call(&mut no, &["LOCK.RELEASE", "app:r", "o"]), R::Int(1));
}
