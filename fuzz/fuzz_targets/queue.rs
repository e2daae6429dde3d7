//! Fuzz the waiter queue (`redis_lock::queue::WaitQueues`) against a plain Vec model.
//!
//! The model is the list of live waiters in arrival order, plus each key's expiry timer.
//! Checked after every op: FIFO heads per key, `len`, `total`, `has`, `key_count`, `ids_of`,
//! `get`; removal of any waiter (head, middle, twice, unknown id) returns exactly the right
//! waiter and hands back the key's expiry timer when, and only when, the key's queue empties;
//! and at the end draining everything leaves the structure empty (no key entries left).
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::queue::{KeyId, WaitQueues, Waiter};
use std::collections::{BTreeSet, HashMap};

#[derive(Arbitrary, Debug)]
enum Op {
    /// A client blocks on key `k` (a small key space so queues share keys).
    Push {
        k: u8,
        owner: u8,
        lease: i64,
        deadline: Option<i64>,
    },
    /// Remove the `i`-th live waiter (in arrival order): timeout, disconnect, grant.
    RemoveNth(u16),
    /// Remove by a raw id: unknown, already removed or live.
    RemoveId(u64),
    /// Grant the head of key `k` (head + remove).
    PopHead(u8),
    /// Many pushes then removals from the middle, to hit the queue's compaction.
    Burst {
        k: u8,
        n: u8,
        keep_every: u8,
    },
    SetTimer {
        k: u8,
        timer: Option<u64>,
        at: i64,
    },
    /// A stored waiter's timer is updated in place.
    SetWaiterTimer(u16, Option<u64>),
}

#[derive(Default)]
struct Model {
    live: Vec<(u64, KeyId, Vec<u8>)>,
    timers: HashMap<KeyId, (u64, i64)>,
    last_id: u64,
    removed: BTreeSet<u64>,
}

fn key(k: u8) -> KeyId {
    let db = i32::from(k % 2);
    let name = match k % 5 {
        0 => b"lock".to_vec(),
        1 => b"".to_vec(),
        2 => vec![0, 0xff],
        3 => b"lock{x}".to_vec(),
        _ => b"LOCK".to_vec(),
    };
    (db, name)
}

fn waiter(k: &KeyId, owner: u8, lease: i64, deadline: Option<i64>, handle: u64) -> Waiter<u64> {
    Waiter { key: k.clone(), owner: vec![owner], lease_ms: lease, deadline, handle, timer: None }
}

fn push(q: &mut WaitQueues<u64>, m: &mut Model, k: &KeyId, owner: u8, lease: i64, deadline: Option<i64>) {
    let handle = m.last_id.wrapping_mul(31).wrapping_add(7);
    let id = q.push(waiter(k, owner, lease, deadline, handle));
    assert!(id > m.last_id, "ids must grow: {id} after {}", m.last_id);
    assert!(!m.removed.contains(&id), "id {id} reused");
    m.last_id = id;
    m.live.push((id, k.clone(), vec![owner]));
    let w = q.get(id).expect("pushed waiter");
    assert_eq!(
        (&w.key, &w.owner, w.lease_ms, w.deadline, w.handle),
        (k, &vec![owner], lease, deadline, handle)
    );
}

fn remove(q: &mut WaitQueues<u64>, m: &mut Model, id: u64) {
    let got = q.remove(id);
    let pos = m.live.iter().position(|(i, _, _)| *i == id);
    match (got, pos) {
        (None, None) => {}
        (Some((w, stale)), Some(p)) => {
            let (_, k, owner) = m.live.remove(p);
            assert_eq!(w.key, k);
            assert_eq!(w.owner, owner);
            m.removed.insert(id);
            let emptied = !m.live.iter().any(|(_, kk, _)| *kk == k);
            let timer = if emptied { m.timers.remove(&k).map(|(t, _)| t) } else { None };
            assert_eq!(stale, timer, "stale timer after removing {id} (queue emptied: {emptied})");
        }
        (got, pos) => panic!("remove({id}) = {:?}, model position {pos:?}", got.map(|(w, t)| (w.key, t))),
    }
}

