//! The reentrant lock's script rows: Redisson's lock scripts (`lock.redisson-scripts native`).
//!
//! Pure data: the operations the lock's scripts perform, each with its KEYS / ARGV layout, and
//! the 11 script texts of Redisson 3.17 to 4.7 by SHA1 and body length (facts from
//! `redisson-sha1.md`; no script text is kept). What each operation does natively is in
//! `script_plans.rs`.

use crate::logic::scripts::{Layout, Object, Op, OpDef, Role, Row};

/// What a lock script does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockOp {
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
    /// The spin lock's unlock: KEYS lock; ARGV lease, owner. nil / 0 / 1, no message (<= 3.23).
    SpinUnlock,
    /// ... KEYS + unlock latch, ARGV + latch ms (3.24+).
    SpinUnlockLatch,
    /// The spin lock's force unlock: KEYS lock. DEL whatever the type; 1 or 0, no message.
    SpinForceUnlock,
    /// The non-reentrant lock's acquire: KEYS lock; ARGV lease, owner, error text. nil taken,
    /// the PTTL when held by another, the error text on re-entry (4.4+).
    NonReentrantAcquire,
}

use Role::{Channel, ErrText, Latch, LatchMs, Lease, Lock, Message, Owner, PublishCmd, Token};

const fn def(op: LockOp, name: &'static str, layout: Layout) -> OpDef {
    OpDef { op: Op { object: Object::Lock, code: op as u8 }, name, layout }
}

/// The lock's operations, in declaration order (`OPS[op as usize]` is `op`'s).
pub const OPS: [OpDef; 14] = [
    def(LockOp::Acquire, "acquire", Layout::fixed(&[Lock], &[Lease, Owner])),
    def(LockOp::UnlockPublish, "unlock-publish", Layout::fixed(&[Lock, Channel], &[Message, Lease, Owner])),
    def(LockOp::Unlock, "unlock", Layout::fixed(&[Lock, Channel], &[Message, Lease, Owner, PublishCmd])),
    def(
        LockOp::UnlockLatch,
        "unlock-latch",
        Layout::fixed(&[Lock, Channel, Latch], &[Message, Lease, Owner, PublishCmd, LatchMs]),
    ),
    def(LockOp::ForceUnlockPublish, "forceunlock-publish", Layout::fixed(&[Lock, Channel], &[Message])),
    def(LockOp::ForceUnlock, "forceunlock", Layout::fixed(&[Lock, Channel], &[Message, PublishCmd])),
    def(LockOp::Renew, "renew", Layout::fixed(&[Lock], &[Lease, Owner])),
    def(LockOp::RenewBatch, "renew-batch", Layout::repeated(&[], &[Lease], &[Lock], &[Owner])),
    def(LockOp::FencedAcquire, "fenced-acquire", Layout::fixed(&[Lock, Token], &[Lease, Owner])),
    def(LockOp::FencedAcquirePlain, "fenced-acquire-plain", Layout::fixed(&[Lock, Token], &[Lease, Owner])),
    def(LockOp::SpinUnlock, "spin-unlock", Layout::fixed(&[Lock], &[Lease, Owner])),
    def(
        LockOp::SpinUnlockLatch,
        "spin-unlock-latch",
        Layout::fixed(&[Lock, Latch], &[Lease, Owner, LatchMs]),
    ),
    def(LockOp::SpinForceUnlock, "spin-forceunlock", Layout::fixed(&[Lock], &[])),
    def(
        LockOp::NonReentrantAcquire,
        "nonreentrant-acquire",
        Layout::fixed(&[Lock], &[Lease, Owner, ErrText]),
    ),
];

impl LockOp {
    /// The operation of an [`Op`] of the lock (its `code`).
    pub fn of(op: Op) -> Option<LockOp> {
        const ALL: [LockOp; 14] = [
            LockOp::Acquire,
            LockOp::UnlockPublish,
            LockOp::Unlock,
            LockOp::UnlockLatch,
            LockOp::ForceUnlockPublish,
            LockOp::ForceUnlock,
            LockOp::Renew,
            LockOp::RenewBatch,
            LockOp::FencedAcquire,
            LockOp::FencedAcquirePlain,
            LockOp::SpinUnlock,
            LockOp::SpinUnlockLatch,
            LockOp::SpinForceUnlock,
            LockOp::NonReentrantAcquire,
        ];
        (op.object == Object::Lock).then(|| ALL.get(usize::from(op.code)).copied()).flatten()
    }
}

const fn row(sha: &'static str, len: usize, op: LockOp) -> Row {
    Row { sha, len, op: Op { object: Object::Lock, code: op as u8 } }
}

