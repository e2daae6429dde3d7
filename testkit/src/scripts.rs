//! Our own Lua implementation of every Redisson lock script kind (`lua/<kind>.lua`, written from
//! the documented algorithm, never Redisson's text), registered with a native server through
//! `lock.redisson-extra-scripts` so they drive the same native code paths as Redisson's own
//! SHA1s; and keyspace snapshots to compare two servers.
//!
//! File names are the kind names of `src/redisson_scripts.rs` (`Kind::name`), the names used in
//! `lock.redisson-extra-scripts` and in `INFO lock`.

use crate::resp::{Conn, R};
use crate::server::Opts;
use std::collections::BTreeMap;

pub const ACQUIRE: &str = include_str!("../../clients/python/src/redislock/lua/acquire.lua");
pub const UNLOCK_PUBLISH: &str = include_str!("../../clients/python/src/redislock/lua/unlock-publish.lua");
pub const UNLOCK: &str = include_str!("../../clients/python/src/redislock/lua/unlock.lua");
pub const UNLOCK_LATCH: &str = include_str!("../../clients/python/src/redislock/lua/unlock-latch.lua");
pub const FORCEUNLOCK_PUBLISH: &str =
    include_str!("../../clients/python/src/redislock/lua/forceunlock-publish.lua");
pub const FORCEUNLOCK: &str = include_str!("../../clients/python/src/redislock/lua/forceunlock.lua");
pub const RENEW: &str = include_str!("../../clients/python/src/redislock/lua/renew.lua");
pub const RENEW_BATCH: &str = include_str!("../../clients/python/src/redislock/lua/renew-batch.lua");
pub const FENCED_ACQUIRE: &str = include_str!("../../clients/python/src/redislock/lua/fenced-acquire.lua");
pub const FENCED_ACQUIRE_PLAIN: &str =
    include_str!("../../clients/python/src/redislock/lua/fenced-acquire-plain.lua");

/// (kind, source) of every script, in the order of the module's kind table.
pub const SOURCES: [(&str, &str); 10] = [
    ("acquire", ACQUIRE),
    ("unlock-publish", UNLOCK_PUBLISH),
    ("unlock", UNLOCK),
    ("unlock-latch", UNLOCK_LATCH),
    ("forceunlock-publish", FORCEUNLOCK_PUBLISH),
    ("forceunlock", FORCEUNLOCK),
    ("renew", RENEW),
    ("renew-batch", RENEW_BATCH),
    ("fenced-acquire", FENCED_ACQUIRE),
    ("fenced-acquire-plain", FENCED_ACQUIRE_PLAIN),
];

/// The read-write lock's scripts (`lua/rw-*.lua`), in the order of the module's operation
/// table: (operation, source).
pub const RW_SOURCES: [(&str, &str); 19] = [
    ("rw-read-acquire", include_str!("../../clients/python/src/redislock/lua/rw-read-acquire.lua")),
    (
        "rw-read-unlock-publish",
        include_str!("../../clients/python/src/redislock/lua/rw-read-unlock-publish.lua"),
    ),
    ("rw-read-unlock", include_str!("../../clients/python/src/redislock/lua/rw-read-unlock.lua")),
    ("rw-read-unlock-latch", include_str!("../../clients/python/src/redislock/lua/rw-read-unlock-latch.lua")),
    (
        "rw-read-unlock-latch-nil",
        include_str!("../../clients/python/src/redislock/lua/rw-read-unlock-latch-nil.lua"),
    ),
    (
        "rw-read-forceunlock-publish",
        include_str!("../../clients/python/src/redislock/lua/rw-read-forceunlock-publish.lua"),
    ),
    ("rw-read-forceunlock", include_str!("../../clients/python/src/redislock/lua/rw-read-forceunlock.lua")),
    ("rw-read-islocked", include_str!("../../clients/python/src/redislock/lua/rw-read-islocked.lua")),
    ("rw-read-renew", include_str!("../../clients/python/src/redislock/lua/rw-read-renew.lua")),
    (
        "rw-read-renew-batch-bug",
        include_str!("../../clients/python/src/redislock/lua/rw-read-renew-batch-bug.lua"),
    ),
    ("rw-read-renew-batch", include_str!("../../clients/python/src/redislock/lua/rw-read-renew-batch.lua")),
    (
        "rw-read-renew-batch-own",
        include_str!("../../clients/python/src/redislock/lua/rw-read-renew-batch-own.lua"),
    ),
    ("rw-write-acquire", include_str!("../../clients/python/src/redislock/lua/rw-write-acquire.lua")),
    (
        "rw-write-unlock-publish",
        include_str!("../../clients/python/src/redislock/lua/rw-write-unlock-publish.lua"),
    ),
    ("rw-write-unlock", include_str!("../../clients/python/src/redislock/lua/rw-write-unlock.lua")),
    (
        "rw-write-unlock-latch",
        include_str!("../../clients/python/src/redislock/lua/rw-write-unlock-latch.lua"),
    ),
    (
        "rw-write-unlock-latch-nil",
        include_str!("../../clients/python/src/redislock/lua/rw-write-unlock-latch-nil.lua"),
    ),
    (
        "rw-write-forceunlock-publish",
        include_str!("../../clients/python/src/redislock/lua/rw-write-forceunlock-publish.lua"),
    ),
    ("rw-write-forceunlock", include_str!("../../clients/python/src/redislock/lua/rw-write-forceunlock.lua")),
];

