//! How a wait ends: the outcome handed to a blocked client, and the callbacks Redis calls for
//! it (the reply, CLIENT UNBLOCK, a disconnect), written once for every kind.

use super::kind::{Kind, Req};
use crate::ffi::blocked::{self, Client, Waits};
use crate::ffi::rm::{self, Ctx, RStr};
use crate::logic::error::Error;
use crate::registry::stats;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub enum Outcome<K: Kind> {
    Granted(K::Granted),
    /// The wait ran out: the waiter's request (its reply depends on it).
    TimedOut(Req<K>),
    Failed(Error),
}

/// The blocked clients' callbacks of kind `K` (see [`blocked::Waits`]).
pub struct Callbacks<K>(PhantomData<K>);

#[inline]
pub fn unblock<K: Kind>(handle: Client, outcome: Outcome<K>) {
    blocked::unblock::<Callbacks<K>>(handle, outcome);
}

/// Run `f`, logging instead of unwinding into Redis.
pub fn quietly(ctx: Ctx, what: &str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        stats::PANICS.inc();
        rm::log(ctx, c"warning", &format!("lock module: internal error in {what} (panic caught)"));
    }
}

/// Reply with `f`, or with an error if it panicked.
fn replying(ctx: Ctx, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        stats::PANICS.inc();
        rm::reply_error(ctx, &Error::PanicInReply.reply());
    }
}

impl<K: Kind> Waits for Callbacks<K> {
    type Outcome = Outcome<K>;

    fn reply(ctx: Ctx, outcome: Option<&Outcome<K>>, argv: &[RStr]) {
        replying(ctx, || match outcome {
            Some(Outcome::Granted(g)) => K::reply_granted(ctx, g),
            Some(Outcome::Failed(e)) => {
                rm::reply_error(ctx, &e.reply());
            }
            Some(Outcome::TimedOut(req)) => K::reply_not_granted(ctx, argv, Some(req)),
            None => K::reply_not_granted(ctx, argv, None),
        });
    }

    /// Redis calls this for CLIENT UNBLOCK (waits have no Redis-side timeout).
    fn unblocked(ctx: Ctx, bc: Client, argv: &[RStr]) {
        replying(ctx, || {
            let table = K::table();
            let id = table.with(|s| s.by_client.get(&bc).copied());
            if id.is_some() {
                stats::WAITS_CANCELLED.inc();
                K::stats().waits_cancelled.inc();
            }
            let w = id.and_then(|id| table.take(ctx, id));
            K::reply_not_granted(ctx, argv, w.as_ref().map(|w| &w.req));
        });
    }

    fn disconnected(ctx: Ctx, bc: Client) -> bool {
        let mut found = false;
        quietly(ctx, "disconnect", || {
            let table = K::table();
            if let Some(id) = table.with(|s| s.by_client.get(&bc).copied()) {
                found = table.take(ctx, id).is_some();
                stats::WAITS_CANCELLED.inc();
                K::stats().waits_cancelled.inc();
            }
        });
        found
    }
}
