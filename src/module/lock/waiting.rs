//! The reentrant lock in the waiting core: a free (absent) lock can be granted, a grant writes
//! the hold (and the FENCE token), and the replies of LOCK.ACQUIRE ... WAIT.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::error::Error;
use crate::logic::lock::policy::{LockPolicy, Request};
use crate::module::wait::{Grant, Kind, Look, Table};
use crate::module::{acl, effects, token};
use crate::registry::config;
use crate::registry::stats::{self, KindStats};

/// The kind (a type for the generic waiting core).
pub struct Lock;

static TABLE: Table<LockPolicy> = Table::new();

impl Kind for Lock {
    type Policy = LockPolicy;
    /// The fencing token of a FENCE waiter.
    type Granted = Option<i64>;

    fn table() -> &'static Table<LockPolicy> {
        &TABLE
    }

    fn stats() -> &'static KindStats {
        &stats::LOCK
    }

    fn look(_: Ctx, key: &Key, _: RStr) -> Look<()> {
        match key.kind() {
            KeyKind::Empty => Look::Open(()),
            KeyKind::Hash => Look::Held(key.deadline()),
            KeyKind::String | KeyKind::SortedSet | KeyKind::Other => Look::WrongType,
        }
    }

    fn apply(ctx: Ctx, g: Grant<'_, Self>) -> Result<Option<i64>, Error> {
        // Where the server re-checks its own blocked commands, a waiter that lost the permission
        // to take the lock (or to write its token key) gets NOPERM instead of the grant.
        let token_key = g.req.fence.then(|| config::token_key(g.lock));
        if !acl::waiter_may_take(g.who, g.lock, g.owner, token_key.as_deref()) {
            return Err(Error::GrantDenied);
        }
        // A FENCE waiter's token key is checked before its grant writes anything. Same-owner
        // waiters granted behind the first share its hold, and so its token.
        let count = g.grant;
        let token = g.req.fence.then(|| token::prepare_for(ctx, g.lock, count > 1)).transpose()?;
        let owner = OwnedStr::new(g.owner);
        let deadline = g.now.saturating_add(g.req.lease_ms);
        let hold = effects::Hold { owner: owner.ptr(), count, deadline, now: g.now, fresh: g.first };
        effects::grant(ctx, g.key, g.name, hold);
        Ok(token.map(|t| t.write(ctx, g.now)))
    }

    fn reply_granted(ctx: Ctx, token: &Option<i64>) {
        match token {
            None => rm::reply_null(ctx),
            Some(t) => rm::reply_pair(ctx, -1, *t),
        };
    }

    /// The key's PTTL (argv[1] is the key), as a pair with no token when the waiter asked for
    /// `FENCE` (the request says so; argv is not parsed again).
    fn reply_not_granted(ctx: Ctx, argv: &[RStr], req: Option<&Request>) {
        let pttl = argv.get(1).map_or(-2, |name| Key::read(ctx, *name).pttl());
        if req.is_some_and(|r| r.fence) {
            rm::reply_pair(ctx, pttl, -1);
        } else {
            rm::reply_int(ctx, pttl);
        }
    }
}
