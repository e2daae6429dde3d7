//! The read-write lock's script rows: Redisson's `RReadLock` / `RWriteLock` scripts
//! (`lock.redisson-scripts native`).
//!
//! Pure data: the operations the read-write lock's scripts perform, each with its KEYS / ARGV
//! layout, and the 19 texts of Redisson 3.17 to 4.7 by SHA1 and body length (facts from
//! `redisson-family.md`; no script text is kept). The writer's renewal uses the plain lock's
//! renew scripts (rows of `logic/lock/scripts.rs`). What each operation does natively is in
//! `script_plans.rs`.

use crate::logic::scripts::{Layout, Object, Op, OpDef, Role, Row};

/// What a read-write lock script does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwOp {
    /// KEYS lock, timeout prefix; ARGV lease, reader field, writer field. Nil or the PTTL.
    ReadAcquire,
    /// KEYS lock, channel, timeout prefix, key prefix; ARGV message, reader (PUBLISH, 3.17-3.21).
    ReadUnlockPublish,
    /// ... ARGV message, reader, publish command (3.22-3.23).
    ReadUnlock,
    /// ... KEYS + latch; ARGV + latch ms (3.24-3.43: a missing lock replies 1).
    ReadUnlockLatch,
    /// As [`RwOp::ReadUnlockLatch`], a missing lock replies nil (3.44+).
    ReadUnlockLatchNil,
    /// KEYS lock, channel; ARGV message (PUBLISH, 3.17-3.21).
    ReadForceUnlockPublish,
    /// KEYS lock, channel; ARGV message, publish command (3.22+).
    ReadForceUnlock,
    /// KEYS lock; no ARGV (3.24+).
    ReadIsLocked,
    /// KEYS lock, key prefix; ARGV lease, reader (watchdog up to 3.43: every hold renewed).
    ReadRenew,
    /// KEYS (lock, key prefix) 1..N; ARGV lease, reader 1..N (3.44-3.52, its loop bug kept).
    ReadRenewBatchBug,
    /// As [`RwOp::ReadRenewBatchBug`] without the bug (4.0-4.3).
    ReadRenewBatch,
    /// KEYS (lock, key prefix) 1..N; ARGV lease, then per lock a count and that many readers
    /// (4.4+: only the listed readers' holds).
    ReadRenewBatchOwn,
    /// KEYS lock; ARGV lease, writer field. Nil or the PTTL.
    WriteAcquire,
    /// KEYS lock, channel; ARGV message, lease, writer (PUBLISH, 3.17-3.21).
    WriteUnlockPublish,
    /// ... ARGV message, lease, writer, publish command (3.22-3.23).
    WriteUnlock,
    /// ... KEYS + latch; ARGV + latch ms (3.24-3.43: a missing lock replies 1).
    WriteUnlockLatch,
    /// As [`RwOp::WriteUnlockLatch`], a missing lock replies nil (3.44+).
    WriteUnlockLatchNil,
    /// KEYS lock, channel; ARGV message (PUBLISH, 3.17-3.21).
    WriteForceUnlockPublish,
    /// KEYS lock, channel; ARGV message, publish command (3.22+).
    WriteForceUnlock,
}

use Role::{Channel, KeyPrefix, Latch, LatchMs, Lease, Lock, Message, Owner, Prefix, PublishCmd, Writer};

const fn def(op: RwOp, name: &'static str, layout: Layout) -> OpDef {
    OpDef { op: Op { object: Object::RwLock, code: op as u8 }, name, layout }
}

const READ_UNLOCK_KEYS: &[Role] = &[Lock, Channel, Prefix, KeyPrefix];
const READ_UNLOCK_LATCH_KEYS: &[Role] = &[Lock, Channel, Prefix, KeyPrefix, Latch];
const READ_UNLOCK_LATCH_ARGS: &[Role] = &[Message, Owner, PublishCmd, LatchMs];
const WRITE_UNLOCK_LATCH_ARGS: &[Role] = &[Message, Lease, Owner, PublishCmd, LatchMs];
const RENEW_BATCH: Layout = Layout::repeated(&[], &[Lease], &[Lock, KeyPrefix], &[Owner]);

