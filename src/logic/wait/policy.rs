//! The grant rules every kind shares, pure: who gets an object that has just become available,
//! and when a Redisson script owner may take it. State in, decision out; `module/wait` applies
//! the decisions (it replies to the blocked clients, writes through the kind, arms timers) and
//! adds what only the server can tell (ACL, the token key). What a head may get is the kind's
//! [`Policy`] (`logic/<kind>/policy.rs`).
//!
//! The rules:
//! - A reservation (the object kept free for a script owner's turn) still running keeps
//!   everyone out ([`gate`]); one that ran out is dropped and counted as missed.
//! - The head of the key's line is served first (FIFO). A script owner's turn that ran out is
//!   dropped; one still running reserves the object for [`TURN_MS`] and nobody is granted. A
//!   waiter the policy admits is granted, or timed out if its wait ran out. A head the policy
//!   does not admit stops the round: nobody behind it is served (no barging).
//! - A turn behind a grant stops the grants ([`next`]).
//! - A free object whose reservation is another owner's and still running makes that owner's
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

/// One kind's grant policy: which waiters at the head of a line get the object that has just
/// become available, and with what. The rules every kind shares (FIFO, timeouts, script owners'
/// turns and reservations) are in [`next`] and [`round`]; the policy only says whether the
/// head may be granted given what the round has granted so far.
///
/// Monomorphised: the glue is generic over the policy, there is no `dyn`.
pub trait Policy {
    /// What a waiter asks for (its lease, a fencing token, a read or write hold...).
    type Request;
    /// What the glue read of the object when the round starts.
    type View;
    /// What the round has granted so far (starts from the view).
    type Round;
    /// One grant, as the glue applies it.
    type Grant: Copy + core::fmt::Debug + PartialEq;
    fn start(view: Self::View) -> Self::Round;
    /// The grant the head (`owner`, asking `req`) gets after what `round` granted, `None` when
    /// it must wait (the round stops there: nobody behind it overtakes).
    fn admit(round: &Self::Round, owner: &[u8], req: &Self::Request) -> Option<Self::Grant>;
    /// Record a grant made.
    fn granted(round: &mut Self::Round, owner: &[u8], grant: Self::Grant);
    /// Whether the round granted anything (a turn behind a grant stops the round).
    fn any_granted(round: &Self::Round) -> bool;
}

/// The head of a key's line, as the policy sees it.
#[derive(Debug)]
pub struct Head<'a, R> {
    pub owner: &'a [u8],
    pub req: &'a R,
    /// `Some(until)`: a script owner's turn, valid until unix-ms `until`.
    pub turn_until: Option<i64>,
    /// The blocked client's deadline (unix ms), `None` for no limit.
    pub deadline: Option<i64>,
}

/// What to do with the head of the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<G> {
    /// Leave the line as it is: no head, or the head may not be granted after this round's
    /// grants.
    Stop,
    /// Remove the head, a script owner's turn that ran out, and look at the next.
    DropTurn,
    /// Remove the head, a script owner's turn, and keep the object free for that owner until
    /// `until`; grant nobody else.
    GiveTurn { until: i64 },
    /// Remove the head, a waiter whose wait ran out, reply that it timed out; look at the next.
    TimeOut,
    /// Remove the head and grant it `G`.
    Grant(G),
}

/// The step for the head of the line, after the grants `round` holds.
pub fn next<P: Policy>(head: Option<&Head<P::Request>>, round: &P::Round, now: i64) -> Step<P::Grant> {
    let Some(head) = head else { return Step::Stop };
    if let Some(until) = head.turn_until {
        return if P::any_granted(round) {
            Step::Stop
        } else if until < now {
            Step::DropTurn
        } else {
            Step::GiveTurn { until: now.saturating_add(TURN_MS) }
        };
    }
    let Some(grant) = P::admit(round, head.owner, head.req) else { return Step::Stop };
    if head.deadline.is_some_and(|d| d <= now) {
        return Step::TimeOut;
    }
    Step::Grant(grant)
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
/// order (step `i` is for `line[i]`). For tests and the fuzz targets; the glue calls [`gate`]
/// and [`next`] itself because it talks to the server between steps.
pub fn round<P: Policy>(
    view: P::View,
    line: &[Head<P::Request>],
    reservation_until: Option<i64>,
    now: i64,
) -> (Gate, Vec<Step<P::Grant>>) {
    let g = gate(reservation_until, now);
    let mut steps = Vec::new();
    if g == Gate::Reserved {
        return (g, steps);
    }
    let mut granted = P::start(view);
    let mut heads = line.iter();
    loop {
        let head = heads.next();
        let step = next::<P>(head, &granted, now);
        match (step, head) {
            (Step::Stop, _) | (_, None) => break,
            (Step::GiveTurn { .. }, _) => {
                steps.push(step);
                break;
            }
            (Step::Grant(grant), Some(h)) => {
                steps.push(step);
                P::granted(&mut granted, h.owner, grant);
            }
            (Step::DropTurn | Step::TimeOut, _) => steps.push(step),
        }
    }
    (g, steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy that grants one waiter per round (a mutex without reentry).
    struct One;
    impl Policy for One {
        type Request = ();
        type View = ();
        type Round = bool;
        type Grant = ();
        fn start(_: ()) -> bool {
            false
        }
        fn admit(round: &bool, _: &[u8], _: &()) -> Option<()> {
            (!*round).then_some(())
        }
        fn granted(round: &mut bool, _: &[u8], _: ()) {
            *round = true;
        }
        fn any_granted(round: &bool) -> bool {
            *round
        }
    }

    fn client(owner: &[u8], deadline: Option<i64>) -> Head<'_, ()> {
        Head { owner, req: &(), turn_until: None, deadline }
    }

    fn turn_of(owner: &[u8], until: i64) -> Head<'_, ()> {
        Head { owner, req: &(), turn_until: Some(until), deadline: None }
    }

    #[test]
    fn reservations_gate_the_line() {
        assert_eq!(gate(None, 10), Gate::Open);
        assert_eq!(gate(Some(10), 10), Gate::Reserved);
        assert_eq!(gate(Some(9), 10), Gate::Missed);
        assert_eq!(round::<One>((), &[client(b"a", None)], Some(11), 10), (Gate::Reserved, vec![]));
        assert_eq!(
            round::<One>((), &[client(b"a", None)], Some(9), 10),
            (Gate::Missed, vec![Step::Grant(())])
        );
    }

    #[test]
    fn timed_out_waiters_and_lapsed_turns_are_skipped_and_a_refused_head_stops_the_round() {
        let line = [client(b"a", Some(10)), turn_of(b"s", 9), client(b"b", Some(11)), client(b"c", None)];
        assert_eq!(round::<One>((), &line, None, 10).1, vec![Step::TimeOut, Step::DropTurn, Step::Grant(())]);
    }

    #[test]
    fn a_live_turn_at_the_head_reserves_and_a_turn_behind_a_grant_stops() {
        let line = [turn_of(b"s", 10), client(b"a", None)];
        assert_eq!(round::<One>((), &line, None, 10).1, vec![Step::GiveTurn { until: 10 + TURN_MS }]);
        assert_eq!(next::<One>(Some(&turn_of(b"s", 100)), &true, 10), Step::Stop);
        assert_eq!(next::<One>(None, &false, 0), Step::Stop);
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
