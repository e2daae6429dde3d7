//! The semaphore in the waiting core: what its count looks like to a round (the available
//! permits), how one grant is written (the same checks and writes as LOCK.SEMACQUIRE), and the
//! replies of `LOCK.SEMACQUIRE ... WAIT`.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, OwnedStr, RStr};
use crate::logic::error::Error;
use crate::logic::script_cmds::Cmd;
use crate::logic::semaphore::policy::{decode_ids, Request, SemPolicy};
use crate::logic::semaphore::{names, state};
use crate::module::acl;
use crate::module::semaphore::{leases, store};
use crate::module::wait::{Grant, Kind, Look, Table};
use crate::registry::stats::{self, KindStats};

/// The kind (a type for the generic waiting core).
pub struct Semaphore;

static TABLE: Table<SemPolicy> = Table::new();

/// What an acquire that took nothing replies for semaphore `name` now: the ms until its
/// earliest lease ends, or -1.
pub fn busy(ctx: Ctx, name: RStr, now: i64) -> i64 {
    let z = OwnedStr::new(&names::zset(rm::bytes(&name)));
    state::busy_reply(Key::read(ctx, z.ptr()).zset_lowest(), now)
}

impl Kind for Semaphore {
    type Policy = SemPolicy;
    type Granted = ();

    fn table() -> &'static Table<SemPolicy> {
        &TABLE
    }

    fn stats() -> &'static KindStats {
        &stats::SEMAPHORE
    }

    fn look(ctx: Ctx, key: &Key, name: RStr) -> Look<i64> {
        let z = OwnedStr::new(&names::zset(rm::bytes(&name)));
        if !matches!(Key::read(ctx, z.ptr()).kind(), KeyKind::Empty | KeyKind::SortedSet) {
            return Look::WrongType;
        }
        match key.kind() {
            KeyKind::Empty => Look::Open(0),
            KeyKind::String => match key.string_get(|b| state::available(Some(b))) {
                Some(Ok(n)) => Look::Open(n),
                // Not a count: nothing to grant until it is one again.
                _ => Look::Held(None),
            },
            KeyKind::Hash | KeyKind::SortedSet | KeyKind::Other => Look::WrongType,
        }
    }

    fn apply(ctx: Ctx, g: Grant<'_, Self>) -> Result<(), Error> {
        let zname = store::zset_name(None, g.lock, true)?;
        if !acl::waiter_may_run(g.who, Cmd::LockSemAcquire, g.lock, Some(&zname)) {
            return Err(Error::SemGrantDenied);
        }
        let score = state::lease_end(g.now, g.req.lease_ms)?;
        let ids: Vec<OwnedStr> = decode_ids(g.owner).into_iter().map(OwnedStr::new).collect();
        let ptrs: Vec<RStr> = ids.iter().map(OwnedStr::ptr).collect();
        let sem = store::Sem { key: g.key, name: g.name, zname: OwnedStr::new(&zname) };
        // An id may have taken a permit (through Redisson) while it waited.
        if ptrs.iter().any(|id| sem.score(ctx, *id).is_some_and(|s| !state::expired(s, g.now))) {
            return Err(Error::SemIdHeld);
        }
        let available = sem.available()?;
        let n = g.grant;
        sem.add(ctx, -n, available.saturating_sub(n));
        sem.hold(ctx, &ptrs, score);
        stats::SEM_ACQUIRES.inc();
        stats::SEM_PERMITS_TAKEN.add(u64::try_from(n).unwrap_or(0));
        leases::watch::<Self>(ctx, g.lock, Some(score), g.now);
        Ok(())
    }

    fn reply_granted(ctx: Ctx, _: &()) {
        rm::reply_null(ctx);
    }

    fn reply_not_granted(ctx: Ctx, argv: &[RStr], _req: Option<&Request>) {
        let reply = argv.get(1).map_or(-1, |name| busy(ctx, *name, rm::millis()));
        rm::reply_int(ctx, reply);
    }

    /// A permit zset written by someone else (a Redisson client in Lua): its lease timer,
    /// waiters or not.
    fn key_written(ctx: Ctx, key: &[u8]) {
        leases::key_event::<Self>(ctx, key);
    }

    /// Permits loaded from disk or replicated here before a promotion: their lease ends.
    fn dataset_arrived(ctx: Ctx) {
        leases::rescan::<Self>(ctx);
    }
}