/// The read-write lock's operations, in declaration order (`OPS[op as usize]` is `op`'s); the
/// names are those of `lock.redisson-extra-scripts`, INFO and the Lua fixtures.
pub const OPS: [OpDef; 19] = [
    def(RwOp::ReadAcquire, "rw-read-acquire", Layout::fixed(&[Lock, Prefix], &[Lease, Owner, Writer])),
    def(
        RwOp::ReadUnlockPublish,
        "rw-read-unlock-publish",
        Layout::fixed(READ_UNLOCK_KEYS, &[Message, Owner]),
    ),
    def(RwOp::ReadUnlock, "rw-read-unlock", Layout::fixed(READ_UNLOCK_KEYS, &[Message, Owner, PublishCmd])),
    def(
        RwOp::ReadUnlockLatch,
        "rw-read-unlock-latch",
        Layout::fixed(READ_UNLOCK_LATCH_KEYS, READ_UNLOCK_LATCH_ARGS),
    ),
    def(
        RwOp::ReadUnlockLatchNil,
        "rw-read-unlock-latch-nil",
        Layout::fixed(READ_UNLOCK_LATCH_KEYS, READ_UNLOCK_LATCH_ARGS),
    ),
    def(
        RwOp::ReadForceUnlockPublish,
        "rw-read-forceunlock-publish",
        Layout::fixed(&[Lock, Channel], &[Message]),
    ),
    def(
        RwOp::ReadForceUnlock,
        "rw-read-forceunlock",
        Layout::fixed(&[Lock, Channel], &[Message, PublishCmd]),
    ),
    def(RwOp::ReadIsLocked, "rw-read-islocked", Layout::fixed(&[Lock], &[])),
    def(RwOp::ReadRenew, "rw-read-renew", Layout::fixed(&[Lock, KeyPrefix], &[Lease, Owner])),
    def(RwOp::ReadRenewBatchBug, "rw-read-renew-batch-bug", RENEW_BATCH),
    def(RwOp::ReadRenewBatch, "rw-read-renew-batch", RENEW_BATCH),
    def(
        RwOp::ReadRenewBatchOwn,
        "rw-read-renew-batch-own",
        Layout::counted(&[], &[Lease], &[Lock, KeyPrefix]),
    ),
    def(RwOp::WriteAcquire, "rw-write-acquire", Layout::fixed(&[Lock], &[Lease, Owner])),
    def(
        RwOp::WriteUnlockPublish,
        "rw-write-unlock-publish",
        Layout::fixed(&[Lock, Channel], &[Message, Lease, Owner]),
    ),
    def(
        RwOp::WriteUnlock,
        "rw-write-unlock",
        Layout::fixed(&[Lock, Channel], &[Message, Lease, Owner, PublishCmd]),
    ),
    def(
        RwOp::WriteUnlockLatch,
        "rw-write-unlock-latch",
        Layout::fixed(&[Lock, Channel, Latch], WRITE_UNLOCK_LATCH_ARGS),
    ),
    def(
        RwOp::WriteUnlockLatchNil,
        "rw-write-unlock-latch-nil",
        Layout::fixed(&[Lock, Channel, Latch], WRITE_UNLOCK_LATCH_ARGS),
    ),
    def(
        RwOp::WriteForceUnlockPublish,
        "rw-write-forceunlock-publish",
        Layout::fixed(&[Lock, Channel], &[Message]),
    ),
    def(
        RwOp::WriteForceUnlock,
        "rw-write-forceunlock",
        Layout::fixed(&[Lock, Channel], &[Message, PublishCmd]),
    ),
];

