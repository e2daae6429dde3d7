//! The read-write lock in the waiting core: what its hash looks like to a round (free, held by
//! readers until their last timeout key ends, or held by a writer), how one grant is written
//! (the same `prepare` / `write` as LOCK.ACQUIRE), and the replies of `LOCK.ACQUIRE ... WAIT`.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::command_args::Access;
use crate::logic::error::Error;
use crate::logic::rwlock::names;
use crate::logic::rwlock::policy::{Open, Request, RwPolicy};
use crate::logic::rwlock::state::{self, Mode, Take};
use crate::module::rwlock::{holds, take as commands};
use crate::module::wait::{Grant, Kind, Look, Table};
use crate::module::{acl, token};
use crate::registry::config;
use crate::registry::stats::{self, KindStats};

/// The kind (a type for the generic waiting core).
pub struct RwLock;

static TABLE: Table<RwPolicy> = Table::new();

/// When the holds a waiter waits for end: the last live read hold's timeout key, or the hash's
/// lease (a timer looks at the key then).
pub fn holds_end(ctx: Ctx, key: &Key, name: RStr) -> Option<i64> {
    match RwLock::look(ctx, key, name) {
        Look::Shared(_, d) | Look::Held(d) => d,
        Look::Open(_) | Look::WrongType => key.deadline(),
    }
}

impl Kind for RwLock {
    type Policy = RwPolicy;
    /// The fencing token of a FENCE writer.
    type Granted = Option<i64>;

    fn table() -> &'static Table<RwPolicy> {
        &TABLE
    }

    fn stats() -> &'static KindStats {
        &stats::RWLOCK
    }

    fn look(ctx: Ctx, key: &Key, name: RStr) -> Look<Open> {
        match key.kind() {
            KeyKind::Empty => Look::Open(Open::Free),
            KeyKind::Hash => match holds::mode(key) {
                Ok(Some(Mode::Read)) => {
                    let h = holds::walk(ctx, key, rm::bytes(&name), None);
                    if h.alive() {
                        Look::Shared(Open::Reading, h.until)
                    } else {
                        // Every read hold expired: nobody is kept out any longer.
                        Look::Open(Open::Free)
                    }
                }
                // A writer, or a plain lock on the key: wait for the hash to go.
                Ok(_) | Err(_) => Look::Held(key.deadline()),
            },
            KeyKind::String | KeyKind::SortedSet | KeyKind::Other => Look::WrongType,
        }
    }

    fn apply(ctx: Ctx, g: Grant<'_, Self>) -> Result<Option<i64>, Error> {
        let access = g.grant;
        let fence = g.req.fence && access == Access::Write;
        // The first grant of a round on a read-mode hash with no live hold clears it (expired
        // holds, whoever is granted next).
        if g.first && g.key.kind() == KeyKind::Hash && commands::expired_reads(ctx, g.key, g.name) {
            commands::clear_expired(ctx, g.key, g.name);
        }
        let owner = OwnedStr::new(g.owner);
        let v = holds::view(g.key, owner.ptr(), access);
        let take = match access {
            Access::Read => state::acquire_read(&v, false)?,
            Access::Write => state::acquire_write(&v)?,
        };
        let count = match take {
            Take::Create => 1,
            Take::Add { count } => count,
            // The policy admitted what the hash does not allow (it changed under the round).
            Take::Contended | Take::ContendedByReaders | Take::OwnReads => return Err(Error::CorruptMode),
        };
        // The waiter's user must still be allowed LOCK.ACQUIRE on the lock and the key the
        // grant derives: a read hold's timeout key, or a FENCE writer's token key.
        let derived = match access {
            Access::Read => Some(names::timeout_key(&names::timeout_prefix(g.lock, g.owner), count)),
            Access::Write => fence.then(|| config::token_key(g.lock)),
        };
        if !acl::waiter_may_take(g.who, g.lock, g.owner, derived.as_deref()) {
            return Err(Error::GrantDenied);
        }
        let want =
            commands::Want { owner: g.owner, access, take, lease_ms: g.req.lease_ms, in_command: false };
        let hold = commands::prepare(ctx, g.key, g.lock, want, g.now)?;
        let reentrant = matches!(take, Take::Add { count } if count > 1);
        let token = fence.then(|| token::prepare_for(ctx, g.lock, reentrant)).transpose()?;
        commands::write(ctx, g.key, g.name, &hold, owner.ptr(), g.now);
        match access {
            Access::Read => stats::RW_ACQUIRES_READ.inc(),
            Access::Write => stats::RW_ACQUIRES_WRITE.inc(),
        }
        Ok(token.map(|t| t.write(ctx, g.now)))
    }

    fn reply_granted(ctx: Ctx, token: &Option<i64>) {
        match token {
            None => rm::reply_null(ctx),
            Some(t) => rm::reply_pair(ctx, -1, *t),
        };
    }

    fn reply_not_granted(ctx: Ctx, argv: &[RStr], req: Option<&Request>) {
        let pttl = argv.get(1).map_or(-2, |name| Key::read(ctx, *name).pttl());
        if req.is_some_and(|r| r.fence) {
            rm::reply_pair(ctx, pttl, -1);
        } else {
            rm::reply_int(ctx, pttl);
        }
    }
}
