//! What each read-write lock script does natively: its path as a [`Plan`], or the reason it
//! runs in Lua.
//!
//! Pure. The glue (`module/rwlock/scripts.rs`) reads the keys on demand through [`Keys`], in the
//! script's own order, and every command the script runs on the path becomes a step with its
//! real arguments, derived keys included (a read hold's timeout key `<prefix>:<n>`, every hold
//! of every field in the read unlock's and the renewals' walks), so the interpreter checks the
//! ACL of each and the write refusal at the first write.
//!
//! Shared decisions: a read unlock ends as `state::after_read_drop` says, a write unlock as
//! `state::release_write` says (the LOCK.* commands decide with the same functions). Where the
//! scripts differ from the LOCK.* rules, the script is followed and the difference is a
//! documented reading: a hash without `mode` is a missing lock to every script (a read or write
//! acquire adds `mode` to it, an unlock publishes); a `mode` other than `read` / `write` is
//! contended for an acquire, not the writer's for a write unlock, and freed by a read unlock that
//! finds no live hold; a read field beside a foreign writer does not re-enter (the script asks
//! only for the writer field); the writer's field count is never parsed by a read acquire
//! (HEXISTS only); counts <= 0 run as HINCRBY and the loops compute them.
//!
//! Whatever would make the script raise an error (a wrong type, a count HINCRBY refuses, a
//! lease PEXPIRE refuses, a latch time SET refuses, an arithmetic error, 1affef78's nil
//! concatenation) is a [`Quirk`] raised at the step where the script fails: the steps before it
//! are ACL-checked (a user who may not run them gets the ACL error, as in Lua) and the call then
//! runs in Lua. Calls the module does not reproduce (numbers Lua would format as exponents, walks
//! longer than [`MAX_WALK`], a derived key that is one of the call's keys or outside its slot)
//! run in Lua too.

use super::script_renewals::{renew, renew_own};
use super::script_steps::{read_acquire, write_acquire, Missing, Walk};
pub use super::script_steps::{Field, Fields, Keys, ModeField, Num, Shape};
use super::script_unlocks::{force_unlock, is_locked, read_unlock, write_unlock};
use crate::logic::plan::{Plan, Then};
use crate::logic::rwlock::scripts::RwOp;
use crate::logic::scripts::Call;

/// The path of `op` for `call` at `now`, written into `p`. A [`Quirk`] ends the path with
/// [`Then::Lua`]: the steps written so far are those the script runs before it fails.
pub fn plan(op: RwOp, call: &Call, now: i64, keys: &mut impl Keys, p: &mut Plan) {
    let done = match op {
        RwOp::ReadAcquire => read_acquire(call, now, keys, p),
        RwOp::WriteAcquire => write_acquire(call, now, keys, p),
        RwOp::ReadUnlockPublish | RwOp::ReadUnlock => read_unlock(call, now, keys, p, Missing::One),
        RwOp::ReadUnlockLatch => read_unlock(call, now, keys, p, Missing::One),
        RwOp::ReadUnlockLatchNil => read_unlock(call, now, keys, p, Missing::Nil),
        RwOp::WriteUnlockPublish | RwOp::WriteUnlock | RwOp::WriteUnlockLatch => {
            write_unlock(call, now, keys, p, Missing::One)
        }
        RwOp::WriteUnlockLatchNil => write_unlock(call, now, keys, p, Missing::Nil),
        RwOp::ReadForceUnlockPublish | RwOp::ReadForceUnlock => force_unlock(call, keys, p, ModeField::Read),
        RwOp::WriteForceUnlockPublish | RwOp::WriteForceUnlock => {
            force_unlock(call, keys, p, ModeField::Write)
        }
        RwOp::ReadIsLocked => is_locked(call, keys, p),
        RwOp::ReadRenew => renew(call, now, keys, p, Walk::Fixed),
        RwOp::ReadRenewBatch => renew(call, now, keys, p, Walk::Fixed),
        RwOp::ReadRenewBatchBug => renew(call, now, keys, p, Walk::Bug),
        RwOp::ReadRenewBatchOwn => renew_own(call, now, keys, p),
    };
    if let Err(q) = done {
        p.drop_effects();
        p.then = Then::Lua(q);
    }
}
