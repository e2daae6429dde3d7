//! Fuzz the Redisson script matching of `lock.redisson-scripts native`
//! (`redis_lock::logic::lock::scripts`): the SHA1 table and the exact-shape check that decide which
//! EVAL/EVALSHA calls the filter rewrites. Properties:
//! - nothing panics, whatever the argv;
//! - a SHA1 or body matches only a script of the table (never by accident): `by_sha` answers
//!   exactly the table's kind for its SHA1s and nothing for other 40-hex strings; `by_body`
//!   answers only when the body's SHA1 and length are the table's;
//! - `parse` accepts only the kind's exact layout (numkeys, number of arguments), and what it
//!   returns is the argv itself: keys, owner and message bytes, leases as integers (`None`
//!   when not one), latch times as positive integers (`None` otherwise), PUBLISH/SPUBLISH only.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::lock::scripts::{parse, parse_sha, Call, Kind, Table, BUILTIN, KINDS};

#[derive(Arbitrary, Debug)]
struct Input {
    kind: u8,
    sha: Vec<u8>,
    body: Vec<u8>,
    pick_builtin: Option<u8>,
    numkeys: Option<u8>,
    argv: Vec<Vec<u8>>,
}

fn canonical(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let n: i64 = s.parse().ok()?;
    (n.to_string() == s).then_some(n)
}

fn canonical_positive(b: &[u8]) -> Option<i64> {
    canonical(b).filter(|n| *n > 0)
}

fuzz_target!(|input: Input| {
    let table = Table::builtin();
    // SHA1 lookups: random strings, and the real hashes in either case.
    let sha = match input.pick_builtin {
        Some(i) => BUILTIN[usize::from(i) % BUILTIN.len()].0.as_bytes().to_vec(),
        None => input.sha.clone(),
    };
    let got = parse_sha(&sha).and_then(|s| table.by_sha(&s));
    let want =
        BUILTIN.iter().find(|(hex, _, _)| hex.as_bytes().eq_ignore_ascii_case(&sha)).map(|(_, _, k)| *k);
    assert_eq!(got, want, "by_sha({sha:?})");
    // Bodies: a body matches only if it hashes to a table SHA1 at that SHA1's length.
    if let Some(kind) = table.by_body(&input.body) {
        let digest = sha1_smol::Sha1::from(&input.body).digest().to_string();
        let hit = BUILTIN.iter().find(|(hex, len, _)| *hex == digest && *len == input.body.len());
        assert_eq!(hit.map(|(_, _, k)| *k), Some(kind), "a body matched by accident");
    }

    // Shapes.
    let kind: Kind = KINDS[usize::from(input.kind) % KINDS.len()];
    let mut rest: Vec<&[u8]> = vec![];
    let numkeys_s = input.numkeys.map(|n| n.to_string().into_bytes());
    if let Some(n) = &numkeys_s {
        rest.push(n);
    }
    rest.extend(input.argv.iter().take(24).map(Vec::as_slice));
    let Ok(call) = parse(kind, &rest) else { return };
    // numkeys is rest[0]: the generated one, or an argument that happens to be an integer.
    let n = rest
        .first()
        .and_then(|b| redis_lock::logic::args::parse_i64(b))
        .and_then(|n| usize::try_from(n).ok())
        .expect("a match needs an integer numkeys");
    let argv = &rest[1..];
    match kind.arity() {
        Some((k, a)) => {
            assert!(n == k && argv.len() == k + a, "{kind:?} matched {n} keys, {} args", argv.len())
        }
        None => assert!(n >= 1 && argv.len() == 2 * n + 1, "batch matched {n} keys, {} args", argv.len()),
    }
    let (keys, args) = argv.split_at(n);
    match call {
        Call::Acquire { lock, lease, owner, token_key, fenced_reply } => {
            assert_eq!((lock, owner), (keys[0], args[1]));
            assert_eq!(lease, canonical(args[0]));
            assert_eq!(token_key, keys.get(1).copied().filter(|_| kind != Kind::Acquire));
            assert_eq!(fenced_reply, kind == Kind::FencedAcquire);
        }
        Call::Unlock { lock, channel, message, lease, owner, publish, latch } => {
            assert_eq!((lock, channel, message, owner), (keys[0], keys[1], args[0], args[2]));
            assert_eq!(lease, canonical(args[1]));
            if kind != Kind::UnlockPublish {
                let cmd = args[3];
                assert!(cmd.eq_ignore_ascii_case(b"PUBLISH") || cmd.eq_ignore_ascii_case(b"SPUBLISH"));
                let sharded = cmd.eq_ignore_ascii_case(b"SPUBLISH");
                assert_eq!(sharded, publish == redis_lock::logic::lock::scripts::Publish::SPublish);
            }
            match latch {
                Some((key, ms)) => assert_eq!((key, ms), (keys[2], canonical_positive(args[4]))),
                None => assert_ne!(kind, Kind::UnlockLatch),
            }
        }
        Call::ForceUnlock { lock, channel, message, .. } => {
            assert_eq!((lock, channel, message), (keys[0], keys[1], args[0]));
        }
        Call::Renew { lease, pairs, batch } => {
            assert_eq!(lease, canonical(args[0]));
            assert_eq!(batch, kind == Kind::RenewBatch);
            let want: Vec<(&[u8], &[u8])> = keys.iter().copied().zip(args[1..].iter().copied()).collect();
            assert_eq!(pairs, want);
        }
    }
});