/// The semaphore's scripts (`lua/semaphore-*.lua`, `lua/pes-*.lua`), in the order of the
/// module's operation table: (operation, source).
pub const SEM_SOURCES: [(&str, &str); 31] = [
    ("semaphore-tryacquire", include_str!("../../clients/python/src/redislock/lua/semaphore-tryacquire.lua")),
    (
        "semaphore-release-publish",
        include_str!("../../clients/python/src/redislock/lua/semaphore-release-publish.lua"),
    ),
    ("semaphore-release", include_str!("../../clients/python/src/redislock/lua/semaphore-release.lua")),
    (
        "semaphore-releaseifexists",
        include_str!("../../clients/python/src/redislock/lua/semaphore-releaseifexists.lua"),
    ),
    ("semaphore-drain", include_str!("../../clients/python/src/redislock/lua/semaphore-drain.lua")),
    (
        "semaphore-trysetpermits-publish",
        include_str!("../../clients/python/src/redislock/lua/semaphore-trysetpermits-publish.lua"),
    ),
    (
        "semaphore-trysetpermits",
        include_str!("../../clients/python/src/redislock/lua/semaphore-trysetpermits.lua"),
    ),
    (
        "semaphore-trysetpermits-ttl",
        include_str!("../../clients/python/src/redislock/lua/semaphore-trysetpermits-ttl.lua"),
    ),
    (
        "semaphore-addpermits-publish",
        include_str!("../../clients/python/src/redislock/lua/semaphore-addpermits-publish.lua"),
    ),
    ("semaphore-addpermits", include_str!("../../clients/python/src/redislock/lua/semaphore-addpermits.lua")),
    (
        "pes-tryacquire-one-publish",
        include_str!("../../clients/python/src/redislock/lua/pes-tryacquire-one-publish.lua"),
    ),
    ("pes-tryacquire-one", include_str!("../../clients/python/src/redislock/lua/pes-tryacquire-one.lua")),
    ("pes-tryacquire", include_str!("../../clients/python/src/redislock/lua/pes-tryacquire.lua")),
    ("pes-release-publish", include_str!("../../clients/python/src/redislock/lua/pes-release-publish.lua")),
    ("pes-release", include_str!("../../clients/python/src/redislock/lua/pes-release.lua")),
    (
        "pes-release-many-partial",
        include_str!("../../clients/python/src/redislock/lua/pes-release-many-partial.lua"),
    ),
    ("pes-release-many", include_str!("../../clients/python/src/redislock/lua/pes-release-many.lua")),
    (
        "pes-available-publish",
        include_str!("../../clients/python/src/redislock/lua/pes-available-publish.lua"),
    ),
    ("pes-available", include_str!("../../clients/python/src/redislock/lua/pes-available.lua")),
    (
        "pes-getpermits-publish",
        include_str!("../../clients/python/src/redislock/lua/pes-getpermits-publish.lua"),
    ),
    ("pes-getpermits", include_str!("../../clients/python/src/redislock/lua/pes-getpermits.lua")),
    ("pes-acquired-publish", include_str!("../../clients/python/src/redislock/lua/pes-acquired-publish.lua")),
    ("pes-acquired", include_str!("../../clients/python/src/redislock/lua/pes-acquired.lua")),
    (
        "pes-setpermits-publish-bug",
        include_str!("../../clients/python/src/redislock/lua/pes-setpermits-publish-bug.lua"),
    ),
    ("pes-setpermits-bug", include_str!("../../clients/python/src/redislock/lua/pes-setpermits-bug.lua")),
    ("pes-setpermits", include_str!("../../clients/python/src/redislock/lua/pes-setpermits.lua")),
    (
        "pes-addpermits-publish",
        include_str!("../../clients/python/src/redislock/lua/pes-addpermits-publish.lua"),
    ),
    ("pes-addpermits", include_str!("../../clients/python/src/redislock/lua/pes-addpermits.lua")),
    (
        "pes-updatelease-publish",
        include_str!("../../clients/python/src/redislock/lua/pes-updatelease-publish.lua"),
    ),
    ("pes-updatelease", include_str!("../../clients/python/src/redislock/lua/pes-updatelease.lua")),
    ("pes-getlease", include_str!("../../clients/python/src/redislock/lua/pes-getlease.lua")),
];

