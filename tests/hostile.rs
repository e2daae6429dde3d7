//! Hostile input: tens of thousands of random LOCK.* invocations against keys of every type,
//! bad input that must change nothing, ACL key patterns and selectors, and OOM behaviour.
//!
//! The random test prints its seed; rerun one case with `HOSTILE_SEED=<seed> cargo test --test
//! hostile`. Its client speaks raw RESP over TCP so that it can pipeline thousands of commands,
//! send any bytes, and read every reply (errors included) in order.

mod common;
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---- a raw RESP2/RESP3 client ----------------------------------------------------------------

#[derive(Clone, PartialEq)]
enum Reply {
    Nil,
    Int(i64),
    Status(String),
    Err(String),
    Bulk(Vec<u8>),
    Arr(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Other(String),
}

/// Bulk strings shown as (lossy) text, so failure messages and ACL LOG entries are readable.
impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Nil => write!(f, "nil"),
            Reply::Int(n) => write!(f, "{n}"),
            Reply::Status(s) => write!(f, "+{s}"),
            Reply::Err(e) => write!(f, "-{e}"),
            Reply::Bulk(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Reply::Arr(a) => f.debug_list().entries(a).finish(),
            Reply::Map(m) => f.debug_map().entries(m.iter().map(|(k, v)| (k, v))).finish(),
            Reply::Other(o) => write!(f, "{o}"),
        }
    }
}

impl Reply {
    fn err(&self) -> Option<&str> {
        match self {
            Reply::Err(e) => Some(e),
            _ => None,
        }
    }
}

struct Raw {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

fn encode(buf: &mut Vec<u8>, argv: &[Vec<u8>]) {
    buf.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
    for a in argv {
        buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

fn v(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        Raw { r: BufReader::new(s.try_clone().unwrap()), w: s }
    }

    fn send(&mut self, cmds: &[Vec<Vec<u8>>]) {
        let mut buf = Vec::new();
        for c in cmds {
            encode(&mut buf, c);
        }
        self.w.write_all(&buf).expect("write to redis-server");
    }

    fn line(&mut self) -> Vec<u8> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l).expect("read a reply (timed out or server gone)");
        assert!(l.ends_with(b"\r\n"), "truncated reply line {:?}", String::from_utf8_lossy(&l));
        l.truncate(l.len() - 2);
        l
    }

    fn read(&mut self) -> Reply {
        let l = self.line();
        let (t, rest) = l.split_first().expect("empty reply line");
        let text = String::from_utf8_lossy(rest).into_owned();
        let n = || text.parse::<i64>().unwrap_or_else(|_| panic!("bad length {text:?}"));
        match t {
            b'+' => Reply::Status(text),
            b'-' => Reply::Err(text),
            b':' => Reply::Int(n()),
            b'_' => Reply::Nil,
            b'$' | b'=' => {
                let len = n();
                if len < 0 {
                    return Reply::Nil;
                }
                let mut b = vec![0u8; len as usize + 2];
                std::io::Read::read_exact(&mut self.r, &mut b).expect("bulk body");
                b.truncate(len as usize);
                Reply::Bulk(b)
            }
            b'*' | b'~' | b'>' => {
                let len = n();
                if len < 0 {
                    return Reply::Nil;
                }
                Reply::Arr((0..len).map(|_| self.read()).collect())
            }
            b'%' => Reply::Map((0..n()).map(|_| (self.read(), self.read())).collect()),
            b'#' | b',' | b'(' => Reply::Other(text),
            _ => panic!("unknown reply type {:?}", String::from_utf8_lossy(&l)),
        }
    }

    fn call(&mut self, argv: &[&[u8]]) -> Reply {
        self.send(&[v(argv)]);
        self.read()
    }
}

// ---- random command generation ----------------------------------------------------------------

const NAMES: [[&str; 3]; 5] = [
    ["LOCK.ACQUIRE", "lock.acquire", "Lock.Acquire"],
    ["LOCK.RELEASE", "lock.release", "LoCk.ReLeAsE"],
    ["LOCK.RENEW", "lock.renew", "Lock.Renew"],
    ["LOCK.FORCERELEASE", "lock.forcerelease", "LOCK.forcerelease"],
    ["LOCK.INFO", "lock.info", "Lock.Info"],
];
const UNKNOWN: [&str; 7] =
    ["LOCK.ACQUIRES", "LOCK.", "LOCK", "LOCK.ACQUIRE\0", "LOCK.FOO", "lock.release2", "LOCK.INFOS"];
/// Integers at every edge, and things that only look like integers.
const INTS: [&str; 27] = [
    "1",
    "2",
    "5",
    "10",
    "100",
    "1000",
    "30000",
    "600000",
    "0",
    "-1",
    "-100",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "9223370000000000000",
    "1e9",
    "",
    "01",
    "+1",
    " 1",
    "1 ",
    "1.5",
    "0x10",
    "-0",
    "abc",
    "\u{0}1",
];
const LEASES: [&str; 9] = ["1", "3", "10", "50", "200", "1000", "30000", "600000", "9223370000000000000"];
const OPTIONS: [&str; 11] =
    ["WAIT", "wait", "Wait", "WAITS", "NOWAIT", "WAIT\0", "TIMEOUT", "", "PX", "FENCE", "FENCES"];
/// Owners that have a junk count in the seeded junk hashes.
const JUNK_OWNERS: [&str; 8] =
    ["j-abc", "j-zero", "j-neg", "j-max", "j-frac", "j-empty", "j-space", "j-plus"];
const JUNK_VALUES: [&str; 8] = ["abc", "0", "-5", "9223372036854775807", "1.5", "", " 1", "+1"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Acquire,
    Release,
    Renew,
    Force,
    Info,
    Unknown,
    Native,
}

