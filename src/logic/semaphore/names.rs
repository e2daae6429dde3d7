//! The names a semaphore derives from its key, as Redisson spells them, and the score of a
//! permit held without a lease.
//!
//! Redisson's rule: `{K}` in the derived name, or `K` as is when it already contains `{`, so
//! the zset and the channel stay in the key's hash slot wherever its hash tag allows it (a key
//! with an empty tag, `a{}b`, does not: the glue checks the slot in a cluster).

use crate::logic::args::derived_name;

/// The score of a permit held without a lease (Redisson's `922337203685477`).
pub const NO_LEASE: i64 = 922_337_203_685_477;

/// The channel prefix of every semaphore (`redisson_sc:{K}`).
pub const CHANNEL_PREFIX: &[u8] = b"redisson_sc";

/// The channel on which the new available count is published.
pub fn channel(key: &[u8]) -> Vec<u8> {
    derived_name(CHANNEL_PREFIX, key)
}

/// The zset of held permits: `{K}:timeout`, or `K:timeout` when `K` contains `{`.
pub fn zset(key: &[u8]) -> Vec<u8> {
    let braces = !key.contains(&b'{');
    let mut z = Vec::with_capacity(key.len() + 10);
    if braces {
        z.push(b'{');
    }
    z.extend_from_slice(key);
    if braces {
        z.push(b'}');
    }
    z.extend_from_slice(b":timeout");
    z
}

/// The semaphore keys a zset name may belong to (what a write to a `...:timeout` key may be
/// about), the likelier first: `{K}:timeout` is the zset of `K`, and of `{K}` too (a name with
/// `{` is not wrapped), so both share it in Redisson's layout.
pub fn owners_of_zset(z: &[u8]) -> Vec<&[u8]> {
    let Some(base) = z.strip_suffix(b":timeout") else { return Vec::new() };
    let mut out = Vec::with_capacity(2);
    if let Some(inner) = base.strip_prefix(b"{").and_then(|b| b.strip_suffix(b"}")) {
        if !inner.contains(&b'{') {
            out.push(inner);
        }
    }
    if base.contains(&b'{') {
        out.push(base);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_follow_redisson() {
        assert_eq!(zset(b"pool"), b"{pool}:timeout".to_vec());
        assert_eq!(zset(b"a{x}b"), b"a{x}b:timeout".to_vec());
        assert_eq!(channel(b"pool"), b"redisson_sc:{pool}".to_vec());
        assert_eq!(channel(b"a{x}b"), b"redisson_sc:a{x}b".to_vec());
    }

    #[test]
    fn a_zset_name_leads_back_to_its_semaphores() {
        for k in [&b"pool"[..], b"a{x}b", b"{t}", b"", b"{", b"\x00\xff"] {
            assert!(owners_of_zset(&zset(k)).contains(&k), "{k:?}");
        }
        assert_eq!(owners_of_zset(b"{pool}:timeout"), vec![&b"pool"[..], b"{pool}"]);
        assert!(owners_of_zset(b"pool").is_empty());
        assert!(owners_of_zset(b"x:timeou").is_empty());
    }
}