/// The 15 lock scripts of Redisson 3.17 to 4.7 (SHA1 of the UTF-8 body, body length): RLock's
/// 11, the spin lock's unlocks and force unlock, the non-reentrant lock's acquire.
pub const ROWS: [Row; 15] = [
    row("dad0f8d619e548e04f21fb48d50be5034df3adae", 339, LockOp::Acquire),
    row("149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 234, LockOp::Acquire),
    row("3ffe249c16dee540ac8ab32e39bd408626b9aff7", 305, LockOp::UnlockPublish),
    row("778cea8aada230ae060b432fc333adaec85f2f4c", 303, LockOp::Unlock),
    row("6866459238a13a701d42f4971f12d9f3a50e2442", 471, LockOp::UnlockLatch),
    row("7e9c80b3d786b95d5d4aaf8fd73adb9775fa6fb1", 109, LockOp::ForceUnlockPublish),
    row("605e338249a7a1d40df83b04f7658354f883b41b", 107, LockOp::ForceUnlock),
    row("8e19a1ddbdee9138df9f32a480c57addab4353d1", 120, LockOp::Renew),
    row("6a3d31570dc6f4b0bd32bcdc8e75667747c6f635", 220, LockOp::RenewBatch),
    row("49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45", 288, LockOp::FencedAcquire),
    row("46b5551ba403d6152a7a6eca122e08728d6c8c66", 262, LockOp::FencedAcquirePlain),
    row("5b9e58d1bcb8498e14aa1d5b49a1ca5b90748946", 264, LockOp::SpinUnlock),
    row("73ac2729af29ea9a975f95e8097f7ee9a74cce3d", 432, LockOp::SpinUnlockLatch),
    row("51b433c3cc9a6ca991b3aefec63d23490c246318", 68, LockOp::SpinForceUnlock),
    row("3daa7be6cf69d9309ad990442e83bf25094f9b22", 273, LockOp::NonReentrantAcquire),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::kinds;
    use crate::logic::script_table::parse_sha;
    use crate::logic::scripts::{parse, Call, Mismatch, OpId, Publish};

    /// A test argv, for as long as the test runs.
    fn argv(s: &[&'static str]) -> &'static [&'static [u8]] {
        Vec::leak(s.iter().map(|a| a.as_bytes()).collect())
    }

    fn layout(op: LockOp) -> &'static Layout {
        &kinds::OPS[op as usize].layout
    }

    #[test]
    fn builtin_table_is_the_fifteen_redisson_lock_scripts() {
        let t = kinds::table(b"").expect("built-in");
        let lock_entries =
            t.entries().iter().filter(|e| kinds::op(e.op).is_some_and(|d| LockOp::of(d.op).is_some()));
        assert_eq!(lock_entries.count(), 15);
        // (keys, args) of a fixed layout; `None` for the batch.
        type Want = (&'static str, usize, LockOp, &'static str, Option<(usize, usize)>);
        let want: [Want; 15] = [
            ("dad0f8d619e548e04f21fb48d50be5034df3adae", 339, LockOp::Acquire, "acquire", Some((1, 2))),
            ("149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 234, LockOp::Acquire, "acquire", Some((1, 2))),
            (
                "3ffe249c16dee540ac8ab32e39bd408626b9aff7",
                305,
                LockOp::UnlockPublish,
                "unlock-publish",
                Some((2, 3)),
            ),
            ("778cea8aada230ae060b432fc333adaec85f2f4c", 303, LockOp::Unlock, "unlock", Some((2, 4))),
            (
                "6866459238a13a701d42f4971f12d9f3a50e2442",
                471,
                LockOp::UnlockLatch,
                "unlock-latch",
                Some((3, 5)),
            ),
            (
                "7e9c80b3d786b95d5d4aaf8fd73adb9775fa6fb1",
                109,
                LockOp::ForceUnlockPublish,
                "forceunlock-publish",
                Some((2, 1)),
            ),
            (
                "605e338249a7a1d40df83b04f7658354f883b41b",
                107,
                LockOp::ForceUnlock,
                "forceunlock",
                Some((2, 2)),
            ),
            ("8e19a1ddbdee9138df9f32a480c57addab4353d1", 120, LockOp::Renew, "renew", Some((1, 2))),
            ("6a3d31570dc6f4b0bd32bcdc8e75667747c6f635", 220, LockOp::RenewBatch, "renew-batch", None),
            (
                "49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45",
                288,
                LockOp::FencedAcquire,
                "fenced-acquire",
                Some((2, 2)),
            ),
            (
                "46b5551ba403d6152a7a6eca122e08728d6c8c66",
                262,
                LockOp::FencedAcquirePlain,
                "fenced-acquire-plain",
                Some((2, 2)),
            ),
            (
                "5b9e58d1bcb8498e14aa1d5b49a1ca5b90748946",
                264,
                LockOp::SpinUnlock,
                "spin-unlock",
                Some((1, 2)),
            ),
            (
                "73ac2729af29ea9a975f95e8097f7ee9a74cce3d",
                432,
                LockOp::SpinUnlockLatch,
                "spin-unlock-latch",
                Some((2, 3)),
            ),
            (
                "51b433c3cc9a6ca991b3aefec63d23490c246318",
                68,
                LockOp::SpinForceUnlock,
                "spin-forceunlock",
                Some((1, 0)),
            ),
            (
                "3daa7be6cf69d9309ad990442e83bf25094f9b22",
                273,
                LockOp::NonReentrantAcquire,
                "nonreentrant-acquire",
                Some((1, 3)),
            ),
        ];
        for (hex, len, op, name, arity) in want {
            let sha = parse_sha(hex.as_bytes()).expect("hex");
            let id = t.by_sha(&sha).expect(hex);
            let d = kinds::op(id).expect("listed");
            assert_eq!((LockOp::of(d.op), d.name), (Some(op), name), "{hex}");
            let l = d.layout;
            assert_eq!(l.each.is_none().then_some((l.keys.len(), l.args.len())), arity, "{hex}");
            assert!(t.entries().iter().any(|e| e.sha == sha && e.len == len && e.op == id), "{hex}");
            assert_eq!(t.by_hex(hex.as_bytes()), Some(id));
            assert_eq!(t.by_hex(hex.to_uppercase().as_bytes()), Some(id));
        }
        for (i, d) in OPS.iter().enumerate() {
            assert_eq!(LockOp::of(d.op).map(|o| o as usize), Some(i), "{}", d.name);
        }
        let names: Vec<&str> = kinds::OPS.iter().take(OPS.len()).map(|d| d.name).collect();
        assert_eq!(
            names,
            [
                "acquire",
                "unlock-publish",
                "unlock",
                "unlock-latch",
                "forceunlock-publish",
                "forceunlock",
                "renew",
                "renew-batch",
                "fenced-acquire",
                "fenced-acquire-plain",
                "spin-unlock",
                "spin-unlock-latch",
                "spin-forceunlock",
                "nonreentrant-acquire"
            ],
            "the INFO order"
        );
    }

    #[test]
    fn extra_scripts_take_operation_names() {
        let body = b"return 1";
        let sha = sha1_smol::Sha1::from(&body[..]).digest().to_string();
        let t = kinds::table(format!("renew:{sha}:{}", body.len()).as_bytes()).expect("extra");
        assert_eq!(t.by_body(body).and_then(kinds::op).map(|d| d.name), Some("renew"));
        assert_eq!(
            kinds::table(b"").expect("built-in").by_body(body),
            None,
            "unknown length is never hashed"
        );
        assert!(kinds::table(b"nope:00:1").is_err());
        assert_eq!(
            kinds::table(b"").expect("empty").entries().len(),
            15 + 19 + 32 + 15 + 6,
            "the lock's, the read-write lock's, the semaphores', the fair lock's and the latch's"
        );
        assert_eq!(t.by_sha(&parse_sha(sha.as_bytes()).expect("hex")), Some(OpId(6)));
    }

    #[test]
    fn exact_shapes_only() {
        let ok = parse(layout(LockOp::Acquire), argv(&["1", "k", "30000", "me:1"])).expect("match");
        assert_eq!(
            (ok.keys, ok.args, ok.lease()),
            (&[&b"k"[..]][..], &[&b"30000"[..], b"me:1"][..], Some(30000))
        );
        for bad in [
            &["2", "k", "30000", "me:1"][..],
            &["1", "k", "30000"],
            &["1", "k", "30000", "o", "x"],
            &["01", "k"],
        ] {
            assert_eq!(parse(layout(LockOp::Acquire), argv(bad)), Err(Mismatch::Shape), "{bad:?}");
        }
        // Any lease parses: PEXPIRE deletes for <= 0, fails for a non-integer (on the paths
        // that reach it, checked when the call runs).
        for (lease, want) in
            [("1.5", None), ("x", None), ("+5", None), ("", None), ("0", Some(0)), ("-1", Some(-1))]
        {
            let c = parse(layout(LockOp::Acquire), argv(&["1", "k", lease, "o"])).expect(lease);
            assert_eq!(c.lease(), want, "{lease}");
        }
        let u: Call = parse(
            layout(LockOp::UnlockLatch),
            argv(&["3", "k", "c", "l", "0", "100", "o", "spublish", "13500"]),
        )
        .expect("match");
        assert_eq!((u.lease(), u.publish, u.latch_ms()), (Some(100), Some(Publish::SPublish), Some(13500)));
        assert_eq!(
            parse(layout(LockOp::Unlock), argv(&["2", "k", "c", "0", "100", "o", "RPUSH"])),
            Err(Mismatch::Argument),
            "only PUBLISH and SPUBLISH"
        );
        let z =
            parse(layout(LockOp::UnlockLatch), argv(&["3", "k", "c", "l", "0", "100", "o", "PUBLISH", "0"]));
        assert_eq!(z.map(|c| c.latch_ms()), Ok(None), "latch ms SET PX refuses: known when it runs");
        let b =
            parse(layout(LockOp::RenewBatch), argv(&["2", "a", "b", "30000", "oa", "ob"])).expect("batch");
        assert_eq!((b.units, b.lease(), b.unit_arg_index(1, Role::Owner)), (2, Some(30000), Some(2)));
        for bad in [&["0", "30000"][..], &["2", "a", "b", "30000", "oa"], &[]] {
            assert_eq!(parse(layout(LockOp::RenewBatch), argv(bad)), Err(Mismatch::Shape), "{bad:?}");
        }
        let f = parse(layout(LockOp::ForceUnlockPublish), argv(&["2", "k", "c", "0"])).expect("force");
        assert_eq!((f.publish, f.key(1)), (None, Some(&b"c"[..])));
    }
}