fn kind_of(name: &[u8]) -> Kind {
    for (i, variants) in NAMES.iter().enumerate() {
        if name.eq_ignore_ascii_case(variants[0].as_bytes()) {
            return [Kind::Acquire, Kind::Release, Kind::Renew, Kind::Force, Kind::Info][i];
        }
    }
    Kind::Unknown
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wrap {
    Direct,
    Multi,
    Eval,
}

struct Item {
    argv: Vec<Vec<u8>>,
    kind: Kind,
    wrap: Wrap,
}

/// The keys of the test, by what they hold.
struct Keys {
    /// Only LOCK.* commands (and DEL/PEXPIRE) ever write these: free, or locks created by the module.
    clean: Vec<Vec<u8>>,
    /// (key, TYPE) of non-hash keys.
    typed: Vec<(Vec<u8>, &'static str)>,
    /// Hashes with junk hold counts.
    junk: Vec<Vec<u8>>,
}

impl Keys {
    fn all(&self) -> Vec<Vec<u8>> {
        let mut v = self.clean.clone();
        v.extend(self.typed.iter().map(|(k, _)| k.clone()));
        v.extend(self.junk.iter().cloned());
        v
    }
}

struct Gen {
    rng: StdRng,
    pool: Vec<Vec<u8>>,
    /// Random key names this generator used with LOCK.* commands (clean: nothing else writes them).
    fresh_keys: HashSet<Vec<u8>>,
    tainted: Arc<Mutex<HashSet<Vec<u8>>>>,
}

fn canonical_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let n: i64 = s.parse().ok()?;
    (n.to_string().as_bytes() == b).then_some(n)
}

/// Could this argv block for longer than a few milliseconds if run directly?
fn may_block_long(argv: &[Vec<u8>]) -> bool {
    kind_of(&argv[0]) == Kind::Acquire
        && (4..argv.len()).any(|i| {
            argv[i].eq_ignore_ascii_case(b"WAIT")
                && argv.get(i + 1).and_then(|t| canonical_i64(t)).is_some_and(|t| !(1..=20).contains(&t))
        })
}

impl Gen {
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.rng.gen_range(0..=max);
        (0..n).map(|_| self.rng.gen()).collect()
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.gen_range(0..xs.len())]
    }

    fn key(&mut self) -> Vec<u8> {
        if self.rng.gen_ratio(1, 8) {
            let k = self.bytes(12);
            self.fresh_keys.insert(k.clone());
            k
        } else {
            let i = self.rng.gen_range(0..self.pool.len());
            self.pool[i].clone()
        }
    }

    fn owner(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..20) {
            0..=4 => b"o1".to_vec(),
            5..=7 => b"o2".to_vec(),
            8 => b"o3".to_vec(),
            9..=10 => b"seed".to_vec(),
            11 => b"".to_vec(),
            12 => b"\x00\xff:1".to_vec(),
            13 => b"WAIT".to_vec(),
            14..=16 => self.pick(&JUNK_OWNERS).as_bytes().to_vec(),
            _ => self.bytes(10),
        }
    }

    fn int(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0..=6 => self.pick(&INTS).as_bytes().to_vec(),
            7 => self.rng.gen::<i64>().to_string().into_bytes(),
            8 => self.rng.gen_range(-5i64..100).to_string().into_bytes(),
            _ => self.bytes(6),
        }
    }

    fn lease(&mut self) -> Vec<u8> {
        if self.rng.gen_ratio(7, 10) {
            self.pick(&LEASES).as_bytes().to_vec()
        } else {
            self.int()
        }
    }

    fn token(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..5) {
            0 => self.int(),
            1 => self.pick(&OPTIONS).as_bytes().to_vec(),
            2 => self.owner(),
            3 => self.key(),
            _ => self.bytes(20),
        }
    }

    fn name(&mut self, k: usize) -> Vec<u8> {
        let variants = NAMES[k];
        self.pick(&variants).as_bytes().to_vec()
    }

    fn maybe_extra(&mut self, argv: &mut Vec<Vec<u8>>) {
        if self.rng.gen_ratio(1, 20) {
            for _ in 0..self.rng.gen_range(1..3) {
                let t = self.token();
                argv.push(t);
            }
        }
    }

    fn native(&mut self) -> Item {
        let i = self.rng.gen_range(0..self.pool.len());
        let key = self.pool[i].clone();
        let argv = match self.rng.gen_range(0..10) {
            0..=3 => vec![b"DEL".to_vec(), key.clone()],
            4..=6 => {
                vec![b"PEXPIRE".to_vec(), key.clone(), self.rng.gen_range(1..20).to_string().into_bytes()]
            }
            7..=8 => {
                let owner = self.owner();
                vec![b"HSET".to_vec(), key.clone(), owner, self.pick(&JUNK_VALUES).as_bytes().to_vec()]
            }
            _ => vec![b"SET".to_vec(), key.clone(), b"not a lock".to_vec()],
        };
        // Anything but DEL/PEXPIRE may leave non-LOCK data behind: leave the key out of the checks.
        if argv[0] != b"DEL" && argv[0] != b"PEXPIRE" {
            self.tainted.lock().unwrap().insert(key);
        } else {
            // A typed or junk key may now be gone: its content is no longer known either.
            self.tainted.lock().unwrap().insert([b"touched:".as_slice(), &key].concat());
        }
        Item { argv, kind: Kind::Native, wrap: Wrap::Direct }
    }

    fn item(&mut self) -> Item {
        let r = self.rng.gen_range(0..100);
        let mut argv: Vec<Vec<u8>> = match r {
            0..=34 => {
                let mut a = vec![self.name(0), self.key(), self.owner(), self.lease()];
                if self.rng.gen_ratio(1, 4) {
                    let opt = if self.rng.gen_ratio(4, 5) {
                        self.pick(&["WAIT", "wait", "Wait"]).as_bytes().to_vec()
                    } else {
                        self.pick(&OPTIONS).as_bytes().to_vec()
                    };
                    let t = if self.rng.gen_ratio(7, 10) {
                        self.rng.gen_range(1..=5).to_string().into_bytes()
                    } else {
                        self.int()
                    };
                    a.push(opt);
                    a.push(t);
                }
                if self.rng.gen_ratio(1, 4) {
                    let fence = self.pick(&["FENCE", "fence", "Fence"]).as_bytes().to_vec();
                    let at = self.rng.gen_range(3..=a.len());
                    a.insert(at, fence);
                }
                self.maybe_extra(&mut a);
                a
            }
            35..=54 => {
                let mut a = vec![self.name(1), self.key(), self.owner()];
                if self.rng.gen_ratio(2, 5) {
                    let l = self.lease();
                    a.push(l);
                }
                self.maybe_extra(&mut a);
                a
            }
            55..=66 => {
                let mut a = vec![self.name(2), self.key(), self.owner(), self.lease()];
                self.maybe_extra(&mut a);
                a
            }
            67..=73 => {
                let mut a = vec![self.name(3), self.key()];
                self.maybe_extra(&mut a);
                a
            }
            74..=83 => {
                let mut a = vec![self.name(4), self.key()];
                self.maybe_extra(&mut a);
                a
            }
            84..=93 => {
                // Any arity 0..8 after the name, any tokens.
                let k = self.rng.gen_range(0..5);
                let mut a = vec![self.name(k)];
                for i in 0..self.rng.gen_range(0..=8) {
                    let t = if i == 0 && self.rng.gen_ratio(3, 4) { self.key() } else { self.token() };
                    a.push(t);
                }
                a
            }
            94..=96 => return self.native(),
            _ => {
                let mut a = vec![self.pick(&UNKNOWN).as_bytes().to_vec()];
                for _ in 0..self.rng.gen_range(0..=4) {
                    let t = self.token();
                    a.push(t);
                }
                a
            }
        };
        let kind = kind_of(&argv[0]);
        let mut wrap = match self.rng.gen_range(0..100) {
            0..=5 => Wrap::Multi,
            6..=9 => Wrap::Eval,
            _ => Wrap::Direct,
        };
        if wrap == Wrap::Direct && may_block_long(&argv) {
            wrap = if self.rng.gen() { Wrap::Multi } else { Wrap::Eval };
        }
        if wrap == Wrap::Eval {
            let mut e = v(&[b"EVAL", b"return redis.pcall(unpack(ARGV))", b"0"]);
            e.append(&mut argv);
            argv = e;
        }
        Item { argv, kind, wrap }
    }
}

