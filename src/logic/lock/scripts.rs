//! Redisson's lock scripts, recognised by SHA1 (`lock.redisson-scripts native`).
//!
//! Pure: the table of known scripts (the 11 of Redisson 3.17 to 4.7, plus entries a test or a
//! Redisson-compatible client registers), and the exact-shape check of a call. The facts come
//! from `redisson-sha1.md` (hashes, body lengths, KEYS/ARGV layouts); no script text is needed
//! or kept. A call matches only when the native code would do exactly what the script does:
//! the right number of keys and arguments, and arguments the script would not reject. Whatever
//! does not match is left to Lua, untouched.

use crate::logic::args::parse_i64;

/// What a script does, and its KEYS/ARGV layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// KEYS lock; ARGV lease, owner. Reply nil (acquired) or the PTTL.
    Acquire,
    /// KEYS lock, channel; ARGV message, lease, owner. Publishes with PUBLISH (3.17-3.21).
    UnlockPublish,
    /// KEYS lock, channel; ARGV message, lease, owner, publish command (3.22-3.23).
    Unlock,
    /// KEYS lock, channel, latch; ARGV message, lease, owner, publish command, latch ms (3.24+).
    UnlockLatch,
    /// KEYS lock, channel; ARGV message. Publishes with PUBLISH (3.17-3.21).
    ForceUnlockPublish,
    /// KEYS lock, channel; ARGV message, publish command (3.22+).
    ForceUnlock,
    /// KEYS lock; ARGV lease, owner (watchdog, up to 3.43).
    Renew,
    /// KEYS lock 1..N; ARGV lease, owner 1..N (batched watchdog, 3.44+).
    RenewBatch,
    /// KEYS lock, token counter; ARGV lease, owner. Reply [-1, token] or [pttl, -1].
    FencedAcquire,
    /// KEYS lock, token counter; ARGV lease, owner. Reply nil or the PTTL (RLock API).
    FencedAcquirePlain,
}

pub const KINDS: [Kind; 10] = [
    Kind::Acquire,
    Kind::UnlockPublish,
    Kind::Unlock,
    Kind::UnlockLatch,
    Kind::ForceUnlockPublish,
    Kind::ForceUnlock,
    Kind::Renew,
    Kind::RenewBatch,
    Kind::FencedAcquire,
    Kind::FencedAcquirePlain,
];

impl Kind {
    /// The kind's name: in `lock.redisson-extra-scripts`, in the rewritten command, and (with
    /// `_` for `-`) in INFO.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Acquire => "acquire",
            Kind::UnlockPublish => "unlock-publish",
            Kind::Unlock => "unlock",
            Kind::UnlockLatch => "unlock-latch",
            Kind::ForceUnlockPublish => "forceunlock-publish",
            Kind::ForceUnlock => "forceunlock",
            Kind::Renew => "renew",
            Kind::RenewBatch => "renew-batch",
            Kind::FencedAcquire => "fenced-acquire",
            Kind::FencedAcquirePlain => "fenced-acquire-plain",
        }
    }

    pub fn from_name(b: &[u8]) -> Option<Kind> {
        KINDS.iter().copied().find(|k| k.name().as_bytes().eq_ignore_ascii_case(b))
    }

    pub fn index(self) -> usize {
        KINDS.iter().position(|k| *k == self).unwrap_or(0)
    }

    /// (number of keys, number of arguments) for a fixed layout; `None` for the batch.
    pub fn arity(self) -> Option<(usize, usize)> {
        Some(match self {
            Kind::Acquire | Kind::Renew => (1, 2),
            Kind::UnlockPublish => (2, 3),
            Kind::Unlock => (2, 4),
            Kind::UnlockLatch => (3, 5),
            Kind::ForceUnlockPublish => (2, 1),
            Kind::ForceUnlock => (2, 2),
            Kind::FencedAcquire | Kind::FencedAcquirePlain => (2, 2),
            Kind::RenewBatch => return None,
        })
    }
}

/// A known script: SHA1 (raw bytes), body length in bytes, kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub sha: [u8; 20],
    pub len: usize,
    pub kind: Kind,
}

/// Lowercase hex of a SHA1, as Redisson sends it.
fn to_hex(sha: &[u8; 20]) -> [u8; 40] {
    let digit = |n: u8| if n < 10 { b'0' + n } else { b'a' + (n - 10) };
    let mut out = [0u8; 40];
    for (pair, b) in out.chunks_exact_mut(2).zip(sha) {
        if let [hi, lo] = pair {
            *hi = digit(b >> 4);
            *lo = digit(b & 15);
        }
    }
    out
}