/// The rest of Redisson's family (`lua/latch-*.lua`, `lua/fair-*.lua`, `lua/spin-*.lua`,
/// `lua/nonreentrant-*.lua`), from the documented behaviour, never Redisson's text.
pub const FAMILY_SOURCES: [(&str, &str); 25] = [
    (
        "latch-trysetcount-publish",
        include_str!("../../clients/python/src/redislock/lua/latch-trysetcount-publish.lua"),
    ),
    ("latch-trysetcount", include_str!("../../clients/python/src/redislock/lua/latch-trysetcount.lua")),
    (
        "latch-countdown-publish",
        include_str!("../../clients/python/src/redislock/lua/latch-countdown-publish.lua"),
    ),
    ("latch-countdown", include_str!("../../clients/python/src/redislock/lua/latch-countdown.lua")),
    ("latch-delete-publish", include_str!("../../clients/python/src/redislock/lua/latch-delete-publish.lua")),
    ("latch-delete", include_str!("../../clients/python/src/redislock/lua/latch-delete.lua")),
    ("fair-acquirefailed", include_str!("../../clients/python/src/redislock/lua/fair-acquirefailed.lua")),
    ("fair-tryacquire-bug", include_str!("../../clients/python/src/redislock/lua/fair-tryacquire-bug.lua")),
    ("fair-tryacquire", include_str!("../../clients/python/src/redislock/lua/fair-tryacquire.lua")),
    ("fair-acquire-bug", include_str!("../../clients/python/src/redislock/lua/fair-acquire-bug.lua")),
    (
        "fair-acquire-enqueue-bug",
        include_str!("../../clients/python/src/redislock/lua/fair-acquire-enqueue-bug.lua"),
    ),
    ("fair-acquire", include_str!("../../clients/python/src/redislock/lua/fair-acquire.lua")),
    (
        "fair-unlock-publish-bug",
        include_str!("../../clients/python/src/redislock/lua/fair-unlock-publish-bug.lua"),
    ),
    ("fair-unlock-bug", include_str!("../../clients/python/src/redislock/lua/fair-unlock-bug.lua")),
    (
        "fair-unlock-latch-bug",
        include_str!("../../clients/python/src/redislock/lua/fair-unlock-latch-bug.lua"),
    ),
    ("fair-unlock-latch", include_str!("../../clients/python/src/redislock/lua/fair-unlock-latch.lua")),
    (
        "fair-forceunlock-publish-bug",
        include_str!("../../clients/python/src/redislock/lua/fair-forceunlock-publish-bug.lua"),
    ),
    ("fair-forceunlock-bug", include_str!("../../clients/python/src/redislock/lua/fair-forceunlock-bug.lua")),
    ("fair-forceunlock", include_str!("../../clients/python/src/redislock/lua/fair-forceunlock.lua")),
    (
        "nonreentrant-fair-tryacquire",
        include_str!("../../clients/python/src/redislock/lua/nonreentrant-fair-tryacquire.lua"),
    ),
    (
        "nonreentrant-fair-acquire",
        include_str!("../../clients/python/src/redislock/lua/nonreentrant-fair-acquire.lua"),
    ),
    ("spin-unlock", include_str!("../../clients/python/src/redislock/lua/spin-unlock.lua")),
    ("spin-unlock-latch", include_str!("../../clients/python/src/redislock/lua/spin-unlock-latch.lua")),
    ("spin-forceunlock", include_str!("../../clients/python/src/redislock/lua/spin-forceunlock.lua")),
    ("nonreentrant-acquire", include_str!("../../clients/python/src/redislock/lua/nonreentrant-acquire.lua")),
];

