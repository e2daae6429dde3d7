//! The fair lock's script rows: Redisson's `RFairLock` scripts and the two acquires of
//! `RNonReentrantFairLock` (`lock.redisson-scripts native`).
//!
//! Pure data: the operations, each with its KEYS / ARGV layout, and the 15 texts of Redisson
//! 3.17 to 4.7 by SHA1 and body length (facts from `redisson-family.md` and
//! `redisson-sha1.md`; no script text is kept). Operations named `-bug` keep a version's
//! failure: up to 3.30 the purge compares a head without deadline (an error), up to 3.44 the
//! enqueue does arithmetic on a last waiter without one. What each does natively is in
//! `module/fair/scripts.rs`.

use crate::logic::scripts::{Layout, Object, Op, OpDef, Role, Row};

/// What a fair-lock script does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FairOp {
    /// KEYS queue, deadlines; ARGV owner, wait. Everyone behind the owner loses `wait` from
    /// its deadline, then the owner leaves both; nil.
    AcquireFailed,
    /// KEYS lock, queue, deadlines; ARGV lease, owner, now, wait: purge, then nil (taken or
    /// re-entered) or 1; never queues. The purge fails on a head without deadline (<= 3.30).
    TryAcquireBug,
    /// ... the purge stops at a head without deadline (3.32+).
    TryAcquire,
    /// KEYS lock, queue, deadlines; ARGV lease, owner, wait, now: purge, take, re-enter, or
    /// queue and reply the ttl; queued already: deadline - wait - now (<= 3.30, both failures).
    AcquireBug,
    /// ... queued already: max(0, PTTL); the enqueue still fails (3.32-3.44).
    AcquireEnqueueBug,
    /// ... nil-safe everywhere (3.45+).
    Acquire,
    /// KEYS lock, queue, deadlines, channel prefix; ARGV message, lease, owner, now (PUBLISH):
    /// purge, then nil / 0 / 1, the head's channel told when freed (<= 3.21).
    UnlockPublishBug,
    /// ... ARGV + publish command (3.22-3.23).
    UnlockBug,
    /// ... KEYS + unlock latch, ARGV + latch ms (3.24-3.30).
    UnlockLatchBug,
    /// ... the purge nil-safe (3.32+).
    UnlockLatch,
    /// KEYS lock, queue, deadlines, channel prefix; ARGV message, now (PUBLISH): purge, then
    /// 1 deleted (the head told) or 0 (<= 3.21).
    ForceUnlockPublishBug,
    /// ... ARGV + publish command (3.22-3.30).
    ForceUnlockBug,
    /// ... the purge nil-safe (3.32+).
    ForceUnlock,
    /// As [`FairOp::TryAcquire`], ARGV + error text: a re-entry is that error (4.4+).
    NonReentrantTryAcquire,
    /// As [`FairOp::Acquire`], ARGV + error text (4.4+).
    NonReentrantAcquire,
}

use Role::{
    ChannelPrefix, Deadlines, ErrText, Latch, LatchMs, Lease, Lock, Message, Now, Owner, PublishCmd, Queue,
    Wait,
};

const fn def(op: FairOp, name: &'static str, layout: Layout) -> OpDef {
    OpDef { op: Op { object: Object::FairLock, code: op as u8 }, name, layout }
}

const LOCK_KEYS: &[Role] = &[Lock, Queue, Deadlines];
const UNLOCK_KEYS: &[Role] = &[Lock, Queue, Deadlines, ChannelPrefix];
const TRY_ARGS: &[Role] = &[Lease, Owner, Now, Wait];
const ACQUIRE_ARGS: &[Role] = &[Lease, Owner, Wait, Now];

