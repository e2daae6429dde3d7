//! Cluster awareness for grants made outside a command (lease timer, keyspace events).
//!
//! Inside a command Redis has already checked that this node serves the key. A timer or event
//! has no such check: after `MIGRATE` deletes a lock here, granting it to a local waiter would
//! recreate the key on a node that no longer owns its slot. Before such a grant the module
//! asks the server whether it would serve the key to a client now ([`may_grant`]).
//! `RM_ClusterKeySlot` is 7.4+, so slots (token keys, channels) are computed here (CRC16-XMODEM,
//! hash tags).

use crate::ffi::call::NotRun;
use crate::ffi::rm::{Ctx, RStr};
use std::sync::atomic::{AtomicBool, Ordering};

/// CRC16-XMODEM, the checksum of Redis Cluster key slots.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The hash slot of `key`, honouring `{hash tags}` as Redis does.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&c| c == b'{').and_then(|open| {
        let rest = key.get(open + 1..)?;
        let close = rest.iter().position(|&c| c == b'}')?;
        (close > 0).then(|| rest.get(..close)).flatten()
    });
    crc16(tagged.unwrap_or(key)) & 16383
}

static CLUSTER_MODE: AtomicBool = AtomicBool::new(false);

/// Record whether the server runs with `cluster-enabled yes` (fixed for the process's life).
pub fn init(ctx: Ctx) {
    let on = crate::ffi::rm::ctx_flags(ctx) & crate::ffi::rm::CTX_CLUSTER != 0;
    CLUSTER_MODE.store(on, Ordering::Relaxed);
}

/// Whether the server is cluster-enabled, without asking Redis on every release.
pub fn enabled() -> bool {
    CLUSTER_MODE.load(Ordering::Relaxed)
}

/// Whether a grant made outside a command (a timer, an event) may write `key` here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Here {
    /// Outside cluster mode, or this node serves the key's slot and is not moving it.
    Yes,
    /// Another node's slot, or a slot migrating or importing: the waiters must go there.
    Moved,
    /// The cluster is down (or the answer is unknown): try again later.
    Later,
}

/// Ask the server, as it decides for a client's command on `key` (see `ffi::call::key_is_local`;
/// it needs no command that a configuration can rename).
pub fn may_grant(ctx: Ctx, key: RStr) -> Here {
    if !enabled() {
        return Here::Yes;
    }
    match crate::ffi::call::key_is_local(ctx, key) {
        Ok(()) => Here::Yes,
        Err(NotRun::NotLocal) => Here::Moved,
        Err(_) => Here::Later,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_cluster_keyslot() {
        // Checked against CLUSTER KEYSLOT on Redis 7.0.15.
        for (k, s) in [
            (&b"123456789"[..], 12739),
            (b"foo", 12182),
            (b"bar", 5061),
            (b"hello", 866),
            (b"somekey", 11058),
            (b"foo{hash_tag}", 2515),
            (b"{user1000}.following", 3443),
            (b"{user1000}.followers", 3443),
        ] {
            assert_eq!(key_slot(k), s, "{k:?}");
        }
        assert_eq!(key_slot(b"{}x"), crc16(b"{}x") & 16383, "empty tag hashes the whole key");
        assert_eq!(key_slot(b"a{"), crc16(b"a{") & 16383);
    }
}
