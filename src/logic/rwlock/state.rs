//! Read-write lock transitions, decided from what the command read of the hash.
//!
//! Pure, as the plain lock's `state.rs`: the glue reads the hash into an [`RwView`] (its mode,
//! the caller's read count and write count), asks one of these functions, and applies the
//! answer. Redisson's rules: readers share the lock, a writer holds it alone, the writer may also
//! take read holds (downgrade), a reader never becomes the writer (no upgrade); every read hold
//! has its own timeout key, so a read unlock looks at the holds that remain (see
//! [`after_read_drop`]).

use crate::logic::args::parse_count;
use crate::logic::error::Error;

/// The `mode` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

/// What a command saw at the lock key, for one owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RwView {
    /// No key.
    Free,
    /// Another type than a hash.
    WrongType,
    /// A hash without a `mode` field: a plain lock.
    NoMode,
    /// A `mode` that is neither `read` nor `write`.
    BadMode,
    /// A read-write lock: its mode, the caller's read count and write count (fields present,
    /// run through [`parse_count`]).
    Held { mode: Mode, read: Option<Result<i64, Error>>, write: Option<Result<i64, Error>> },
}

/// The mode field's value as a [`RwView`] needs it: `None` when the field is missing.
pub fn parse_mode(raw: Option<&[u8]>) -> Result<Option<Mode>, Error> {
    match raw {
        None => Ok(None),
        Some(b"read") => Ok(Some(Mode::Read)),
        Some(b"write") => Ok(Some(Mode::Write)),
        Some(_) => Err(Error::CorruptMode),
    }
}

/// A count field as read, `None` when absent.
pub fn count(raw: Option<&[u8]>) -> Option<Result<i64, Error>> {
    raw.map(parse_count)
}

fn known(c: &Option<Result<i64, Error>>) -> Result<Option<i64>, Error> {
    match c {
        None => Ok(None),
        Some(Ok(n)) => Ok(Some(*n)),
        Some(Err(e)) => Err(e.clone()),
    }
}

/// The hold an acquire takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Create the hash in this mode with the hold at count 1.
    Create,
    /// Add a hold: the caller's count becomes `count` (read: its timeout key `count` is set
    /// and the hash's TTL becomes max(PTTL, lease); write: the TTL becomes PTTL + lease).
    Add { count: i64 },
    /// Another owner holds the lock in a way this request cannot share.
    Contended,
    /// WRITE on a lock in read mode, the caller holding no read hold: contended while any
    /// read hold is alive (the glue looks at the timeout keys; none alive: the lock is free).
    ContendedByReaders,
    /// WRITE by an owner that holds read holds: Redisson replies the PTTL (no upgrade); with
    /// WAIT it would wait for itself.
    OwnReads,
}

fn add(n: Option<i64>) -> Result<Take, Error> {
    let count = n.unwrap_or(0).checked_add(1).ok_or(Error::CorruptCount)?;
    Ok(Take::Add { count })
}

/// A held lock's mode, the caller's read count and write count.
type Counts = (Mode, Option<i64>, Option<i64>);

fn held(view: &RwView) -> Result<Option<Counts>, Error> {
    match view {
        RwView::Free => Ok(None),
        RwView::WrongType => Err(Error::WrongType),
        RwView::NoMode => Err(Error::NotRwLock),
        RwView::BadMode => Err(Error::CorruptMode),
        RwView::Held { mode, read, write } => Ok(Some((*mode, known(read)?, known(write)?))),
    }
}

/// `READ`: a reader joins (or re-enters) unless another owner writes. `queued`: clients wait
/// on the key, so a new reader (not a re-entry, not the writer's own read) queues behind them.
pub fn acquire_read(view: &RwView, queued: bool) -> Result<Take, Error> {
    let Some((mode, read, write)) = held(view)? else { return Ok(Take::Create) };
    match (mode, read, write) {
        // Re-entry, and the writer's own read holds, are always immediate.
        (_, Some(n), _) => add(Some(n)),
        (Mode::Write, None, Some(_)) => add(None),
        (Mode::Read, None, _) if !queued => add(None),
        _ => Ok(Take::Contended),
    }
}

/// `WRITE`: the writer re-enters; anyone else waits for every hold to end.
pub fn acquire_write(view: &RwView) -> Result<Take, Error> {
    let Some((mode, read, write)) = held(view)? else { return Ok(Take::Create) };
    Ok(match (mode, read, write) {
        (Mode::Write, _, Some(n)) => add(Some(n))?,
        (Mode::Write, _, None) => Take::Contended,
        (Mode::Read, Some(_), _) => Take::OwnReads,
        (Mode::Read, None, _) => Take::ContendedByReaders,
    })
}

/// A read release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadRelease {
    /// The caller has no read hold (or there is no lock): nil.
    NotHeld,
    /// Drop hold number `old` (its timeout key); the caller keeps `old - 1` holds (0: its field
    /// goes). Then [`after_read_drop`].
    Drop { old: i64 },
}

pub fn release_read(view: &RwView) -> Result<ReadRelease, Error> {
    let Some((_, read, _)) = held(view)? else { return Ok(ReadRelease::NotHeld) };
    Ok(match read {
        None => ReadRelease::NotHeld,
        // A count <= 0 (only a script writes one) drops as the last.
        Some(old) => ReadRelease::Drop { old },
    })
}

/// What becomes of the lock once a read hold was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAfter {
    /// Other holds remain alive: the hash's TTL becomes the longest of their timeout keys' (ms).
    Rearm(i64),
    /// The writer keeps the lock (its own read hold went).
    KeepWriter,
    /// No live hold remains: the hash is deleted, the lock is free (reply 1).
    Free,
}

