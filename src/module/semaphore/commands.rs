//! The LOCK.SEM* commands: parse (`logic/semaphore/args.rs`), open the two keys, decide
//! (`logic/semaphore/state.rs`), check, write. Every refusal happens before the first write.
//! The writes are Redisson's layout (`RPermitExpirableSemaphore`), so Redisson clients and
//! LOCK.SEM* clients share one semaphore. The rows (COMMAND DOCS, flags, keys) sit beside.

use crate::ffi::command::{entry, run};
use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{self, Ctx, RStr};
use crate::logic::args::{self, TIMEOUT};
use crate::logic::error::Error;
use crate::logic::semaphore::args as sargs;
use crate::logic::semaphore::policy::{encode_ids, Request};
use crate::logic::semaphore::state;
use crate::module::semaphore::leases;
use crate::module::semaphore::store::{self, Sem};
use crate::module::semaphore::waiting::{busy, Semaphore};
use crate::module::wait;
use crate::registry::cmdinfo::{arg, opt, Arg, ArgKind, Keys, Spec, RO_ACCESS, RW_ACCESS_UPDATE, RW_UPDATE};
use crate::registry::stats;

/// The semaphore key (argv[1]; arity was checked by the parser).
fn first(strs: &[RStr]) -> Result<RStr, Error> {
    strs.first().copied().ok_or(Error::Arity)
}

/// The argv strings of the ids: `ids` are the parser's slices of `argv`, at `from`.
fn id_strs(strs: &[RStr], from: usize, n: usize) -> Result<&[RStr], Error> {
    strs.get(from..from.saturating_add(n)).ok_or(Error::Arity)
}

/// Return expired permits, grant waiters, publish: what follows any return of permits inside
/// a command (`returned` > 0). `handoff`: a release (counted as handoffs).
fn after_return(ctx: Ctx, sem: &Sem<'_>, now: i64, handoff: bool) {
    wait::grant_head::<Semaphore>(ctx, sem.key, sem.name, now, handoff);
    sem.publish(ctx);
}

/// Keep the lease timer at the semaphore's earliest lease end.
fn watch(ctx: Ctx, sem: &Sem<'_>, now: i64) {
    leases::watch::<Semaphore>(ctx, rm::bytes(&sem.name), sem.earliest(ctx), now);
}

fn semset(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let a = sargs::set(argv)?;
    let name = first(strs)?;
    let lock = rm::bytes(&name);
    leases::in_use(ctx);
    let zname = store::zset_name(Some(ctx), lock, true)?;
    let key = Key::write(ctx, name);
    let sem = store::open(ctx, &key, name, &zname)?;
    let exists = key.kind() != KeyKind::Empty;
    if a.nx && exists {
        stats::SEM_SETS_NOT_SET.inc();
        rm::reply_int(ctx, 0);
        return Ok(());
    }
    let old = sem.available()?;
    let now = rm::millis();
    let expired = sem.expired(ctx, now);
    let held = i64::try_from(sem.held(ctx).saturating_sub(expired.len())).unwrap_or(i64::MAX);
    let new = state::after_set(a.permits, held);
    // The change as one exact increment (a count written by hand near the i64 bounds would
    // make it overflow): refused before anything is written.
    let returned = i64::try_from(expired.len()).unwrap_or(i64::MAX);
    old.checked_add(returned).and_then(|c| new.checked_sub(c)).ok_or(Error::SemNotInteger)?;
    // Expired permits return (as the timer would) before the total is set.
    let raised = !exists || new > old || !expired.is_empty();
    if raised {
        store::may_publish(ctx, lock)?;
    }
    if !expired.is_empty() {
        sem.return_expired(ctx, now)?;
    }
    let current = sem.available()?;
    if new != current || !exists {
        sem.add(ctx, new.saturating_sub(current), new);
    }
    stats::SEM_SETS.inc();
    if raised {
        after_return(ctx, &sem, now, false);
    }
    watch(ctx, &sem, now);
    rm::reply_int(ctx, 1);
    Ok(())
}

