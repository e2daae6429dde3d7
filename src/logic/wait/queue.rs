//! The per-key FIFO of blocked LOCK.ACQUIRE ... WAIT clients, and of the places in line of
//! Redisson script owners whose acquire failed while clients were waiting (their *turns*).
//!
//! Pure data structure, generic over the client handle so it can be tested without Redis.
//! Removal of a waiter from the middle (timeout, disconnect) is O(1): the waiter leaves the
//! table at once and its id is skipped when it reaches the head. Finding a script owner's turn
//! is O(1) too (an index by owner per key), so a failed Redisson acquire costs the same with
//! 10 000 turns queued as with one. The lock name is stored once per key, shared by its
//! entries, and each owner id once per entry (the turn index shares it). Turns exist only while
//! the key has blocked clients: when its last client leaves, the key's queue is dropped whole
//! (turns and reservation included), so memory goes back to where it was and a key without WAIT
//! clients behaves exactly as the scripts do.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A lock key in a database.
pub type KeyId = (i32, Vec<u8>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<H, R, T = u64> {
    /// The key, shared by every entry of the key (the queue keeps one copy of the name).
    pub key: Arc<KeyId>,
    pub owner: Arc<[u8]>,
    /// What the waiter asks for (the kind's request: a lease, a token, a read or write hold...).
    pub req: R,
    /// Absolute unix-ms deadline of the wait, `None` for no limit.
    pub deadline: Option<i64>,
    pub handle: H,
    /// Timer that ends the wait at `deadline`.
    pub timer: Option<T>,
    /// `Some(until)`: not a blocked client but a script owner's place in line, valid until
    /// unix-ms `until` (its `handle` is meaningless).
    pub turn_until: Option<i64>,
}

impl<H, R, T> Waiter<H, R, T> {
    pub fn is_turn(&self) -> bool {
        self.turn_until.is_some()
    }
}

#[derive(Debug)]
struct KeyQueue<T> {
    ids: VecDeque<u64>,
    /// Entries still in the table (clients and turns).
    live: usize,
    /// Blocked clients among them.
    clients: usize,
    /// Timer armed at the holder's lease deadline (or the reservation's end): (timer id, deadline).
    expiry_timer: Option<(T, i64)>,
    /// The free lock is kept for this script owner until unix-ms `.1`.
    reserved: Option<(Vec<u8>, i64)>,
    /// The turn of each script owner in line (at most one per owner).
    turns: HashMap<Arc<[u8]>, u64>,
}

// Not derived: that would require `T: Default`.
impl<T> Default for KeyQueue<T> {
    fn default() -> Self {
        KeyQueue {
            ids: VecDeque::new(),
            live: 0,
            clients: 0,
            expiry_timer: None,
            reserved: None,
            turns: HashMap::new(),
        }
    }
}

#[derive(Debug)]
pub struct WaitQueues<H, R, T = u64> {
    next_id: u64,
    keys: HashMap<Arc<KeyId>, KeyQueue<T>>,
    waiters: HashMap<u64, Waiter<H, R, T>>,
    /// Blocked clients over all keys.
    clients: usize,
    /// Bytes of names and owner ids kept (the INFO gauge `waiter_bytes`): each key's name once,
    /// each entry's owner once.
    kept_bytes: usize,
}

impl<H, R, T> Default for WaitQueues<H, R, T> {
    fn default() -> Self {
        WaitQueues { next_id: 1, keys: HashMap::new(), waiters: HashMap::new(), clients: 0, kept_bytes: 0 }
    }
}

impl<H, R, T: Copy> WaitQueues<H, R, T> {
    /// Append a waiter at the tail of its key's queue; returns its id. A blocked client is
    /// always queued; a turn (`turn_until` set) only behind a key that has blocked clients, and
    /// only one per owner and key: `None` otherwise.
    pub fn push(&mut self, mut waiter: Waiter<H, R, T>) -> Option<u64> {
        let turn = waiter.is_turn();
        if turn && (self.clients_on(&waiter.key) == 0 || self.turn_of(&waiter.key, &waiter.owner).is_some()) {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        // One copy of the name per key: a new entry shares the key's.
        match self.keys.get_key_value(&*waiter.key) {
            Some((shared, _)) => waiter.key = Arc::clone(shared),
            None => {
                self.kept_bytes = self.kept_bytes.saturating_add(waiter.key.1.len());
                self.keys.insert(Arc::clone(&waiter.key), KeyQueue::default());
            }
        }
        let q = self.keys.get_mut(&*waiter.key)?;
        q.ids.push_back(id);
        q.live += 1;
        if turn {
            q.turns.insert(Arc::clone(&waiter.owner), id);
        } else {
            q.clients += 1;
            self.clients += 1;
        }
        self.kept_bytes = self.kept_bytes.saturating_add(waiter.owner.len());
        self.waiters.insert(id, waiter);
        Some(id)
    }

    pub fn get(&self, id: u64) -> Option<&Waiter<H, R, T>> {
        self.waiters.get(&id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Waiter<H, R, T>> {
        self.waiters.get_mut(&id)
    }

    /// Remove a waiter wherever it stands. Returns it, and the expiry timer of its key if the
    /// key's queue became empty (the caller stops that timer).
    /// When the last blocked client of the key leaves, the key's turns go with it.
    pub fn remove(&mut self, id: u64) -> Option<(Waiter<H, R, T>, Option<T>)> {
        let w = self.waiters.remove(&id)?;
        self.kept_bytes = self.kept_bytes.saturating_sub(w.owner.len());
        let mut stale_timer = None;
        if let Some(q) = self.keys.get_mut(&*w.key) {
            q.live = q.live.saturating_sub(1);
            if w.is_turn() {
                if q.turns.get(&w.owner) == Some(&id) {
                    q.turns.remove(&w.owner);
                }
            } else {
                q.clients = q.clients.saturating_sub(1);
                self.clients = self.clients.saturating_sub(1);
            }
            if q.clients == 0 {
                stale_timer = q.expiry_timer.map(|(t, _)| t);
                if let Some(q) = self.keys.remove(&*w.key) {
                    self.kept_bytes = self.kept_bytes.saturating_sub(w.key.1.len());
                    for i in q.ids {
                        if let Some(gone) = self.waiters.remove(&i) {
                            self.kept_bytes = self.kept_bytes.saturating_sub(gone.owner.len());
                        }
                    }
                }
            } else if q.ids.len() > 2 * q.live + 16 {
                let waiters = &self.waiters;
                q.ids.retain(|i| waiters.contains_key(i));
            }
        }
        Some((w, stale_timer))
    }

    /// Blocked clients waiting on `key`.
    pub fn clients_on(&self, key: &KeyId) -> usize {
        self.keys.get(key).map_or(0, |q| q.clients)
    }

    /// The queued turn of script owner `owner` on `key`, if any.
    pub fn turn_of(&self, key: &KeyId, owner: &[u8]) -> Option<u64> {
        self.keys.get(key)?.turns.get(owner).copied()
    }

    /// Who the free lock is kept for, and until when.
    pub fn reservation(&self, key: &KeyId) -> Option<(&[u8], i64)> {
        self.keys.get(key)?.reserved.as_ref().map(|(o, t)| (o.as_slice(), *t))
    }

    /// Keep (or stop keeping) the free lock for a script owner. Ignored for a key without queue.
    pub fn set_reservation(&mut self, key: &KeyId, r: Option<(Vec<u8>, i64)>) {
        if let Some(q) = self.keys.get_mut(key) {
            q.reserved = r;
        }
    }

    /// Id of the first live waiter of `key`.
    pub fn head(&mut self, key: &KeyId) -> Option<u64> {
        let q = self.keys.get_mut(key)?;
        while let Some(&id) = q.ids.front() {
            if self.waiters.contains_key(&id) {
                return Some(id);
            }
            q.ids.pop_front();
        }
        None
    }

    /// Number of entries on `key`: blocked clients and turns.
    pub fn len(&self, key: &KeyId) -> usize {
        self.keys.get(key).map_or(0, |q| q.live)
    }

    pub fn has(&self, key: &KeyId) -> bool {
        self.keys.contains_key(key)
    }

    /// All entries, all keys (blocked clients and turns).
    pub fn total(&self) -> usize {
        self.waiters.len()
    }

    /// Blocked clients, all keys.
    pub fn clients(&self) -> usize {
        self.clients
    }

    /// Script owners' turns, all keys.
    pub fn turns(&self) -> usize {
        self.waiters.len().saturating_sub(self.clients)
    }

    /// Bytes of names (once per key) and owner ids (once per entry) kept.
    pub fn kept_bytes(&self) -> usize {
        self.kept_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Give back the tables' memory once nobody waits (maps keep their capacity otherwise).
    pub fn shrink_if_empty(&mut self) {
        if self.waiters.is_empty() {
            self.waiters.shrink_to_fit();
            self.keys.shrink_to_fit();
        }
    }

    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Keys that have waiters.
    pub fn keys(&self) -> Vec<KeyId> {
        self.keys.keys().map(|k| KeyId::clone(k)).collect()
    }

    /// Ids of every waiter on `key`, head first.
    pub fn ids_of(&self, key: &KeyId) -> Vec<u64> {
        self.keys.get(key).map_or_else(Vec::new, |q| {
            q.ids.iter().copied().filter(|i| self.waiters.contains_key(i)).collect()
        })
    }

    /// All waiter ids.
    pub fn all_ids(&self) -> Vec<u64> {
        self.waiters.keys().copied().collect()
    }

    pub fn expiry_timer(&self, key: &KeyId) -> Option<(T, i64)> {
        self.keys.get(key).and_then(|q| q.expiry_timer)
    }

    /// Record the key's expiry timer; returns the one it replaces.
    pub fn set_expiry_timer(&mut self, key: &KeyId, timer: Option<(T, i64)>) -> Option<T> {
        match self.keys.get_mut(key) {
            Some(q) => std::mem::replace(&mut q.expiry_timer, timer).map(|(t, _)| t),
            None => timer.map(|(t, _)| t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(key: &str, owner: &str) -> Waiter<u32, i64> {
        Waiter {
            key: Arc::new((0, key.as_bytes().to_vec())),
            owner: Arc::from(owner.as_bytes()),
            req: 10,
            deadline: None,
            handle: 0,
            timer: None,
            turn_until: None,
        }
    }

    fn k(key: &str) -> KeyId {
        (0, key.as_bytes().to_vec())
    }

    #[test]
    fn fifo_per_key() {
        let mut q = WaitQueues::default();
        let a = q.push(w("x", "a")).unwrap();
        let b = q.push(w("x", "b")).unwrap();
        let c = q.push(w("y", "c")).unwrap();
        assert_eq!(q.head(&k("x")), Some(a));
        assert_eq!(q.head(&k("y")), Some(c));
        assert_eq!(q.len(&k("x")), 2);
        q.remove(a);
        assert_eq!(q.head(&k("x")), Some(b));
        assert_eq!(q.ids_of(&k("x")), vec![b]);
        assert_eq!(q.total(), 2);
    }

    #[test]
    fn removal_from_the_middle_and_cleanup() {
        let mut q = WaitQueues::default();
        let ids: Vec<u64> = (0..100).map(|i| q.push(w("x", &i.to_string())).unwrap()).collect();
        assert_eq!(q.set_expiry_timer(&k("x"), Some((77, 5))), None);
        for id in ids.iter().skip(1).step_by(2) {
            assert!(q.remove(*id).is_some());
        }
        assert!(q.remove(ids[1]).is_none(), "double remove is a no-op");
        assert_eq!(q.len(&k("x")), 50);
        assert_eq!(q.ids_of(&k("x")).len(), 50);
        let mut order = vec![];
        while let Some(h) = q.head(&k("x")) {
            order.push(h);
            let (_, timer) = q.remove(h).unwrap();
            if q.is_empty() {
                assert_eq!(timer, Some(77), "last removal hands back the key's timer");
            }
        }
        assert_eq!(order, ids.iter().copied().step_by(2).collect::<Vec<_>>());
        assert!(q.is_empty());
        assert_eq!(q.clients(), 0);
        q.shrink_if_empty();
        assert_eq!(q.waiters.capacity(), 0);
        assert_eq!(q.keys.capacity(), 0);
        assert_eq!(q.key_count(), 0);
        assert!(!q.has(&k("x")));
    }

    #[test]
    fn turns_live_only_beside_blocked_clients() {
        let mut q = WaitQueues::default();
        let turn = |o: &str| Waiter { turn_until: Some(100), ..w("x", o) };
        assert_eq!(q.push(turn("java:1")), None, "no turn without a blocked client");
        let c1 = q.push(w("x", "py:1")).unwrap();
        let t1 = q.push(turn("java:1")).expect("turn behind a client");
        let c2 = q.push(w("x", "py:2")).unwrap();
        assert_eq!((q.len(&k("x")), q.clients_on(&k("x")), q.clients()), (3, 2, 2));
        assert_eq!(q.turn_of(&k("x"), b"java:1"), Some(t1));
        assert_eq!(q.turn_of(&k("x"), b"py:1"), None, "clients are not turns");
        q.set_reservation(&k("x"), Some((b"java:9".to_vec(), 50)));
        assert_eq!(q.reservation(&k("x")), Some((&b"java:9"[..], 50)));
        assert_eq!(q.ids_of(&k("x")), vec![c1, t1, c2]);
        q.remove(c1);
        assert_eq!(q.head(&k("x")), Some(t1), "a turn stands in line like a client");
        assert_eq!((q.turns(), q.kept_bytes()), (1, 1 + 6 + 4), "the name once, each owner once");
        assert_eq!(q.push(turn("java:1")), None, "one turn per owner and key");
        q.remove(c2);
        assert!(!q.has(&k("x")), "the last client takes the turns and reservation with it");
        assert_eq!((q.turns(), q.kept_bytes()), (0, 0));
        assert!(q.get(t1).is_none());
        assert!(q.is_empty());
    }
}
