//! The names a read-write lock derives from its key, as Redisson spells them: the writer's
//! field, the timeout key of each read hold, the channel.
//!
//! Redisson's rule: `{K}` in the derived name, or `K` as is when it already contains `{`, so a
//! derived key stays in the lock's hash slot wherever the key's hash tag allows it (a key with
//! an empty tag, `a{}b`, does not: the glue checks the slot in a cluster).

use crate::logic::args::derived_name;

/// The `mode` field and its two values.
pub const MODE: &[u8] = b"mode";
pub const READ: &[u8] = b"read";
pub const WRITE: &[u8] = b"write";

/// The channel prefix of every read-write lock (`redisson_rwlock:{K}`).
pub const CHANNEL_PREFIX: &[u8] = b"redisson_rwlock";

/// The release channel of lock `key`.
pub fn channel(key: &[u8]) -> Vec<u8> {
    derived_name(CHANNEL_PREFIX, key)
}

/// The writer's field of `owner`: `<owner>:write`.
pub fn write_field(owner: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(owner.len() + 6);
    f.extend_from_slice(owner);
    f.extend_from_slice(b":write");
    f
}

/// `{K}` (or `K` when it contains `{`): what every derived key of the lock starts with.
pub fn key_prefix(key: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(key.len() + 2);
    if key.contains(&b'{') {
        p.extend_from_slice(key);
    } else {
        p.push(b'{');
        p.extend_from_slice(key);
        p.push(b'}');
    }
    p
}

/// The timeout-key prefix of `field` (a reader's owner id): `<key prefix>:<field>:rwlock_timeout`
/// (with room for a hold number after it).
pub fn timeout_prefix(key: &[u8], field: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(key.len() + field.len() + 40);
    push_timeout_prefix(&mut p, key, field);
    p
}

/// Append the timeout-key prefix of `field` to `out` (a walk reuses one buffer).
pub fn push_timeout_prefix(out: &mut Vec<u8>, key: &[u8], field: &[u8]) {
    out.reserve(key.len() + field.len() + 40);
    if key.contains(&b'{') {
        out.extend_from_slice(key);
    } else {
        out.push(b'{');
        out.extend_from_slice(key);
        out.push(b'}');
    }
    out.push(b':');
    out.extend_from_slice(field);
    out.extend_from_slice(b":rwlock_timeout");
}

/// The timeout key of read hold number `n` of `field`: `<timeout prefix>:<n>`.
pub fn timeout_key(prefix: &[u8], n: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 21);
    k.extend_from_slice(prefix);
    k.push(b':');
    push_decimal(&mut k, n);
    k
}

/// Append `:<n>` to a timeout-key prefix (a buffer reused for every hold of a field).
pub fn push_hold_number(prefix: &mut Vec<u8>, n: i64) {
    prefix.push(b':');
    push_decimal(prefix, n);
}

/// Append `n` in decimal (as `n.to_string()` spells it), without a temporary string.
fn push_decimal(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(decimal(n, &mut [0; 20]));
}

/// The decimal digits of `n` in `buf` (as `n.to_string()` spells them; no allocation: the walks
/// name one key per hold).
pub fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'0' + (v % 10) as u8;
        }
        v /= 10;
        // 19 digits at most: slot 0 stays free for the sign.
        if v == 0 || i == 1 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'-';
        }
    }
    buf.get(i..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_spells_every_i64_as_to_string() {
        for n in [0, 1, 9, 10, -1, -42, 12_345, i64::MAX, i64::MIN, i64::MIN + 1] {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes());
        }
    }

    #[test]
    fn names_follow_redissons_rule() {
        assert_eq!(channel(b"cat"), b"redisson_rwlock:{cat}");
        assert_eq!(channel(b"a{t}b"), b"redisson_rwlock:a{t}b");
        assert_eq!(write_field(b"u:1"), b"u:1:write");
        let p = timeout_prefix(b"cat", b"u:1");
        assert_eq!(p, b"{cat}:u:1:rwlock_timeout");
        assert_eq!(timeout_key(&p, 12), b"{cat}:u:1:rwlock_timeout:12");
        assert_eq!(timeout_prefix(b"a{t}", b"o"), b"a{t}:o:rwlock_timeout");
        assert_eq!(key_prefix(b"x"), b"{x}");
        for n in [0, 7, 10, -3, i64::MAX, i64::MIN] {
            assert_eq!(timeout_key(b"p", n), format!("p:{n}").into_bytes());
        }
    }
}