/// Redisson's rule after a read hold is dropped: `fields_left` is the hash's field count after
/// the drop (`mode` included), `longest` the largest PTTL over the timeout keys of every count
/// field that remains (-2 when none exists), `mode` the lock's mode.
pub fn after_read_drop(fields_left: usize, longest: i64, mode: Mode) -> ReadAfter {
    if fields_left > 1 {
        if longest > 0 {
            return ReadAfter::Rearm(longest);
        }
        if mode == Mode::Write {
            return ReadAfter::KeepWriter;
        }
    }
    ReadAfter::Free
}

/// A write release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteRelease {
    /// Not the writer (a free lock, a lock in read mode, another writer): nil.
    NotHeld,
    /// The writer keeps `count` holds: reply 0.
    Decrement { count: i64 },
    /// The writer's last hold: its field goes; the lock is free, or passes to read mode when
    /// fields remain (the writer's own read holds): reply 1.
    Last,
}

pub fn release_write(view: &RwView) -> Result<WriteRelease, Error> {
    let Some((mode, _, write)) = held(view)? else { return Ok(WriteRelease::NotHeld) };
    Ok(match (mode, write) {
        (Mode::Write, Some(n)) => match n.checked_sub(1).ok_or(Error::CorruptCount)? {
            left if left > 0 => WriteRelease::Decrement { count: left },
            _ => WriteRelease::Last,
        },
        _ => WriteRelease::NotHeld,
    })
}

/// `READ` renewal: `Some(count)` when the caller holds read holds (its `count` timeout keys and
/// the hash are renewed).
pub fn renew_read(view: &RwView) -> Result<Option<i64>, Error> {
    Ok(held(view)?.and_then(|(_, read, _)| read))
}

/// `WRITE` renewal: whether the caller is the writer.
pub fn renew_write(view: &RwView) -> Result<bool, Error> {
    Ok(held(view)?.is_some_and(|(mode, _, write)| mode == Mode::Write && write.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(mode: Mode, read: Option<&str>, write: Option<&str>) -> RwView {
        RwView::Held { mode, read: count(read.map(str::as_bytes)), write: count(write.map(str::as_bytes)) }
    }

    #[test]
    fn readers_share_writers_exclude() {
        use Mode::*;
        assert_eq!(acquire_read(&RwView::Free, true), Ok(Take::Create));
        assert_eq!(acquire_read(&v(Read, None, None), false), Ok(Take::Add { count: 1 }));
        assert_eq!(acquire_read(&v(Read, None, None), true), Ok(Take::Contended));
        assert_eq!(acquire_read(&v(Read, Some("2"), None), true), Ok(Take::Add { count: 3 }));
        assert_eq!(acquire_read(&v(Write, None, None), false), Ok(Take::Contended));
        assert_eq!(acquire_read(&v(Write, None, Some("1")), true), Ok(Take::Add { count: 1 }), "downgrade");
        assert_eq!(acquire_write(&RwView::Free), Ok(Take::Create));
        assert_eq!(acquire_write(&v(Write, None, Some("2"))), Ok(Take::Add { count: 3 }));
        assert_eq!(acquire_write(&v(Write, Some("1"), None)), Ok(Take::Contended));
        assert_eq!(acquire_write(&v(Read, Some("1"), None)), Ok(Take::OwnReads));
        assert_eq!(acquire_write(&v(Read, None, None)), Ok(Take::ContendedByReaders));
    }

    #[test]
    fn bad_hashes_are_refused() {
        assert_eq!(acquire_read(&RwView::NoMode, false), Err(Error::NotRwLock));
        assert_eq!(acquire_write(&RwView::BadMode), Err(Error::CorruptMode));
        assert_eq!(release_read(&RwView::WrongType), Err(Error::WrongType));
        assert_eq!(acquire_read(&v(Mode::Read, Some("x"), None), false), Err(Error::CorruptCount));
        assert_eq!(
            acquire_write(&v(Mode::Write, None, Some("9223372036854775807"))),
            Err(Error::CorruptCount)
        );
        assert_eq!(parse_mode(Some(b"READ")), Err(Error::CorruptMode));
        assert_eq!(parse_mode(Some(b"write")), Ok(Some(Mode::Write)));
    }

    #[test]
    fn releases() {
        use Mode::*;
        assert_eq!(release_read(&RwView::Free), Ok(ReadRelease::NotHeld));
        assert_eq!(release_read(&v(Read, None, None)), Ok(ReadRelease::NotHeld));
        assert_eq!(release_read(&v(Read, Some("2"), None)), Ok(ReadRelease::Drop { old: 2 }));
        assert_eq!(after_read_drop(3, 500, Read), ReadAfter::Rearm(500));
        assert_eq!(after_read_drop(3, -2, Read), ReadAfter::Free, "every other hold expired");
        assert_eq!(after_read_drop(2, -2, Write), ReadAfter::KeepWriter);
        assert_eq!(after_read_drop(1, -2, Read), ReadAfter::Free);
        assert_eq!(release_write(&v(Read, Some("1"), None)), Ok(WriteRelease::NotHeld));
        assert_eq!(release_write(&v(Write, None, Some("3"))), Ok(WriteRelease::Decrement { count: 2 }));
        assert_eq!(release_write(&v(Write, None, Some("1"))), Ok(WriteRelease::Last));
        assert_eq!(release_write(&v(Write, None, None)), Ok(WriteRelease::NotHeld));
        assert_eq!(renew_read(&v(Read, Some("4"), None)), Ok(Some(4)));
        assert_eq!(renew_read(&RwView::Free), Ok(None));
        assert_eq!(renew_write(&v(Write, None, Some("1"))), Ok(true));
        assert_eq!(renew_write(&v(Read, None, Some("1"))), Ok(false));
    }
}