fn check(q: &mut WaitQueues<u64>, m: &Model) {
    assert_eq!(q.total(), m.live.len());
    assert_eq!(q.is_empty(), m.live.is_empty());
    let keys: BTreeSet<KeyId> = m.live.iter().map(|(_, k, _)| k.clone()).collect();
    assert_eq!(q.key_count(), keys.len(), "key entries must go away with their last waiter");
    let mut listed = q.keys();
    listed.sort();
    assert_eq!(listed, keys.iter().cloned().collect::<Vec<_>>());
    let mut all = q.all_ids();
    all.sort_unstable();
    let mut want_all: Vec<u64> = m.live.iter().map(|(i, _, _)| *i).collect();
    want_all.sort_unstable();
    assert_eq!(all, want_all);
    for k in (0..10u8).map(key) {
        let ids: Vec<u64> = m.live.iter().filter(|(_, kk, _)| *kk == k).map(|(i, _, _)| *i).collect();
        assert_eq!(q.len(&k), ids.len());
        assert_eq!(q.has(&k), !ids.is_empty());
        assert_eq!(q.ids_of(&k), ids, "FIFO order of {k:?}");
        assert_eq!(q.head(&k), ids.first().copied(), "head of {k:?}");
        assert_eq!(q.expiry_timer(&k), m.timers.get(&k).copied());
    }
    for id in m.removed.iter().rev().take(4) {
        assert!(q.get(*id).is_none(), "removed waiter {id} still reachable");
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut q: WaitQueues<u64> = WaitQueues::default();
    let mut m = Model::default();
    for op in ops.iter().take(512) {
        match op {
            Op::Push { k, owner, lease, deadline } => {
                push(&mut q, &mut m, &key(*k), *owner, *lease, *deadline)
            }
            Op::RemoveNth(i) => {
                if !m.live.is_empty() {
                    let id = m.live[usize::from(*i) % m.live.len()].0;
                    remove(&mut q, &mut m, id);
                }
            }
            Op::RemoveId(id) => remove(&mut q, &mut m, *id),
            Op::PopHead(k) => {
                let k = key(*k);
                let head = q.head(&k);
                let want = m.live.iter().find(|(_, kk, _)| *kk == k).map(|(i, _, _)| *i);
                assert_eq!(head, want, "head of {k:?}");
                if let Some(id) = head {
                    remove(&mut q, &mut m, id);
                }
            }
            Op::Burst { k, n, keep_every } => {
                let k = key(*k);
                let start = m.live.len();
                for j in 0..*n {
                    push(&mut q, &mut m, &k, j, 1, None);
                }
                let fresh: Vec<u64> = m.live[start..].iter().map(|(i, _, _)| *i).collect();
                let keep = usize::from(*keep_every).max(1);
                for (j, id) in fresh.iter().enumerate() {
                    if j % keep != 0 {
                        remove(&mut q, &mut m, *id);
                    }
                }
            }
            Op::SetTimer { k, timer, at } => {
                let k = key(*k);
                let new = timer.map(|t| (t, *at));
                let replaced = q.set_expiry_timer(&k, new);
                if m.live.iter().any(|(_, kk, _)| *kk == k) {
                    let old = match new {
                        Some(n) => m.timers.insert(k, n),
                        None => m.timers.remove(&k),
                    };
                    assert_eq!(replaced, old.map(|(t, _)| t), "replaced timer");
                } else {
                    // No queue for the key: nothing is stored, the caller gets its timer back.
                    assert_eq!(replaced, timer.as_ref().copied());
                }
            }
            Op::SetWaiterTimer(i, t) => {
                if !m.live.is_empty() {
                    let id = m.live[usize::from(*i) % m.live.len()].0;
                    q.get_mut(id).expect("live waiter").timer = *t;
                    assert_eq!(q.get(id).expect("live waiter").timer, *t);
                }
            }
        }
        check(&mut q, &m);
    }
    // Drain in FIFO order key by key: everything goes, and so does every key entry.
    while let Some((_, k, _)) = m.live.first().cloned() {
        let head = q.head(&k).expect("a head while the model has waiters");
        assert_eq!(head, m.live.iter().find(|(_, kk, _)| *kk == k).unwrap().0);
        remove(&mut q, &mut m, head);
    }
    check(&mut q, &m);
    assert_eq!(q.key_count(), 0);
    assert!(q.is_empty());
});
