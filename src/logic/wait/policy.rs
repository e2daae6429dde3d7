//! The grant policy, pure: who gets a lock that has just become free, and when a Redisson
//! script owner may take it. State in, decision out; `module/wait` applies the decisions (it
//! replies to the blocked clients, writes the lock, arms timers) and adds what only the server
//! can tell (ACL, the token key).
//!
//! The rules:
//! - A reservation (the lock kept free for a script owner's turn) still running keeps everyone
//!   out ([`gate`]); one that ran out is dropped and counted as missed.
//! - The head of the key's line is served first (FIFO). A script owner's turn that ran out is
//!   dropped; one still running reserves the lock for [`TURN_MS`] and nobody is granted. A
//!   waiter whose wait ran out is timed out. Any other waiter is granted.
//! - Behind a granted waiter, the waiters right behind it with the same owner id are granted
//!   too (the same hold, the count growing by one each); the first of another owner, or a
//!   turn, stops the grants ([`next`]).
//! - A free lock whose reservation is another owner's and still running makes that owner's
//!   acquire wait for the rest of it; the reservation's own owner takes it ([`turn`]).

/// How long a free lock is kept for the script owner whose turn it is: long enough for the
/// release message to reach it and its acquire to come back, short enough that an owner that
/// gave up stalls the queue only briefly.
pub const TURN_MS: i64 = 200;

/// How long a script owner's place in line outlives the PTTL it was told to wait (it retries
/// after at most that long, refreshing its place).
pub const TURN_GRACE_MS: i64 = 1000;

/// The PTTL a script owner is told when it was told none (`-1`: retry on the release message).
pub const TURN_DEFAULT_WAIT_MS: i64 = 30_000;

/// Whether a free lock may be granted now, given its reservation's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No reservation: serve the line.
    Open,
    /// A reservation still running: grant nobody.
    Reserved,
    /// A reservation that ran out: drop it (a missed turn), then serve the line.
    Missed,
}

pub fn gate(reservation_until: Option<i64>, now: i64) -> Gate {
    match reservation_until {
        Some(until) if until >= now => Gate::Reserved,
        Some(_) => Gate::Missed,
        None => Gate::Open,
    }
}

/// The head of a key's line, as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    pub owner: &'a [u8],
    /// `Some(until)`: a script owner's turn, valid until unix-ms `until`.
    pub turn_until: Option<i64>,
    /// The blocked client's deadline (unix ms), `None` for no limit.
    pub deadline: Option<i64>,
}

/// The hold granted so far in this round: its owner and count.
#[derive(Debug, Clone, Copy)]
pub struct Holder<'a> {
    pub owner: &'a [u8],
    pub count: i64,
}

/// What to do with the head of the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Leave the line as it is: no head, or the head may not share the hold granted so far.
    Stop,
    /// Remove the head, a script owner's turn that ran out, and look at the next.
    DropTurn,
    /// Remove the head, a script owner's turn, and keep the lock free for that owner until
    /// `until`; grant nobody else.
    GiveTurn { until: i64 },
    /// Remove the head, a waiter whose wait ran out, reply that it timed out; look at the next.
    TimeOut,
    /// Remove the head and grant it the lock with hold count `count` (1 for the first grant,
    /// one more for each same-owner waiter behind it).
    Grant { count: i64 },
}

pub fn next(head: Option<&Head>, holder: Option<&Holder>, now: i64) -> Step {
    let Some(head) = head else { return Step::Stop };
    if let Some(h) = holder {
        if head.turn_until.is_some() || h.owner != head.owner {
            return Step::Stop;
        }
    }
    if let Some(until) = head.turn_until {
        return if until < now {
            Step::DropTurn
        } else {
            Step::GiveTurn { until: now.saturating_add(TURN_MS) }
        };
    }
    if head.deadline.is_some_and(|d| d <= now) {
        return Step::TimeOut;
    }
    Step::Grant { count: holder.map_or(1, |h| h.count.saturating_add(1)) }
}

/// May a script owner take the free lock now, given the lock's reservation?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Yes; nothing to change.
    Go,
    /// Yes: it is its own reservation, which it now uses up (drop it).
    TakeReservation,
    /// No, another owner's turn: the ms left of it (>= 1), to be replied as the PTTL.
    Wait(i64),
}

pub fn turn(reservation: Option<(&[u8], i64)>, owner: &[u8], now: i64) -> Turn {
    match reservation {
        Some((o, until)) if until >= now && o != owner => Turn::Wait(until.saturating_sub(now).max(1)),
        Some((_, until)) if until >= now => Turn::TakeReservation,
        _ => Turn::Go,
    }
}

