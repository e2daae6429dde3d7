//! The semaphore's script rows: Redisson's `RSemaphore` and `RPermitExpirableSemaphore`
//! scripts (`lock.redisson-scripts native`).
//!
//! Pure data: the operations those scripts perform, each with its KEYS / ARGV layout, and the
//! 34 texts of Redisson 3.17 to 4.7 by SHA1 and body length (facts from `redisson-family.md`;
//! no script text is kept). Operations named `-publish` are the texts before 3.22 (PUBLISH
//! written in the script), the others take the publish command as an argument. What each does
//! natively is in `module/semaphore/scripts.rs`.

use crate::logic::scripts::{Layout, Object, Op, OpDef, Role, Row};

/// What a semaphore script does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SemOp {
    /// KEYS count; ARGV permits. 1 taken (DECRBY), 0 not.
    TryAcquire,
    /// KEYS count, channel; ARGV permits (PUBLISH). INCRBY, publish the new value; nil.
    ReleasePublish,
    /// ... ARGV + publish command.
    Release,
    /// KEYS count, channel; ARGV permits, publish command. 0 when the key is absent, else as
    /// a release and 1.
    ReleaseIfExists,
    /// KEYS count. 0 absent, else SET 0 and the old value as a bulk string.
    Drain,
    /// KEYS count, channel; ARGV permits (PUBLISH). 1 set (absent key), 0 not.
    TrySetPublish,
    /// ... ARGV + publish command.
    TrySet,
    /// ... ARGV + time to live (SET ... PX).
    TrySetTtl,
    /// KEYS count, channel; ARGV delta (PUBLISH). SET value + delta, publish it; nil.
    AddPublish,
    /// ... ARGV + publish command.
    Add,
    /// PES. KEYS count, zset, channel; ARGV 1, score, id, now, no-lease (PUBLISH): reclaim,
    /// then the id bytes, `:<lowest score>` or nil.
    PesTryAcquireOnePublish,
    /// ... ARGV + publish command.
    PesTryAcquireOne,
    /// KEYS count, zset, channel; ARGV n, score, now, no-lease, publish command, ids: `OK`,
    /// `:<lowest score>` or nil.
    PesTryAcquire,
    /// KEYS count, channel, zset; ARGV id, permits, now (PUBLISH). 1 returned, 0 absent or
    /// expired.
    PesReleasePublish,
    /// ... ARGV + publish command.
    PesRelease,
    /// KEYS count, channel, zset; ARGV n, now, publish command, ids: reclaim, then whatever
    /// ids are held (3.23.4-3.40).
    PesReleaseManyPartial,
    /// As [`SemOp::PesReleaseManyPartial`], all or nothing (3.41+).
    PesReleaseMany,
    /// KEYS count, zset, channel; ARGV now (PUBLISH): reclaim, then the available permits.
    PesAvailablePublish,
    /// ... ARGV + publish command.
    PesAvailable,
    /// ... available + held (PUBLISH).
    PesGetPermitsPublish,
    PesGetPermits,
    /// ... held (PUBLISH).
    PesAcquiredPublish,
    PesAcquired,
    /// KEYS count, channel, zset; ARGV total (PUBLISH): 3.19-3.21, its comparison never true.
    PesSetPermitsPublishBug,
    /// ... ARGV + publish command (3.22-3.23.3, the same comparison).
    PesSetPermitsBug,
    /// ... fixed (3.23.4+).
    PesSetPermits,
    /// KEYS count, channel; ARGV delta (PUBLISH): SET value + delta, publish the delta if > 0.
    PesAddPublish,
    PesAdd,
    /// KEYS count, zset, channel; ARGV id, score, now (PUBLISH): reclaim, then 1 re-scored, 0.
    PesUpdateLeasePublish,
    PesUpdateLease,
    /// KEYS count, zset, channel; ARGV id, no-lease, now, publish command: reclaim, then -1,
    /// the ms left, or 0.
    PesGetLease,
}

use Role::{Channel, Count, Id, Lock, NoLease, Now, Permits, PublishCmd, Score, Ttl};

const fn def(op: SemOp, name: &'static str, layout: Layout) -> OpDef {
    OpDef { op: Op { object: Object::Semaphore, code: op as u8 }, name, layout }
}