/// The source of one kind's script; panics on an unknown kind.
pub fn lua(kind: &str) -> &'static str {
    SOURCES
        .iter()
        .chain(RW_SOURCES.iter())
        .chain(SEM_SOURCES.iter())
        .chain(FAMILY_SOURCES.iter())
        .find(|(k, _)| *k == kind)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("no script {kind}"))
}

pub struct OwnScript {
    pub kind: &'static str,
    pub body: &'static [u8],
    pub sha: String,
}

/// Every script kind, implemented from the documented algorithm (never Redisson's text).
pub fn own_scripts() -> Vec<OwnScript> {
    SOURCES
        .into_iter()
        .map(|(kind, body)| {
            let body = body.as_bytes();
            OwnScript { kind, body, sha: sha1_smol::Sha1::from(body).digest().to_string() }
        })
        .collect()
}

pub fn script(kind: &str) -> OwnScript {
    own_scripts()
        .into_iter()
        .chain(rw_scripts())
        .chain(sem_scripts())
        .chain(family_scripts())
        .find(|s| s.kind == kind)
        .unwrap_or_else(|| panic!("no script {kind}"))
}

/// The read-write lock's scripts (from the documented algorithm, never Redisson's text).
pub fn rw_scripts() -> Vec<OwnScript> {
    RW_SOURCES
        .into_iter()
        .map(|(kind, body)| {
            let body = body.as_bytes();
            OwnScript { kind, body, sha: sha1_smol::Sha1::from(body).digest().to_string() }
        })
        .collect()
}

/// The semaphore's scripts (from the documented behaviour, never Redisson's text).
pub fn sem_scripts() -> Vec<OwnScript> {
    SEM_SOURCES
        .into_iter()
        .map(|(kind, body)| {
            let body = body.as_bytes();
            OwnScript { kind, body, sha: sha1_smol::Sha1::from(body).digest().to_string() }
        })
        .collect()
}

/// The fair lock's, the latch's, the spin and non-reentrant locks' scripts (from the documented
/// behaviour, never Redisson's text).
pub fn family_scripts() -> Vec<OwnScript> {
    FAMILY_SOURCES
        .into_iter()
        .map(|(kind, body)| {
            let body = body.as_bytes();
            OwnScript { kind, body, sha: sha1_smol::Sha1::from(body).digest().to_string() }
        })
        .collect()
}

/// Load the family's scripts (so EVALSHA works in Lua too).
pub fn load_family(c: &mut Conn) {
    for s in family_scripts() {
        assert_eq!(c.call(&[b"SCRIPT".to_vec(), b"LOAD".to_vec(), s.body.to_vec()]).str(), s.sha);
    }
}

/// Load the semaphore's scripts (so EVALSHA works in Lua too).
pub fn load_sem(c: &mut Conn) {
    for s in sem_scripts() {
        assert_eq!(c.call(&[b"SCRIPT".to_vec(), b"LOAD".to_vec(), s.body.to_vec()]).str(), s.sha);
    }
}

/// Load the read-write lock's scripts (so EVALSHA works in Lua too).
pub fn load_rw(c: &mut Conn) {
    for s in rw_scripts() {
        assert_eq!(c.call(&[b"SCRIPT".to_vec(), b"LOAD".to_vec(), s.body.to_vec()]).str(), s.sha);
    }
}

/// `lock.redisson-extra-scripts` value registering every own script (both kinds).
pub fn extra_spec() -> String {
    own_scripts()
        .into_iter()
        .chain(rw_scripts())
        .chain(sem_scripts())
        .chain(family_scripts())
        .collect::<Vec<_>>()
        .iter()
        .map(|s| format!("{}:{}:{}", s.kind, s.sha, s.body.len()))
        .collect::<Vec<_>>()
        .join(",")
}

/// A server with the module, `native`, and our scripts registered.
pub fn native_opts() -> Opts {
    Opts::default()
        .module_arg("redisson-scripts native")
        .module_arg(&format!("redisson-extra-scripts {}", extra_spec()))
}

/// Load every own script (so EVALSHA works in Lua too).
pub fn load_all(c: &mut Conn) {
    for s in own_scripts() {
        assert_eq!(c.call(&[b"SCRIPT".to_vec(), b"LOAD".to_vec(), s.body.to_vec()]).str(), s.sha);
    }
}

/// What a key holds: type, content (hash fields or the string under ""), PEXPIRETIME.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyState {
    pub ty: String,
    pub content: BTreeMap<Vec<u8>, Vec<u8>>,
    pub pexpiretime: i64,
}