/// The fair lock's operations, in declaration order (`OPS[op as usize]` is `op`'s); the names
/// are those of `lock.redisson-extra-scripts`, INFO and the Lua fixtures.
pub const OPS: [OpDef; 15] = [
    def(FairOp::AcquireFailed, "fair-acquirefailed", Layout::fixed(&[Queue, Deadlines], &[Owner, Wait])),
    def(FairOp::TryAcquireBug, "fair-tryacquire-bug", Layout::fixed(LOCK_KEYS, TRY_ARGS)),
    def(FairOp::TryAcquire, "fair-tryacquire", Layout::fixed(LOCK_KEYS, TRY_ARGS)),
    def(FairOp::AcquireBug, "fair-acquire-bug", Layout::fixed(LOCK_KEYS, ACQUIRE_ARGS)),
    def(FairOp::AcquireEnqueueBug, "fair-acquire-enqueue-bug", Layout::fixed(LOCK_KEYS, ACQUIRE_ARGS)),
    def(FairOp::Acquire, "fair-acquire", Layout::fixed(LOCK_KEYS, ACQUIRE_ARGS)),
    def(
        FairOp::UnlockPublishBug,
        "fair-unlock-publish-bug",
        Layout::fixed(UNLOCK_KEYS, &[Message, Lease, Owner, Now]),
    ),
    def(
        FairOp::UnlockBug,
        "fair-unlock-bug",
        Layout::fixed(UNLOCK_KEYS, &[Message, Lease, Owner, Now, PublishCmd]),
    ),
    def(
        FairOp::UnlockLatchBug,
        "fair-unlock-latch-bug",
        Layout::fixed(
            &[Lock, Queue, Deadlines, ChannelPrefix, Latch],
            &[Message, Lease, Owner, Now, PublishCmd, LatchMs],
        ),
    ),
    def(
        FairOp::UnlockLatch,
        "fair-unlock-latch",
        Layout::fixed(
            &[Lock, Queue, Deadlines, ChannelPrefix, Latch],
            &[Message, Lease, Owner, Now, PublishCmd, LatchMs],
        ),
    ),
    def(
        FairOp::ForceUnlockPublishBug,
        "fair-forceunlock-publish-bug",
        Layout::fixed(UNLOCK_KEYS, &[Message, Now]),
    ),
    def(
        FairOp::ForceUnlockBug,
        "fair-forceunlock-bug",
        Layout::fixed(UNLOCK_KEYS, &[Message, Now, PublishCmd]),
    ),
    def(FairOp::ForceUnlock, "fair-forceunlock", Layout::fixed(UNLOCK_KEYS, &[Message, Now, PublishCmd])),
    def(
        FairOp::NonReentrantTryAcquire,
        "nonreentrant-fair-tryacquire",
        Layout::fixed(LOCK_KEYS, &[Lease, Owner, Now, Wait, ErrText]),
    ),
    def(
        FairOp::NonReentrantAcquire,
        "nonreentrant-fair-acquire",
        Layout::fixed(LOCK_KEYS, &[Lease, Owner, Wait, Now, ErrText]),
    ),
];

impl FairOp {
    /// The operation of an [`Op`] of the fair lock (its `code`).
    pub fn of(op: Op) -> Option<FairOp> {
        const ALL: [FairOp; 15] = [
            FairOp::AcquireFailed,
            FairOp::TryAcquireBug,
            FairOp::TryAcquire,
            FairOp::AcquireBug,
            FairOp::AcquireEnqueueBug,
            FairOp::Acquire,
            FairOp::UnlockPublishBug,
            FairOp::UnlockBug,
            FairOp::UnlockLatchBug,
            FairOp::UnlockLatch,
            FairOp::ForceUnlockPublishBug,
            FairOp::ForceUnlockBug,
            FairOp::ForceUnlock,
            FairOp::NonReentrantTryAcquire,
            FairOp::NonReentrantAcquire,
        ];
        (op.object == Object::FairLock).then(|| ALL.get(usize::from(op.code)).copied()).flatten()
    }

    /// The purge fails ("attempt to compare nil with number") on a head without deadline.
    pub fn purge_fails_on_nil(self) -> bool {
        matches!(
            self,
            FairOp::TryAcquireBug
                | FairOp::AcquireBug
                | FairOp::UnlockPublishBug
                | FairOp::UnlockBug
                | FairOp::UnlockLatchBug
                | FairOp::ForceUnlockPublishBug
                | FairOp::ForceUnlockBug
        )
    }

    /// The enqueue fails ("arithmetic on a nil value") on a last waiter without deadline.
    pub fn enqueue_fails_on_nil(self) -> bool {
        matches!(self, FairOp::AcquireBug | FairOp::AcquireEnqueueBug)
    }

