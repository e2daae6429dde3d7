//! Lock state transitions, decided from what the command read from the key.
//!
//! Pure: the Redis glue reads the key (does it exist, is it a hash, the caller's hold count) into
//! a [`LockView`], asks one of these functions what to do, and applies the answer. Everything
//! that can refuse the command is decided here, before the glue writes anything.

/// What a command saw at the lock key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockView {
    /// No key: the lock is free.
    Free,
    /// A hash. `mine` is the caller's hold count if its field is present, already run through
    /// [`parse_count`].
    Hash { mine: Option<Result<i64, Error>> },
    /// Any other type.
    WrongType,
}

impl LockView {
    /// A hash seen through HEXISTS, as Redisson's renew scripts look at it: whether the caller's
    /// field is present, its count never read (a present field reads as one hold, so [`renew`]
    /// answers as the script does, also for a count that is not a number).
    pub fn field(present: bool) -> LockView {
        LockView::Hash { mine: present.then_some(Ok(1)) }
    }
}

use crate::logic::error::Error;

pub use crate::logic::args::parse_count;

fn my_count(mine: &Option<Result<i64, Error>>) -> Result<Option<i64>, Error> {
    match mine {
        None => Ok(None),
        Some(Ok(n)) => Ok(Some(*n)),
        Some(Err(e)) => Err(e.clone()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// Create the hash with `owner -> 1`.
    Create,
    /// Owner re-enters: the count becomes `new_count`.
    Reenter { new_count: i64 },
    /// Someone else holds it.
    Contended,
}

pub fn acquire(view: &LockView) -> Result<Acquire, Error> {
    match view {
        LockView::Free => Ok(Acquire::Create),
        LockView::WrongType => Err(Error::WrongType),
        LockView::Hash { mine } => match my_count(mine)? {
            None => Ok(Acquire::Contended),
            Some(n) => {
                n.checked_add(1).map(|new_count| Acquire::Reenter { new_count }).ok_or(Error::CorruptCount)
            }
        },
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// The caller does not hold the lock.
    NotOwner,
    /// Still held by the caller with `new_count` holds.
    Decrement { new_count: i64 },
    /// Last hold released: the lock becomes free (or passes to the next waiter).
    Free,
}

/// A count of 1 (or, as a Redisson unlock script reads HINCRBY's answer, anything <= 1) is the
/// last hold; a count that cannot be decremented is corrupt.
pub fn release(view: &LockView) -> Result<Release, Error> {
    match view {
        LockView::Free => Ok(Release::NotOwner),
        LockView::WrongType => Err(Error::WrongType),
        LockView::Hash { mine } => Ok(match my_count(mine)? {
            None => Release::NotOwner,
            Some(n) => match n.checked_sub(1).ok_or(Error::CorruptCount)? {
                left if left > 0 => Release::Decrement { new_count: left },
                _ => Release::Free,
            },
        }),
    }
}

/// `true` when the owner holds the lock and its lease should be reset.
pub fn renew(view: &LockView) -> Result<bool, Error> {
    match view {
        LockView::Free => Ok(false),
        LockView::WrongType => Err(Error::WrongType),
        LockView::Hash { mine } => Ok(my_count(mine)?.is_some()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(c: &str) -> LockView {
        LockView::Hash { mine: Some(parse_count(c.as_bytes())) }
    }
    const OTHER: LockView = LockView::Hash { mine: None };

    #[test]
    fn acquire_transitions() {
        assert_eq!(acquire(&LockView::Free), Ok(Acquire::Create));
        assert_eq!(acquire(&OTHER), Ok(Acquire::Contended));
        assert_eq!(acquire(&held("2")), Ok(Acquire::Reenter { new_count: 3 }));
        assert_eq!(acquire(&LockView::WrongType), Err(Error::WrongType));
        assert_eq!(acquire(&held("x")), Err(Error::CorruptCount));
        assert_eq!(acquire(&held("0")), Err(Error::CorruptCount));
        assert_eq!(acquire(&held("9223372036854775807")), Err(Error::CorruptCount));
    }

    #[test]
    fn release_transitions() {
        assert_eq!(release(&LockView::Free), Ok(Release::NotOwner));
        assert_eq!(release(&OTHER), Ok(Release::NotOwner));
        assert_eq!(release(&held("1")), Ok(Release::Free));
        assert_eq!(release(&held("5")), Ok(Release::Decrement { new_count: 4 }));
        assert_eq!(release(&held("-1")), Err(Error::CorruptCount));
        assert_eq!(release(&LockView::WrongType), Err(Error::WrongType));
        // Counts a script's HINCRBY accepts (LOCK.* views never hold them: parse_count).
        let raw = |n: i64| LockView::Hash { mine: Some(Ok(n)) };
        assert_eq!(release(&raw(0)), Ok(Release::Free));
        assert_eq!(release(&raw(-7)), Ok(Release::Free));
        assert_eq!(release(&raw(i64::MIN)), Err(Error::CorruptCount));
        assert_eq!(acquire(&raw(0)), Ok(Acquire::Reenter { new_count: 1 }));
    }

    #[test]
    fn renew_transitions() {
        assert_eq!(renew(&LockView::Free), Ok(false));
        assert_eq!(renew(&OTHER), Ok(false));
        assert_eq!(renew(&held("3")), Ok(true));
        assert_eq!(renew(&held("")), Err(Error::CorruptCount));
        assert_eq!((renew(&LockView::field(true)), renew(&LockView::field(false))), (Ok(true), Ok(false)));
        assert!(Error::WrongType.reply().starts_with("WRONGTYPE"));
    }
}