impl RwOp {
    const ALL: [RwOp; 19] = [
        RwOp::ReadAcquire,
        RwOp::ReadUnlockPublish,
        RwOp::ReadUnlock,
        RwOp::ReadUnlockLatch,
        RwOp::ReadUnlockLatchNil,
        RwOp::ReadForceUnlockPublish,
        RwOp::ReadForceUnlock,
        RwOp::ReadIsLocked,
        RwOp::ReadRenew,
        RwOp::ReadRenewBatchBug,
        RwOp::ReadRenewBatch,
        RwOp::ReadRenewBatchOwn,
        RwOp::WriteAcquire,
        RwOp::WriteUnlockPublish,
        RwOp::WriteUnlock,
        RwOp::WriteUnlockLatch,
        RwOp::WriteUnlockLatchNil,
        RwOp::WriteForceUnlockPublish,
        RwOp::WriteForceUnlock,
    ];

    /// The operation of an [`Op`] of the read-write lock (its `code`).
    pub fn of(op: Op) -> Option<RwOp> {
        (op.object == Object::RwLock).then(|| RwOp::ALL.get(usize::from(op.code)).copied()).flatten()
    }
}

const fn row(sha: &'static str, len: usize, op: RwOp) -> Row {
    Row { sha, len, op: Op { object: Object::RwLock, code: op as u8 } }
}