    /// An owner already queued is told its deadline - wait - now (else max(0, PTTL)).
    pub fn old_queued_reply(self) -> bool {
        self == FairOp::AcquireBug
    }

    /// A re-entry is an error (the non-reentrant fair lock).
    pub fn non_reentrant(self) -> bool {
        matches!(self, FairOp::NonReentrantTryAcquire | FairOp::NonReentrantAcquire)
    }

    /// Queues the caller when the lock is not free for it (else replies 1).
    pub fn queues(self) -> bool {
        matches!(
            self,
            FairOp::AcquireBug | FairOp::AcquireEnqueueBug | FairOp::Acquire | FairOp::NonReentrantAcquire
        )
    }
}

const fn row(sha: &'static str, len: usize, op: FairOp) -> Row {
    Row { sha, len, op: Op { object: Object::FairLock, code: op as u8 } }
}

/// The 15 fair-lock scripts of Redisson 3.17 to 4.7 (SHA1 of the UTF-8 body, body length).
pub const ROWS: [Row; 15] = [
    row("d1ddef65ad80886b5d36e023c99930044ddd653a", 305, FairOp::AcquireFailed),
    row("aa0a28d2eb7cbeb50151315a58eb75302d8dfa40", 908, FairOp::TryAcquireBug),
    row("d20501c26a30adf6fb0fe9883bbbcc497e6157e2", 929, FairOp::TryAcquire),
    row("762bfafa6be221431a0b668685dd15c926483619", 1453, FairOp::AcquireBug),
    row("929defe0321e0a4c943b4244951d3a730b6eaabc", 1484, FairOp::AcquireEnqueueBug),
    row("8f6ed299ffd259f0539c20f89253998c0777ea75", 1541, FairOp::Acquire),
    row("35d32367b21753c39b55dc64d1906fee627cc9a8", 931, FairOp::UnlockPublishBug),
    row("14f85250fb2a386500bf8e4b25a8e95db140ff0c", 927, FairOp::UnlockBug),
    row("ca303f8587d0942f8a0021f62338626ca4dd0118", 1152, FairOp::UnlockLatchBug),
    row("367f80bd2e300e411fb0936d9b601e5bcb3fd4b6", 1173, FairOp::UnlockLatch),
    row("95cdf4b03f82c82edf987c7d216b4b67d861b14f", 536, FairOp::ForceUnlockPublishBug),
    row("047c11d7fec40d0102fe9903ff1e19e9a1dec610", 534, FairOp::ForceUnlockBug),
    row("71ed11d4e4818119ac560b3d670a7f08256afc46", 555, FairOp::ForceUnlock),
    row("5bea9498faee85066db11f2f8bf80fccbf222eaf", 867, FairOp::NonReentrantTryAcquire),
    row("46724422f148047badd768b1b1a3d750d86bded2", 1482, FairOp::NonReentrantAcquire),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::kinds;
    use crate::logic::script_table::parse_sha;

    #[test]
    fn the_fifteen_fair_texts_name_their_operations() {
        let t = kinds::table(b"").expect("built-in");
        for (i, d) in OPS.iter().enumerate() {
            assert_eq!(FairOp::of(d.op).map(|o| o as usize), Some(i), "{}", d.name);
        }
        for r in ROWS {
            let id = t.by_sha(&parse_sha(r.sha.as_bytes()).expect("hex")).expect(r.sha);
            assert_eq!(kinds::op(id).map(|d| d.op), Some(r.op), "{}", r.sha);
        }
        let shapes: Vec<(usize, usize)> =
            OPS.iter().map(|d| (d.layout.keys.len(), d.layout.args.len())).collect();
        assert_eq!(
            shapes,
            [
                (2, 2),
                (3, 4),
                (3, 4),
                (3, 4),
                (3, 4),
                (3, 4),
                (4, 4),
                (4, 5),
                (5, 6),
                (5, 6),
                (4, 2),
                (4, 3),
                (4, 3),
                (3, 5),
                (3, 5)
            ]
        );
        let bugs = OPS.iter().filter_map(|d| FairOp::of(d.op)).filter(|o| o.purge_fails_on_nil()).count();
        assert_eq!(bugs, 7);
    }
}
