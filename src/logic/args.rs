//! Argument parsing shared by every kind: integers as Redis spells them, deadlines, the names
//! derived from a lock key. Each kind parses its own commands in `logic/<kind>/args.rs`.
//!
//! Pure: works on byte slices, knows nothing about Redis, so it can be unit-tested and fuzzed
//! without a server. Every failure is an [`Error`] whose text is the Redis error reply.

use super::error::Error;

pub const LEASE: &str = "lease-ms";
pub const TIMEOUT: &str = "timeout-ms";

/// Parse a decimal integer exactly as Redis's `string2ll` does: an optional `-`, digits, no
/// leading `+`, no leading zeros (except `0` itself), no spaces, within `i64`.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some(_) => (false, b),
        None => return None,
    };
    let (&first, _) = digits.split_first()?;
    if !first.is_ascii_digit() || (first == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    // Accumulate negatively so that i64::MIN parses.
    let mut acc: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        acc = acc.checked_mul(10)?.checked_sub(i64::from(c - b'0'))?;
    }
    if neg {
        Some(acc)
    } else {
        acc.checked_neg()
    }
}

/// A hold count as HINCRBY writes it: a decimal integer >= 1.
pub fn parse_count(raw: &[u8]) -> Result<i64, Error> {
    match parse_i64(raw) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(Error::CorruptCount),
    }
}

/// Absolute deadline `now + ms`, refusing values that overflow.
pub fn deadline(now_ms: i64, ms: i64, name: &'static str) -> Result<i64, Error> {
    now_ms.checked_add(ms).ok_or(Error::Overflow(name))
}

/// A name derived from lock `key` in its hash slot (its release channel, its fencing-token key):
/// `<prefix>:{key}`, or `<prefix>:key` when the key already contains `{` (Redisson's rule, which
/// keeps the derived name in the key's hash slot).
pub fn derived_name(prefix: &[u8], key: &[u8]) -> Vec<u8> {
    let braces = !key.contains(&b'{');
    let mut ch = Vec::with_capacity(prefix.len() + key.len() + 3);
    ch.extend_from_slice(prefix);
    ch.push(b':');
    if braces {
        ch.push(b'{');
    }
    ch.extend_from_slice(key);
    if braces {
        ch.push(b'}');
    }
    ch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_redis_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"30000"), Some(30000));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"1.5",
            b"1e3",
            b"0x10",
            b"abc",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"\x001",
            b"\xff",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn deadlines_overflow() {
        assert_eq!(deadline(1000, 5, LEASE), Ok(1005));
        assert_eq!(deadline(1000, i64::MAX, LEASE), Err(Error::Overflow(LEASE)));
        assert!(Error::Overflow(LEASE).to_string().contains("lease-ms"));
    }

    #[test]
    fn channels_keep_the_slot() {
        assert_eq!(derived_name(b"p", b"lock"), b"p:{lock}".to_vec());
        assert_eq!(derived_name(b"p", b"a{x}b"), b"p:a{x}b".to_vec());
        assert_eq!(derived_name(b"p", b"a{"), b"p:a{".to_vec());
        assert_eq!(derived_name(b"p", b"\x00\xff"), b"p:{\x00\xff}".to_vec());
    }
}
