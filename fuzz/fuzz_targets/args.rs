//! Fuzz the argument parsers (`redis_lock::logic::args`) against an independent model of the spec.
//!
//! The input becomes an argv (raw bytes mixed with interesting tokens: integers at the i64
//! edges, `WAIT`, `FENCE`, `READ` and `WRITE` in any case, empty strings) fed to every parser. Properties:
//! - no parser panics;
//! - `parse_i64` accepts exactly the canonical decimal spelling of an i64 (`n.to_string()`),
//!   and round-trips it;
//! - every `Ok` carries exactly the values of the argv (owner bytes, lease, wait timeout, fence);
//! - every `Err` is one of the errors the argv actually deserves, and `Ok` comes back only when
//!   no error applies (so precedence between several errors is left to the implementation);
//! - `deadline` is `now + ms` or `Overflow` exactly when that sum overflows;
//! - `channel_name` follows the documented formula and keeps the key's hash slot wherever the
//!   key's hash tag makes that possible.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::args::{self, LEASE, TIMEOUT};
use redis_lock::logic::command_args::{self as lock_args, Access};
use redis_lock::logic::error::Error;

#[derive(Arbitrary, Debug)]
enum Tok {
    Raw(Vec<u8>),
    Int(i64),
    /// An integer just past the i64 range, or a near-integer spelling.
    Odd(u8, i64),
    Wait(u8),
    Fence(u8),
    Access(u8),
    Empty,
}

impl Tok {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Tok::Raw(b) => b.clone(),
            Tok::Int(n) => n.to_string().into_bytes(),
            Tok::Odd(k, n) => match k % 10 {
                0 => b"9223372036854775808".to_vec(),
                1 => b"-9223372036854775809".to_vec(),
                2 => format!("+{n}").into_bytes(),
                3 => format!("0{n}").into_bytes(),
                4 => format!(" {n}").into_bytes(),
                5 => format!("{n} ").into_bytes(),
                6 => format!("{n}e3").into_bytes(),
                7 => format!("{n}.0").into_bytes(),
                8 => b"-0".to_vec(),
                _ => format!("{n}\0").into_bytes(),
            },
            Tok::Wait(k) => match k % 5 {
                0 => b"WAIT".to_vec(),
                1 => b"wait".to_vec(),
                2 => b"WaIt".to_vec(),
                3 => b"WAITS".to_vec(),
                _ => b"W\0AIT".to_vec(),
            },
            Tok::Fence(k) => match k % 4 {
                0 => b"FENCE".to_vec(),
                1 => b"fence".to_vec(),
                2 => b"FeNcE".to_vec(),
                _ => b"FENCES".to_vec(),
            },
            Tok::Access(k) => match k % 5 {
                0 => b"READ".to_vec(),
                1 => b"write".to_vec(),
                2 => b"Read".to_vec(),
                3 => b"WRITE".to_vec(),
                _ => b"READS".to_vec(),
            },
            Tok::Empty => Vec::new(),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    argv: Vec<Tok>,
    probe: i64,
    now: i64,
    ms: i64,
    prefix: Vec<u8>,
    key: Vec<u8>,
}

/// The spec's integer: exactly the canonical decimal spelling of an i64.
fn model_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let n: i64 = s.parse().ok()?;
    (n.to_string().as_bytes() == b).then_some(n)
}

fn check_i64(b: &[u8]) {
    let got = args::parse_i64(b);
    assert_eq!(got, model_i64(b), "parse_i64({b:?})");
    if let Some(n) = got {
        assert_eq!(n.to_string().as_bytes(), b, "accepted a non-canonical spelling");
    }
}

fn model_access(b: &[u8]) -> Option<Access> {
    if b.eq_ignore_ascii_case(b"READ") {
        Some(Access::Read)
    } else if b.eq_ignore_ascii_case(b"WRITE") {
        Some(Access::Write)
    } else {
        None
    }
}

/// The arguments after `key owner` of RELEASE / RENEW: (the access word, if exactly one or
/// none; `Err` for two), and the other arguments.
fn model_split<'a>(rest: &[&'a [u8]]) -> (Result<Option<Access>, ()>, Vec<&'a [u8]>) {
    let words: Vec<Access> = rest.iter().filter_map(|a| model_access(a)).collect();
    let others = rest.iter().copied().filter(|a| model_access(a).is_none()).collect();
    let access = match words.as_slice() {
        [] => Ok(None),
        [a] => Ok(Some(*a)),
        _ => Err(()),
    };
    (access, others)
}