/// Lowercase or uppercase hex of a SHA1 to bytes (EVALSHA accepts both cases).
pub fn parse_sha(hex: &[u8]) -> Option<[u8; 20]> {
    if hex.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    let digit = |c: u8| (c as char).to_digit(16);
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let &[hi, lo] = pair else { return None };
        *o = u8::try_from(digit(hi)? * 16 + digit(lo)?).ok()?;
    }
    Some(out)
}

const fn entry(hex: &str, len: usize, kind: Kind) -> (&str, usize, Kind) {
    (hex, len, kind)
}

/// The 11 lock scripts of Redisson 3.17 to 4.7 (SHA1 of the UTF-8 body, body length).
pub const BUILTIN: [(&str, usize, Kind); 11] = [
    entry("dad0f8d619e548e04f21fb48d50be5034df3adae", 339, Kind::Acquire),
    entry("149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 234, Kind::Acquire),
    entry("3ffe249c16dee540ac8ab32e39bd408626b9aff7", 305, Kind::UnlockPublish),
    entry("778cea8aada230ae060b432fc333adaec85f2f4c", 303, Kind::Unlock),
    entry("6866459238a13a701d42f4971f12d9f3a50e2442", 471, Kind::UnlockLatch),
    entry("7e9c80b3d786b95d5d4aaf8fd73adb9775fa6fb1", 109, Kind::ForceUnlockPublish),
    entry("605e338249a7a1d40df83b04f7658354f883b41b", 107, Kind::ForceUnlock),
    entry("8e19a1ddbdee9138df9f32a480c57addab4353d1", 120, Kind::Renew),
    entry("6a3d31570dc6f4b0bd32bcdc8e75667747c6f635", 220, Kind::RenewBatch),
    entry("49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45", 288, Kind::FencedAcquire),
    entry("46b5551ba403d6152a7a6eca122e08728d6c8c66", 262, Kind::FencedAcquirePlain),
];

/// The scripts the filter knows: the built-in ones and registered extras.
#[derive(Debug, Clone, Default)]
pub struct Table {
    entries: Vec<Entry>,
    /// Lowercase hex of each entry's SHA1, same order: EVALSHA is matched without decoding.
    hex: Vec<[u8; 40]>,
}

impl Table {
    pub fn builtin() -> Table {
        let mut t = Table::default();
        for (hex, len, kind) in BUILTIN {
            if let Some(sha) = parse_sha(hex.as_bytes()) {
                t.push(Entry { sha, len, kind });
            }
        }
        t
    }

    fn push(&mut self, e: Entry) {
        if let Some(i) = self.entries.iter().position(|x| x.sha == e.sha) {
            self.entries.remove(i);
            self.hex.remove(i);
        }
        self.hex.push(to_hex(&e.sha));
        self.entries.push(e);
    }

    /// The kind of the script with this SHA1 in hex (EVALSHA's argument, either case).
    pub fn by_hex(&self, hex: &[u8]) -> Option<Kind> {
        if hex.len() != 40 {
            return None;
        }
        // Compare 8 bytes at a time before the whole string: most entries differ at once.
        let head = |b: &[u8]| b.get(..8).and_then(|p| <[u8; 8]>::try_from(p).ok()).map(u64::from_ne_bytes);
        let want = head(hex);
        if let Some(i) = self.hex.iter().position(|h| head(h) == want && h.as_slice() == hex) {
            return self.entries.get(i).map(|e| e.kind);
        }
        parse_sha(hex).and_then(|s| self.by_sha(&s))
    }

    /// The built-in table plus `extra`: `kind:sha1:length` entries separated by commas or
    /// spaces (an empty string adds nothing). `Err` says what is wrong.
    pub fn with_extra(extra: &[u8]) -> Result<Table, String> {
        let mut t = Table::builtin();
        for item in extra.split(|c| *c == b',' || *c == b' ').filter(|s| !s.is_empty()) {
            let mut parts = item.split(|c| *c == b':');
            let (Some(kind), Some(sha), Some(len), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("`{}` is not kind:sha1:length", String::from_utf8_lossy(item)));
            };
            let kind = Kind::from_name(kind)
                .ok_or_else(|| format!("unknown script kind `{}`", String::from_utf8_lossy(kind)))?;
            let sha = parse_sha(sha).ok_or("a sha1 is 40 hex digits")?;
            let len = parse_i64(len)
                .and_then(|l| usize::try_from(l).ok())
                .filter(|l| *l > 0)
                .ok_or("a script length is a positive integer")?;
            t.push(Entry { sha, len, kind });
        }
        Ok(t)
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn by_sha(&self, sha: &[u8; 20]) -> Option<Kind> {
        self.entries.iter().find(|e| e.sha == *sha).map(|e| e.kind)
    }

    /// Whether some known script body has this length (only those bodies are hashed).
    pub fn has_len(&self, len: usize) -> bool {
        self.entries.iter().any(|e| e.len == len)
    }

    /// The kind of the script whose body is `body`, hashing it only when its length is known.
    pub fn by_body(&self, body: &[u8]) -> Option<Kind> {
        if !self.has_len(body.len()) {
            return None;
        }
        let sha = sha1_smol::Sha1::from(body).digest().bytes();
        self.entries.iter().find(|e| e.sha == sha && e.len == body.len()).map(|e| e.kind)
    }
}

/// A publish command the scripts may be given (case-insensitive, as `redis.call` accepts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    Publish,
    SPublish,
}

