//! Fuzz the waiter queue (`redis_lock::logic::wait::queue::WaitQueues`) against a plain Vec model.
//!
//! The model is the list of live entries in arrival order (blocked clients and script owners'
//! turns), plus each key's expiry timer and reservation. Checked after every op: FIFO heads per
//! key, `len`, `clients_on`, `total`, `clients`, `has`, `key_count`, `ids_of`, `get`,
//! `turn_of`, `reservation`; a turn is queued only behind a blocked client of its key; removal
//! of any entry (head, middle, twice, unknown id) returns exactly the right entry, and when the
//! key's last blocked client leaves, its turns, reservation and expiry timer go with it (the
//! timer handed back); a script owner has at most one turn per key; the bytes kept are each
//! key's name once and each entry's owner once; at the end draining everything leaves the
//! structure empty.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::wait::queue::{KeyId, WaitQueues, Waiter};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

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
    /// A script owner's failed acquire asks for a place in line.
    PushTurn {
        k: u8,
        owner: u8,
        until: i64,
    },
    /// The free lock is kept (or no longer kept) for an owner.
    Reserve {
        k: u8,
        owner: Option<u8>,
        until: i64,
    },
}

#[derive(Default)]
struct Model {
    /// (id, key, owner, is a turn)
    live: Vec<(u64, KeyId, Vec<u8>, bool)>,
    timers: HashMap<KeyId, (u64, i64)>,
    reserved: HashMap<KeyId, (Vec<u8>, i64)>,
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

fn waiter(k: &KeyId, owner: u8, lease: i64, deadline: Option<i64>, handle: u64) -> Waiter<u64, i64> {
    Waiter {
        key: Arc::new(k.clone()),
        owner: Arc::from(vec![owner]),
        req: lease,
        deadline,
        handle,
        timer: None,
        turn_until: None,
    }
}

fn clients_of(m: &Model, k: &KeyId) -> usize {
    m.live.iter().filter(|(_, kk, _, turn)| kk == k && !turn).count()
}

fn push(
    q: &mut WaitQueues<u64, i64>,
    m: &mut Model,
    k: &KeyId,
    owner: u8,
    lease: i64,
    deadline: Option<i64>,
) {
    let handle = m.last_id.wrapping_mul(31).wrapping_add(7);
    let id = q.push(waiter(k, owner, lease, deadline, handle)).expect("a blocked client is always queued");
    assert!(id > m.last_id, "ids must grow: {id} after {}", m.last_id);
    assert!(!m.removed.contains(&id), "id {id} reused");
    m.last_id = id;
    m.live.push((id, k.clone(), vec![owner], false));
    let w = q.get(id).expect("pushed waiter");
    assert_eq!((&*w.key, &*w.owner, w.req, w.deadline, w.handle), (k, &[owner][..], lease, deadline, handle));
}

fn push_turn(q: &mut WaitQueues<u64, i64>, m: &mut Model, k: &KeyId, owner: u8, until: i64) {
    let w = Waiter { turn_until: Some(until), ..waiter(k, owner, 0, None, 0) };
    let got = q.push(w);
    if clients_of(m, k) == 0 {
        assert_eq!(got, None, "a turn without a blocked client on {k:?}");
        return;
    }
    if m.live.iter().any(|(_, kk, o, turn)| kk == k && *turn && *o == [owner]) {
        assert_eq!(got, None, "a second turn of owner {owner} on {k:?}");
        return;
    }
    let id = got.expect("a turn behind a blocked client");
    assert!(id > m.last_id);
    m.last_id = id;
    m.live.push((id, k.clone(), vec![owner], true));
    assert!(q.get(id).is_some_and(|w| w.is_turn() && w.turn_until == Some(until)));
}

fn remove(q: &mut WaitQueues<u64, i64>, m: &mut Model, id: u64) {
    let got = q.remove(id);
    let pos = m.live.iter().position(|(i, _, _, _)| *i == id);
    match (got, pos) {
        (None, None) => {}
        (Some((w, stale)), Some(p)) => {
            let (_, k, owner, turn) = m.live.remove(p);
            assert_eq!(*w.key, k);
            assert_eq!(*w.owner, owner[..]);
            assert_eq!(w.is_turn(), turn);
            m.removed.insert(id);
            let emptied = clients_of(m, &k) == 0;
            let timer = if emptied { m.timers.remove(&k).map(|(t, _)| t) } else { None };
            if emptied {
                // The key's turns and reservation go with its last blocked client.
                for (i, _, _, _) in m.live.iter().filter(|(_, kk, _, _)| *kk == k) {
                    m.removed.insert(*i);
                }
                m.live.retain(|(_, kk, _, _)| *kk != k);
                m.reserved.remove(&k);
            }
            assert_eq!(stale, timer, "stale timer after removing {id} (queue emptied: {emptied})");
        }
        (got, pos) => {
            panic!("remove({id}) = {:?}, model position {pos:?}", got.map(|(w, t)| (KeyId::clone(&w.key), t)))
        }
    }
}

fn check(q: &mut WaitQueues<u64, i64>, m: &Model) {
    assert_eq!(q.total(), m.live.len());
    assert_eq!(q.clients(), m.live.iter().filter(|e| !e.3).count());
    assert_eq!(q.is_empty(), m.live.is_empty());
    let keys: BTreeSet<KeyId> = m.live.iter().map(|(_, k, _, _)| k.clone()).collect();
    assert_eq!(q.key_count(), keys.len(), "key entries must go away with their last waiter");
    let kept: usize =
        keys.iter().map(|k| k.1.len()).sum::<usize>() + m.live.iter().map(|e| e.2.len()).sum::<usize>();
    assert_eq!(q.kept_bytes(), kept, "each name once per key, each owner once per entry");
    let mut listed = q.keys();
    listed.sort();
    assert_eq!(listed, keys.iter().cloned().collect::<Vec<_>>());
    let mut all = q.all_ids();
    all.sort_unstable();
    let mut want_all: Vec<u64> = m.live.iter().map(|(i, _, _, _)| *i).collect();
    want_all.sort_unstable();
    assert_eq!(all, want_all);
    for k in (0..10u8).map(key) {
        let ids: Vec<u64> = m.live.iter().filter(|(_, kk, _, _)| *kk == k).map(|(i, _, _, _)| *i).collect();
        assert_eq!(q.len(&k), ids.len());
        assert_eq!(q.clients_on(&k), clients_of(m, &k));
        assert_eq!(q.reservation(&k), m.reserved.get(&k).map(|(o, t)| (o.as_slice(), *t)));
        for owner in 0..4u8 {
            let want = m.live.iter().find(|(_, kk, o, turn)| *kk == k && *turn && *o == [owner]).map(|e| e.0);
            assert_eq!(q.turn_of(&k, &[owner]), want, "turn of {owner} on {k:?}");
        }
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
    let mut q: WaitQueues<u64, i64> = WaitQueues::default();
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
                let want = m.live.iter().find(|(_, kk, _, _)| *kk == k).map(|(i, _, _, _)| *i);
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
                let fresh: Vec<u64> = m.live[start..].iter().map(|(i, _, _, _)| *i).collect();
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
                if m.live.iter().any(|(_, kk, _, _)| *kk == k) {
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
            Op::PushTurn { k, owner, until } => push_turn(&mut q, &mut m, &key(*k), owner % 4, *until),
            Op::Reserve { k, owner, until } => {
                let k = key(*k);
                let r = owner.map(|o| (vec![o % 4], *until));
                q.set_reservation(&k, r.clone());
                if m.live.iter().any(|(_, kk, _, _)| *kk == k) {
                    match r {
                        Some(r) => m.reserved.insert(k, r),
                        None => m.reserved.remove(&k),
                    };
                }
            }
        }
        check(&mut q, &m);
    }
    // Drain in FIFO order key by key: everything goes, and so does every key entry.
    while let Some((_, k, _, _)) = m.live.first().cloned() {
        let head = q.head(&k).expect("a head while the model has waiters");
        assert_eq!(head, m.live.iter().find(|(_, kk, _, _)| *kk == k).unwrap().0);
        remove(&mut q, &mut m, head);
    }
    check(&mut q, &m);
    assert_eq!(q.key_count(), 0);
    assert!(q.is_empty());
});