const PES_KEYS: &[Role] = &[Lock, Permits, Channel];
const PES_RELEASE_KEYS: &[Role] = &[Lock, Channel, Permits];

/// The semaphore's operations, in declaration order (`OPS[op as usize]` is `op`'s); the names
/// are those of `lock.redisson-extra-scripts`, INFO and the Lua fixtures.
pub const OPS: [OpDef; 31] = [
    def(SemOp::TryAcquire, "semaphore-tryacquire", Layout::fixed(&[Lock], &[Count])),
    def(SemOp::ReleasePublish, "semaphore-release-publish", Layout::fixed(&[Lock, Channel], &[Count])),
    def(SemOp::Release, "semaphore-release", Layout::fixed(&[Lock, Channel], &[Count, PublishCmd])),
    def(
        SemOp::ReleaseIfExists,
        "semaphore-releaseifexists",
        Layout::fixed(&[Lock, Channel], &[Count, PublishCmd]),
    ),
    def(SemOp::Drain, "semaphore-drain", Layout::fixed(&[Lock], &[])),
    def(SemOp::TrySetPublish, "semaphore-trysetpermits-publish", Layout::fixed(&[Lock, Channel], &[Count])),
    def(SemOp::TrySet, "semaphore-trysetpermits", Layout::fixed(&[Lock, Channel], &[Count, PublishCmd])),
    def(
        SemOp::TrySetTtl,
        "semaphore-trysetpermits-ttl",
        Layout::fixed(&[Lock, Channel], &[Count, PublishCmd, Ttl]),
    ),
    def(SemOp::AddPublish, "semaphore-addpermits-publish", Layout::fixed(&[Lock, Channel], &[Count])),
    def(SemOp::Add, "semaphore-addpermits", Layout::fixed(&[Lock, Channel], &[Count, PublishCmd])),
    def(
        SemOp::PesTryAcquireOnePublish,
        "pes-tryacquire-one-publish",
        Layout::fixed(PES_KEYS, &[Count, Score, Id, Now, NoLease]),
    ),
    def(
        SemOp::PesTryAcquireOne,
        "pes-tryacquire-one",
        Layout::fixed(PES_KEYS, &[Count, Score, Id, Now, NoLease, PublishCmd]),
    ),
    def(
        SemOp::PesTryAcquire,
        "pes-tryacquire",
        Layout::args_tail(PES_KEYS, &[Count, Score, Now, NoLease, PublishCmd], &[Id]),
    ),
    def(SemOp::PesReleasePublish, "pes-release-publish", Layout::fixed(PES_RELEASE_KEYS, &[Id, Count, Now])),
    def(SemOp::PesRelease, "pes-release", Layout::fixed(PES_RELEASE_KEYS, &[Id, Count, Now, PublishCmd])),
    def(
        SemOp::PesReleaseManyPartial,
        "pes-release-many-partial",
        Layout::args_tail(PES_RELEASE_KEYS, &[Count, Now, PublishCmd], &[Id]),
    ),
    def(
        SemOp::PesReleaseMany,
        "pes-release-many",
        Layout::args_tail(PES_RELEASE_KEYS, &[Count, Now, PublishCmd], &[Id]),
    ),
    def(SemOp::PesAvailablePublish, "pes-available-publish", Layout::fixed(PES_KEYS, &[Now])),
    def(SemOp::PesAvailable, "pes-available", Layout::fixed(PES_KEYS, &[Now, PublishCmd])),
    def(SemOp::PesGetPermitsPublish, "pes-getpermits-publish", Layout::fixed(PES_KEYS, &[Now])),
    def(SemOp::PesGetPermits, "pes-getpermits", Layout::fixed(PES_KEYS, &[Now, PublishCmd])),
    def(SemOp::PesAcquiredPublish, "pes-acquired-publish", Layout::fixed(PES_KEYS, &[Now])),
    def(SemOp::PesAcquired, "pes-acquired", Layout::fixed(PES_KEYS, &[Now, PublishCmd])),
    def(
        SemOp::PesSetPermitsPublishBug,
        "pes-setpermits-publish-bug",
        Layout::fixed(PES_RELEASE_KEYS, &[Count]),
    ),
    def(SemOp::PesSetPermitsBug, "pes-setpermits-bug", Layout::fixed(PES_RELEASE_KEYS, &[Count, PublishCmd])),
    def(SemOp::PesSetPermits, "pes-setpermits", Layout::fixed(PES_RELEASE_KEYS, &[Count, PublishCmd])),
    def(SemOp::PesAddPublish, "pes-addpermits-publish", Layout::fixed(&[Lock, Channel], &[Count])),
    def(SemOp::PesAdd, "pes-addpermits", Layout::fixed(&[Lock, Channel], &[Count, PublishCmd])),
    def(SemOp::PesUpdateLeasePublish, "pes-updatelease-publish", Layout::fixed(PES_KEYS, &[Id, Score, Now])),
    def(SemOp::PesUpdateLease, "pes-updatelease", Layout::fixed(PES_KEYS, &[Id, Score, Now, PublishCmd])),
    def(SemOp::PesGetLease, "pes-getlease", Layout::fixed(PES_KEYS, &[Id, NoLease, Now, PublishCmd])),
];

