//! The count-down latch's script rows: Redisson's `RCountDownLatch` scripts
//! (`lock.redisson-scripts native`).
//!
//! Pure data: the three operations, each with its KEYS / ARGV layout, and the 6 texts of
//! Redisson 3.17 to 4.7 by SHA1 and body length (facts from `redisson-family.md`; no script
//! text is kept). Operations named `-publish` are the texts before 3.22 (PUBLISH written in the
//! script). What each does natively is in `module/latch/scripts.rs`.

use crate::logic::scripts::{Layout, Object, Op, OpDef, Role, Row};

/// What a latch script does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LatchOp {
    /// KEYS latch, channel; ARGV message, count (PUBLISH). 1: the absent key is SET to the
    /// count (any string) and the message published; 0: the key exists.
    TrySetCountPublish,
    /// ... ARGV + publish command.
    TrySetCount,
    /// KEYS latch, channel; ARGV message (PUBLISH). DECR; <= 0 deletes; == 0 publishes; nil.
    CountDownPublish,
    /// ... ARGV + publish command.
    CountDown,
    /// KEYS latch, channel; ARGV message (PUBLISH). 1 deleted and published, 0 absent.
    DeletePublish,
    /// ... ARGV + publish command.
    Delete,
}

use Role::{Channel, Count, Lock, Message, PublishCmd};

const fn def(op: LatchOp, name: &'static str, layout: Layout) -> OpDef {
    OpDef { op: Op { object: Object::Latch, code: op as u8 }, name, layout }
}

const KEYS: &[Role] = &[Lock, Channel];

/// The latch's operations, in declaration order (`OPS[op as usize]` is `op`'s); the names are
/// those of `lock.redisson-extra-scripts`, INFO and the Lua fixtures.
pub const OPS: [OpDef; 6] = [
    def(LatchOp::TrySetCountPublish, "latch-trysetcount-publish", Layout::fixed(KEYS, &[Message, Count])),
    def(LatchOp::TrySetCount, "latch-trysetcount", Layout::fixed(KEYS, &[Message, Count, PublishCmd])),
    def(LatchOp::CountDownPublish, "latch-countdown-publish", Layout::fixed(KEYS, &[Message])),
    def(LatchOp::CountDown, "latch-countdown", Layout::fixed(KEYS, &[Message, PublishCmd])),
    def(LatchOp::DeletePublish, "latch-delete-publish", Layout::fixed(KEYS, &[Message])),
    def(LatchOp::Delete, "latch-delete", Layout::fixed(KEYS, &[Message, PublishCmd])),
];

impl LatchOp {
    /// The operation of an [`Op`] of the latch (its `code`).
    pub fn of(op: Op) -> Option<LatchOp> {
        const ALL: [LatchOp; 6] = [
            LatchOp::TrySetCountPublish,
            LatchOp::TrySetCount,
            LatchOp::CountDownPublish,
            LatchOp::CountDown,
            LatchOp::DeletePublish,
            LatchOp::Delete,
        ];
        (op.object == Object::Latch).then(|| ALL.get(usize::from(op.code)).copied()).flatten()
    }
}

const fn row(sha: &'static str, len: usize, op: LatchOp) -> Row {
    Row { sha, len, op: Op { object: Object::Latch, code: op as u8 } }
}

/// The 6 latch scripts of Redisson 3.17 to 4.7 (SHA1 of the UTF-8 body, body length).
pub const ROWS: [Row; 6] = [
    row("956d64ccf21d1feed0339006db8295e2aa04a8d8", 147, LatchOp::TrySetCountPublish),
    row("2a52d54a6f35bc8af5e84a2930b2ca1aa2a15892", 145, LatchOp::TrySetCount),
    row("c103a1b27e5635c206edc800af5851a8c4cc8305", 143, LatchOp::CountDownPublish),
    row("38060fab26b0e7c5982a5cfd7ad542e44d3da19b", 141, LatchOp::CountDown),
    row("23bcabf6e8e3267791df8ea2e9ed607944b28658", 107, LatchOp::DeletePublish),
    row("47aed1b8133417c9bc009ffc08602e37ed4a1bb3", 105, LatchOp::Delete),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::kinds;
    use crate::logic::script_table::parse_sha;

    #[test]
    fn the_six_latch_texts_name_their_operations() {
        let t = kinds::table(b"").expect("built-in");
        for (i, d) in OPS.iter().enumerate() {
            assert_eq!(LatchOp::of(d.op).map(|o| o as usize), Some(i), "{}", d.name);
        }
        for r in ROWS {
            let id = t.by_sha(&parse_sha(r.sha.as_bytes()).expect("hex")).expect(r.sha);
            assert_eq!(kinds::op(id).map(|d| d.op), Some(r.op), "{}", r.sha);
        }
        let (keys, args): (Vec<usize>, Vec<usize>) =
            OPS.iter().map(|d| (d.layout.keys.len(), d.layout.args.len())).unzip();
        assert_eq!((keys, args), (vec![2; 6], vec![2, 3, 1, 2, 1, 2]));
    }
}
