//! Redisson's naming of a lock's release channel, written independently of the module so that
//! tests check the module against it rather than against itself.

/// `<prefix>:{K}`, or `<prefix>:K` when `K` already contains `{` (the name keeps `K`'s slot).
pub fn prefixed(prefix: &str, key: &[u8]) -> Vec<u8> {
    let mut c = format!("{prefix}:").into_bytes();
    if key.contains(&b'{') {
        c.extend_from_slice(key);
    } else {
        c.push(b'{');
        c.extend_from_slice(key);
        c.push(b'}');
    }
    c
}

/// The default release-channel prefix (`lock.channel-prefix`).
pub const PREFIX: &str = "redisson_lock__channel";

/// The default release channel of lock `key`.
pub fn channel(key: &[u8]) -> Vec<u8> {
    prefixed(PREFIX, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tag_rule() {
        assert_eq!(channel(b"k"), b"redisson_lock__channel:{k}");
        assert_eq!(channel(b"a{b}"), b"redisson_lock__channel:a{b}");
        assert_eq!(prefixed("p", b"{}x"), b"p:{}x");
    }
}
