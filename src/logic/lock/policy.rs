//! The reentrant lock's grant policy: a free lock goes to the head of the line, and to the
//! waiters right behind it with the same owner id (the same hold, its count growing by one
//! each); the first waiter of another owner stops the round.

use crate::logic::wait::policy::Policy;

/// What a blocked `LOCK.ACQUIRE ... WAIT` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Request {
    pub lease_ms: i64,
    /// `FENCE`: the grant issues a fencing token and the reply is a pair.
    pub fence: bool,
}

/// The policy of the reentrant lock.
pub struct LockPolicy;

impl Policy for LockPolicy {
    type Request = Request;
    /// A round starts on a free lock: nothing to see.
    type View = ();
    /// The hold granted so far: its owner and count.
    type Round = Option<(Vec<u8>, i64)>;
    /// The hold count the grant writes (1 for the first grant of a round).
    type Grant = i64;

    fn start(_: ()) -> Self::Round {
        None
    }

    fn admit(round: &Self::Round, owner: &[u8], _: &Request) -> Option<i64> {
        match round {
            None => Some(1),
            Some((o, count)) if o.as_slice() == owner => Some(count.saturating_add(1)),
            Some(_) => None,
        }
    }

    fn granted(round: &mut Self::Round, owner: &[u8], count: i64) {
        match round {
            Some((_, c)) => *c = count,
            None => *round = Some((owner.to_vec(), count)),
        }
    }

    fn any_granted(round: &Self::Round) -> bool {
        round.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::wait::policy::{round, Head, Step, TURN_MS};

    const REQ: Request = Request { lease_ms: 10, fence: false };

    fn client(owner: &[u8], deadline: Option<i64>) -> Head<'_, Request> {
        Head { owner, req: &REQ, turn_until: None, deadline }
    }

    fn turn_of(owner: &[u8], until: i64) -> Head<'_, Request> {
        Head { owner, req: &REQ, turn_until: Some(until), deadline: None }
    }

    #[test]
    fn head_first_then_same_owner_behind_it() {
        let line = [client(b"a", None), client(b"a", Some(100)), client(b"b", None), client(b"a", None)];
        let (_, steps) = round::<LockPolicy>((), &line, None, 10);
        assert_eq!(steps, vec![Step::Grant(1), Step::Grant(2)]);
    }

    #[test]
    fn timed_out_waiters_and_lapsed_turns_are_skipped() {
        let line = [client(b"a", Some(10)), turn_of(b"s", 9), client(b"b", Some(11)), client(b"b", None)];
        let (_, steps) = round::<LockPolicy>((), &line, None, 10);
        assert_eq!(steps, vec![Step::TimeOut, Step::DropTurn, Step::Grant(1), Step::Grant(2)]);
    }

    #[test]
    fn another_owner_behind_a_grant_stops_even_when_timed_out() {
        let line = [client(b"a", None), client(b"b", Some(5)), client(b"a", None)];
        assert_eq!(round::<LockPolicy>((), &line, None, 10).1, vec![Step::Grant(1)]);
    }

    #[test]
    fn turns_reserve_at_the_head_and_stop_behind_a_grant() {
        let line = [turn_of(b"s", 10), client(b"a", None)];
        assert_eq!(round::<LockPolicy>((), &line, None, 10).1, vec![Step::GiveTurn { until: 10 + TURN_MS }]);
        let line = [client(b"s", None), turn_of(b"s", 100), client(b"s", None)];
        assert_eq!(round::<LockPolicy>((), &line, None, 10).1, vec![Step::Grant(1)]);
    }
}