fn semacquire(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let a = sargs::acquire(argv)?;
    let name = first(strs)?;
    let ids = id_strs(strs, 3, a.ids.len())?;
    let lock = rm::bytes(&name);
    leases::in_use(ctx);
    let now = rm::millis();
    let score = state::lease_end(now, a.lease_ms)?;
    let wait_deadline = match a.wait_ms {
        Some(t) if t > 0 => Some(args::deadline(now, t, TIMEOUT)?),
        _ => None,
    };
    let who = store::caller(ctx);
    let zname = who.zset_name(lock)?;
    let key = Key::write(ctx, name);
    let sem = store::open_count(&key, name, &zname)?;
    let available = sem.available()?;
    let (taken, expired) = sem.peek(ctx, |z| {
        let taken = ids.iter().any(|id| z.zset_score(*id).is_some_and(|s| !state::expired(s, now)));
        let mut expired = false;
        z.zset_upto(now as f64, 1, &mut |_, _| expired = true);
        (taken, expired)
    })?;
    if taken {
        return Err(Error::SemIdHeld);
    }
    if expired {
        who.may_publish(lock)?;
        sem.return_expired(ctx, now)?;
        after_return(ctx, &sem, now, false);
    }
    let n = i64::try_from(ids.len()).unwrap_or(i64::MAX);
    let queued = wait::has_waiters::<Semaphore>(ctx, name);
    let available = if expired { sem.available()? } else { available };
    if state::takes(available, n, queued) {
        sem.add(ctx, -n, available.saturating_sub(n));
        sem.hold(ctx, ids, score);
        stats::SEM_ACQUIRES.inc();
        stats::SEM_PERMITS_TAKEN.add(u64::try_from(n).unwrap_or(0));
        leases::watch::<Semaphore>(ctx, lock, Some(score), now);
        rm::reply_null(ctx);
        return Ok(());
    }
    stats::SEM_ACQUIRES_CONTENDED.inc();
    let owner = a.wait_ms.is_some().then(|| encode_ids(a.ids.iter().copied()));
    let may_block = owner.as_ref().is_some_and(|o| {
        let flags = rm::ctx_flags(ctx);
        flags & rm::CTX_MASTER != 0
            && flags & (rm::CTX_DENY_BLOCKING | rm::CTX_MULTI | rm::CTX_LUA) == 0
            && wait::admit(lock, o)
    });
    watch(ctx, &sem, now);
    match owner {
        Some(owner) if may_block => {
            drop(sem);
            drop(key);
            let req = Request { n, lease_ms: a.lease_ms };
            wait::block::<Semaphore>(ctx, name, &owner, req, wait_deadline, None, now);
        }
        _ => {
            rm::reply_int(ctx, busy(ctx, name, now));
        }
    }
    Ok(())
}

fn semrelease(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let given = sargs::release(argv)?.len();
    let name = first(strs)?;
    let ids = id_strs(strs, 1, given)?;
    let lock = rm::bytes(&name);
    leases::in_use(ctx);
    let who = store::caller(ctx);
    let zname = who.zset_name(lock)?;
    let key = Key::write(ctx, name);
    let sem = store::open_count(&key, name, &zname)?;
    let available = sem.available()?;
    let now = rm::millis();
    let (live, expired) = sem.peek(ctx, |z| {
        let live: Vec<RStr> = ids
            .iter()
            .copied()
            .filter(|id| z.zset_score(*id).is_some_and(|s| !state::expired(s, now)))
            .collect();
        let mut expired = false;
        z.zset_upto(now as f64, 1, &mut |_, _| expired = true);
        (live, expired)
    })?;
    if live.is_empty() && !expired {
        stats::SEM_RELEASES_MISSED.inc();
        rm::reply_int(ctx, 0);
        return Ok(());
    }
    who.may_publish(lock)?;
    // Expired permits (the given ones among them) go back as the timer would return them.
    let back = if expired { sem.return_expired(ctx, now)? } else { 0 };
    let n = i64::try_from(sem.drop_ids(ctx, &live)).unwrap_or(i64::MAX);
    let count = state::after_return(available, n.saturating_add(back));
    if n > 0 {
        sem.add(ctx, n, count);
    }
    stats::SEM_RELEASES.inc();
    stats::SEM_PERMITS_RELEASED.add(u64::try_from(n).unwrap_or(0));
    let waiters = wait::has_waiters::<Semaphore>(ctx, name);
    if waiters {
        after_return(ctx, &sem, now, n > 0);
        watch(ctx, &sem, now);
    } else {
        sem.publish_count(ctx, count);
    }
    rm::reply_int(ctx, n);
    Ok(())
}

