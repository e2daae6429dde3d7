//! Fuzz the lock state transitions (`redis_lock::logic::lock::state`) on a model of one lock key.
//!
//! The model is what Redis would hold at the key: nothing, a non-hash value, or a hash
//! {owner -> stored bytes}. Each op reads a `LockView` from the model exactly as the command
//! glue does, asks the pure function, applies the answer as the glue does (HINCRBY-style count
//! writes, whole-key DEL on the last release) and checks:
//! - every count written by a LOCK op is >= 1, and a hash never holds a module-written 0;
//! - acquire: free -> create with 1; own hold -> count + 1; held by another -> nothing changes;
//! - release: last hold frees the whole key; a deeper hold decrements by one; a non-owner (or a
//!   free key) changes nothing;
//! - renew: true exactly when the caller holds the lock, and never changes the counts;
//! - non-hash keys give WrongType, stored junk gives CorruptCount, and refusals change nothing.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::error::Error;
use redis_lock::logic::lock::state::{self, Acquire, LockView, Release};
use std::collections::BTreeMap;

#[derive(Arbitrary, Debug)]
enum Junk {
    Raw(Vec<u8>),
    Int(i64),
    Max,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Acquire(u8),
    Release(u8),
    Renew(u8),
    /// LOCK.FORCERELEASE / DEL / lease expiry: the key disappears.
    Delete,
    /// A foreign writer stores anything in an owner's field (HSET).
    Foreign(u8, Junk),
    /// The key becomes another type (SET, LPUSH, ...).
    OtherType,
}

#[derive(Clone, Debug, PartialEq)]
enum Model {
    Absent,
    Other,
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
}

fn owner_id(n: u8) -> Vec<u8> {
    // A few owners so they collide often; one of them binary.
    match n % 4 {
        0 => b"uuid-a:1".to_vec(),
        1 => b"uuid-b:7".to_vec(),
        2 => vec![0, 0xff, b':', 0x80],
        _ => b"uuid-a:2".to_vec(),
    }
}

fn view(m: &Model, owner: &[u8]) -> LockView {
    match m {
        Model::Absent => LockView::Free,
        Model::Other => LockView::WrongType,
        Model::Hash(h) => LockView::Hash { mine: h.get(owner).map(|raw| state::parse_count(raw)) },
    }
}

/// What the stored bytes mean as a count, by the spec (canonical decimal >= 1).
fn spec_count(raw: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(raw).ok()?;
    let n: i64 = s.parse().ok()?;
    (n >= 1 && n.to_string().as_bytes() == raw).then_some(n)
}

