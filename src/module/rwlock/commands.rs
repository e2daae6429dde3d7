//! The read-write lock's LOCK.* commands (`READ` / `WRITE`; `module/commands.rs` dispatches
//! here): parse, read the hash, decide (`logic/rwlock/state.rs`), check, write. Every refusal
//! happens before the first write. The writes are Redisson's (its layout, TTLs, timeout keys
//! and messages), so Redisson clients and LOCK.* clients share one lock.

use crate::ffi::key::Key;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::args;
use crate::logic::command_args::{Access, AcquireArgs, ReleaseArgs, RenewArgs};
use crate::logic::error::Error;
use crate::logic::rwlock::names;
use crate::logic::rwlock::policy::Request;
use crate::logic::rwlock::state::{self, Mode, ReadAfter, ReadRelease, RwView, Take, WriteRelease};
use crate::module::rwlock::holds::{self, MAX_WALK, MAX_WALK_BYTES};
use crate::module::rwlock::take::{
    self, check_derived, clear_expired, expired_reads, prepare, timeout_key, Want,
};
use crate::module::rwlock::waiting::RwLock;
use crate::module::{acl, effects, token, wait};
use crate::registry::stats;

/// The message a read unlock publishes when it frees the lock (`0`), and a write unlock or a
/// force release (`1`): Redisson's.
fn message(access: Access) -> crate::ffi::rm::Shared {
    match access {
        Access::Read => rm::zero(),
        Access::Write => rm::one(),
    }
}

/// Publish a freed lock's message, unless a LOCK.* waiter took it.
fn hand_over_or_publish(ctx: Ctx, key: &Key, name: RStr, now: i64, msg: Access) {
    if !wait::grant_head::<RwLock>(ctx, key, name, now, true) {
        let m = message(msg);
        effects::publish_message(ctx, &names::channel(rm::bytes(&name)), m.ptr());
    }
}

pub fn acquire(ctx: Ctx, name: RStr, owner: RStr, a: &AcquireArgs<'_>, access: Access) -> Result<(), Error> {
    let lock = rm::bytes(&name);
    if a.fence {
        acl::may_write_token(ctx, lock)?;
    }
    let now = rm::millis();
    args::deadline(now, a.lease_ms, args::LEASE)?;
    let wait_deadline = match a.wait_ms {
        Some(t) if t > 0 => Some(args::deadline(now, t, args::TIMEOUT)?),
        _ => None,
    };
    let key = Key::write(ctx, name);
    let mut v = holds::view(&key, owner, access);
    let mut queued = wait::has_waiters::<RwLock>(ctx, name);
    // A lock freed behind our back and not yet handed over belongs to the head of the line.
    if v == RwView::Free && queued {
        wait::grant_head::<RwLock>(ctx, &key, name, now, false);
        v = holds::view(&key, owner, access);
        queued = wait::has_waiters::<RwLock>(ctx, name);
    }
    let mut take = match access {
        Access::Read => state::acquire_read(&v, queued)?,
        Access::Write => state::acquire_write(&v)?,
    };
    if take == Take::ContendedByReaders && !queued && expired_reads(ctx, &key, name) {
        clear_expired(ctx, &key, name);
        take = Take::Create;
    }
    match take {
        Take::Create | Take::Add { .. } => {}
        Take::OwnReads if a.wait_ms.is_some() => return Err(Error::UpgradeWouldDeadlock),
        Take::Contended | Take::ContendedByReaders | Take::OwnReads => {
            stats::RW_ACQUIRES_CONTENDED.inc();
            let flags = rm::ctx_flags(ctx);
            let may_block = a.wait_ms.is_some()
                && flags & rm::CTX_MASTER != 0
                && flags & (rm::CTX_DENY_BLOCKING | rm::CTX_MULTI | rm::CTX_LUA) == 0
                && take != Take::OwnReads
                && wait::admit(lock, a.owner);
            if may_block {
                let lock_deadline = crate::module::rwlock::waiting::holds_end(ctx, &key, name);
                drop(key);
                let req = Request { lease_ms: a.lease_ms, fence: a.fence, access };
                wait::block::<RwLock>(ctx, name, a.owner, req, wait_deadline, lock_deadline, now);
            } else if a.fence {
                rm::reply_pair(ctx, key.pttl(), -1);
            } else {
                rm::reply_int(ctx, key.pttl());
            }
            return Ok(());
        }
    }
    let hold = prepare(
        ctx,
        &key,
        lock,
        Want { owner: a.owner, access, take, lease_ms: a.lease_ms, in_command: true },
        now,
    )?;
    let reentrant = matches!(take, Take::Add { count } if count > 1);
    let token = if a.fence { Some(token::prepare_for(ctx, lock, reentrant)?) } else { None };
    take::write(ctx, &key, name, &hold, owner, now);
    match access {
        Access::Read => stats::RW_ACQUIRES_READ.inc(),
        Access::Write => stats::RW_ACQUIRES_WRITE.inc(),
    }
    if reentrant {
        stats::RW_ACQUIRES_REENTRANT.inc();
    }
    match token {
        Some(t) => rm::reply_pair(ctx, -1, t.write(ctx, now)),
        None => rm::reply_null(ctx),
    };
    Ok(())
}