fn semrenew(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let (lease_ms, given) = sargs::renew(argv)?;
    let name = first(strs)?;
    let ids = id_strs(strs, 2, given.len())?;
    let lock = rm::bytes(&name);
    leases::in_use(ctx);
    let now = rm::millis();
    let score = state::lease_end(now, lease_ms)?;
    let zname = store::zset_name(Some(ctx), lock, true)?;
    let key = Key::write(ctx, name);
    let sem = store::open(ctx, &key, name, &zname)?;
    let live: Vec<RStr> = ids
        .iter()
        .copied()
        .filter(|id| sem.score(ctx, *id).is_some_and(|s| !state::expired(s, now)))
        .collect();
    if live.is_empty() {
        stats::SEM_RENEWALS_MISSED.inc();
    } else {
        sem.hold(ctx, &live, score);
        stats::SEM_RENEWALS.inc();
        watch(ctx, &sem, now);
    }
    rm::reply_int(ctx, i64::try_from(live.len()).unwrap_or(i64::MAX));
    Ok(())
}

/// The most holders LOCK.SEMINFO lists (earliest lease end first).
pub const INFO_HOLDERS: usize = 100;

fn seminfo(ctx: Ctx, strs: &[RStr], argv: &[&[u8]]) -> Result<(), Error> {
    let [_key] = argv else { return Err(Error::Arity) };
    let name = first(strs)?;
    let lock = rm::bytes(&name);
    let zname = store::zset_name(Some(ctx), lock, false)?;
    let key = Key::read(ctx, name);
    let sem = store::open(ctx, &key, name, &zname)?;
    let available = sem.available()?;
    let held = i64::try_from(sem.held(ctx)).unwrap_or(i64::MAX);
    let now = rm::millis();
    let holders = sem.upto(ctx, i64::MAX, INFO_HOLDERS);
    let earliest = sem.earliest(ctx).filter(|&s| s < crate::logic::semaphore::names::NO_LEASE);
    let db = rm::selected_db(ctx);
    let (waiters, waiting_permits) = waiting_permits(db, lock);
    let fields: [(&[u8], i64); 7] = [
        (b"available", available),
        (b"held", held),
        (b"total", available.saturating_add(held)),
        (b"waiters", waiters),
        (b"waiting_permits", waiting_permits),
        (b"earliest_expiry", earliest.unwrap_or(-1)),
        (b"expires_in", state::busy_reply(earliest, now)),
    ];
    rm::reply_map(ctx, fields.len() + 2);
    for (k, v) in fields {
        rm::reply_bytes(ctx, k);
        rm::reply_int(ctx, v);
    }
    rm::reply_bytes(ctx, b"pttl");
    rm::reply_int(ctx, key.pttl());
    rm::reply_bytes(ctx, b"holders");
    rm::reply_map(ctx, holders.len());
    for (id, score) in &holders {
        rm::reply_bytes(ctx, id);
        rm::reply_int(ctx, if *score >= crate::logic::semaphore::names::NO_LEASE { -1 } else { *score });
    }
    Ok(())
}

