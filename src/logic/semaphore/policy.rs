//! The semaphore's grant policy: one FIFO line per semaphore. The head takes its permits when
//! that many are available (all or none), then the next head from what is left, and so on; a
//! head that needs more than is left stops the round, so a large request is never overtaken by
//! smaller ones behind it.
//!
//! A waiter's ids travel as its "owner" bytes (the waiting core keeps and counts one byte
//! string per waiter): each id prefixed by its length, see [`encode_ids`].

use crate::logic::wait::policy::Policy;

/// What a blocked `LOCK.SEMACQUIRE ... WAIT` asked for (its ids are its owner bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// How many permits (one per id).
    pub n: i64,
    /// 0: no lease.
    pub lease_ms: i64,
}

/// What the round has left and whether it granted anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    pub left: i64,
    pub granted: bool,
}

pub struct SemPolicy;

impl Policy for SemPolicy {
    type Request = Request;
    /// The available permits when the round starts.
    type View = i64;
    type Round = Round;
    /// The permits granted.
    type Grant = i64;

    fn start(available: i64) -> Round {
        Round { left: available, granted: false }
    }

    fn admit(round: &Round, _owner: &[u8], req: &Request) -> Option<i64> {
        (req.n >= 1 && round.left >= req.n).then_some(req.n)
    }

    fn granted(round: &mut Round, _owner: &[u8], n: i64) {
        round.left = round.left.saturating_sub(n);
        round.granted = true;
    }

    fn any_granted(round: &Round) -> bool {
        round.granted
    }
}

/// The ids of a waiter as one byte string: each id as its length (4 bytes, little endian)
/// followed by its bytes.
pub fn encode_ids<'a>(ids: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for id in ids {
        let len = u32::try_from(id.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(id.get(..len as usize).unwrap_or(id));
    }
    out
}

/// The ids [`encode_ids`] wrote; a malformed tail is dropped.
pub fn decode_ids(mut b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((len, rest)) = b.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        let Some((id, rest)) = rest.split_at_checked(len) else { break };
        out.push(id);
        b = rest;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::wait::policy::{round, Head, Step};

    fn waiter(req: &Request) -> Head<'_, Request> {
        Head { owner: b"ids", req, turn_until: None, deadline: None }
    }

    #[test]
    fn heads_are_served_in_order_and_a_large_head_blocks_the_line() {
        let (three, one, two) =
            (Request { n: 3, lease_ms: 0 }, Request { n: 1, lease_ms: 0 }, Request { n: 2, lease_ms: 0 });
        let line = [waiter(&one), waiter(&three), waiter(&one)];
        assert_eq!(
            round::<SemPolicy>(2, &line, None, 0).1,
            vec![Step::Grant(1)],
            "3 does not fit in the 1 left"
        );
        let line = [waiter(&two), waiter(&one), waiter(&one)];
        assert_eq!(
            round::<SemPolicy>(4, &line, None, 0).1,
            vec![Step::Grant(2), Step::Grant(1), Step::Grant(1)]
        );
        assert_eq!(round::<SemPolicy>(0, &line, None, 0).1, vec![]);
        assert_eq!(round::<SemPolicy>(-5, &line, None, 0).1, vec![]);
    }

    #[test]
    fn ids_round_trip() {
        let ids: [&[u8]; 4] = [b"a", b"", b"\x00\xff\x00", &[7u8; 300]];
        let enc = encode_ids(ids.iter().copied());
        assert_eq!(decode_ids(&enc), ids.to_vec());
        assert_eq!(decode_ids(&enc[..enc.len() - 1]), ids[..3].to_vec());
        assert!(decode_ids(b"\x05\x00\x00").is_empty());
    }
}
