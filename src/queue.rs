//! The per-key FIFO of blocked LOCK.ACQUIRE ... WAIT clients.
//!
//! Pure data structure, generic over the client handle so it can be tested without Redis.
//! Removal of a waiter from the middle (timeout, disconnect) is O(1): the waiter leaves the
//! table at once and its id is skipped when it reaches the head; a queue whose live count drops
//! to zero is dropped whole, so memory goes back to where it was.

use std::collections::{HashMap, VecDeque};

/// A lock key in a database.
pub type KeyId = (i32, Vec<u8>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<H> {
    pub key: KeyId,
    pub owner: Vec<u8>,
    pub lease_ms: i64,
    /// The waiter asked for a fencing token (`FENCE`).
    pub fence: bool,
    /// Absolute unix-ms deadline of the wait, `None` for no limit.
    pub deadline: Option<i64>,
    pub handle: H,
    /// Timer that ends the wait at `deadline`.
    pub timer: Option<u64>,
}

#[derive(Debug, Default)]
struct KeyQueue {
    ids: VecDeque<u64>,
    live: usize,
    /// Timer armed at the holder's lease deadline: (timer id, deadline).
    expiry_timer: Option<(u64, i64)>,
}

#[derive(Debug)]
pub struct WaitQueues<H> {
    next_id: u64,
    keys: HashMap<KeyId, KeyQueue>,
    waiters: HashMap<u64, Waiter<H>>,
}

impl<H> Default for WaitQueues<H> {
    fn default() -> Self {
        WaitQueues { next_id: 1, keys: HashMap::new(), waiters: HashMap::new() }
    }
}

impl<H> WaitQueues<H> {
    /// Append a waiter at the tail of its key's queue; returns its id.
    pub fn push(&mut self, waiter: Waiter<H>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let q = self.keys.entry(waiter.key.clone()).or_default();
        q.ids.push_back(id);
        q.live += 1;
        self.waiters.insert(id, waiter);
        id
    }

    pub fn get(&self, id: u64) -> Option<&Waiter<H>> {
        self.waiters.get(&id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Waiter<H>> {
        self.waiters.get_mut(&id)
    }

    /// Remove a waiter wherever it stands. Returns it, and the expiry timer of its key if the
    /// key's queue became empty (the caller stops that timer).
    pub fn remove(&mut self, id: u64) -> Option<(Waiter<H>, Option<u64>)> {
        let w = self.waiters.remove(&id)?;
        let mut stale_timer = None;
        if let Some(q) = self.keys.get_mut(&w.key) {
            q.live = q.live.saturating_sub(1);
            if q.live == 0 {
                stale_timer = q.expiry_timer.map(|(t, _)| t);
                self.keys.remove(&w.key);
            } else if q.ids.len() > 2 * q.live + 16 {
                let waiters = &self.waiters;
                q.ids.retain(|i| waiters.contains_key(i));
            }
        }
        Some((w, stale_timer))
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

    /// Number of live waiters on `key`.
    pub fn len(&self, key: &KeyId) -> usize {
        self.keys.get(key).map_or(0, |q| q.live)
    }

    pub fn has(&self, key: &KeyId) -> bool {
        self.keys.contains_key(key)
    }

    /// All waiters, all keys.
    pub fn total(&self) -> usize {
        self.waiters.len()
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
        self.keys.keys().cloned().collect()
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

    pub fn expiry_timer(&self, key: &KeyId) -> Option<(u64, i64)> {
        self.keys.get(key).and_then(|q| q.expiry_timer)
    }

    /// Record the key's expiry timer; returns the one it replaces.
    pub fn set_expiry_timer(&mut self, key: &KeyId, timer: Option<(u64, i64)>) -> Option<u64> {
        match self.keys.get_mut(key) {
            Some(q) => std::mem::replace(&mut q.expiry_timer, timer).map(|(t, _)| t),
            None => timer.map(|(t, _)| t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(key: &str, owner: &str) -> Waiter<u32> {
        Waiter {
            key: (0, key.as_bytes().to_vec()),
            owner: owner.as_bytes().to_vec(),
            lease_ms: 10,
            fence: false,
            deadline: None,
            handle: 0,
            timer: None,
        }
    }

    fn k(key: &str) -> KeyId {
        (0, key.as_bytes().to_vec())
    }

    #[test]
    fn fifo_per_key() {
        let mut q = WaitQueues::default();
        let a = q.push(w("x", "a"));
        let b = q.push(w("x", "b"));
        let c = q.push(w("y", "c"));
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
        let ids: Vec<u64> = (0..100).map(|i| q.push(w("x", &i.to_string()))).collect();
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
            let (_, timer) = q.remove(h).unwrap(); // ok: test
            if q.is_empty() {
                assert_eq!(timer, Some(77), "last removal hands back the key's timer");
            }
        }
        assert_eq!(order, ids.iter().copied().step_by(2).collect::<Vec<_>>());
        assert!(q.is_empty());
        q.shrink_if_empty();
        assert_eq!(q.waiters.capacity(), 0);
        assert_eq!(q.keys.capacity(), 0);
        assert_eq!(q.key_count(), 0);
        assert!(!q.has(&k("x")));
    }
}
