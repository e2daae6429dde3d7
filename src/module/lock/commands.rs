//! The plain lock's LOCK.* commands (no `READ` / `WRITE`; `module/commands.rs` parses and
//! dispatches here): read the key, decide (state.rs), write (effects.rs). Every refusal
//! happens before the first write.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, RStr};
use crate::logic::args;
use crate::logic::command_args::{AcquireArgs, ReleaseArgs, RenewArgs};
use crate::logic::error::Error;
use crate::logic::lock::policy::Request;
use crate::logic::lock::state::{self, LockView};
use crate::module::effects;
use crate::module::lock::waiting::Lock;
use crate::module::token;
use crate::module::wait;
use crate::registry::stats;

/// Read what the lock key holds for `owner`. A read-write lock (a hash whose `mode` field is
/// `read` or `write`) is refused: its commands take `READ` / `WRITE`.
fn view(key: &Key, owner: RStr) -> Result<LockView, Error> {
    Ok(match key.kind() {
        KeyKind::Empty => LockView::Free,
        KeyKind::String | KeyKind::SortedSet | KeyKind::Other => LockView::WrongType,
        KeyKind::Hash => {
            if is_rwlock(key) {
                return Err(Error::IsRwLock);
            }
            LockView::Hash { mine: key.hash_get(owner, state::parse_count) }
        }
    })
}

/// Whether a hash holds a read-write lock: its `mode` field is `read` or `write`.
pub fn is_rwlock(key: &Key) -> bool {
    let mode = rm::mode_field();
    key.hash_get(mode.ptr(), |m| m == b"read" || m == b"write").unwrap_or(false)
}

pub fn acquire(ctx: Ctx, name: RStr, owner: RStr, a: &AcquireArgs<'_>) -> Result<(), Error> {
    // FENCE writes the token key: the user must be allowed to (checked before any write, and
    // before a wait whose grant would write it).
    if a.fence {
        crate::module::acl::may_write_token(ctx, rm::bytes(&name))?;
    }
    let now = rm::millis();
    let deadline = args::deadline(now, a.lease_ms, args::LEASE)?;
    let wait_deadline = match a.wait_ms {
        Some(t) if t > 0 => Some(args::deadline(now, t, args::TIMEOUT)?),
        _ => None,
    };
    let key = Key::write(ctx, name);
    let mut v = view(&key, owner)?;
    // Waiters go first: a lock freed behind our back (expiry, DEL...) and not yet handed over
    // belongs to the head of the queue, not to this newcomer; nor does a lock kept for a
    // Redisson script owner's turn.
    let mut turn_pttl = None;
    if v == LockView::Free && wait::has_waiters::<Lock>(ctx, name) {
        if wait::grant_head::<Lock>(ctx, &key, name, now, false) {
            v = view(&key, owner)?;
        } else if let wait::Turn::Wait(ms) = wait::turn::<Lock>(ctx, name, a.owner, now) {
            turn_pttl = Some(ms);
        }
    }
    let decision = if turn_pttl.is_some() { state::Acquire::Contended } else { state::acquire(&v)? };
    let (count, counter) = match decision {
        state::Acquire::Create => (1, &stats::ACQUIRES_NEW),
        state::Acquire::Reenter { new_count } => (new_count, &stats::ACQUIRES_REENTRANT),
        state::Acquire::Contended => {
            stats::ACQUIRES_CONTENDED.inc();
            // WAIT blocks only on a master (a writable replica answers as without WAIT: its
            // waiters would never be granted, nothing frees its locks but replication), outside
            // MULTI and scripts, and within lock.max-waiters / lock.max-waiter-bytes.
            let flags = rm::ctx_flags(ctx);
            let may_block = a.wait_ms.is_some()
                && flags & crate::ffi::rm::CTX_MASTER != 0
                && flags
                    & (crate::ffi::rm::CTX_DENY_BLOCKING
                        | crate::ffi::rm::CTX_MULTI
                        | crate::ffi::rm::CTX_LUA)
                    == 0
                && wait::admit(rm::bytes(&name), a.owner);
            if may_block {
                let lock_deadline = key.deadline();
                drop(key);
                let req = Request { lease_ms: a.lease_ms, fence: a.fence };
                wait::block::<Lock>(ctx, name, a.owner, req, wait_deadline, lock_deadline, now);
            } else if a.fence {
                rm::reply_pair(ctx, turn_pttl.unwrap_or_else(|| key.pttl()), -1);
            } else {
                rm::reply_int(ctx, turn_pttl.unwrap_or_else(|| key.pttl()));
            }
            return Ok(());
        }
    };
    // The token key is read and checked before the first write: a refusal changes nothing.
    // A reentrant acquire keeps its hold's token (a new one only when none is stored).
    let reentrant = count > 1;
    let token = if a.fence { Some(token::prepare_for(ctx, rm::bytes(&name), reentrant)?) } else { None };
    effects::grant(ctx, &key, name, effects::Hold { owner, count, deadline, now, fresh: count == 1 });
    counter.inc();
    match token {
        Some(t) => rm::reply_pair(ctx, -1, t.write(ctx, now)),
        None => rm::reply_null(ctx),
    };
    Ok(())
}

