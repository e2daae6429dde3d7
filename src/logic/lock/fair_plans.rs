//! What each fair-lock script does natively, by operation: the acquires (`fair_acquire.rs`)
//! and the releases (`fair_release.rs`) over the shared reads and purge (`fair_queue.rs`). Pure.

use super::fair_queue::{Ctx, Fair, FairKeys};
use super::fair_scripts::FairOp;
use super::{fair_acquire, fair_release};
use crate::logic::plan::Quirk;
use crate::logic::scripts::Call;

/// The path of `op` for `call` (`args`: the path's arguments are checked), at server time
/// `now` (the lease and latch deadlines; the script's own times are its ARGV).
pub fn decide(
    op: FairOp,
    call: &Call,
    keys: &mut impl FairKeys,
    now: i64,
    args: bool,
) -> Result<Fair, Quirk> {
    let mut c = Ctx::new(call, op, args);
    match op {
        FairOp::AcquireFailed => fair_acquire::acquire_failed(&mut c, keys)?,
        FairOp::TryAcquireBug
        | FairOp::TryAcquire
        | FairOp::AcquireBug
        | FairOp::AcquireEnqueueBug
        | FairOp::Acquire
        | FairOp::NonReentrantTryAcquire
        | FairOp::NonReentrantAcquire => fair_acquire::acquire(&mut c, keys, now)?,
        FairOp::UnlockPublishBug | FairOp::UnlockBug | FairOp::UnlockLatchBug | FairOp::UnlockLatch => {
            fair_release::unlock(&mut c, keys, now)?
        }
        FairOp::ForceUnlockPublishBug | FairOp::ForceUnlockBug | FairOp::ForceUnlock => {
            fair_release::force_unlock(&mut c, keys)?
        }
    }
    Ok(c.out)
}
