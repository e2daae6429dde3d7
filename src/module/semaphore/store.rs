//! A semaphore's keys: the string `K` (available permits) and the zset `{K}:timeout` (held
//! permit ids and their lease ends). Reads, and writes with their effects: replicated as plain
//! INCRBY / DECRBY / ZADD / ZREM / PEXPIREAT / PUBLISH (a module-less replica or an AOF reload
//! ends with the same keys), with the keyspace events those commands fire.
//!
//! The zset is opened for each operation and closed right after: a zset emptied through one
//! handle is deleted, and a second handle open on it would point at freed memory.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::replication;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr, NOTIFY_GENERIC, NOTIFY_STRING, NOTIFY_ZSET};
use crate::logic::error::Error;
use crate::logic::semaphore::{names, state};
use crate::module::{acl, cluster, effects};
use crate::registry::stats;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set while the module writes a semaphore's keys: the keyspace events it fires are its own
/// (the lease timers already know of its leases).
static OWN_WRITE: AtomicBool = AtomicBool::new(false);

/// Whether the keyspace event being delivered comes from the module's own write.
pub fn own_write() -> bool {
    OWN_WRITE.load(Ordering::Relaxed)
}

/// Fire a keyspace event of the module's own write.
fn notify(ctx: Ctx, class: std::ffi::c_int, event: &std::ffi::CStr, key: RStr) {
    OWN_WRITE.store(true, Ordering::Relaxed);
    rm::notify(ctx, class, event, key);
    OWN_WRITE.store(false, Ordering::Relaxed);
}

/// Most expired permits one command or timer returns (the rest on the next pass, a timer 1 ms
/// later): a zset of a million expired ids is not walked in one event-loop iteration.
pub const RETURN_BATCH: usize = 10_000;

/// A semaphore: its count key, open for writing (or reading: SEMINFO), and its zset's name.
/// The key is borrowed: whoever opened it (a command, the waiting core) passes the same handle
/// to the grants it makes, as two handles on one key would not see each other's writes.
pub struct Sem<'a> {
    pub key: &'a Key,
    pub name: RStr,
    pub zname: OwnedStr,
}

/// The zset's name, checked as if the client had named it: in the semaphore's slot (cluster)
/// and, inside a command (`ctx`), writable (or readable: `write` false) by the calling user.
pub fn zset_name(ctx: Option<Ctx>, lock: &[u8], write: bool) -> Result<Vec<u8>, Error> {
    let z = names::zset(lock);
    if cluster::enabled() && cluster::key_slot(&z) != cluster::key_slot(lock) {
        return Err(Error::SemZsetCrossSlot);
    }
    if let Some(ctx) = ctx {
        let ok = if write { acl::may_write(ctx, &z) } else { acl::may_read(ctx, &z) };
        if !ok {
            return Err(Error::SemZsetDenied);
        }
    }
    Ok(z)
}

/// The calling user may publish on the semaphore's channel (checked before a write that
/// publishes).
pub fn may_publish(ctx: Ctx, lock: &[u8]) -> Result<(), Error> {
    acl::may_publish_on(ctx, &names::channel(lock)).map_err(|_| Error::SemPublishDenied)
}

/// The calling user, looked up once for the checks of a command's derived names.
pub struct Caller(Option<acl::User>);

pub fn caller(ctx: Ctx) -> Caller {
    Caller(acl::calling_user(ctx))
}

impl Caller {
    /// The zset's name, checked as [`zset_name`] does, for this caller (it writes it).
    pub fn zset_name(&self, lock: &[u8]) -> Result<Vec<u8>, Error> {
        let z = zset_name(None, lock, true)?;
        if !acl::user_may_write(self.0.as_ref(), &z) {
            return Err(Error::SemZsetDenied);
        }
        Ok(z)
    }

    /// The caller may publish on the semaphore's channel.
    pub fn may_publish(&self, lock: &[u8]) -> Result<(), Error> {
        if self.0.is_none() || acl::user_may_publish(self.0.as_ref(), &names::channel(lock)) {
            Ok(())
        } else {
            Err(Error::SemPublishDenied)
        }
    }
}

