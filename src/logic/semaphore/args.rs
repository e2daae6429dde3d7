//! Argument parsing of the LOCK.SEM* commands (argv without the command name).
//!
//! Pure: works on byte slices, knows nothing about Redis, so it can be unit-tested and fuzzed
//! without a server. Every failure is an [`Error`] whose text is the Redis error reply, and is
//! found before anything is written.

use crate::logic::args::{parse_i64, LEASE, TIMEOUT};
use crate::logic::error::Error;

pub const PERMITS: &str = "permits";
pub const NUMIDS: &str = "numids";

/// The most permits a semaphore may have in total, and the most one call may take: Lua's
/// integers (doubles) are exact up to 2^53, and Redisson's scripts compute through them.
pub const MAX_PERMITS: i64 = (1 << 53) - 1;

/// The most ids one call may name (an acquire takes one permit per id).
pub const MAX_IDS: usize = 100_000;

/// `LOCK.SEMSET key permits [NX]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetArgs {
    pub permits: i64,
    pub nx: bool,
}

pub fn set(argv: &[&[u8]]) -> Result<SetArgs, Error> {
    let [_key, permits, options @ ..] = argv else { return Err(Error::Arity) };
    let permits = count(permits, PERMITS, 0)?;
    let nx = match options {
        [] => false,
        [o] if o.eq_ignore_ascii_case(b"NX") => true,
        _ => return Err(Error::Syntax),
    };
    Ok(SetArgs { permits, nx })
}

/// `LOCK.SEMACQUIRE key lease-ms numids id [id ...] [WAIT timeout-ms]`: the ids are
/// `argv[3..3 + numids]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireArgs<'a> {
    /// 0: no lease.
    pub lease_ms: i64,
    pub ids: &'a [&'a [u8]],
    /// `Some(0)` waits without limit.
    pub wait_ms: Option<i64>,
}

