//! A client joins a line: `LOCK.* ... WAIT` blocks the caller at the tail of its key's line,
//! with its wait timeout on a module timer (exact, and capped per period, see `timing`), so a
//! grant never reaches a client whose deadline passed.

use super::callbacks::{quietly, unblock, Callbacks, Outcome};
use super::grants::{arm_expiry, key_id};
use super::kind::{Kind, Req};
use crate::ffi::blocked;
use crate::ffi::rm::{self, Ctx, RStr};
use crate::ffi::timers::{self, TimerId};
use crate::logic::error::Error;
use crate::logic::timing;
use crate::logic::wait::queue::Waiter;
use crate::registry::stats;
use std::sync::Arc;

/// Block the calling client at the tail of `name`'s line, asking `req` as `owner`, until
/// `wait_deadline` (unix ms; `None`: no limit). `lock_deadline`: when the object's current
/// lease ends (a timer looks at the key then).
pub fn block<K: Kind>(
    ctx: Ctx,
    name: RStr,
    owner: &[u8],
    req: Req<K>,
    wait_deadline: Option<i64>,
    lock_deadline: Option<i64>,
    now: i64,
) {
    let Some(bc) = blocked::block::<Callbacks<K>>(ctx) else {
        rm::reply_error(ctx, &Error::CannotBlock.reply());
        return;
    };
    crate::module::acl::remember_waiter(ctx, bc);
    super::events::watch_keyspace(ctx);
    let key = key_id(ctx, name);
    let waiter = Waiter {
        key: Arc::new(key.clone()),
        owner: Arc::from(owner),
        req,
        deadline: wait_deadline,
        handle: bc,
        timer: None,
        turn_until: None,
    };
    let table = K::table();
    let id = table.with(|s| {
        let id = s.q.push(waiter);
        if let Some(id) = id {
            s.by_client.insert(bc, id);
        }
        id
    });
    // A blocked client is always queued (only turns are refused).
    let Some(id) = id else { return };
    stats::WAITS_STARTED.inc();
    K::stats().waits_started.inc();
    if let Some(d) = wait_deadline {
        arm_wait_timer::<K>(ctx, id, timing::period(d, now));
    }
    arm_expiry::<K>(ctx, &key, lock_deadline, now);
}

/// Whether `name` (in the context's db) has blocked clients of kind `K`; cheap when none wait.
pub fn has_waiters<K: Kind>(ctx: Ctx, name: RStr) -> bool {
    K::table().clients() != 0 && waiting_on::<K>(rm::selected_db(ctx), rm::bytes(&name)) != 0
}

/// Number of clients of kind `K` waiting on `key` in `db`.
pub fn waiting_on<K: Kind>(db: i32, key: &[u8]) -> usize {
    let table = K::table();
    if table.clients() == 0 {
        return 0;
    }
    table.with(|s| s.q.clients_on(&(db, key.to_vec())))
}

/// Arm waiter `id`'s timeout timer `period` ms from now (a capped period: see `timing`).
fn arm_wait_timer<K: Kind>(ctx: Ctx, id: u64, period: i64) {
    let t: TimerId = timers::after(ctx, period, move |ctx| on_wait_timer::<K>(ctx, id));
    K::table().with(|s| {
        if let Some(w) = s.q.get_mut(id) {
            w.timer = Some(t);
        }
    });
}

fn on_wait_timer<K: Kind>(ctx: Ctx, id: u64) {
    quietly(ctx, "wait timeout", || {
        let table = K::table();
        // The timer fired, so it must not be stopped again.
        let deadline = table.with(|s| {
            let w = s.q.get_mut(id)?;
            w.timer = None;
            w.deadline
        });
        // A long wait takes several capped timers: re-arm until the deadline is reached.
        if let Some(timing::Fired::Rearm(p)) = deadline.map(|d| timing::on_fire(d, rm::millis())) {
            arm_wait_timer::<K>(ctx, id, p);
            return;
        }
        if let Some(w) = table.take(ctx, id) {
            stats::WAITS_TIMED_OUT.inc();
            K::stats().waits_timed_out.inc();
            unblock::<K>(w.handle, Outcome::TimedOut(w.req));
        }
    });
}

/// Clients of kind `K` waiting on `key` in `db`, split by `pred` on their request: (those it
/// holds for, the others).
pub fn waiting_split<K: Kind>(db: i32, key: &[u8], pred: impl Fn(&Req<K>) -> bool) -> (usize, usize) {
    let table = K::table();
    if table.clients() == 0 {
        return (0, 0);
    }
    table.with(|s| {
        let kid = (db, key.to_vec());
        let mut out = (0, 0);
        for id in s.q.ids_of(&kid) {
            match s.q.get(id) {
                Some(w) if w.is_turn() => {}
                Some(w) if pred(&w.req) => out.0 += 1,
                Some(_) => out.1 += 1,
                None => {}
            }
        }
        out
    })
}

/// The sum of `f` over the requests of the clients of kind `K` waiting on `key` in `db`.
pub fn waiting_sum<K: Kind>(db: i32, key: &[u8], f: impl Fn(&Req<K>) -> i64) -> i64 {
    let table = K::table();
    if table.clients() == 0 {
        return 0;
    }
    table.with(|s| {
        let kid = (db, key.to_vec());
        s.q.ids_of(&kid)
            .into_iter()
            .filter_map(|id| s.q.get(id))
            .filter(|w| !w.is_turn())
            .fold(0i64, |acc, w| acc.saturating_add(f(&w.req)))
    })
}