/// Clients waiting on semaphore `lock` and the permits they ask for in all.
fn waiting_permits(db: i32, lock: &[u8]) -> (i64, i64) {
    let n = wait::waiting_on::<Semaphore>(db, lock);
    let permits = wait::waiting_sum::<Semaphore>(db, lock, |r: &Request| r.n);
    (i64::try_from(n).unwrap_or(i64::MAX), permits)
}

entry!(semset_cmd, |ctx, argv| run(ctx, argv, semset));
entry!(semacquire_cmd, |ctx, argv| run(ctx, argv, semacquire));
entry!(semrelease_cmd, |ctx, argv| run(ctx, argv, semrelease));
entry!(semrenew_cmd, |ctx, argv| run(ctx, argv, semrenew));
entry!(seminfo_cmd, |ctx, argv| run(ctx, argv, seminfo));

const fn many(a: Arg) -> Arg {
    Arg { multiple: true, ..a }
}

/// The LOCK.SEM* commands: entry point, registration flags, key positions, COMMAND DOCS.
pub const COMMANDS: [Spec; 5] = [
    Spec {
        name: c"lock.semset",
        handler: semset_cmd,
        flags: c"write deny-oom",
        acl: c"write",
        arity: -3,
        summary: c"Sets a semaphore's total permits (available + held; NX: only when it does not exist); permits that become available go to waiters and are published",
        complexity: c"O(1); O(N log M) when N expired permits return",
        key_flags: RW_ACCESS_UPDATE,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key), arg(c"permits", ArgKind::Int), opt(c"nx", ArgKind::PureToken, Some(c"NX"))],
    },
    Spec {
        name: c"lock.semacquire",
        handler: semacquire_cmd,
        flags: c"write deny-oom",
        acl: c"write blocking",
        arity: -5,
        summary: c"Takes one permit of a semaphore per id, all or none, each leased for lease-ms (0: no lease); optionally waits in a FIFO queue",
        complexity: c"O(N log M) where N is the number of ids and M the held permits",
        key_flags: RW_ACCESS_UPDATE,
        keys: Keys::First,
        args: &[
            arg(c"key", ArgKind::Key),
            arg(c"lease-ms", ArgKind::Int),
            arg(c"numids", ArgKind::Int),
            many(arg(c"id", ArgKind::Str)),
            opt(c"timeout-ms", ArgKind::Int, Some(c"WAIT")),
        ],
    },
    Spec {
        name: c"lock.semrelease",
        handler: semrelease_cmd,
        flags: c"write",
        acl: c"write fast",
        arity: -3,
        summary: c"Returns the permits the given ids hold (not expired) to a semaphore; they go to waiters and the new count is published",
        complexity: c"O(N log M) where N is the number of ids and M the held permits",
        key_flags: RW_ACCESS_UPDATE,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key), many(arg(c"id", ArgKind::Str))],
    },
    Spec {
        name: c"lock.semrenew",
        handler: semrenew_cmd,
        flags: c"write fast",
        acl: c"write fast",
        arity: -4,
        summary: c"Resets the lease of the permits the given ids hold to lease-ms from now (0: no lease)",
        complexity: c"O(N log M) where N is the number of ids and M the held permits",
        key_flags: RW_UPDATE,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key), arg(c"lease-ms", ArgKind::Int), many(arg(c"id", ArgKind::Str))],
    },
    Spec {
        name: c"lock.seminfo",
        handler: seminfo_cmd,
        flags: c"readonly fast",
        acl: c"read fast",
        arity: 2,
        summary: c"Returns a semaphore's available and held permits, its waiters, its earliest lease end and (up to 100) holders",
        complexity: c"O(log M) where M is the number of held permits",
        key_flags: RO_ACCESS,
        keys: Keys::First,
        args: &[arg(c"key", ArgKind::Key)],
    },
];