/// Until when a script owner told to retry within `pttl` ms (-1: on the release message) keeps
/// its place in line.
pub fn turn_place_until(pttl: i64, now: i64) -> i64 {
    let wait = if pttl < 0 { TURN_DEFAULT_WAIT_MS } else { pttl };
    now.saturating_add(wait).saturating_add(TURN_GRACE_MS)
}

/// One round over a whole line, as `module/wait` plays it when every grant succeeds: the gate,
/// then [`next`] on each head until it stops. Returns the gate and each step taken, in line
/// order (step `i` is for `line[i]`). For tests and the fuzz target; the glue calls [`gate`]
/// and [`next`] itself because it talks to the server between steps.
pub fn round(line: &[Head], reservation_until: Option<i64>, now: i64) -> (Gate, Vec<Step>) {
    let g = gate(reservation_until, now);
    let mut steps = Vec::new();
    if g == Gate::Reserved {
        return (g, steps);
    }
    let mut holder: Option<Holder> = None;
    let mut heads = line.iter();
    loop {
        let head = heads.next();
        let step = next(head, holder.as_ref(), now);
        match (step, head) {
            (Step::Stop, _) | (_, None) => break,
            (Step::GiveTurn { .. }, _) => {
                steps.push(step);
                break;
            }
            (Step::Grant { count }, Some(h)) => {
                steps.push(step);
                holder = Some(Holder { owner: h.owner, count });
            }
            (Step::DropTurn | Step::TimeOut, _) => steps.push(step),
        }
    }
    (g, steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(owner: &[u8], deadline: Option<i64>) -> Head<'_> {
        Head { owner, turn_until: None, deadline }
    }

    fn turn_of(owner: &[u8], until: i64) -> Head<'_> {
        Head { owner, turn_until: Some(until), deadline: None }
    }

    #[test]
    fn reservations_gate_the_line() {
        assert_eq!(gate(None, 10), Gate::Open);
        assert_eq!(gate(Some(10), 10), Gate::Reserved);
        assert_eq!(gate(Some(9), 10), Gate::Missed);
        assert_eq!(round(&[client(b"a", None)], Some(11), 10), (Gate::Reserved, vec![]));
        assert_eq!(round(&[client(b"a", None)], Some(9), 10), (Gate::Missed, vec![Step::Grant { count: 1 }]));
    }

    #[test]
    fn head_first_then_same_owner_behind_it() {
        let line = [client(b"a", None), client(b"a", Some(100)), client(b"b", None), client(b"a", None)];
        let (_, steps) = round(&line, None, 10);
        assert_eq!(steps, vec![Step::Grant { count: 1 }, Step::Grant { count: 2 }]);
    }

    #[test]
    fn timed_out_waiters_and_lapsed_turns_are_skipped() {
        let line = [client(b"a", Some(10)), turn_of(b"s", 9), client(b"b", Some(11)), client(b"b", None)];
        let (_, steps) = round(&line, None, 10);
        assert_eq!(
            steps,
            vec![Step::TimeOut, Step::DropTurn, Step::Grant { count: 1 }, Step::Grant { count: 2 }]
        );
    }

    #[test]
    fn a_live_turn_at_the_head_reserves_the_lock() {
        let line = [turn_of(b"s", 10), client(b"a", None)];
        assert_eq!(round(&line, None, 10).1, vec![Step::GiveTurn { until: 10 + TURN_MS }]);
    }

    #[test]
    fn a_turn_behind_a_grant_stops_the_grants() {
        let line = [client(b"s", None), turn_of(b"s", 100), client(b"s", None)];
        assert_eq!(round(&line, None, 10).1, vec![Step::Grant { count: 1 }]);
        assert_eq!(next(None, None, 0), Step::Stop);
    }

    #[test]
    fn script_owners_take_their_own_turn_and_wait_for_others() {
        assert_eq!(turn(None, b"a", 10), Turn::Go);
        assert_eq!(turn(Some((b"a", 10)), b"a", 10), Turn::TakeReservation);
        assert_eq!(turn(Some((b"b", 10)), b"a", 10), Turn::Wait(1));
        assert_eq!(turn(Some((b"b", 250)), b"a", 10), Turn::Wait(240));
        assert_eq!(turn(Some((b"b", 9)), b"a", 10), Turn::Go);
        assert_eq!(turn_place_until(-1, 0), TURN_DEFAULT_WAIT_MS + TURN_GRACE_MS);
        assert_eq!(turn_place_until(50, 1), 51 + TURN_GRACE_MS);
        assert_eq!(turn_place_until(i64::MAX, 1), i64::MAX);
    }
}