fn publish_cmd(b: &[u8]) -> Option<Publish> {
    if b.eq_ignore_ascii_case(b"PUBLISH") {
        Some(Publish::Publish)
    } else if b.eq_ignore_ascii_case(b"SPUBLISH") {
        Some(Publish::SPublish)
    } else {
        None
    }
}

/// A lease as PEXPIRE takes it: any integer in Redis's spelling (<= 0 deletes the key), `None`
/// when PEXPIRE would fail. Only used on the paths that run PEXPIRE.
fn lease_ms(b: &[u8]) -> Option<i64> {
    parse_i64(b)
}

/// A time in ms that SET PX takes: a positive integer in Redis's spelling, `None` when SET would
/// fail. (Whether `now + ms` overflows is checked when it runs.)
fn positive_ms(b: &[u8]) -> Option<i64> {
    parse_i64(b).filter(|v| *v > 0)
}

/// A matched call, with its arguments checked and parsed. Byte slices borrow the argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call<'a> {
    /// `lease`, here and below: `None` when the argument is not an integer (the script fails
    /// if it reaches its PEXPIRE; it does not on the paths that leave the lease unused).
    Acquire {
        lock: &'a [u8],
        lease: Option<i64>,
        owner: &'a [u8],
        token_key: Option<&'a [u8]>,
        fenced_reply: bool,
    },
    Unlock {
        lock: &'a [u8],
        channel: &'a [u8],
        message: &'a [u8],
        lease: Option<i64>,
        owner: &'a [u8],
        publish: Publish,
        /// (latch key, latch ms) for the 3.24+ script; the ms are `None` when SET PX would
        /// refuse them (the script fails if it writes the latch).
        latch: Option<(&'a [u8], Option<i64>)>,
    },
    ForceUnlock {
        lock: &'a [u8],
        channel: &'a [u8],
        message: &'a [u8],
        publish: Publish,
    },
    /// Renewal of (lock, owner) pairs; `batch` replies an array.
    Renew {
        lease: Option<i64>,
        pairs: Vec<(&'a [u8], &'a [u8])>,
        batch: bool,
    },
}

/// Why a call of a known script is left to Lua.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// numkeys or the number of arguments differs from the script's layout.
    Shape,
    /// An argument the module does not run natively (a publish command other than PUBLISH and
    /// SPUBLISH).
    Argument,
}