pub fn keys(c: &mut Conn) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut cursor = b"0".to_vec();
    loop {
        let r = c.call(&[b"SCAN".to_vec(), cursor, b"COUNT".to_vec(), b"1000".to_vec()]);
        let a = r.arr();
        cursor = a[0].bytes();
        out.extend(a[1].arr().iter().map(R::bytes));
        if cursor == b"0" {
            break;
        }
    }
    out.sort();
    out
}

pub fn key_state(c: &mut Conn, key: &[u8]) -> KeyState {
    let ty = c.call(&[b"TYPE".to_vec(), key.to_vec()]).str();
    let content = match ty.as_str() {
        "hash" => {
            let r = c.call(&[b"HGETALL".to_vec(), key.to_vec()]);
            r.arr().chunks(2).map(|p| (p[0].bytes(), p[1].bytes())).collect()
        }
        "string" => BTreeMap::from([(vec![], c.call(&[b"GET".to_vec(), key.to_vec()]).bytes())]),
        "list" => {
            let r = c.call(&[&b"LRANGE"[..], key, &b"0"[..], &b"-1"[..]]);
            r.arr().iter().enumerate().map(|(i, e)| (format!("{i:08}").into_bytes(), e.bytes())).collect()
        }
        "zset" => {
            let r = c.call(&[&b"ZRANGE"[..], key, &b"0"[..], &b"-1"[..], &b"WITHSCORES"[..]]);
            r.arr().chunks(2).map(|p| (p[0].bytes(), p[1].bytes())).collect()
        }
        _ => BTreeMap::new(),
    };
    let pexpiretime = c.call(&[b"PEXPIRETIME".to_vec(), key.to_vec()]).int();
    KeyState { ty, content, pexpiretime }
}

pub fn snapshot(c: &mut Conn) -> BTreeMap<Vec<u8>, KeyState> {
    keys(c).into_iter().map(|k| (k.clone(), key_state(c, &k))).collect()
}

/// Same keys, types and contents; deadlines within `tol_ms`.
pub fn assert_same_keyspace(a: &mut Conn, b: &mut Conn, tol_ms: i64, ctx: &str) {
    let (sa, sb) = (snapshot(a), snapshot(b));
    let names = |s: &BTreeMap<Vec<u8>, KeyState>| {
        s.keys().map(|k| String::from_utf8_lossy(k).into_owned()).collect::<Vec<_>>()
    };
    assert_eq!(names(&sa), names(&sb), "{ctx}: key sets differ");
    for (k, x) in &sa {
        let y = &sb[k];
        assert_eq!((&x.ty, &x.content), (&y.ty, &y.content), "{ctx}: {}", String::from_utf8_lossy(k));
        let close = (x.pexpiretime < 0 && x.pexpiretime == y.pexpiretime)
            || (x.pexpiretime - y.pexpiretime).abs() <= tol_ms;
        assert!(
            close,
            "{ctx}: {} deadlines {} vs {}",
            String::from_utf8_lossy(k),
            x.pexpiretime,
            y.pexpiretime
        );
    }
}

/// An argv for an assertion message, a script body (longer than 80 bytes) shortened.
pub fn show(argv: &[Vec<u8>]) -> String {
    argv.iter()
        .map(|a| if a.len() > 80 { "<script>".to_string() } else { String::from_utf8_lossy(a).into_owned() })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `INFO lock` counters `lock_redisson_<op><suffix>` (`_native` or `_lua`), by operation.
pub fn info_counts(c: &mut Conn, suffix: &str) -> BTreeMap<String, i64> {
    let info = c.call(&[&b"INFO"[..], b"lock"]).str();
    info.lines()
        .filter_map(|l| l.strip_prefix("lock_redisson_"))
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| k.strip_suffix(suffix).map(|k| (k.to_string(), v.trim().parse().unwrap_or(0))))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_kind_has_a_distinct_script() {
        let all: Vec<_> =
            super::own_scripts().into_iter().chain(super::rw_scripts()).chain(super::sem_scripts()).collect();
        assert_eq!(all.len(), 60);
        for (i, a) in all.iter().enumerate() {
            assert!(a.body.starts_with(b"-- Redisson"), "{}", a.kind);
            assert!(all[i + 1..].iter().all(|b| b.sha != a.sha && b.kind != a.kind), "{}", a.kind);
        }
    }
}
