//! Cluster awareness for grants made outside a command (lease timer, keyspace events).
//!
//! Inside a command Redis has already checked that this node serves the key. A timer or event
//! has no such check: after `MIGRATE` deletes a lock here, granting it to a local waiter would
//! recreate the key on a node that no longer owns its slot. Before such a grant the module
//! asks `CLUSTER NODES` whether this node still serves the slot and is not migrating it.
//! `RM_ClusterKeySlot` is 7.4+, so the slot is computed here (CRC16-XMODEM, hash tags).

use crate::ffi::rm::Ctx;
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

/// Whether the `myself` line of `CLUSTER NODES` serves `slot` and is not moving it.
pub fn serves_slot(nodes: &str, slot: u16) -> bool {
    let Some(line) = nodes.lines().find(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("myself"))) else {
        return false;
    };
    let mut mine = false;
    for tok in line.split(' ').skip(8) {
        if let Some(inner) = tok.strip_prefix('[') {
            // [slot->-target] (migrating) or [slot-<-source] (importing)
            let n = inner.split('-').next().and_then(|s| s.parse::<u16>().ok());
            if n == Some(slot) {
                return false;
            }
            continue;
        }
        let (lo, hi) = match tok.split_once('-') {
            Some((a, b)) => (a.parse::<u16>().ok(), b.parse::<u16>().ok()),
            None => (tok.parse::<u16>().ok(), tok.parse::<u16>().ok()),
        };
        if let (Some(lo), Some(hi)) = (lo, hi) {
            mine |= (lo..=hi).contains(&slot);
        }
    }
    mine
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

/// True outside cluster mode; in cluster mode, whether this node serves `key`'s slot and is
/// not migrating or importing it.
pub fn may_grant(ctx: Ctx, key: &[u8]) -> bool {
    if !enabled() {
        return true;
    }
    let Some(reply) = crate::ffi::rm::call_cluster_nodes(ctx) else { return false };
    let text = reply.bytes();
    !text.is_empty() && serves_slot(&String::from_utf8_lossy(text), key_slot(key))
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

    #[test]
    fn nodes_parsing() {
        let nodes = "\
aaa 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 7000 [5461->-bbb] [9000-<-ccc]
bbb 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
";
        assert!(serves_slot(nodes, 0));
        assert!(serves_slot(nodes, 5460));
        assert!(serves_slot(nodes, 7000));
        assert!(!serves_slot(nodes, 5461), "migrating away");
        assert!(!serves_slot(nodes, 9000), "importing");
        assert!(!serves_slot(nodes, 10000), "another node's slot");
        assert!(!serves_slot("garbage", 1));
    }
}