// ---- reply checks -----------------------------------------------------------------------------

/// The error replies the spec allows from LOCK.* commands, by the counter they feed.
fn classify_error(e: &str, name: &[u8]) -> Option<&'static str> {
    let exact: [(&str, &'static str); 9] = [
        ("ERR lease-ms is not an integer or out of range", "err_lease_int"),
        ("ERR lease-ms must be a positive integer", "err_lease_pos"),
        ("ERR timeout-ms must not be negative", "err_timeout_neg"),
        ("ERR timeout-ms is not an integer or out of range", "err_timeout_int"),
        ("ERR lease-ms is too large: the deadline would overflow", "err_overflow"),
        ("ERR timeout-ms is too large: the deadline would overflow", "err_overflow"),
        ("ERR owner must not be empty", "err_owner"),
        ("ERR syntax error", "err_syntax"),
        ("ERR lock hash holds a hold count that is not a positive integer", "corrupt"),
    ];
    if let Some((_, c)) = exact.iter().find(|(t, _)| *t == e) {
        return Some(c);
    }
    if e == "WRONGTYPE Operation against a key holding the wrong kind of value" {
        return Some("wrongtype");
    }
    let arity = format!("ERR wrong number of arguments for '{}' command", String::from_utf8_lossy(name));
    if e.eq_ignore_ascii_case(&arity) {
        return Some("err_arity");
    }
    None
}

/// Check one LOCK.* (or unknown command) reply; returns its class for the coverage counts.
/// Redis 8 resolves a command name only up to its first NUL byte (`LOCK.ACQUIRE\0` runs
/// LOCK.ACQUIRE); 7.x and Valkey answer "unknown command". The kind such a name resolves to.
fn resolved_kind(name: &[u8]) -> Kind {
    match name.iter().position(|b| *b == 0) {
        Some(nul) => kind_of(&name[..nul]),
        None => Kind::Unknown,
    }
}

fn check_reply(kind: Kind, argv: &[Vec<u8>], r: &Reply) -> &'static str {
    let resolved = resolved_kind(&argv[0]);
    let unknown_refused = r.err().is_some_and(|e| e.starts_with("ERR unknown command"));
    let (kind, name) = if kind == Kind::Unknown && resolved != Kind::Unknown && !unknown_refused {
        let nul = argv[0].iter().position(|b| *b == 0).unwrap_or(argv[0].len());
        (resolved, &argv[0][..nul])
    } else {
        (kind, &argv[0][..])
    };
    let ctx =
        || format!("{:?} -> {r:?}", argv.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>());
    if let Some(e) = r.err() {
        assert!(!e.contains("internal error") && !e.contains("panic"), "module internal error: {}", ctx());
        if kind == Kind::Unknown {
            assert!(e.starts_with("ERR unknown command"), "{}", ctx());
            return "unknown";
        }
        return classify_error(e, name).unwrap_or_else(|| panic!("unexpected error reply: {}", ctx()));
    }
    let waited = may_block_long(argv) || argv.iter().any(|a| a.eq_ignore_ascii_case(b"WAIT"));
    match (kind, r) {
        (Kind::Acquire, Reply::Nil) => "acquire_nil",
        (Kind::Acquire, Reply::Int(n)) if *n >= -1 || (waited && *n == -2) => "acquire_pttl",
        (Kind::Acquire, Reply::Arr(a)) => match a.as_slice() {
            [Reply::Int(-1), Reply::Int(t)] if *t > 0 => "acquire_token",
            [Reply::Int(n), Reply::Int(-1)] if *n >= -1 || (waited && *n == -2) => "acquire_fenced_pttl",
            _ => panic!("FENCE reply of the wrong shape: {}", ctx()),
        },
        (Kind::Release, Reply::Nil) => "release_nil",
        (Kind::Release, Reply::Int(0)) => "release_0",
        (Kind::Release, Reply::Int(1)) => "release_1",
        (Kind::Renew, Reply::Int(0)) => "renew_0",
        (Kind::Renew, Reply::Int(1)) => "renew_1",
        (Kind::Force, Reply::Int(0)) => "force_0",
        (Kind::Force, Reply::Int(1)) => "force_1",
        (Kind::Info, Reply::Nil) => "info_nil",
        (Kind::Info, Reply::Arr(a)) if a.len() == 8 && a[0] == Reply::Bulk(b"owners".to_vec()) => "info",
        (Kind::Info, Reply::Map(m)) if m.len() == 4 && m[0].0 == Reply::Bulk(b"owners".to_vec()) => "info",
        _ => panic!("reply of the wrong shape: {}", ctx()),
    }
}

type Counts = BTreeMap<&'static str, usize>;

