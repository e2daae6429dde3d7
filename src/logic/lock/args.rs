//! Argument parsing for the plain lock's LOCK.* commands.
//!
//! Pure: works on byte slices, knows nothing about Redis, so it can be unit-tested and fuzzed
//! without a server. Every failure is an [`Error`] whose text is the Redis error reply.

use crate::logic::args::{parse_i64, LEASE, TIMEOUT};
use crate::logic::error::Error;

fn lease(b: &[u8]) -> Result<i64, Error> {
    match parse_i64(b) {
        None => Err(Error::NotInteger(LEASE)),
        Some(v) if v <= 0 => Err(Error::NotPositive(LEASE)),
        Some(v) => Ok(v),
    }
}

fn owner(b: &[u8]) -> Result<&[u8], Error> {
    if b.is_empty() {
        Err(Error::EmptyOwner)
    } else {
        Ok(b)
    }
}

/// `LOCK.ACQUIRE key owner lease-ms [WAIT timeout-ms] [FENCE]` (argv without the command name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireArgs<'a> {
    pub owner: &'a [u8],
    pub lease_ms: i64,
    /// `Some(0)` waits without limit.
    pub wait_ms: Option<i64>,
    /// Issue a fencing token and reply with the `[pttl, token]` array.
    pub fence: bool,
}

pub fn acquire<'a>(argv: &[&'a [u8]]) -> Result<AcquireArgs<'a>, Error> {
    let [_key, own, lease_b, options @ ..] = argv else {
        return Err(Error::Arity);
    };
    let owner = owner(own)?;
    let lease_ms = lease(lease_b)?;
    let mut wait_ms = None;
    let mut fence = false;
    let mut rest = options;
    while let Some((opt, tail)) = rest.split_first() {
        rest = tail;
        if opt.eq_ignore_ascii_case(b"FENCE") && !fence {
            fence = true;
            continue;
        }
        if !opt.eq_ignore_ascii_case(b"WAIT") || wait_ms.is_some() {
            return Err(Error::Syntax);
        }
        let Some((value, tail)) = rest.split_first() else {
            return Err(Error::Syntax);
        };
        let v = parse_i64(value).ok_or(Error::NotInteger(TIMEOUT))?;
        if v < 0 {
            return Err(Error::Negative(TIMEOUT));
        }
        wait_ms = Some(v);
        rest = tail;
    }
    Ok(AcquireArgs { owner, lease_ms, wait_ms, fence })
}

/// `LOCK.RELEASE key owner [lease-ms]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseArgs<'a> {
    pub owner: &'a [u8],
    pub lease_ms: Option<i64>,
}

pub fn release<'a>(argv: &[&'a [u8]]) -> Result<ReleaseArgs<'a>, Error> {
    match argv {
        [_key, own] => Ok(ReleaseArgs { owner: owner(own)?, lease_ms: None }),
        [_key, own, l] => Ok(ReleaseArgs { owner: owner(own)?, lease_ms: Some(lease(l)?) }),
        [_, _, _, ..] => Err(Error::Syntax),
        _ => Err(Error::Arity),
    }
}

/// `LOCK.RENEW key owner lease-ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewArgs<'a> {
    pub owner: &'a [u8],
    pub lease_ms: i64,
}

pub fn renew<'a>(argv: &[&'a [u8]]) -> Result<RenewArgs<'a>, Error> {
    match argv {
        [_key, own, l] => Ok(RenewArgs { owner: owner(own)?, lease_ms: lease(l)? }),
        _ => Err(Error::Arity),
    }
}

/// `LOCK.FORCERELEASE key` and `LOCK.INFO key`.
pub fn key_only(argv: &[&[u8]]) -> Result<(), Error> {
    match argv {
        [_key] => Ok(()),
        _ => Err(Error::Arity),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_forms() {
        let a = acquire(&[b"k", b"me", b"100"]).unwrap();
        assert_eq!(a, AcquireArgs { owner: b"me", lease_ms: 100, wait_ms: None, fence: false });
        let a = acquire(&[b"k", b"me", b"100", b"fence"]).unwrap();
        assert_eq!(a, AcquireArgs { owner: b"me", lease_ms: 100, wait_ms: None, fence: true });
        let a = acquire(&[b"k", b"me", b"100", b"FENCE", b"WAIT", b"7"]).unwrap();
        assert_eq!((a.wait_ms, a.fence), (Some(7), true));
        let a = acquire(&[b"k", b"me", b"100", b"WAIT", b"7", b"Fence"]).unwrap();
        assert_eq!((a.wait_ms, a.fence), (Some(7), true));
        let a = acquire(&[b"k", b"me", b"100", b"wait", b"0"]).unwrap();
        assert_eq!(a.wait_ms, Some(0));
        let a = acquire(&[b"k", b"me", b"100", b"WAIT", b"250"]).unwrap();
        assert_eq!(a.wait_ms, Some(250));
    }

    #[test]
    fn acquire_errors() {
        assert_eq!(acquire(&[b"k", b"me"]), Err(Error::Arity));
        assert_eq!(acquire(&[b"k", b"", b"1"]), Err(Error::EmptyOwner));
        assert_eq!(acquire(&[b"k", b"me", b"x"]), Err(Error::NotInteger(LEASE)));
        assert_eq!(acquire(&[b"k", b"me", b"0"]), Err(Error::NotPositive(LEASE)));
        assert_eq!(acquire(&[b"k", b"me", b"-5"]), Err(Error::NotPositive(LEASE)));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"NOPE", b"1"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"1", b"WAIT", b"1"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"-1"]), Err(Error::Negative(TIMEOUT)));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"z"]), Err(Error::NotInteger(TIMEOUT)));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"FENCE", b"FENCE"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"FENCE", b"WAIT"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"FENCE"]), Err(Error::NotInteger(TIMEOUT)));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"FENCES"]), Err(Error::Syntax));
    }

    #[test]
    fn release_renew_key_only() {
        assert_eq!(release(&[b"k", b"o"]).unwrap().lease_ms, None);
        assert_eq!(release(&[b"k", b"o", b"5"]).unwrap().lease_ms, Some(5));
        assert_eq!(release(&[b"k"]), Err(Error::Arity));
        assert_eq!(release(&[b"k", b"o", b"5", b"6"]), Err(Error::Syntax));
        assert_eq!(release(&[b"k", b"o", b"0"]), Err(Error::NotPositive(LEASE)));
        assert_eq!(renew(&[b"k", b"o", b"5"]).unwrap().lease_ms, 5);
        assert_eq!(renew(&[b"k", b"o"]), Err(Error::Arity));
        assert_eq!(renew(&[b"k", b"", b"5"]), Err(Error::EmptyOwner));
        assert!(key_only(&[b"k"]).is_ok());
        assert_eq!(key_only(&[b"k", b"x"]), Err(Error::Arity));
    }
}