/// The refusal the spec demands for `owner` on `m`, if any (the caller's own field only).
fn refusal(m: &Model, owner: &[u8]) -> Option<Error> {
    match m {
        Model::Other => Some(Error::WrongType),
        Model::Hash(h) => match h.get(owner) {
            Some(raw) if spec_count(raw).is_none() => Some(Error::CorruptCount),
            _ => None,
        },
        Model::Absent => None,
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut m = Model::Absent;
    // Fields whose bytes came from a foreign writer, not from a LOCK op.
    let mut foreign: std::collections::BTreeSet<Vec<u8>> = Default::default();

    for op in ops.iter().take(256) {
        let before = m.clone();
        let mut writes = false;
        match op {
            Op::Acquire(o) => {
                let o = owner_id(*o);
                let got = state::acquire(&view(&m, &o));
                let mine = match &m {
                    Model::Hash(h) => h.get(&o).and_then(|r| spec_count(r)),
                    _ => None,
                };
                match (got, refusal(&m, &o)) {
                    (Err(e), Some(want)) => assert_eq!(e, want),
                    // The only extra refusal: a count at i64::MAX cannot be incremented.
                    (Err(Error::CorruptCount), None) => assert_eq!(mine, Some(i64::MAX)),
                    (Ok(a), None) => match (a, &mut m) {
                        (Acquire::Create, Model::Absent) => {
                            m = Model::Hash(BTreeMap::from([(o.clone(), b"1".to_vec())]));
                            writes = true;
                            foreign.clear();
                        }
                        (Acquire::Reenter { new_count }, Model::Hash(h)) => {
                            assert_eq!(Some(new_count - 1), mine, "reentry must add exactly one");
                            assert!(new_count >= 2);
                            h.insert(o.clone(), new_count.to_string().into_bytes());
                            writes = true;
                            foreign.remove(&o);
                        }
                        (Acquire::Contended, Model::Hash(h)) => {
                            assert!(!h.contains_key(&o), "owner told it is contended on its own lock");
                        }
                        (a, m) => panic!("acquire gave {a:?} on {m:?}"),
                    },
                    (got, want) => panic!("acquire on {m:?} by {o:?}: got {got:?}, spec wants {want:?}"),
                }
            }
            Op::Release(o) => {
                let o = owner_id(*o);
                let got = state::release(&view(&m, &o));
                match (got, refusal(&m, &o)) {
                    (Err(e), Some(want)) => assert_eq!(e, want),
                    (Ok(r), None) => match (r, &mut m) {
                        (Release::NotOwner, Model::Absent) => {}
                        (Release::NotOwner, Model::Hash(h)) => assert!(!h.contains_key(&o)),
                        (Release::Free, Model::Hash(h)) => {
                            assert_eq!(h.get(&o).and_then(|r| spec_count(r)), Some(1), "freed a deeper hold");
                            // The last hold deletes the whole key (LOCK.RELEASE -> DEL).
                            writes = true;
                            m = Model::Absent;
                            foreign.clear();
                        }
                        (Release::Decrement { new_count }, Model::Hash(h)) => {
                            let old = h.get(&o).and_then(|r| spec_count(r)).expect("decrement of no hold");
                            assert_eq!(new_count, old - 1);
                            assert!(new_count >= 1, "a release left a count of {new_count}");
                            h.insert(o.clone(), new_count.to_string().into_bytes());
                            writes = true;
                            foreign.remove(&o);
                        }
                        (r, m) => panic!("release gave {r:?} on {m:?}"),
                    },
                    (got, want) => panic!("release on {m:?} by {o:?}: got {got:?}, spec wants {want:?}"),
                }
            }
            Op::Renew(o) => {
                let o = owner_id(*o);
                let got = state::renew(&view(&m, &o));
                match (got, refusal(&m, &o)) {
                    (Err(e), Some(want)) => assert_eq!(e, want),
                    (Ok(renewed), None) => {
                        let holds = matches!(&m, Model::Hash(h) if h.contains_key(&o));
                        assert_eq!(renewed, holds, "renew on {m:?} by {o:?}");
                    }
                    (got, want) => panic!("renew on {m:?} by {o:?}: got {got:?}, spec wants {want:?}"),
                }
            }
            Op::Delete => {
                m = Model::Absent;
                foreign.clear();
            }
            Op::Foreign(o, junk) => {
                let o = owner_id(*o);
                let raw = match junk {
                    Junk::Raw(b) => b.clone(),
                    Junk::Int(n) => n.to_string().into_bytes(),
                    Junk::Max => i64::MAX.to_string().into_bytes(),
                };
                match &mut m {
                    Model::Hash(h) => {
                        h.insert(o.clone(), raw);
                    }
                    _ => m = Model::Hash(BTreeMap::from([(o.clone(), raw)])),
                }
                foreign.insert(o);
            }
            Op::OtherType => {
                m = Model::Other;
                foreign.clear();
            }
        }
        // A refusal (Err) or a no-op answer (Contended, NotOwner, renew) changes nothing.
        if !writes && matches!(op, Op::Acquire(_) | Op::Release(_) | Op::Renew(_)) {
            assert_eq!(m, before, "{op:?} changed the key without a write decision");
        }
        // Invariant: every field a LOCK op wrote is a count >= 1.
        if let Model::Hash(h) = &m {
            assert!(!h.is_empty(), "an empty hash cannot exist in Redis");
            for (f, v) in h {
                if !foreign.contains(f) {
                    let n = spec_count(v);
                    assert!(n.is_some_and(|n| n >= 1), "field {f:?} holds {v:?}");
                }
            }
        }
    }
});