/// Send `items` in one pipeline and check every reply.
fn run_batch(con: &mut Raw, items: &[Item], counts: &mut Counts) {
    let mut cmds = Vec::new();
    for it in items {
        if it.wrap == Wrap::Multi {
            cmds.push(v(&[b"MULTI"]));
            cmds.push(it.argv.clone());
            cmds.push(v(&[b"EXEC"]));
        } else {
            cmds.push(it.argv.clone());
        }
    }
    con.send(&cmds);
    for it in items {
        let class = match it.wrap {
            Wrap::Direct if it.kind == Kind::Native => {
                let r = con.read();
                if let Some(e) = r.err() {
                    assert!(e.starts_with("WRONGTYPE"), "{:?} -> {e}", it.argv);
                }
                "native"
            }
            Wrap::Direct => check_reply(it.kind, &it.argv, &con.read()),
            Wrap::Multi => {
                assert_eq!(con.read(), Reply::Status("OK".into()), "MULTI");
                let queued = con.read();
                let exec = con.read();
                match queued {
                    Reply::Status(s) if s == "QUEUED" => match exec {
                        Reply::Arr(mut rs) if rs.len() == 1 => {
                            let r = rs.pop().unwrap();
                            *counts.entry("multi").or_default() += 1;
                            check_reply(it.kind, &it.argv, &r)
                        }
                        other => panic!("EXEC of {:?} -> {other:?}", it.argv),
                    },
                    Reply::Err(_) => {
                        let e =
                            exec.err().unwrap_or_else(|| panic!("EXEC after a refused command: {exec:?}"));
                        assert!(e.starts_with("EXECABORT"), "{e}");
                        *counts.entry("execabort").or_default() += 1;
                        check_reply(it.kind, &it.argv, &queued)
                    }
                    other => panic!("queueing {:?} -> {other:?}", it.argv),
                }
            }
            Wrap::Eval => {
                let r = con.read();
                let inner = &it.argv[3..];
                match &r {
                    Reply::Err(e) if e.contains("from script") || e.contains("@user_script") => {
                        assert!(!e.contains("internal error"), "{e}");
                        // Lua-level refusal (arity, unknown command) or a module error seen through
                        // the script: strip the script decoration before classifying.
                        if classify_error(e.split(" script:").next().unwrap_or(e), &inner[0]).is_none()
                            && !e.contains("Unknown Redis command")
                            && !e.contains("Unknown command")
                            && !e.contains("Wrong number of args")
                        {
                            panic!("EVAL {inner:?} -> unexpected {e}");
                        }
                        *counts.entry("eval").or_default() += 1;
                        "script_err"
                    }
                    // redis.pcall hands back module errors as error replies; nil becomes false.
                    _ => {
                        if it.kind == Kind::Unknown && resolved_kind(&inner[0]) == Kind::Unknown {
                            panic!("EVAL of an unknown command succeeded: {inner:?} -> {r:?}");
                        }
                        *counts.entry("eval").or_default() += 1;
                        match &r {
                            Reply::Arr(a) if it.kind == Kind::Info => {
                                assert_eq!(a.len(), 8, "{r:?}");
                                "info"
                            }
                            _ => check_reply(it.kind, inner, &r),
                        }
                    }
                }
            }
        };
        *counts.entry(class).or_default() += 1;
        *counts.entry("total").or_default() += 1;
    }
}