pub fn release(ctx: Ctx, name: RStr, owner: RStr, a: &ReleaseArgs<'_>, access: Access) -> Result<(), Error> {
    let now = rm::millis();
    let deadline = a.lease_ms.map(|l| args::deadline(now, l, args::LEASE)).transpose()?;
    let key = Key::write(ctx, name);
    let v = holds::view(&key, owner, access);
    match access {
        Access::Read => release_read(ctx, &key, name, owner, &v, now),
        Access::Write => release_write(ctx, &key, name, owner, &v, deadline, now),
    }
}

fn not_held(ctx: Ctx) -> Result<(), Error> {
    stats::RW_RELEASES_NOT_OWNER.inc();
    rm::reply_null(ctx);
    Ok(())
}

fn release_read(ctx: Ctx, key: &Key, name: RStr, owner: RStr, v: &RwView, now: i64) -> Result<(), Error> {
    let ReadRelease::Drop { old } = state::release_read(v)? else { return not_held(ctx) };
    let RwView::Held { mode, .. } = v else { return not_held(ctx) };
    let lock = rm::bytes(&name);
    let tk = timeout_key(ctx, lock, rm::bytes(&owner), old)?;
    let left = old.saturating_sub(1);
    let fields_left = key.hash_len().saturating_sub(usize::from(left <= 0));
    // Redisson looks at the other holds only when other fields remain.
    let longest = if fields_left > 1 { holds::walk(ctx, key, lock, Some(&tk)).longest } else { -2 };
    let after = state::after_read_drop(fields_left, longest, *mode);
    if after == ReadAfter::Free {
        acl::may_publish_on(ctx, &names::channel(lock))?;
    }
    let tk = OwnedStr::new(&tk);
    stats::RW_RELEASES_READ.inc();
    if after == ReadAfter::Free {
        // The hash goes: the count it held needs no write of its own.
        effects::delete_with(ctx, key, name, tk.ptr());
        stats::RW_RELEASES_FULL.inc();
        hand_over_or_publish(ctx, key, name, now, Access::Read);
        rm::reply_int(ctx, 1);
        return Ok(());
    }
    if left > 0 {
        effects::set_count(ctx, key, name, owner, left, -1);
    } else {
        effects::hdel(ctx, key, name, owner);
    }
    effects::delete_named(ctx, tk.ptr());
    match after {
        ReadAfter::Rearm(ms) => {
            effects::set_lease(ctx, key, name, now.saturating_add(ms), now);
            rm::signal_modified(ctx, name);
            rm::reply_int(ctx, 0);
        }
        ReadAfter::KeepWriter => {
            rm::signal_modified(ctx, name);
            rm::reply_int(ctx, 0);
        }
        ReadAfter::Free => {}
    }
    Ok(())
}

fn release_write(
    ctx: Ctx,
    key: &Key,
    name: RStr,
    owner: RStr,
    v: &RwView,
    deadline: Option<i64>,
    now: i64,
) -> Result<(), Error> {
    let field = OwnedStr::new(&names::write_field(rm::bytes(&owner)));
    match state::release_write(v)? {
        WriteRelease::NotHeld => return not_held(ctx),
        WriteRelease::Decrement { count } => {
            effects::set_count(ctx, key, name, field.ptr(), count, -1);
            if let Some(d) = deadline {
                effects::set_lease(ctx, key, name, d, now);
            }
            rm::signal_modified(ctx, name);
            stats::RW_RELEASES_WRITE.inc();
            rm::reply_int(ctx, 0);
        }
        WriteRelease::Last if key.hash_len() <= 2 => {
            acl::may_publish_on(ctx, &names::channel(rm::bytes(&name)))?;
            effects::delete(ctx, key, name);
            stats::RW_RELEASES_WRITE.inc();
            stats::RW_RELEASES_FULL.inc();
            hand_over_or_publish(ctx, key, name, now, Access::Write);
            rm::reply_int(ctx, 1);
        }
        WriteRelease::Last => {
            // The writer keeps its read holds: the lock passes to read mode, readers at the
            // head of the line may join them (no message, as Redisson).
            effects::hdel(ctx, key, name, field.ptr());
            let (mode, read) = (rm::mode_field(), rm::read_word());
            effects::hset(ctx, key, name, &[(mode.ptr(), read.ptr())]);
            rm::signal_modified(ctx, name);
            stats::RW_RELEASES_WRITE.inc();
            wait::grant_head::<RwLock>(ctx, key, name, now, true);
            rm::reply_int(ctx, 1);
        }
    }
    Ok(())
}