/// The 19 read-write lock scripts of Redisson 3.17 to 4.7 (SHA1 of the UTF-8 body, length).
pub const ROWS: [Row; 19] = [
    row("95553a6ff11176c18e71344e89d116b06fd6f753", 717, RwOp::ReadAcquire),
    row("f5469be4bfe5232d519471092634b3ee84e5ee6f", 1026, RwOp::ReadUnlockPublish),
    row("92a54c31a4dc3b46f81e24a6dd5bb7d677c6f882", 1022, RwOp::ReadUnlock),
    row("5947c0fee6ca25ae094ec1b3e7a2559a9273d29f", 1293, RwOp::ReadUnlockLatch),
    row("6e1b10e11ac0a3ed8e902562ecd32ce01b553039", 1295, RwOp::ReadUnlockLatchNil),
    row("23f9bc91439172625235ce2ee06d6647f08a7e27", 150, RwOp::ReadForceUnlockPublish),
    row("27dbe744e95c1d854a7f556cc6817030de2d0d01", 148, RwOp::ReadForceUnlock),
    row("8ad44f1ba014938c20da38206b6d496c85ec1aed", 157, RwOp::ReadIsLocked),
    row("6563941ff57e01b8cf61e86907b80686438a2f74", 475, RwOp::ReadRenew),
    row("1affef780a01e1406cb1968c62918f618d10d6a3", 596, RwOp::ReadRenewBatchBug),
    row("d6564f42b98d6eece0e940a478ee248f80b8a90a", 596, RwOp::ReadRenewBatch),
    row("38d2b478dfbe264ab67c221b7e4be62245f00ba0", 574, RwOp::ReadRenewBatchOwn),
    row("6306ba3bf1f563b284bed52d305fce615c6664d9", 508, RwOp::WriteAcquire),
    row("baa634f6184acc1b8f145e810a0e0e00967a3cbe", 637, RwOp::WriteUnlockPublish),
    row("319a1cdf1b56c767a0a9adf2224250bf811f110c", 633, RwOp::WriteUnlock),
    row("d29c5559782035515d32e926762830b3304b49be", 858, RwOp::WriteUnlockLatch),
    row("21f5fb0f8ddfa9be5c3e0c9757c128796add75c6", 860, RwOp::WriteUnlockLatchNil),
    row("23639b0b2d18d26ce352e148ff4ac5b8e984b696", 151, RwOp::WriteForceUnlockPublish),
    row("2e2cb2a3b13e2e80e4236ef6a25beaf365dba608", 149, RwOp::WriteForceUnlock),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::kinds;
    use crate::logic::script_table::parse_sha;
    use crate::logic::scripts::{parse, Mismatch, Publish};

    fn argv(s: &[&'static str]) -> &'static [&'static [u8]] {
        Vec::leak(s.iter().map(|a| a.as_bytes()).collect())
    }

    #[test]
    fn builtin_rows_are_the_nineteen_texts() {
        let t = kinds::table(b"").expect("built-in");
        for (i, r) in ROWS.iter().enumerate() {
            let sha = parse_sha(r.sha.as_bytes()).expect("hex");
            let id = t.by_sha(&sha).expect(r.sha);
            let d = kinds::op(id).expect("listed");
            assert_eq!(RwOp::of(d.op), RwOp::of(r.op), "{}", r.sha);
            assert!(t.entries().iter().any(|e| e.sha == sha && e.len == r.len && e.op == id));
            assert_eq!(t.by_hex(r.sha.to_uppercase().as_bytes()), Some(id));
            assert_eq!(RwOp::of(r.op).map(|o| o as usize), Some(i), "one row per operation, in order");
        }
        for (i, d) in OPS.iter().enumerate() {
            assert_eq!(RwOp::of(d.op).map(|o| o as usize), Some(i), "{}", d.name);
            assert!(d.name.starts_with("rw-"));
        }
        let lens: Vec<usize> = ROWS.iter().map(|r| r.len).collect();
        assert_eq!(
            lens,
            [
                717, 1026, 1022, 1293, 1295, 150, 148, 157, 475, 596, 596, 574, 508, 637, 633, 858, 860, 151,
                149
            ]
        );
    }

    #[test]
    fn shapes() {
        let l = |op: RwOp| &OPS[op as usize].layout;
        let a =
            parse(l(RwOp::ReadAcquire), argv(&["2", "k", "{k}:o:rwlock_timeout", "30000", "o", "o:write"]));
        assert_eq!(a.map(|c| (c.lease(), c.units)), Ok((Some(30000), 1)));
        let u = parse(
            l(RwOp::ReadUnlockLatchNil),
            argv(&["5", "k", "c", "p", "{k}", "latch", "0", "o", "SPUBLISH", "13500"]),
        )
        .expect("unlock");
        assert_eq!(
            (u.publish, u.latch_ms(), u.key_index(Role::KeyPrefix)),
            (Some(Publish::SPublish), Some(13500), Some(3))
        );
        assert!(parse(l(RwOp::ReadIsLocked), argv(&["1", "k"])).is_ok());
        assert_eq!(parse(l(RwOp::ReadIsLocked), argv(&["1", "k", "x"])), Err(Mismatch::Shape));
        let b = parse(l(RwOp::ReadRenewBatch), argv(&["4", "a", "{a}", "b", "{b}", "100", "o1", "o2"]))
            .expect("b");
        assert_eq!(
            (b.units, b.unit_key_index(1, Role::KeyPrefix), b.unit_arg_index(1, Role::Owner)),
            (2, Some(3), Some(2))
        );
        assert_eq!(
            parse(l(RwOp::ReadRenewBatch), argv(&["3", "a", "{a}", "b", "100", "o1"])),
            Err(Mismatch::Shape)
        );
        let own = l(RwOp::ReadRenewBatchOwn);
        let o = parse(own, argv(&["4", "a", "{a}", "b", "{b}", "100", "2", "o1", "o2", "0"])).expect("own");
        assert_eq!(o.units, 2);
        for bad in [
            &["4", "a", "{a}", "b", "{b}", "100", "2", "o1", "o2"][..],
            &["4", "a", "{a}", "b", "{b}", "100", "1", "o1", "0", "x"],
            &["2", "a", "{a}", "100", "5", "o1"],
        ] {
            assert_eq!(parse(own, argv(bad)), Err(Mismatch::Shape), "{bad:?}");
        }
        for bad in [
            &["2", "a", "{a}", "100", "x"][..],
            &["2", "a", "{a}", "100", "-1"],
            &["2", "a", "{a}", "100", "01", "o"],
        ] {
            assert_eq!(parse(own, argv(bad)), Err(Mismatch::Argument), "{bad:?}");
        }
    }
}