const fn row(sha: &'static str, len: usize, op: SemOp) -> Row {
    Row { sha, len, op: Op { object: Object::Semaphore, code: op as u8 } }
}

/// Every text of Redisson 3.17.0 to 4.7.0 (`redisson-family.md`).
pub const ROWS: [Row; 32] = [
    row("c7dc9d189c1715465a31a06ddbc008585e0c20be", 184, SemOp::TryAcquire),
    row("6ef996845b2b97db21c5bc1ed04b8eae2babe56f", 93, SemOp::ReleasePublish),
    row("ae27582488dd01f4e238cc0733a12146d410eb44", 91, SemOp::Release),
    row("6883802454c09d455e3234c8b01549adf1fb8b4c", 154, SemOp::ReleaseIfExists),
    row("c87766d572855e9461c4ecd453db5d1cbab6119e", 126, SemOp::Drain),
    row("8d41a082c3a98f3e882844af9c9e9f9fbd7f8573", 167, SemOp::TrySetPublish),
    row("241ce4e87e652b4f9b39d33cbcd7df9ee8ed906c", 165, SemOp::TrySet),
    row("38bf99884eb94708a40a9aabacb15b4c5f16e804", 180, SemOp::TrySetTtl),
    row("af883fdf25153ad9a41ad1c0d5dfde728728961a", 175, SemOp::AddPublish),
    row("98238d408c6755085344670d3a2ddaa55cf177a9", 173, SemOp::Add),
    row("9dd7dc38c905805c04c8f14cb8aae2bd5dd529b0", 758, SemOp::PesTryAcquireOnePublish),
    row("d47a2fd3852467e5e7f2d1618c92a1ca719fcf7a", 756, SemOp::PesTryAcquireOne),
    row("992c96b09a3d8ea0b37f5dc12e5347a44d93909d", 781, SemOp::PesTryAcquire),
    row("2eac39f9e36394f850326ea7cd240d6ebc715ae2", 312, SemOp::PesReleasePublish),
    row("4ce079451bee2993ce00c8a4e205b536c6ccad67", 310, SemOp::PesRelease),
    row("bb41a8ec1cd921c89e9d8f2ddde38ad13a2e8b74", 563, SemOp::PesReleaseManyPartial),
    row("cf3ab77b1c0ae1226ae0e06e5cb18ee75f56c96b", 678, SemOp::PesReleaseMany),
    row("6aee5085c7e0b3ff5d8612116a9b5f2ceb1fdab2", 379, SemOp::PesAvailablePublish),
    row("26b3972b2c9e617556282f404cb79709d746a713", 377, SemOp::PesAvailable),
    row("795a15adb7654812d3711bed0f526f84076f8f4e", 532, SemOp::PesGetPermitsPublish),
    row("e242db5c1c68811b0d26a41937dcf22415b6d872", 530, SemOp::PesGetPermits),
    row("dd0e62727caf54b589ae8e4bf22c32ec5ec33250", 394, SemOp::PesAcquiredPublish),
    row("6f0b0be79a0c146c778cb14f40c10eb5b706e574", 392, SemOp::PesAcquired),
    row("f753b3fd2954a5f1ed4d8f95a9c41819ecc27f41", 440, SemOp::PesSetPermitsPublishBug),
    row("055e71dede7c0d07958c639e4661ab8bd36c4ab9", 436, SemOp::PesSetPermitsBug),
    row("494d8561fee0cdb033f6c28d74c052c52189a578", 446, SemOp::PesSetPermits),
    // PES's own trySetPermits up to 3.18.0: the same behaviour as RSemaphore's (its test of a
    // stored "0" compares a string with a number and is never true).
    row("44d63d4882cfdb9af87c32c96c24a9e1e15cffd5", 181, SemOp::TrySetPublish),
    row("575a088d37e6b44b707ce3103c04a03c2cd504bd", 221, SemOp::PesAddPublish),
    row("ec6fb1cd5f66817424e8fe70fee7929391b7c6f0", 219, SemOp::PesAdd),
    row("5100a65fefa9ca6c9ed0977c06c41c68e2e847e8", 440, SemOp::PesUpdateLeasePublish),
    row("2298b02cc67a89f2a638e47503db3675c73d77f5", 438, SemOp::PesUpdateLease),
    row("8be95cb5221cc7ee883cacb8859a8b32ef501a0e", 472, SemOp::PesGetLease),
];