pub fn release(ctx: Ctx, name: RStr, owner: RStr, a: &ReleaseArgs<'_>) -> Result<(), Error> {
    let now = rm::millis();
    let deadline = a.lease_ms.map(|l| args::deadline(now, l, args::LEASE)).transpose()?;
    let key = Key::write(ctx, name);
    match state::release(&view(&key, owner)?)? {
        state::Release::NotOwner => {
            stats::RELEASES_NOT_OWNER.inc();
            rm::reply_null(ctx);
        }
        state::Release::Decrement { new_count } => {
            effects::set_count(ctx, &key, name, owner, new_count, -1);
            if let Some(d) = deadline {
                effects::set_lease(ctx, &key, name, d, now);
            }
            rm::signal_modified(ctx, name);
            stats::RELEASES_PARTIAL.inc();
            rm::reply_int(ctx, 0);
        }
        state::Release::Free => {
            crate::module::acl::may_publish_release(ctx, rm::bytes(&name))?;
            free_lock(ctx, &key, name, now);
            stats::RELEASES_FULL.inc();
            rm::reply_int(ctx, 1);
        }
    }
    Ok(())
}

/// Delete the lock, then hand it to the head waiter, or publish that it is free.
fn free_lock(ctx: Ctx, key: &Key, name: RStr, now: i64) {
    effects::delete(ctx, key, name);
    if !wait::grant_head::<Lock>(ctx, key, name, now, true) {
        effects::publish_release(ctx, name);
    }
}

pub fn renew(ctx: Ctx, name: RStr, owner: RStr, a: &RenewArgs<'_>) -> Result<(), Error> {
    let now = rm::millis();
    let deadline = args::deadline(now, a.lease_ms, args::LEASE)?;
    let key = Key::write(ctx, name);
    if state::renew(&view(&key, owner)?)? {
        effects::set_lease(ctx, &key, name, deadline, now);
        rm::signal_modified(ctx, name);
        stats::RENEWALS_OK.inc();
        rm::reply_int(ctx, 1);
    } else {
        stats::RENEWALS_MISSED.inc();
        rm::reply_int(ctx, 0);
    }
    Ok(())
}

/// LOCK.FORCERELEASE of a plain lock (`key` opened for writing).
pub fn force_release(ctx: Ctx, key: &Key, name: RStr) -> Result<(), Error> {
    match key.kind() {
        KeyKind::String | KeyKind::SortedSet | KeyKind::Other => return Err(Error::WrongType),
        KeyKind::Empty => {
            stats::FORCE_RELEASES_MISSED.inc();
            rm::reply_int(ctx, 0);
        }
        KeyKind::Hash => {
            crate::module::acl::may_publish_release(ctx, rm::bytes(&name))?;
            free_lock(ctx, key, name, rm::millis());
            stats::FORCE_RELEASES.inc();
            rm::reply_int(ctx, 1);
        }
    }
    Ok(())
}

/// LOCK.INFO of a plain lock (`key` opened for reading).
pub fn info(ctx: Ctx, key: &Key, name: RStr) -> Result<(), Error> {
    match key.kind() {
        KeyKind::Empty => {
            rm::reply_null(ctx);
            return Ok(());
        }
        KeyKind::String | KeyKind::SortedSet | KeyKind::Other => return Err(Error::WrongType),
        KeyKind::Hash => {}
    }
    let entries = key.hash_entries();
    let mut owners = Vec::with_capacity(entries.len());
    for (field, value) in &entries {
        owners.push((field, state::parse_count(value)?));
    }
    let waiters = wait::waiting_on::<Lock>(rm::selected_db(ctx), rm::bytes(&name));
    let token = token::last(ctx, rm::bytes(&name));
    rm::reply_map(ctx, 4);
    rm::reply_bytes(ctx, b"owners");
    rm::reply_map(ctx, owners.len());
    for (field, count) in owners {
        rm::reply_bytes(ctx, field);
        rm::reply_int(ctx, count);
    }
    rm::reply_bytes(ctx, b"pttl");
    rm::reply_int(ctx, key.pttl());
    rm::reply_bytes(ctx, b"waiters");
    rm::reply_int(ctx, waiters as i64);
    rm::reply_bytes(ctx, b"token");
    match token {
        Some(t) => rm::reply_int(ctx, t),
        None => rm::reply_null(ctx),
    };
    Ok(())
}
