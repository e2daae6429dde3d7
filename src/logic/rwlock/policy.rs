//! The read-write lock's grant policy: one FIFO line of readers and writers per key. A writer
//! at the head gets a free lock alone (and the waiters right behind it with the same owner: its
//! re-entries, or its own reads); a reader at the head gets a free or read-held lock, and every
//! reader right behind it up to the first writer is granted with it. So readers are batched and
//! a writer is never overtaken by readers that came after it.

use crate::logic::command_args::Access;
use crate::logic::wait::policy::Policy;

/// What a blocked `LOCK.ACQUIRE ... WAIT ... READ | WRITE` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub lease_ms: i64,
    /// `FENCE` (writes only): the grant issues a fencing token.
    pub fence: bool,
    pub access: Access,
}

/// What the lock looks like when a round starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// No live hold: anyone may take it.
    Free,
    /// Held by readers: only readers may join.
    Reading,
}

/// What the round has granted so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    Free { granted: bool },
    Reading { granted: bool },
    Writing(Vec<u8>),
}

pub struct RwPolicy;

impl Policy for RwPolicy {
    type Request = Request;
    type View = Open;
    type Round = Round;
    type Grant = Access;

    fn start(view: Open) -> Round {
        match view {
            Open::Free => Round::Free { granted: false },
            Open::Reading => Round::Reading { granted: false },
        }
    }

    fn admit(round: &Round, owner: &[u8], req: &Request) -> Option<Access> {
        match (round, req.access) {
            (Round::Free { .. }, a) => Some(a),
            (Round::Reading { .. }, Access::Read) => Some(Access::Read),
            (Round::Reading { .. }, Access::Write) => None,
            (Round::Writing(w), a) => (w.as_slice() == owner).then_some(a),
        }
    }

    fn granted(round: &mut Round, owner: &[u8], grant: Access) {
        match (&*round, grant) {
            (Round::Writing(_), _) => {}
            (_, Access::Write) => *round = Round::Writing(owner.to_vec()),
            (_, Access::Read) => *round = Round::Reading { granted: true },
        }
    }

    fn any_granted(round: &Round) -> bool {
        match round {
            Round::Free { granted } | Round::Reading { granted } => *granted,
            Round::Writing(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::wait::policy::{round, Head, Step};

    const R: Request = Request { lease_ms: 10, fence: false, access: Access::Read };
    const W: Request = Request { lease_ms: 10, fence: false, access: Access::Write };

    fn h<'a>(owner: &'a [u8], req: &'a Request) -> Head<'a, Request> {
        Head { owner, req, turn_until: None, deadline: None }
    }

    #[test]
    fn readers_are_batched_up_to_the_first_writer() {
        let line = [h(b"a", &R), h(b"b", &R), h(b"c", &R), h(b"w", &W), h(b"d", &R)];
        let (_, steps) = round::<RwPolicy>(Open::Free, &line, None, 0);
        assert_eq!(steps, vec![Step::Grant(Access::Read); 3]);
    }

    #[test]
    fn a_writer_at_the_head_goes_alone_and_is_not_overtaken() {
        let line = [h(b"w", &W), h(b"a", &R), h(b"x", &W)];
        assert_eq!(round::<RwPolicy>(Open::Free, &line, None, 0).1, vec![Step::Grant(Access::Write)]);
        // Readers hold it: the writer waits, and so does every reader behind it.
        assert_eq!(round::<RwPolicy>(Open::Reading, &line, None, 0).1, vec![]);
        let line = [h(b"a", &R), h(b"w", &W)];
        assert_eq!(round::<RwPolicy>(Open::Reading, &line, None, 0).1, vec![Step::Grant(Access::Read)]);
    }

    #[test]
    fn the_writers_own_requests_follow_it() {
        let line = [h(b"w", &W), h(b"w", &R), h(b"w", &W), h(b"a", &R)];
        let (_, steps) = round::<RwPolicy>(Open::Free, &line, None, 0);
        assert_eq!(
            steps,
            vec![Step::Grant(Access::Write), Step::Grant(Access::Read), Step::Grant(Access::Write)]
        );
    }
}