impl SemOp {
    /// The semaphore operation of `op`, if it is one.
    pub fn of(op: Op) -> Option<SemOp> {
        if op.object != Object::Semaphore {
            return None;
        }
        OPS.get(usize::from(op.code)).and_then(|d| ALL.get(usize::from(d.op.code)).copied())
    }
}

/// Every operation, in declaration order.
const ALL: [SemOp; 31] = [
    SemOp::TryAcquire,
    SemOp::ReleasePublish,
    SemOp::Release,
    SemOp::ReleaseIfExists,
    SemOp::Drain,
    SemOp::TrySetPublish,
    SemOp::TrySet,
    SemOp::TrySetTtl,
    SemOp::AddPublish,
    SemOp::Add,
    SemOp::PesTryAcquireOnePublish,
    SemOp::PesTryAcquireOne,
    SemOp::PesTryAcquire,
    SemOp::PesReleasePublish,
    SemOp::PesRelease,
    SemOp::PesReleaseManyPartial,
    SemOp::PesReleaseMany,
    SemOp::PesAvailablePublish,
    SemOp::PesAvailable,
    SemOp::PesGetPermitsPublish,
    SemOp::PesGetPermits,
    SemOp::PesAcquiredPublish,
    SemOp::PesAcquired,
    SemOp::PesSetPermitsPublishBug,
    SemOp::PesSetPermitsBug,
    SemOp::PesSetPermits,
    SemOp::PesAddPublish,
    SemOp::PesAdd,
    SemOp::PesUpdateLeasePublish,
    SemOp::PesUpdateLease,
    SemOp::PesGetLease,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argument_tail_is_counted_from_the_arguments() {
        use crate::logic::scripts::{parse, Mismatch};
        let argv = |v: &[&'static str]| -> Vec<&'static [u8]> { v.iter().map(|a| a.as_bytes()).collect() };
        let layout = &OPS[SemOp::PesTryAcquire as usize].layout;
        let ok = argv(&["3", "k", "z", "c", "2", "9", "1", "922337203685477", "PUBLISH", "a", "b"]);
        let c = parse(layout, &ok).expect("match");
        assert_eq!((c.units, c.unit_arg_index(1, Role::Id)), (2, Some(6)));
        for bad in
            [&["3", "k", "z", "c", "2", "9", "1", "922337203685477", "PUBLISH"][..], &["2", "k", "z", "1"]]
        {
            assert_eq!(parse(layout, &argv(bad)), Err(Mismatch::Shape), "{bad:?}");
        }
    }

    #[test]
    fn operations_are_listed_in_declaration_order() {
        for (i, (d, op)) in OPS.iter().zip(ALL).enumerate() {
            assert_eq!(usize::from(d.op.code), i);
            assert_eq!(op as usize, i);
            assert_eq!(SemOp::of(d.op), Some(op));
        }
        assert_eq!(ROWS.iter().filter(|r| r.sha.len() == 40).count(), 32);
    }
}