pub fn acquire<'a>(argv: &'a [&'a [u8]]) -> Result<AcquireArgs<'a>, Error> {
    let [_key, lease_b, numids, rest @ ..] = argv else { return Err(Error::Arity) };
    let lease_ms = lease(lease_b)?;
    let n = usize::try_from(count(numids, NUMIDS, 1)?).map_err(|_| Error::SemNumIds)?;
    if n > rest.len() {
        return Err(Error::SemNumIds);
    }
    let (ids, options) = rest.split_at(n);
    let wait_ms = match options {
        [] => None,
        [w, t] if w.eq_ignore_ascii_case(b"WAIT") => Some(timeout(t)?),
        // More arguments than numids ids and no WAIT: the count is wrong.
        _ => return Err(Error::SemNumIds),
    };
    check_ids(ids)?;
    Ok(AcquireArgs { lease_ms, ids, wait_ms })
}

/// `LOCK.SEMRELEASE key id [id ...]`: the ids.
pub fn release<'a>(argv: &'a [&'a [u8]]) -> Result<&'a [&'a [u8]], Error> {
    let [_key, ids @ ..] = argv else { return Err(Error::Arity) };
    if ids.is_empty() {
        return Err(Error::Arity);
    }
    check_ids(ids)?;
    Ok(ids)
}

/// `LOCK.SEMRENEW key lease-ms id [id ...]`: the lease (0: no lease) and the ids.
pub fn renew<'a>(argv: &'a [&'a [u8]]) -> Result<(i64, &'a [&'a [u8]]), Error> {
    let [_key, lease_b, ids @ ..] = argv else { return Err(Error::Arity) };
    if ids.is_empty() {
        return Err(Error::Arity);
    }
    let lease_ms = lease(lease_b)?;
    check_ids(ids)?;
    Ok((lease_ms, ids))
}

/// A lease: 0 (none) or a positive number of ms.
fn lease(b: &[u8]) -> Result<i64, Error> {
    match parse_i64(b) {
        None => Err(Error::NotInteger(LEASE)),
        Some(v) if v < 0 => Err(Error::Negative(LEASE)),
        Some(v) => Ok(v),
    }
}

fn timeout(b: &[u8]) -> Result<i64, Error> {
    match parse_i64(b) {
        None => Err(Error::NotInteger(TIMEOUT)),
        Some(v) if v < 0 => Err(Error::Negative(TIMEOUT)),
        Some(v) => Ok(v),
    }
}

/// An integer in `min..=MAX_PERMITS`.
fn count(b: &[u8], name: &'static str, min: i64) -> Result<i64, Error> {
    match parse_i64(b) {
        None => Err(Error::NotInteger(name)),
        Some(v) if v < min && min > 0 => Err(Error::NotPositive(name)),
        Some(v) if v < min => Err(Error::Negative(name)),
        Some(v) if v > MAX_PERMITS => Err(Error::TooLarge(name)),
        Some(v) => Ok(v),
    }
}

/// Ids are not empty, not repeated, and at most [`MAX_IDS`].
fn check_ids(ids: &[&[u8]]) -> Result<(), Error> {
    if ids.len() > MAX_IDS {
        return Err(Error::TooLarge(NUMIDS));
    }
    if ids.iter().any(|id| id.is_empty()) {
        return Err(Error::SemEmptyId);
    }
    let repeated = if ids.len() <= 8 {
        ids.iter().enumerate().any(|(i, a)| ids.iter().skip(i + 1).any(|b| a == b))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        !ids.iter().all(|id| seen.insert(*id))
    };
    if repeated {
        return Err(Error::SemRepeatedId);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&'static str]) -> Vec<&'static [u8]> {
        s.iter().map(|x| x.as_bytes()).collect()
    }

    #[test]
    fn semset() {
        assert_eq!(set(&v(&["k", "4"])), Ok(SetArgs { permits: 4, nx: false }));
        assert_eq!(set(&v(&["k", "0", "nx"])), Ok(SetArgs { permits: 0, nx: true }));
        assert_eq!(set(&v(&["k", "-1"])), Err(Error::Negative(PERMITS)));
        assert_eq!(set(&v(&["k", "x"])), Err(Error::NotInteger(PERMITS)));
        assert_eq!(set(&v(&["k", "9007199254740992"])), Err(Error::TooLarge(PERMITS)));
        assert_eq!(set(&v(&["k", "1", "NX", "NX"])), Err(Error::Syntax));
        assert_eq!(set(&v(&["k", "1", "XX"])), Err(Error::Syntax));
        assert_eq!(set(&v(&["k"])), Err(Error::Arity));
    }

    #[test]
    fn semacquire() {
        let a = v(&["k", "100", "2", "a", "b"]);
        let got = acquire(&a).expect("ok");
        assert_eq!((got.lease_ms, got.ids.len(), got.wait_ms), (100, 2, None));
        let a = v(&["k", "0", "1", "WAIT", "wait", "500"]);
        let got = acquire(&a).expect("an id may be spelled WAIT");
        assert_eq!((got.ids, got.wait_ms), (&[&b"WAIT"[..]][..], Some(500)));
        for (args, e) in [
            (&["k", "100", "0", "a"][..], Error::NotPositive(NUMIDS)),
            (&["k", "100", "3", "a", "b"], Error::SemNumIds),
            (&["k", "100", "1", "a", "b"], Error::SemNumIds),
            (&["k", "100", "1", "a", "b", "c"], Error::SemNumIds),
            (&["k", "100", "1", "a", "NOWAIT", "1"], Error::SemNumIds),
            (&["k", "100", "2", "a", "a"], Error::SemRepeatedId),
            (&["k", "100", "1", ""], Error::SemEmptyId),
            (&["k", "-1", "1", "a"], Error::Negative(LEASE)),
            (&["k", "1.5", "1", "a"], Error::NotInteger(LEASE)),
            (&["k", "1", "x", "a"], Error::NotInteger(NUMIDS)),
            (&["k", "1", "1", "a", "WAIT", "-1"], Error::Negative(TIMEOUT)),
            (&["k", "1", "99999999999999999999", "a"], Error::NotInteger(NUMIDS)),
            (&["k", "1", "9007199254740991", "a"], Error::SemNumIds),
        ] {
            assert_eq!(acquire(&v(args)), Err(e), "{args:?}");
        }
        let many: Vec<Vec<u8>> = (0..20u8).map(|i| vec![b'x', i]).collect();
        let mut a: Vec<&[u8]> = vec![b"k", b"1", b"20"];
        a.extend(many.iter().map(Vec::as_slice));
        assert!(acquire(&a).is_ok());
        a[22] = b"x\x00";
        assert_eq!(acquire(&a), Err(Error::SemRepeatedId));
    }

    #[test]
    fn semrelease_and_semrenew() {
        let a = v(&["k", "a", "b"]);
        assert_eq!(release(&a).map(<[_]>::len), Ok(2));
        assert_eq!(release(&v(&["k"])), Err(Error::Arity));
        assert_eq!(release(&v(&["k", "a", "a"])), Err(Error::SemRepeatedId));
        let a = v(&["k", "0", "a"]);
        assert_eq!(renew(&a).map(|(l, ids)| (l, ids.len())), Ok((0, 1)));
        assert_eq!(renew(&v(&["k", "5"])), Err(Error::Arity));
        assert_eq!(renew(&v(&["k", "x", "a"])), Err(Error::NotInteger(LEASE)));
    }
}