pub fn renew(ctx: Ctx, name: RStr, owner: RStr, a: &RenewArgs<'_>, access: Access) -> Result<(), Error> {
    let now = rm::millis();
    let deadline = args::deadline(now, a.lease_ms, args::LEASE)?;
    let key = Key::write(ctx, name);
    let v = holds::view(&key, owner, access);
    let renewed = match access {
        Access::Write => {
            let ok = state::renew_write(&v)?;
            if ok {
                effects::set_lease(ctx, &key, name, deadline, now);
            }
            ok
        }
        Access::Read => match state::renew_read(&v)? {
            None => false,
            Some(count) => {
                let lock = rm::bytes(&name);
                // At most MAX_WALK holds and MAX_WALK_BYTES of their names.
                let name_len = lock.len().saturating_add(a.owner.len()).saturating_add(40);
                let n = usize::try_from(count).unwrap_or(0).min(MAX_WALK).min(MAX_WALK_BYTES / name_len);
                let mut keys = Vec::with_capacity(n);
                for i in 1..=i64::try_from(n).unwrap_or(0) {
                    keys.push(timeout_key(ctx, lock, a.owner, i)?);
                }
                for tk in keys {
                    let tk = OwnedStr::new(&tk);
                    effects::expire_named(ctx, tk.ptr(), deadline, now);
                }
                if key.deadline().is_none_or(|cur| cur < deadline) {
                    effects::set_lease(ctx, &key, name, deadline, now);
                }
                true
            }
        },
    };
    if renewed {
        rm::signal_modified(ctx, name);
        stats::RW_RENEWALS_OK.inc();
    } else {
        stats::RW_RENEWALS_MISSED.inc();
    }
    rm::reply_int(ctx, i64::from(renewed));
    Ok(())
}

/// LOCK.FORCERELEASE of a read-write lock (`key` is a hash with a `mode` field): every hold,
/// its timeout keys too; the lock goes to the head of the line, or message `1` is published.
pub fn force_release(ctx: Ctx, key: &Key, name: RStr) -> Result<(), Error> {
    let lock = rm::bytes(&name);
    acl::may_publish_on(ctx, &names::channel(lock))?;
    let tks = holds::all_timeout_keys(key, lock);
    for tk in &tks {
        check_derived(Some(ctx), lock, tk)?;
    }
    for tk in tks {
        let tk = OwnedStr::new(&tk);
        effects::delete_named(ctx, tk.ptr());
    }
    effects::delete(ctx, key, name);
    stats::RW_FORCE_RELEASES.inc();
    hand_over_or_publish(ctx, key, name, rm::millis(), Access::Write);
    rm::reply_int(ctx, 1);
    Ok(())
}

/// LOCK.INFO of a read-write lock: mode, readers with counts, the writer and its count, PTTL,
/// waiters (all, readers, writers), the last fencing token.
pub fn info(ctx: Ctx, key: &Key, name: RStr) -> Result<(), Error> {
    let mode = match holds::mode(key) {
        Ok(Some(Mode::Read)) => names::READ,
        Ok(Some(Mode::Write)) => names::WRITE,
        _ => return Err(Error::CorruptMode),
    };
    let mut readers = Vec::new();
    let mut writer = None;
    for (field, value) in key.hash_entries() {
        if field.as_slice() == names::MODE {
            continue;
        }
        let count = state::count(Some(&value)).transpose()?.unwrap_or(0);
        match field.strip_suffix(b":write") {
            Some(owner) if mode == names::WRITE && writer.is_none() => writer = Some((owner.to_vec(), count)),
            _ => readers.push((field, count)),
        }
    }
    let lock = rm::bytes(&name);
    let db = rm::selected_db(ctx);
    let (r, w) = wait::waiting_split::<RwLock>(db, lock, |req: &Request| req.access == Access::Read);
    let token = token::last(ctx, lock);
    rm::reply_map(ctx, 9);
    rm::reply_bytes(ctx, b"mode");
    rm::reply_bytes(ctx, mode);
    rm::reply_bytes(ctx, b"readers");
    rm::reply_map(ctx, readers.len());
    for (field, count) in &readers {
        rm::reply_bytes(ctx, field);
        rm::reply_int(ctx, *count);
    }
    rm::reply_bytes(ctx, b"writer");
    match &writer {
        Some((owner, _)) => rm::reply_bytes(ctx, owner),
        None => rm::reply_null(ctx),
    };
    rm::reply_bytes(ctx, b"write_holds");
    rm::reply_int(ctx, writer.as_ref().map_or(0, |(_, c)| *c));
    rm::reply_bytes(ctx, b"pttl");
    rm::reply_int(ctx, key.pttl());
    rm::reply_bytes(ctx, b"waiters");
    rm::reply_int(ctx, i64::try_from(r + w).unwrap_or(i64::MAX));
    rm::reply_bytes(ctx, b"waiting_readers");
    rm::reply_int(ctx, i64::try_from(r).unwrap_or(i64::MAX));
    rm::reply_bytes(ctx, b"waiting_writers");
    rm::reply_int(ctx, i64::try_from(w).unwrap_or(i64::MAX));
    rm::reply_bytes(ctx, b"token");
    match token {
        Some(t) => rm::reply_int(ctx, t),
        None => rm::reply_null(ctx),
    };
    Ok(())
}
