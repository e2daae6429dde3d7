//! Taking a read or write hold, for LOCK.ACQUIRE and for a grant alike: where its deadlines go
//! (Redisson's TTL rules), the check of the key it derives (a read hold's timeout key), the
//! writes; and clearing a read-mode hash whose every hold expired.

use crate::ffi::key::Key;
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::args;
use crate::logic::command_args::Access;
use crate::logic::error::Error;
use crate::logic::rwlock::names;
use crate::logic::rwlock::state::{Mode, Take};
use crate::module::rwlock::holds;
use crate::module::{acl, cluster, effects};
use crate::registry::stats;

/// A read hold's timeout key, checked as if the client had named it: in the lock's slot
/// (cluster) and writable by the calling user.
pub fn timeout_key(ctx: Ctx, lock: &[u8], owner: &[u8], n: i64) -> Result<Vec<u8>, Error> {
    let tk = names::timeout_key(&names::timeout_prefix(lock, owner), n);
    check_derived(Some(ctx), lock, &tk)?;
    Ok(tk)
}

/// A derived key: in the lock's slot, and (inside a command: `ctx`) writable by the caller.
/// Outside a command (a grant from a timer) the waiter's user is checked by the grant.
pub fn check_derived(ctx: Option<Ctx>, lock: &[u8], tk: &[u8]) -> Result<(), Error> {
    if cluster::enabled() && cluster::key_slot(tk) != cluster::key_slot(lock) {
        return Err(Error::TimeoutKeyCrossSlot);
    }
    if ctx.is_some_and(|ctx| !acl::may_write(ctx, tk)) {
        return Err(Error::TimeoutKeyDenied);
    }
    Ok(())
}

/// A hold to write, decided and checked.
pub struct Hold<'a> {
    pub owner: &'a [u8],
    pub access: Access,
    /// `Create` or `Add`.
    pub take: Take,
    /// The hash's new deadline.
    pub deadline: i64,
    /// A read hold's timeout key and its deadline.
    pub marker: Option<(Vec<u8>, i64)>,
}

/// What an acquire (or a grant) takes: `take` is `Create` or `Add`.
pub struct Want<'a> {
    pub owner: &'a [u8],
    pub access: Access,
    pub take: Take,
    pub lease_ms: i64,
    /// Inside the client's command: the calling user's ACL applies to the timeout key (a
    /// grant checks the waiter's user itself).
    pub in_command: bool,
}

/// Decide where a hold's deadlines go and check what only the server can (the timeout key),
/// before anything is written.
pub fn prepare<'a>(ctx: Ctx, key: &Key, lock: &[u8], want: Want<'a>, now: i64) -> Result<Hold<'a>, Error> {
    let Want { owner, access, take, lease_ms, in_command } = want;
    let lease_end = args::deadline(now, lease_ms, args::LEASE)?;
    let (deadline, marker) = match (access, take) {
        (Access::Read, t) => {
            let n = match t {
                Take::Add { count } => count,
                _ => 1,
            };
            let tk = names::timeout_key(&names::timeout_prefix(lock, owner), n);
            check_derived(in_command.then_some(ctx), lock, &tk)?;
            // The hash lives as long as its longest hold: max(PTTL, lease).
            let d = match t {
                Take::Add { .. } => key.deadline().map_or(lease_end, |cur| cur.max(lease_end)),
                _ => lease_end,
            };
            (d, Some((tk, lease_end)))
        }
        (Access::Write, Take::Add { .. }) => {
            // Redisson's write re-entry: the TTL becomes PTTL + lease (it grows).
            let ms = key.pttl().checked_add(lease_ms).ok_or(Error::Overflow(args::LEASE))?;
            (args::deadline(now, ms, args::LEASE)?, None)
        }
        (Access::Write, _) => (lease_end, None),
    };
    Ok(Hold { owner, access, take, deadline, marker })
}

/// Write a prepared hold: the mode (a new lock), the count, the read hold's timeout key, the
/// hash's lease.
/// `owner` is `h.owner` as a string (the command's argument, or the grant's copy).
pub fn write(ctx: Ctx, key: &Key, name: RStr, h: &Hold<'_>, owner: RStr, now: i64) {
    let write_field;
    let field = match h.access {
        Access::Read => owner,
        Access::Write => {
            write_field = OwnedStr::new(&names::write_field(h.owner));
            write_field.ptr()
        }
    };
    let (count, fresh) = match h.take {
        Take::Add { count } => (count, false),
        _ => (1, true),
    };
    if fresh {
        // A new lock: its mode and the first hold in one HSET.
        let mode = rm::mode_field();
        let value = match h.access {
            Access::Read => rm::read_word(),
            Access::Write => rm::write_word(),
        };
        let one = rm::one();
        effects::hset(ctx, key, name, &[(mode.ptr(), value.ptr()), (field, one.ptr())]);
    } else {
        effects::set_count(ctx, key, name, field, count, 1);
    }
    if let Some((tk, d)) = &h.marker {
        let tk = OwnedStr::new(tk);
        effects::set_marker(ctx, tk.ptr(), *d, now);
    }
    if fresh || key.deadline() != Some(h.deadline) {
        effects::set_lease(ctx, key, name, h.deadline, now);
    }
    rm::signal_modified(ctx, name);
}

/// A read-mode hash whose every read hold expired (Redisson's read unlock would delete it): it
/// no longer keeps anyone out. Delete it and its stale fields' timeout keys.
pub fn clear_expired(ctx: Ctx, key: &Key, name: RStr) {
    for tk in holds::all_timeout_keys(key, rm::bytes(&name)) {
        let tk = OwnedStr::new(&tk);
        effects::delete_named(ctx, tk.ptr());
    }
    effects::delete(ctx, key, name);
    stats::RW_EXPIRED_HOLDS.inc();
}

/// Whether a read-mode hash has no live read hold left.
pub fn expired_reads(ctx: Ctx, key: &Key, name: RStr) -> bool {
    matches!(holds::mode(key), Ok(Some(Mode::Read))) && !holds::walk(ctx, key, rm::bytes(&name), None).alive()
}
