//! ACL categories per server version. Redis 7.2+ (and Valkey) let a module put its commands in
//! ACL categories (`RM_SetCommandACLCategories`), so a user with `+@write` can run LOCK.ACQUIRE;
//! on 7.0 module commands are in no category and must be granted by name.

mod common;
use common::*;

use testkit::cmd;

use resp::{Conn, R};

/// (major, minor) of the Redis API the server implements (Valkey reports redis_version 7.2.4).
fn api_version(c: &mut Conn) -> (u32, u32) {
    let info = cmd!(c, "INFO", "server").str();
    let v = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .expect("redis_version")
        .trim()
        .to_string();
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn user(port: u16, name: &str) -> Conn {
    let mut c = Conn::new(port);
    assert_eq!(cmd!(c, "AUTH", name, "pw"), R::Simple("OK".into()));
    c
}

fn allowed(r: &R) -> bool {
    !matches!(r, R::Err(e) if e.starts_with("NOPERM"))
}

#[test]
fn categories_follow_the_server_version() {
    let s = Server::start_opts(Opts::default().module_arg("redisson-scripts native"));
    let mut admin = Conn::new(s.port);
    let categories = api_version(&mut admin) >= (7, 2);
    for (name, rule) in [
        ("writer", "+@write"),
        ("reader", "+@read"),
        ("blocker", "+@blocking"),
        ("scripter", "+@scripting"),
        ("script-cmds", "+@scripting +exists +hexists +hincrby +pexpire +pttl"),
        ("named", "+lock.acquire +lock.release +lock.info"),
    ] {
        let mut args: Vec<String> =
            ["ACL", "SETUSER", name, "on", ">pw", "~*", "&*"].map(String::from).to_vec();
        args.extend(rule.split(' ').map(String::from));
        let r = admin.call(&args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>());
        assert_eq!(r, R::Simple("OK".into()), "{name}");
    }
    let acquire = |c: &mut Conn, k: &str| cmd!(c, "LOCK.ACQUIRE", k, "o", 30000);
    let mut w = user(s.port, "writer");
    let mut r = user(s.port, "reader");
    let mut b = user(s.port, "blocker");
    let mut sc = user(s.port, "scripter");
    let mut scc = user(s.port, "script-cmds");
    let mut n = user(s.port, "named");

    // Granted by name: every version.
    assert_eq!(acquire(&mut n, "a"), R::Nil);
    assert!(allowed(&cmd!(n, "LOCK.INFO", "a")));
    assert_eq!(cmd!(n, "LOCK.RELEASE", "a", "o"), R::Int(1));
    assert!(!allowed(&cmd!(n, "LOCK.RENEW", "a", "o", 1000)), "not granted");

    if categories {
        assert_eq!(acquire(&mut w, "w"), R::Nil, "@write covers LOCK.ACQUIRE");
        assert_eq!(cmd!(w, "LOCK.RENEW", "w", "o", 1000), R::Int(1));
        assert_eq!(cmd!(w, "LOCK.RELEASE", "w", "o"), R::Int(1));
        assert_eq!(cmd!(w, "LOCK.FORCERELEASE", "w"), R::Int(0));
        assert!(!allowed(&cmd!(w, "LOCK.INFO", "w")), "LOCK.INFO is @read, not @write");
        assert!(allowed(&cmd!(r, "LOCK.INFO", "w")), "@read covers LOCK.INFO");
        assert!(!allowed(&acquire(&mut r, "r")), "@read does not cover LOCK.ACQUIRE");
        assert_eq!(acquire(&mut b, "b"), R::Nil, "LOCK.ACQUIRE is @blocking");
        // LOCK.REDISSON is @scripting, like EVAL; the script's own commands must be allowed too
        // (spec section 9): +@scripting alone is refused as Lua refuses it, with ERR.
        let redisson =
            cmd!(sc, "LOCK.REDISSON", "149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 1, "s", 30000, "o");
        assert!(matches!(&redisson, R::Err(e) if e.starts_with("ERR ACL")), "{redisson:?}");
        let redisson =
            cmd!(scc, "LOCK.REDISSON", "149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 1, "s", 30000, "o");
        assert_eq!(redisson, R::Nil, "+@scripting and the script's commands");
        assert_eq!(
            cmd!(scc, "EVALSHA", "149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 1, "s", 30000, "o"),
            R::Nil
        );
    } else {
        for (c, what) in [(&mut w, "@write"), (&mut r, "@read"), (&mut b, "@blocking")] {
            assert!(!allowed(&acquire(c, "x")), "{what} does not cover module commands on 7.0");
        }
        assert!(!allowed(&cmd!(r, "LOCK.INFO", "x")));
        let redisson =
            cmd!(sc, "LOCK.REDISSON", "149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 1, "s", 30000, "o");
        assert!(!allowed(&redisson), "7.0: grant +lock.redisson by name");
        let redisson =
            cmd!(scc, "LOCK.REDISSON", "149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 1, "s", 30000, "o");
        assert!(!allowed(&redisson), "7.0: the script's commands are not enough either");
    }
    // Categories as COMMAND INFO reports them (7.0 has none for module commands).
    let info = cmd!(admin, "COMMAND", "INFO", "lock.acquire");
    let text = format!("{info:?}");
    assert_eq!(text.contains("@write"), categories, "{text}");
}