/// Semaphore `name` with its count key `key` open: WRONGTYPE unless `K` is a string (or
/// absent) and the zset a zset (or absent). `zname` from [`zset_name`].
pub fn open<'a>(ctx: Ctx, key: &'a Key, name: RStr, zname: &[u8]) -> Result<Sem<'a>, Error> {
    if !matches!(key.kind(), KeyKind::Empty | KeyKind::String) {
        return Err(Error::WrongType);
    }
    let sem = Sem { key, name, zname: OwnedStr::new(zname) };
    if !matches!(sem.zset_kind(ctx), KeyKind::Empty | KeyKind::SortedSet) {
        return Err(Error::WrongType);
    }
    Ok(sem)
}

/// Semaphore `name` with its count key `key` open, the zset's type not checked yet: the caller
/// reads the zset through [`Sem::peek`], which checks it (one open of the zset instead of two).
pub fn open_count<'a>(key: &'a Key, name: RStr, zname: &[u8]) -> Result<Sem<'a>, Error> {
    if !matches!(key.kind(), KeyKind::Empty | KeyKind::String) {
        return Err(Error::WrongType);
    }
    Ok(Sem { key, name, zname: OwnedStr::new(zname) })
}

impl Sem<'_> {
    /// Read the zset through one handle (WRONGTYPE unless it is a zset or absent); nothing may be
    /// written while it is open.
    pub fn peek<R>(&self, ctx: Ctx, f: impl FnOnce(&Key) -> R) -> Result<R, Error> {
        let z = Key::read(ctx, self.zname.ptr());
        if !matches!(z.kind(), KeyKind::Empty | KeyKind::SortedSet) {
            return Err(Error::WrongType);
        }
        Ok(f(&z))
    }

    fn zset(&self, ctx: Ctx) -> Key {
        Key::write(ctx, self.zname.ptr())
    }

    fn zset_kind(&self, ctx: Ctx) -> KeyKind {
        Key::read(ctx, self.zname.ptr()).kind()
    }

    /// The available permits (0 without the key).
    pub fn available(&self) -> Result<i64, Error> {
        match self.key.kind() {
            KeyKind::String => self.key.string_get(|b| state::available(Some(b))).unwrap_or(Ok(0)),
            _ => Ok(0),
        }
    }

    /// Held permits (expired ones not yet returned included).
    pub fn held(&self, ctx: Ctx) -> usize {
        let z = Key::read(ctx, self.zname.ptr());
        if z.kind() == KeyKind::SortedSet {
            z.len()
        } else {
            0
        }
    }

    /// The lease end of `id`'s permit, if it holds one.
    pub fn score(&self, ctx: Ctx, id: RStr) -> Option<i64> {
        Key::read(ctx, self.zname.ptr()).zset_score(id)
    }

    /// The earliest lease end of a held permit.
    pub fn earliest(&self, ctx: Ctx) -> Option<i64> {
        Key::read(ctx, self.zname.ptr()).zset_lowest()
    }

    /// Up to `limit` held permits, earliest lease end first, whose lease ends at or before `upto`.
    pub fn upto(&self, ctx: Ctx, upto: i64, limit: usize) -> Vec<(Vec<u8>, i64)> {
        let mut out = Vec::new();
        Key::read(ctx, self.zname.ptr())
            .zset_upto(upto as f64, limit, &mut |id, s| out.push((id.to_vec(), s)));
        out
    }

    /// Ids of permits whose lease ended by `now` (at most [`RETURN_BATCH`]).
    pub fn expired(&self, ctx: Ctx, now: i64) -> Vec<Vec<u8>> {
        self.upto(ctx, now, RETURN_BATCH).into_iter().map(|(id, _)| id).collect()
    }

    /// Add `delta` to the count, which becomes `new`, keeping its TTL (INCRBY / DECRBY).
    pub fn add(&self, ctx: Ctx, delta: i64, new: i64) {
        let digits = new.to_string();
        let text = digits.as_bytes();
        if !self.key.string_overwrite(text) {
            let deadline = self.key.deadline();
            let v = OwnedStr::new(text);
            self.key.string_set(v.ptr());
            if let Some(d) = deadline {
                self.key.set_deadline(d, rm::millis());
            }
        }
        replication::count(ctx, self.name, delta, text);
        // INCRBY and DECRBY both fire `incrby`.
        rm::notify(ctx, NOTIFY_STRING, c"incrby", self.name);
        rm::signal_modified(ctx, self.name);
    }

    /// Give each id a permit until `score` (ZADD, one call for all), and the zset the count's
    /// TTL when it has one (Redisson's rule).
    pub fn hold(&self, ctx: Ctx, ids: &[RStr], score: i64) {
        self.zadd(ctx, ids, score, true);
    }

    /// ZADD each id with `score`; `copy_ttl`: then the zset gets the count's TTL, if any.
    pub fn zadd(&self, ctx: Ctx, ids: &[RStr], score: i64, copy_ttl: bool) {
        if ids.is_empty() {
            return;
        }
        let z = self.zset(ctx);
        // One event per id added or re-scored, as the scripts' ZADD per id fires (a ZADD that
        // changes nothing fires none).
        let changed = ids.iter().filter(|id| z.zset_add(score, **id)).count();
        let s = OwnedStr::from_i64(score);
        replication::zadd(ctx, self.zname.ptr(), s.ptr(), ids);
        for _ in 0..changed {
            notify(ctx, NOTIFY_ZSET, c"zadd", self.zname.ptr());
        }
        if let Some(d) = self.key.deadline().filter(|_| copy_ttl) {
            let now = rm::millis();
            z.set_deadline(d, now);
            replication::pexpireat(ctx, self.zname.ptr(), d, None);
            notify(ctx, NOTIFY_GENERIC, c"expire", self.zname.ptr());
        }
        drop(z);
        rm::signal_modified(ctx, self.zname.ptr());
    }

    /// Take the permits of `ids` out of the zset (ZREM, one call); how many were there.
    pub fn drop_ids(&self, ctx: Ctx, ids: &[RStr]) -> usize {
        let z = self.zset(ctx);
        let gone: Vec<RStr> = ids.iter().copied().filter(|id| z.zset_rem(*id)).collect();
        let emptied = z.kind() == KeyKind::Empty;
        drop(z);
        if gone.is_empty() {
            return 0;
        }
        replication::zrem(ctx, self.zname.ptr(), &gone);
        notify(ctx, NOTIFY_ZSET, c"zrem", self.zname.ptr());
        if emptied {
            notify(ctx, NOTIFY_GENERIC, c"del", self.zname.ptr());
        }
        rm::signal_modified(ctx, self.zname.ptr());
        gone.len()
    }

    /// Return the permits of `ids` (those still in the zset) to the count; how many returned.
    pub fn give_back(&self, ctx: Ctx, ids: &[RStr]) -> Result<i64, Error> {
        let available = self.available()?;
        let n = i64::try_from(self.drop_ids(ctx, ids)).unwrap_or(i64::MAX);
        if n > 0 {
            self.add(ctx, n, state::after_return(available, n));
        }
        Ok(n)
    }

    /// Publish `count` on the semaphore's channel.
    pub fn publish_count(&self, ctx: Ctx, count: i64) {
        let msg = OwnedStr::from_i64(count);
        effects::publish_message(ctx, &names::channel(rm::bytes(&self.name)), msg.ptr());
    }

    /// Return every permit whose lease ended by `now` (at most [`RETURN_BATCH`]); how many.
    pub fn return_expired(&self, ctx: Ctx, now: i64) -> Result<i64, Error> {
        let ids = self.expired(ctx, now);
        if ids.is_empty() {
            return Ok(0);
        }
        let owned: Vec<OwnedStr> = ids.iter().map(|id| OwnedStr::new(id)).collect();
        let ptrs: Vec<RStr> = owned.iter().map(OwnedStr::ptr).collect();
        let n = self.give_back(ctx, &ptrs)?;
        for _ in 0..n {
            stats::SEM_EXPIRED_RETURNED.inc();
        }
        Ok(n)
    }

    /// SET the count to `value` (any string, as a script's SET), its TTL dropped, or set to end
    /// at `deadline` (SET ... PX).
    pub fn set(&self, ctx: Ctx, value: RStr, deadline: Option<i64>) {
        let existed = self.key.kind() != KeyKind::Empty;
        self.key.string_set(value);
        match deadline {
            Some(d) => {
                self.key.set_deadline(d, rm::millis());
                replication::set_pxat(ctx, self.name, value, d, existed);
            }
            None => crate::ffi::replicate::replicate_set(ctx, self.name, value, None),
        }
        rm::notify(ctx, NOTIFY_STRING, c"set", self.name);
        if deadline.is_some() {
            rm::notify(ctx, NOTIFY_GENERIC, c"expire", self.name);
        }
        rm::signal_modified(ctx, self.name);
    }

    /// Publish the available count on the semaphore's channel.
    pub fn publish(&self, ctx: Ctx) {
        let n = self.available().unwrap_or(0);
        let msg = OwnedStr::from_i64(n);
        effects::publish_message(ctx, &names::channel(rm::bytes(&self.name)), msg.ptr());
    }
}