/// Check `rest` (everything after the script or SHA1: numkeys, keys, args) against `kind`.
pub fn parse<'a>(kind: Kind, rest: &[&'a [u8]]) -> Result<Call<'a>, Mismatch> {
    let (&numkeys, rest) = rest.split_first().ok_or(Mismatch::Shape)?;
    let n = parse_i64(numkeys).and_then(|n| usize::try_from(n).ok()).ok_or(Mismatch::Shape)?;
    let nargs = match kind.arity() {
        Some((k, a)) if k == n => a,
        Some(_) => return Err(Mismatch::Shape),
        None if n >= 1 => n + 1,
        None => return Err(Mismatch::Shape),
    };
    if rest.len() != n + nargs {
        return Err(Mismatch::Shape);
    }
    let (keys, argv) = rest.split_at(n);
    let key = |i: usize| keys.get(i).copied().ok_or(Mismatch::Shape);
    let arg = |i: usize| argv.get(i).copied().ok_or(Mismatch::Shape);
    let ms = |i: usize| arg(i).map(lease_ms);
    let publish = |i: usize| arg(i).and_then(|b| publish_cmd(b).ok_or(Mismatch::Argument));
    Ok(match kind {
        Kind::Acquire => Call::Acquire {
            lock: key(0)?,
            lease: ms(0)?,
            owner: arg(1)?,
            token_key: None,
            fenced_reply: false,
        },
        Kind::FencedAcquire | Kind::FencedAcquirePlain => Call::Acquire {
            lock: key(0)?,
            lease: ms(0)?,
            owner: arg(1)?,
            token_key: Some(key(1)?),
            fenced_reply: kind == Kind::FencedAcquire,
        },
        Kind::UnlockPublish | Kind::Unlock | Kind::UnlockLatch => Call::Unlock {
            lock: key(0)?,
            channel: key(1)?,
            message: arg(0)?,
            lease: ms(1)?,
            owner: arg(2)?,
            publish: if kind == Kind::UnlockPublish { Publish::Publish } else { publish(3)? },
            latch: if kind == Kind::UnlockLatch { Some((key(2)?, arg(4).map(positive_ms)?)) } else { None },
        },
        Kind::ForceUnlockPublish | Kind::ForceUnlock => Call::ForceUnlock {
            lock: key(0)?,
            channel: key(1)?,
            message: arg(0)?,
            publish: if kind == Kind::ForceUnlock { publish(1)? } else { Publish::Publish },
        },
        Kind::Renew => Call::Renew { lease: ms(0)?, pairs: vec![(key(0)?, arg(1)?)], batch: false },
        Kind::RenewBatch => Call::Renew {
            lease: ms(0)?,
            pairs: keys.iter().copied().zip(argv.iter().skip(1).copied()).collect(),
            batch: true,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&'static str]) -> Vec<&'static [u8]> {
        s.iter().map(|a| a.as_bytes()).collect()
    }

    #[test]
    fn builtin_table_is_the_eleven_redisson_scripts() {
        let t = Table::builtin();
        assert_eq!(t.entries().len(), 11);
        type Row = (&'static str, usize, Kind, Option<(usize, usize)>);
        let want: [Row; 11] = [
            ("dad0f8d619e548e04f21fb48d50be5034df3adae", 339, Kind::Acquire, Some((1, 2))),
            ("149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 234, Kind::Acquire, Some((1, 2))),
            ("3ffe249c16dee540ac8ab32e39bd408626b9aff7", 305, Kind::UnlockPublish, Some((2, 3))),
            ("778cea8aada230ae060b432fc333adaec85f2f4c", 303, Kind::Unlock, Some((2, 4))),
            ("6866459238a13a701d42f4971f12d9f3a50e2442", 471, Kind::UnlockLatch, Some((3, 5))),
            ("7e9c80b3d786b95d5d4aaf8fd73adb9775fa6fb1", 109, Kind::ForceUnlockPublish, Some((2, 1))),
            ("605e338249a7a1d40df83b04f7658354f883b41b", 107, Kind::ForceUnlock, Some((2, 2))),
            ("8e19a1ddbdee9138df9f32a480c57addab4353d1", 120, Kind::Renew, Some((1, 2))),
            ("6a3d31570dc6f4b0bd32bcdc8e75667747c6f635", 220, Kind::RenewBatch, None),
            ("49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45", 288, Kind::FencedAcquire, Some((2, 2))),
            ("46b5551ba403d6152a7a6eca122e08728d6c8c66", 262, Kind::FencedAcquirePlain, Some((2, 2))),
        ];
        for (hex, len, kind, arity) in want {
            let sha = parse_sha(hex.as_bytes()).expect("hex");
            assert_eq!(t.by_sha(&sha), Some(kind), "{hex}");
            assert_eq!(kind.arity(), arity, "{hex}");
            assert!(t.entries().contains(&Entry { sha, len, kind }), "{hex}");
            let upper = parse_sha(hex.to_uppercase().as_bytes());
            assert_eq!(upper, Some(sha), "EVALSHA takes either case");
            assert_eq!(t.by_hex(hex.as_bytes()), Some(kind));
            assert_eq!(t.by_hex(hex.to_uppercase().as_bytes()), Some(kind));
        }
        for k in KINDS {
            assert_eq!(Kind::from_name(k.name().as_bytes()), Some(k));
        }
    }

    #[test]
    fn bodies_are_hashed_only_at_known_lengths() {
        let body = b"return 1";
        let sha = sha1_smol::Sha1::from(&body[..]).digest().to_string();
        let t = Table::with_extra(format!("renew:{sha}:{}", body.len()).as_bytes()).expect("extra");
        assert_eq!(t.by_body(body), Some(Kind::Renew));
        assert_eq!(t.by_body(b"return 2"), None, "same length, other hash");
        assert_eq!(Table::builtin().by_body(body), None, "unknown length is never hashed");
        assert!(Table::with_extra(b"nope:00:1").is_err());
        assert!(Table::with_extra(b"renew:abc:1").is_err());
        assert!(Table::with_extra(format!("renew:{sha}:0").as_bytes()).is_err());
        assert!(Table::with_extra(format!("renew:{sha}").as_bytes()).is_err());
        assert_eq!(Table::with_extra(b"").expect("empty").entries().len(), 11);
    }

    #[test]
    fn exact_shapes_only() {
        let ok = parse(Kind::Acquire, &argv(&["1", "k", "30000", "me:1"]));
        assert_eq!(
            ok,
            Ok(Call::Acquire {
                lock: b"k",
                lease: Some(30000),
                owner: b"me:1",
                token_key: None,
                fenced_reply: false
            })
        );
        assert_eq!(parse(Kind::Acquire, &argv(&["2", "k", "30000", "me:1"])), Err(Mismatch::Shape));
        assert_eq!(parse(Kind::Acquire, &argv(&["1", "k", "30000"])), Err(Mismatch::Shape));
        assert_eq!(parse(Kind::Acquire, &argv(&["1", "k", "30000", "o", "x"])), Err(Mismatch::Shape));
        assert_eq!(parse(Kind::Acquire, &argv(&["01", "k", "30000", "o"])), Err(Mismatch::Shape));
        // Any lease parses: PEXPIRE deletes for <= 0, fails for a non-integer (on the paths
        // that reach it, checked when the call runs).
        for (lease, want) in
            [("1.5", None), ("x", None), ("+5", None), ("", None), ("0", Some(0)), ("-1", Some(-1))]
        {
            match parse(Kind::Acquire, &argv(&["1", "k", lease, "o"])) {
                Ok(Call::Acquire { lease: got, .. }) => assert_eq!(got, want, "{lease}"),
                other => panic!("{lease}: {other:?}"),
            }
        }
        let u = parse(Kind::UnlockLatch, &argv(&["3", "k", "c", "l", "0", "100", "o", "spublish", "13500"]));
        assert_eq!(
            u,
            Ok(Call::Unlock {
                lock: b"k",
                channel: b"c",
                message: b"0",
                lease: Some(100),
                owner: b"o",
                publish: Publish::SPublish,
                latch: Some((b"l", Some(13500)))
            })
        );
        assert_eq!(
            parse(Kind::Unlock, &argv(&["2", "k", "c", "0", "100", "o", "RPUSH"])),
            Err(Mismatch::Argument),
            "only PUBLISH and SPUBLISH"
        );
        assert!(
            matches!(
                parse(Kind::UnlockLatch, &argv(&["3", "k", "c", "l", "0", "100", "o", "PUBLISH", "0"])),
                Ok(Call::Unlock { latch: Some((b"l", None)), .. })
            ),
            "latch ms SET PX refuses: known when it runs"
        );
        let b = parse(Kind::RenewBatch, &argv(&["2", "a", "b", "30000", "oa", "ob"]));
        assert_eq!(
            b,
            Ok(Call::Renew {
                lease: Some(30000),
                pairs: vec![(&b"a"[..], &b"oa"[..]), (b"b", b"ob")],
                batch: true
            })
        );
        assert_eq!(parse(Kind::RenewBatch, &argv(&["0", "30000"])), Err(Mismatch::Shape));
        assert_eq!(parse(Kind::RenewBatch, &argv(&["2", "a", "b", "30000", "oa"])), Err(Mismatch::Shape));
        assert_eq!(parse(Kind::RenewBatch, &argv(&[])), Err(Mismatch::Shape));
        let f = parse(Kind::ForceUnlockPublish, &argv(&["2", "k", "c", "0"]));
        assert_eq!(
            f,
            Ok(Call::ForceUnlock { lock: b"k", channel: b"c", message: b"0", publish: Publish::Publish })
        );
    }
}