fn info_field(con: &mut Raw, section: &str, field: &str) -> String {
    let Reply::Bulk(b) = con.call(&[b"INFO", section.as_bytes()]) else { panic!("INFO {section}") };
    let text = String::from_utf8(b).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// Create the key pool: free names, module-made locks, every Redis type, junk hashes.
fn seed(con: &mut Raw) -> Keys {
    let mut clean: Vec<Vec<u8>> = (0..10).map(|i| format!("lock:{i}").into_bytes()).collect();
    clean.extend([
        b"".to_vec(),
        b"\x00lock\xff".to_vec(),
        b"{tag}lock".to_vec(),
        b"lock{".to_vec(),
        b"}lock".to_vec(),
        b"WAIT".to_vec(),
        b"lock with spaces\r\n".to_vec(),
    ]);
    let seeded: Vec<Vec<u8>> = (0..6).map(|i| format!("seeded:{i}").into_bytes()).collect();
    for k in &seeded {
        for _ in 0..3 {
            assert_eq!(con.call(&[b"LOCK.ACQUIRE", k, b"seed", b"600000"]), Reply::Nil);
        }
    }
    clean.extend(seeded);
    let typed: Vec<(Vec<u8>, &str)> = vec![
        (b"t:string".to_vec(), "string"),
        (b"t:int".to_vec(), "string"),
        (b"t:list".to_vec(), "list"),
        (b"t:set".to_vec(), "set"),
        (b"t:zset".to_vec(), "zset"),
        (b"t:stream".to_vec(), "stream"),
        (b"t:bigset".to_vec(), "set"),
    ];
    let setup: Vec<Vec<Vec<u8>>> = vec![
        v(&[b"SET", b"t:string", b"hello"]),
        v(&[b"SET", b"t:int", b"1"]),
        v(&[b"RPUSH", b"t:list", b"o1", b"1"]),
        v(&[b"SADD", b"t:set", b"o1", b"1"]),
        v(&[b"ZADD", b"t:zset", b"1", b"o1"]),
        v(&[b"XADD", b"t:stream", b"*", b"o1", b"1"]),
        v(&[b"PEXPIRE", b"t:list", b"600000"]),
    ];
    con.send(&setup);
    for c in &setup {
        let r = con.read();
        assert!(r.err().is_none(), "{c:?} -> {r:?}");
    }
    let mut big = v(&[b"SADD", b"t:bigset"]);
    big.extend((0..300).map(|i| format!("m{i}").into_bytes()));
    assert_eq!(con.call(&big.iter().map(Vec::as_slice).collect::<Vec<_>>()), Reply::Int(300));
    // Junk hashes: every junk owner with its junk count, plus a valid owner, one with a TTL.
    let junk: Vec<Vec<u8>> = (0..4).map(|i| format!("junk:{i}").into_bytes()).collect();
    for (i, k) in junk.iter().enumerate() {
        let mut hset = v(&[b"HSET", k]);
        for (o, val) in JUNK_OWNERS.iter().zip(JUNK_VALUES) {
            hset.push(o.as_bytes().to_vec());
            hset.push(val.as_bytes().to_vec());
        }
        hset.push(b"o2".to_vec());
        hset.push(b"1".to_vec());
        let r = con.call(&hset.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert_eq!(r, Reply::Int(JUNK_OWNERS.len() as i64 + 1));
        if i % 2 == 1 {
            assert_eq!(con.call(&[b"PEXPIRE", k, b"600000"]), Reply::Int(1));
        }
    }
    Keys { clean, typed, junk }
}

#[test]
fn thirty_thousand_hostile_invocations_leave_server_and_locks_intact() {
    let mut s = Server::start();
    let mut con = Raw::connect(s.port);
    let pid = info_field(&mut con, "server", "process_id");
    assert_eq!(Some(pid.parse::<u32>().unwrap()), s.pid());
    let uptime: u64 = info_field(&mut con, "server", "uptime_in_seconds").parse().unwrap();
    let keys = seed(&mut con);

    let seed: u64 =
        std::env::var("HOSTILE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("hostile seed: {seed} (rerun with HOSTILE_SEED={seed})");
    let tainted = Arc::new(Mutex::new(HashSet::new()));
    let threads: Vec<_> = (0..3u64)
        .map(|t| {
            let pool = keys.all();
            let tainted = tainted.clone();
            let port = s.port;
            std::thread::spawn(move || {
                let mut g =
                    Gen { rng: StdRng::seed_from_u64(seed ^ t), pool, fresh_keys: HashSet::new(), tainted };
                let mut con = Raw::connect(port);
                if t == 2 {
                    // One client speaks RESP3 (maps, nulls).
                    assert!(matches!(con.call(&[b"HELLO", b"3"]), Reply::Map(_)));
                }
                let mut counts = Counts::new();
                for _ in 0..50 {
                    let items: Vec<Item> = (0..200).map(|_| g.item()).collect();
                    run_batch(&mut con, &items, &mut counts);
                }
                (counts, g.fresh_keys)
            })
        })
        .collect();
    let mut counts = Counts::new();
    let mut fresh = HashSet::new();
    for t in threads {
        let (c, f) = t.join().expect("a client thread failed (see its panic above)");
        for (k, n) in c {
            *counts.entry(k).or_default() += n;
        }
        fresh.extend(f);
    }
    eprintln!("reply classes: {counts:?}");
    assert_eq!(counts["total"], 30_000);
    // The generator reached every path that matters.
    for class in [
        "acquire_nil",
        "acquire_pttl",
        "acquire_token",
        "acquire_fenced_pttl",
        "release_nil",
        "release_0",
        "release_1",
        "renew_0",
        "renew_1",
        "force_0",
        "force_1",
        "info",
        "info_nil",
        "err_arity",
        "err_lease_int",
        "err_lease_pos",
        "err_timeout_neg",
        "err_timeout_int",
        "err_overflow",
        "err_owner",
        "err_syntax",
        "wrongtype",
        "corrupt",
        "unknown",
        "execabort",
        "multi",
        "eval",
        "native",
    ] {
        assert!(counts.get(class).copied().unwrap_or(0) > 0, "no `{class}` reply in 30 000 commands");
    }

    // Same process, never restarted, nothing panicked, no waiter left behind.
    s.assert_alive();
    assert_eq!(info_field(&mut con, "server", "process_id"), pid, "the server process changed");
    let uptime_now: u64 = info_field(&mut con, "server", "uptime_in_seconds").parse().unwrap();
    assert!(uptime_now >= uptime, "uptime reset: {uptime} -> {uptime_now}");
    let mut rc = s.conn();
    assert_eq!(stat(&mut rc, "panics_caught"), 0, "a panic was caught in the module:\n{}", s.log());
    let drained = wait_for(Duration::from_secs(5), || {
        (stat(&mut rc, "waiters") == 0 && stat(&mut rc, "keys_with_waiters") == 0).then_some(())
    });
    assert!(drained.is_some(), "waiters left: {:?}", lock_info(&mut rc));
    let li = lock_info(&mut rc);
    eprintln!("module stats: {li:?}");
    let started: i64 = li["waits_started"].parse().unwrap();
    let ended: i64 = ["waits_granted", "waits_timed_out", "waits_cancelled", "waits_failed"]
        .iter()
        .map(|f| li[*f].parse::<i64>().unwrap())
        .sum();
    assert!(started > 0, "no client ever waited: {li:?}");
    assert!(li["waits_granted"] != "0", "no waiter was ever granted: {li:?}");
    assert_eq!(started, ended, "every wait must end exactly once: {li:?}");

    // Every lock the module made is a valid lock: counts >= 1, and a TTL.
    let tainted = tainted.lock().unwrap().clone();
    let mut checked = 0;
    let mut clean: Vec<Vec<u8>> = keys.clean.clone();
    clean.extend(fresh.into_iter().filter(|k| !keys.all().contains(k)));
    for k in clean.iter().filter(|k| !tainted.contains(*k)) {
        let ty = con.call(&[b"TYPE", k]);
        match ty {
            Reply::Status(t) if t == "none" => continue,
            Reply::Status(t) if t == "hash" => {}
            other => panic!("clean key {k:?} has type {other:?}"),
        }
        let Reply::Arr(fields) = con.call(&[b"HGETALL", k]) else { panic!("HGETALL") };
        if fields.is_empty() {
            continue; // its lease ended between TYPE and HGETALL
        }
        checked += 1;
        for pair in fields.chunks(2) {
            let Reply::Bulk(val) = &pair[1] else { panic!("{pair:?}") };
            let n = canonical_i64(val);
            assert!(n.is_some_and(|n| n >= 1), "lock {k:?}: field {:?} holds {val:?}", pair[0]);
        }
        match con.call(&[b"PTTL", k]) {
            // 0: the lease ends within this millisecond; -2: it expired between the reads.
            Reply::Int(n) if n >= 0 => {}
            Reply::Int(-2) => {}
            other => panic!("lock {k:?} without a lease: PTTL {other:?}"),
        }
        let info = con.call(&[b"LOCK.INFO", k]);
        assert!(matches!(info, Reply::Arr(_) | Reply::Nil), "LOCK.INFO {k:?} -> {info:?}");
    }
    assert!(checked > 0, "no lock survived to be checked");
    // LOCK.* never changed a non-hash key (unless DEL/PEXPIRE/SET/HSET touched it).
    for (k, ty) in &keys.typed {
        if tainted.contains(k) || tainted.contains(&[b"touched:".as_slice(), k].concat()) {
            continue;
        }
        assert_eq!(con.call(&[b"TYPE", k]), Reply::Status(ty.to_string()), "{k:?}");
    }
    s.assert_alive();
}

// ---- bad input changes nothing ----------------------------------------------------------------

/// (DUMP, PEXPIRETIME) of a key: its exact content and absolute deadline.
fn snapshot(con: &mut Raw, k: &[u8]) -> (Reply, Reply) {
    (con.call(&[b"DUMP", k]), con.call(&[b"PEXPIRETIME", k]))
}

#[test]
fn bad_input_changes_nothing_publishes_nothing_notifies_nothing() {
    let s = Server::start();
    let mut con = Raw::connect(s.port);
    assert_eq!(con.call(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"]), Reply::Status("OK".into()));
    let setup: Vec<Vec<Vec<u8>>> = vec![
        v(&[b"SET", b"str", b"x"]),
        v(&[b"RPUSH", b"list", b"a"]),
        v(&[b"SADD", b"set", b"a"]),
        v(&[b"ZADD", b"zset", b"1", b"a"]),
        v(&[b"XADD", b"stream", b"*", b"a", b"1"]),
        v(&[b"HSET", b"junk", b"me", b"abc", b"zero", b"0", b"max", b"9223372036854775807"]),
        v(&[b"LOCK.ACQUIRE", b"lock", b"me", b"600000"]),
        v(&[b"LOCK.ACQUIRE", b"lock", b"me", b"600000"]),
        v(&[b"LOCK.ACQUIRE", b"\x00bin\xff", b"\x00me\xff", b"600000"]),
    ];
    con.send(&setup);
    for c in &setup {
        let r = con.read();
        assert!(r.err().is_none(), "{c:?} -> {r:?}");
    }
    // Subscribed (confirmed) after the setup: from here on, any event or message is a change.
    let mut sub = Raw::connect(s.port);
    sub.send(&[v(&[b"PSUBSCRIBE", b"__key*__:*", b"redisson_lock__channel*"])]);
    sub.read();
    sub.read();
    let keys: Vec<&[u8]> =
        vec![b"str", b"list", b"set", b"zset", b"stream", b"junk", b"lock", b"\x00bin\xff", b"absent"];
    let owners: Vec<&[u8]> = vec![b"me", b"other", b"\x00me\xff", b"zero", b"max"];
    let before: Vec<_> = keys.iter().map(|k| snapshot(&mut con, k)).collect();

    let bad_leases: [&[u8]; 12] = [
        b"0",
        b"-1",
        b"abc",
        b"",
        b"1.5",
        b"1e9",
        b"+5",
        b"05",
        b" 5",
        b"9223372036854775807",
        b"9223372036854775808",
        b"-9223372036854775808",
    ];
    let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
    for k in &keys {
        for o in &owners {
            for l in bad_leases {
                cmds.push(v(&[b"LOCK.ACQUIRE", k, o, l]));
                cmds.push(v(&[b"LOCK.ACQUIRE", k, o, l, b"WAIT", b"0"]));
                cmds.push(v(&[b"LOCK.RELEASE", k, o, l]));
                cmds.push(v(&[b"LOCK.RENEW", k, o, l]));
            }
            for (opt, t) in [
                (&b"WAIT"[..], &b"-1"[..]),
                (b"WAIT", b"x"),
                (b"WAIT", b""),
                (b"WAIT", b"9223372036854775808"),
                (b"WAIT", b"9223372036854775807"),
                (b"NOWAIT", b"5"),
                (b"", b"5"),
                (b"WAIT\0", b"5"),
            ] {
                cmds.push(v(&[b"LOCK.ACQUIRE", k, o, b"1000", opt, t]));
            }
            cmds.push(v(&[b"LOCK.ACQUIRE", k, o, b"1000", b"WAIT"]));
            cmds.push(v(&[b"LOCK.ACQUIRE", k, o, b"1000", b"WAIT", b"0", b"WAIT", b"0"]));
            cmds.push(v(&[b"LOCK.ACQUIRE", k, o, b"1000", b"WAIT", b"0", b"extra"]));
            cmds.push(v(&[b"LOCK.RELEASE", k, o, b"1000", b"extra"]));
            cmds.push(v(&[b"LOCK.RENEW", k, o]));
            cmds.push(v(&[b"LOCK.RENEW", k, o, b"1000", b"extra"]));
        }
        for cmd in [&b"LOCK.ACQUIRE"[..], b"LOCK.RELEASE", b"LOCK.RENEW"] {
            cmds.push(v(&[cmd, k, b"", b"1000"]));
        }
        cmds.push(v(&[b"LOCK.FORCERELEASE", k, b"extra"]));
        cmds.push(v(&[b"LOCK.INFO", k, b"extra"]));
        cmds.push(v(&[b"LOCK.ACQUIRE", k, b"me"]));
        cmds.push(v(&[b"LOCK.RELEASE", k]));
    }
    // Valid arguments against keys whose content is refused.
    for k in [&b"str"[..], b"list", b"set", b"zset", b"stream"] {
        cmds.push(v(&[b"LOCK.ACQUIRE", k, b"me", b"1000"]));
        cmds.push(v(&[b"LOCK.ACQUIRE", k, b"me", b"1000", b"WAIT", b"0"]));
        cmds.push(v(&[b"LOCK.RELEASE", k, b"me"]));
        cmds.push(v(&[b"LOCK.RENEW", k, b"me", b"1000"]));
        cmds.push(v(&[b"LOCK.FORCERELEASE", k]));
        cmds.push(v(&[b"LOCK.INFO", k]));
    }
    for o in [&b"me"[..], b"zero", b"max"] {
        cmds.push(v(&[b"LOCK.ACQUIRE", b"junk", o, b"1000"]));
        cmds.push(v(&[b"LOCK.ACQUIRE", b"junk", o, b"1000", b"WAIT", b"0"]));
        // A count of i64::MAX is a valid hold (it can be released or renewed), only not re-entered.
        if o != b"max" {
            cmds.push(v(&[b"LOCK.RELEASE", b"junk", o, b"1000"]));
            cmds.push(v(&[b"LOCK.RENEW", b"junk", o, b"1000"]));
        }
    }
    cmds.push(v(&[b"LOCK.INFO", b"junk"]));
    let n = cmds.len();
    con.send(&cmds);
    for c in &cmds {
        let r = con.read();
        let e = r.err().unwrap_or_else(|| panic!("{c:?} must be refused, got {r:?}"));
        let ok = classify_error(e, &c[0]).is_some();
        assert!(ok, "{c:?} -> unexpected error {e:?}");
    }
    let after: Vec<_> = keys.iter().map(|k| snapshot(&mut con, k)).collect();
    for ((k, b), a) in keys.iter().zip(&before).zip(&after) {
        assert_eq!(b, a, "{} refused commands changed key {k:?}", n);
    }
    // Nothing was published and no keyspace event fired: the first thing the subscriber sees
    // after the refusals is the PING it sends now.
    sub.send(&[v(&[b"PING", b"marker"])]);
    let r = sub.read();
    assert_eq!(r, Reply::Arr(vec![Reply::Bulk(b"pong".to_vec()), Reply::Bulk(b"marker".to_vec())]));
    assert_eq!(stat(&mut s.conn(), "panics_caught"), 0);
}

// ---- ACL --------------------------------------------------------------------------------------

fn auth(s: &Server, user: &str) -> Raw {
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&[b"AUTH", user.as_bytes(), b"any"]), Reply::Status("OK".into()));
    c
}

fn is_noperm(r: &Reply) -> bool {
    r.err().is_some_and(|e| e.starts_with("NOPERM"))
}

/// Every LOCK.* command on `key`, in an order where each one can succeed.
fn every_command(key: &[u8]) -> Vec<Vec<Vec<u8>>> {
    vec![
        v(&[b"LOCK.ACQUIRE", key, b"me", b"60000"]),
        v(&[b"LOCK.ACQUIRE", key, b"me", b"60000", b"WAIT", b"10"]),
        v(&[b"LOCK.INFO", key]),
        v(&[b"LOCK.RENEW", key, b"me", b"60000"]),
        v(&[b"LOCK.RELEASE", key, b"me", b"60000"]),
        v(&[b"LOCK.RELEASE", key, b"me"]),
        v(&[b"LOCK.FORCERELEASE", key]),
    ]
}

fn check_key_patterns(s: &Server, user: &str) {
    let mut c = auth(s, user);
    let mut admin = Raw::connect(s.port);
    // Outside app:*: NOPERM for every command, and the key is never touched.
    assert_eq!(admin.call(&[b"LOCK.ACQUIRE", b"other:x", b"admin", b"60000"]), Reply::Nil);
    let before = snapshot(&mut admin, b"other:x");
    for cmd in every_command(b"other:x").into_iter().chain(every_command(b"other:free")) {
        let r = c.call(&cmd.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert!(is_noperm(&r), "{user}: {cmd:?} -> {r:?}, want NOPERM");
    }
    assert_eq!(snapshot(&mut admin, b"other:x"), before);
    assert_eq!(admin.call(&[b"EXISTS", b"other:free"]), Reply::Int(0));
    // Inside app:*: allowed, and they do their job.
    let key = format!("app:{user}");
    let replies: Vec<Reply> = every_command(key.as_bytes()).iter().map(|cmd| c_call(&mut c, cmd)).collect();
    assert_eq!(replies[0], Reply::Nil, "{user}: acquire");
    assert_eq!(replies[1], Reply::Nil, "{user}: reentrant acquire with WAIT");
    assert!(matches!(replies[2], Reply::Arr(_)), "{user}: info {:?}", replies[2]);
    assert_eq!(replies[3], Reply::Int(1), "{user}: renew");
    assert_eq!(replies[4], Reply::Int(0), "{user}: partial release");
    assert_eq!(replies[5], Reply::Int(1), "{user}: full release");
    assert_eq!(replies[6], Reply::Int(0), "{user}: force release of a free lock");
    // Keys of another user's pattern inside a script are refused too.
    let r = c.call(&[b"EVAL", b"return redis.call('LOCK.ACQUIRE', KEYS[1], 'me', '1000')", b"1", b"other:y"]);
    assert!(r.err().is_some_and(|e| e.contains("NOPERM") || e.contains("permissions")), "{user}: EVAL {r:?}");
    assert_eq!(admin.call(&[b"EXISTS", b"other:y"]), Reply::Int(0));
}

fn c_call(c: &mut Raw, cmd: &[Vec<u8>]) -> Reply {
    c.call(&cmd.iter().map(Vec::as_slice).collect::<Vec<_>>())
}

#[test]
fn acl_key_patterns_and_read_only_selectors() {
    let s = Server::start();
    let mut admin = Raw::connect(s.port);
    let ok = Reply::Status("OK".into());
    assert_eq!(
        admin.call(&[
            b"ACL",
            b"SETUSER",
            b"app",
            b"on",
            b"nopass",
            b"~app:*",
            b"&redisson_lock__channel:*",
            b"+@all"
        ]),
        ok
    );
    assert_eq!(
        admin.call(&[
            b"ACL",
            b"SETUSER",
            b"named",
            b"on",
            b"nopass",
            b"~app:*",
            b"&redisson_lock__channel:*",
            b"+lock.acquire",
            b"+lock.release",
            b"+lock.renew",
            b"+lock.forcerelease",
            b"+lock.info",
            b"+eval",
        ]),
        ok
    );
    check_key_patterns(&s, "app");
    check_key_patterns(&s, "named");

    // `named` has only the LOCK.* commands: a plain hash write is refused.
    let mut named = auth(&s, "named");
    assert!(is_noperm(&named.call(&[b"HSET", b"app:h", b"f", b"1"])));

    // A restricted user allowed the lock channels (not PUBLISH itself) gets its release message
    // published (without the channel, the release is refused: tests/security_acl.rs).
    let mut sub = Raw::connect(s.port);
    sub.send(&[v(&[b"SUBSCRIBE", b"redisson_lock__channel:{app:pub}"])]);
    sub.read();
    assert_eq!(named.call(&[b"LOCK.ACQUIRE", b"app:pub", b"me", b"60000"]), Reply::Nil);
    assert_eq!(named.call(&[b"LOCK.RELEASE", b"app:pub", b"me"]), Reply::Int(1));
    assert_eq!(
        sub.read(),
        Reply::Arr(vec![
            Reply::Bulk(b"message".to_vec()),
            Reply::Bulk(b"redisson_lock__channel:{app:pub}".to_vec()),
            Reply::Bulk(b"0".to_vec()),
        ])
    );

    // Read-only key selector: LOCK.INFO (read key spec) is allowed, LOCK.ACQUIRE (write) is not.
    assert_eq!(admin.call(&[b"LOCK.ACQUIRE", b"app:x", b"admin", b"60000"]), Reply::Nil);
    assert_eq!(
        admin.call(&[
            b"ACL",
            b"SETUSER",
            b"reader",
            b"on",
            b"nopass",
            b"%R~app:*",
            b"+lock.info",
            b"+lock.acquire"
        ]),
        ok
    );
    let mut reader = auth(&s, "reader");
    let before = snapshot(&mut admin, b"app:x");
    match reader.call(&[b"LOCK.INFO", b"app:x"]) {
        Reply::Arr(a) => assert_eq!(a[0], Reply::Bulk(b"owners".to_vec())),
        other => panic!("reader: LOCK.INFO app:x -> {other:?}"),
    }
    assert_eq!(reader.call(&[b"LOCK.INFO", b"app:free"]), Reply::Nil);
    for cmd in [
        v(&[b"LOCK.ACQUIRE", b"app:x", b"reader", b"60000"]),
        v(&[b"LOCK.ACQUIRE", b"app:x", b"admin", b"60000"]),
        v(&[b"LOCK.ACQUIRE", b"app:new", b"reader", b"60000"]),
        v(&[b"LOCK.ACQUIRE", b"app:x", b"reader", b"60000", b"WAIT", b"0"]),
    ] {
        let r = c_call(&mut reader, &cmd);
        assert!(is_noperm(&r), "reader: {cmd:?} -> {r:?}, want NOPERM");
    }
    assert!(is_noperm(&reader.call(&[b"LOCK.INFO", b"other:x"])), "reader outside app:*");
    assert_eq!(snapshot(&mut admin, b"app:x"), before);
    assert_eq!(admin.call(&[b"EXISTS", b"app:new"]), Reply::Int(0));
    // The refusals are visible in the ACL log, naming the command and key.
    let Reply::Arr(log) = admin.call(&[b"ACL", b"LOG", b"1"]) else { panic!("ACL LOG") };
    let entry = format!("{log:?}");
    assert!(entry.contains("app:x") || entry.contains("other:x"), "{entry}");
}

// ---- OOM --------------------------------------------------------------------------------------

#[test]
fn under_oom_acquire_is_refused_but_release_renew_and_force_work() {
    let s = Server::start();
    let mut c = Raw::connect(s.port);
    let ok = Reply::Status("OK".into());
    // Locks made before memory runs out: a reentrant one, a single hold, one for FORCERELEASE.
    for (k, n) in [(&b"oom:deep"[..], 3), (b"oom:single", 1), (b"oom:force", 1)] {
        for _ in 0..n {
            assert_eq!(c.call(&[b"LOCK.ACQUIRE", k, b"me", b"600000"]), Reply::Nil);
        }
    }
    // Some data, then a limit below what is in use, no eviction.
    assert_eq!(c.call(&[b"DEBUG", b"POPULATE", b"20000", b"fill", b"100"]), ok);
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"maxmemory-policy", b"noeviction"]), ok);
    let used: u64 = info_field(&mut c, "memory", "used_memory").parse().unwrap();
    let limit = (used - used / 10).to_string();
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"maxmemory", limit.as_bytes()]), ok);

    let oom = |r: &Reply| r.err().is_some_and(|e| e.starts_with("OOM "));
    for cmd in [
        v(&[b"LOCK.ACQUIRE", b"oom:new", b"me", b"60000"]),
        v(&[b"LOCK.ACQUIRE", b"oom:deep", b"me", b"60000"]),
        v(&[b"LOCK.ACQUIRE", b"oom:single", b"other", b"60000", b"WAIT", b"0"]),
        v(&[b"LOCK.ACQUIRE", b"oom:new", b"me", b"60000", b"WAIT", b"10"]),
    ] {
        let r = c_call(&mut c, &cmd);
        assert!(oom(&r), "{cmd:?} under OOM -> {r:?}, want OOM");
    }
    let r = c.call(&[b"EVAL", b"return redis.call('LOCK.ACQUIRE', KEYS[1], 'me', '1000')", b"1", b"oom:lua"]);
    assert!(r.err().is_some_and(|e| e.contains("OOM")), "ACQUIRE from Lua under OOM -> {r:?}");
    assert_eq!(c.call(&[b"EXISTS", b"oom:new", b"oom:lua"]), Reply::Int(0));
    assert_eq!(c.call(&[b"HGET", b"oom:deep", b"me"]), Reply::Bulk(b"3".to_vec()));

    // What frees memory, or does not add any, still works.
    assert_eq!(c.call(&[b"LOCK.RELEASE", b"oom:deep", b"me"]), Reply::Int(0));
    assert_eq!(c.call(&[b"LOCK.RELEASE", b"oom:deep", b"me", b"60000"]), Reply::Int(0));
    assert_eq!(c.call(&[b"HGET", b"oom:deep", b"me"]), Reply::Bulk(b"1".to_vec()));
    // The watchdog's renewal adds no memory, so it is not denied either (flags `write fast`).
    assert_eq!(c.call(&[b"LOCK.RENEW", b"oom:deep", b"me", b"60000"]), Reply::Int(1));
    assert_eq!(c.call(&[b"LOCK.RELEASE", b"oom:deep", b"me"]), Reply::Int(1));
    assert_eq!(c.call(&[b"LOCK.RELEASE", b"oom:single", b"me"]), Reply::Int(1));
    assert_eq!(c.call(&[b"LOCK.RELEASE", b"oom:single", b"me"]), Reply::Nil);
    assert_eq!(c.call(&[b"LOCK.FORCERELEASE", b"oom:force"]), Reply::Int(1));
    assert_eq!(c.call(&[b"LOCK.FORCERELEASE", b"oom:force"]), Reply::Int(0));
    assert_eq!(c.call(&[b"LOCK.INFO", b"oom:deep"]), Reply::Nil);
    assert_eq!(c.call(&[b"EXISTS", b"oom:deep", b"oom:single", b"oom:force"]), Reply::Int(0));

    // Memory back: acquiring works again.
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"maxmemory", b"0"]), ok);
    assert_eq!(c.call(&[b"LOCK.ACQUIRE", b"oom:new", b"me", b"60000"]), Reply::Nil);
    assert_eq!(stat(&mut s.conn(), "panics_caught"), 0);
}