/// Errors that `owner` and `lease` deserve.
fn owner_errors(o: &[u8], errs: &mut Vec<Error>) {
    if o.is_empty() {
        errs.push(Error::EmptyOwner);
    }
}
fn lease_errors(l: &[u8], errs: &mut Vec<Error>) -> Option<i64> {
    match model_i64(l) {
        None => errs.push(Error::NotInteger(LEASE)),
        Some(v) if v <= 0 => errs.push(Error::NotPositive(LEASE)),
        Some(v) => return Some(v),
    }
    None
}

fn judge<T: std::fmt::Debug>(what: &str, argv: &[&[u8]], got: &Result<T, Error>, errs: &[Error]) {
    match got {
        Ok(v) => assert!(errs.is_empty(), "{what}{argv:?} = Ok({v:?}) but deserves {errs:?}"),
        Err(e) => {
            assert!(errs.contains(e), "{what}{argv:?} = Err({e:?}), deserved one of {errs:?}");
            let text = e.to_string();
            assert!(text.starts_with("ERR "), "error text {text:?}");
            match e {
                Error::NotInteger(n) | Error::NotPositive(n) | Error::Negative(n) => {
                    assert!(text.contains(n), "{text:?} must name {n}")
                }
                _ => {}
            }
        }
    }
}

fn check_acquire(argv: &[&[u8]]) {
    let got = lock_args::acquire(argv);
    let mut errs = vec![];
    let mut want = None;
    if argv.len() < 3 {
        errs.push(Error::Arity);
    } else {
        owner_errors(argv[1], &mut errs);
        let lease = lease_errors(argv[2], &mut errs);
        // Options: `WAIT <timeout>`, `FENCE` and one of `READ` / `WRITE`, in any order, each
        // at most once. The walk stops at the first bad option (what follows it has no defined
        // meaning).
        let mut wait = None;
        let mut fence = false;
        let mut access = None;
        let mut i = 3;
        while i < argv.len() {
            let opt = argv[i];
            if opt.eq_ignore_ascii_case(b"FENCE") && !fence {
                fence = true;
                i += 1;
                continue;
            }
            if let Some(a) = model_access(opt) {
                if access.is_some() {
                    errs.push(Error::Syntax);
                    break;
                }
                access = Some(a);
                i += 1;
                continue;
            }
            if !opt.eq_ignore_ascii_case(b"WAIT") || wait.is_some() || i + 1 >= argv.len() {
                errs.push(Error::Syntax);
                break;
            }
            match model_i64(argv[i + 1]) {
                None => errs.push(Error::NotInteger(TIMEOUT)),
                Some(v) if v < 0 => errs.push(Error::Negative(TIMEOUT)),
                Some(v) => wait = Some(v),
            }
            if wait.is_none() {
                break;
            }
            i += 2;
        }
        if fence && access == Some(Access::Read) {
            errs.push(Error::Syntax);
        }
        want = lease.map(|l| (l, wait, fence, access));
    }
    judge("acquire", argv, &got, &errs);
    if let Ok(a) = got {
        let (lease, wait, fence, access) = want.expect("Ok without a valid lease");
        assert_eq!(a.access, access);
        assert_eq!(a.owner, argv[1]);
        assert_eq!(a.lease_ms, lease);
        assert_eq!(a.wait_ms, wait);
        assert_eq!(a.fence, fence);
        assert!(a.lease_ms > 0 && a.wait_ms.is_none_or(|w| w >= 0));
    }
}

fn check_release(argv: &[&[u8]]) {
    let got = lock_args::release(argv);
    let mut errs = vec![];
    let mut want = None;
    if argv.len() < 2 {
        errs.push(Error::Arity);
    } else {
        owner_errors(argv[1], &mut errs);
        let (access, others) = model_split(&argv[2..]);
        if access.is_err() || others.len() > 1 {
            errs.push(Error::Syntax);
        }
        let lease = others.first().and_then(|l| lease_errors(l, &mut errs));
        want = Some((lease, access.ok().flatten()));
    }
    judge("release", argv, &got, &errs);
    if let Ok(r) = got {
        let (lease, access) = want.expect("Ok with a bad argv");
        assert_eq!(r.owner, argv[1]);
        assert_eq!((r.lease_ms, r.access), (lease, access));
    }
}

fn check_renew(argv: &[&[u8]]) {
    let got = lock_args::renew(argv);
    let mut errs = vec![];
    let mut want = None;
    if argv.len() < 2 {
        errs.push(Error::Arity);
    } else {
        owner_errors(argv[1], &mut errs);
        let (access, others) = model_split(&argv[2..]);
        match (access.is_err(), others.len()) {
            (true, _) | (_, 2..) => errs.push(Error::Syntax),
            (false, 0) => errs.push(Error::Arity),
            _ => {}
        }
        if others.len() > 1 {
            errs.push(Error::Arity);
        }
        let lease = others.first().and_then(|l| lease_errors(l, &mut errs));
        want = Some((lease, access.ok().flatten()));
    }
    judge("renew", argv, &got, &errs);
    if let Ok(r) = got {
        let (lease, access) = want.expect("Ok with a bad argv");
        assert_eq!(r.owner, argv[1]);
        assert_eq!((Some(r.lease_ms), r.access), (lease, access));
    }
}

fn check_key_only(argv: &[&[u8]]) {
    let got = lock_args::key_only(argv);
    let errs = if argv.len() == 1 { vec![] } else { vec![Error::Arity] };
    judge("key_only", argv, &got, &errs);
}

/// Redis Cluster's hash tag rule (keyHashSlot): the part that is hashed.
fn hashed_part(k: &[u8]) -> &[u8] {
    if let Some(open) = k.iter().position(|&c| c == b'{') {
        if let Some(len) = k[open + 1..].iter().position(|&c| c == b'}') {
            if len > 0 {
                return &k[open + 1..open + 1 + len];
            }
        }
    }
    k
}

fn check_channel(prefix: &[u8], key: &[u8]) {
    let ch = args::derived_name(prefix, key);
    let mut want = prefix.to_vec();
    want.push(b':');
    if key.contains(&b'{') {
        want.extend_from_slice(key);
    } else {
        want.push(b'{');
        want.extend_from_slice(key);
        want.push(b'}');
    }
    assert_eq!(ch, want, "channel_name({prefix:?}, {key:?})");
    // Same slot as the key, wherever Redisson's rule can give it: the prefix has no braces and
    // either the key has a real hash tag or is non-empty without braces. (The empty key, and keys
    // like `a}b`, `a{` or `{}x`, get a channel in another slot; that is Redisson's own naming,
    // kept for compatibility.)
    let plain_prefix = !prefix.contains(&b'{') && !prefix.contains(&b'}');
    let key_has_tag = hashed_part(key).len() < key.len();
    let key_plain = !key.is_empty() && !key.contains(&b'{') && !key.contains(&b'}');
    if plain_prefix && (key_has_tag || key_plain) {
        assert_eq!(hashed_part(&ch), hashed_part(key), "channel {ch:?} left the slot of {key:?}");
    }
}

fuzz_target!(|input: Input| {
    let owned: Vec<Vec<u8>> = input.argv.iter().take(12).map(Tok::bytes).collect();
    let argv: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();

    for a in &argv {
        check_i64(a);
    }
    let p = input.probe.to_string();
    assert_eq!(args::parse_i64(p.as_bytes()), Some(input.probe), "round trip of {p}");

    check_acquire(&argv);
    check_release(&argv);
    check_renew(&argv);
    check_key_only(&argv);
    // The same argv shifted, so short argvs reach every parser's arity edges.
    for cut in 0..argv.len().min(6) {
        check_acquire(&argv[cut..]);
        check_release(&argv[cut..]);
        check_renew(&argv[cut..]);
        check_key_only(&argv[cut..]);
    }

    match (args::deadline(input.now, input.ms, LEASE), input.now.checked_add(input.ms)) {
        (Ok(d), Some(s)) => assert_eq!(d, s),
        (Err(Error::Overflow(n)), None) => assert_eq!(n, LEASE),
        (got, sum) => panic!("deadline({}, {}) = {got:?}, sum {sum:?}", input.now, input.ms),
    }

    check_channel(&input.prefix, &input.key);
    if let Some(first) = argv.first() {
        check_channel(b"redisson_lock__channel", first);
    }
});
