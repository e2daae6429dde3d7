//! Every kind whose scripts run natively, in one list: their operations (the INFO order, the
//! per-operation counters, the filter's name objects) and their built-in rows. A new kind adds
//! its two lists here.

use crate::logic::latch::scripts as latch;
use crate::logic::lock::fair_scripts as fair;
use crate::logic::lock::scripts as lock;
use crate::logic::rwlock::scripts as rwlock;
use crate::logic::script_table::Table;
use crate::logic::scripts::{Layout, Object, Op, OpDef, OpId, Row};
use crate::logic::semaphore::scripts as semaphore;

/// Each kind's operations, in INFO order.
const OP_LISTS: [&[OpDef]; 5] = [&lock::OPS, &rwlock::OPS, &semaphore::OPS, &fair::OPS, &latch::OPS];

/// Each kind's built-in rows.
const ROW_LISTS: [&[Row]; 5] = [&lock::ROWS, &rwlock::ROWS, &semaphore::ROWS, &fair::ROWS, &latch::ROWS];

/// How many operations there are, over every kind.
pub const N_OPS: usize = {
    let mut n = 0;
    let mut lists: &[&[OpDef]] = &OP_LISTS;
    while let Some((first, rest)) = lists.split_first() {
        n += first.len();
        lists = rest;
    }
    n
};

/// Every operation of every kind; an [`OpId`] is an index into it.
pub static OPS: [OpDef; N_OPS] = {
    const NONE: OpDef =
        OpDef { op: Op { object: Object::Lock, code: u8::MAX }, name: "", layout: Layout::fixed(&[], &[]) };
    let mut out = [NONE; N_OPS];
    let mut i = 0;
    let mut lists: &[&[OpDef]] = &OP_LISTS;
    while let Some((first, rest)) = lists.split_first() {
        let mut ops: &[OpDef] = first;
        while let Some((op, more)) = ops.split_first() {
            #[allow(clippy::indexing_slicing, reason = "const evaluation: out of range fails the build")]
            {
                out[i] = *op;
            }
            i += 1;
            ops = more;
        }
        lists = rest;
    }
    out
};

pub fn op(id: OpId) -> Option<&'static OpDef> {
    OPS.get(id.0)
}

/// The built-in rows of every kind plus `extra` (`lock.redisson-extra-scripts`).
pub fn table(extra: &[u8]) -> Result<Table, String> {
    Table::new(&OPS, ROW_LISTS.iter().flat_map(|rows| rows.iter()), extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_names_a_listed_operation() {
        let rows: usize = ROW_LISTS.iter().map(|r| r.len()).sum();
        assert_eq!(table(b"").expect("built-in").entries().len(), rows);
        assert!(OPS.iter().all(|d| !d.name.is_empty()), "every slot filled");
        for (i, d) in OPS.iter().enumerate() {
            assert_eq!(
                OPS.iter().position(|x| x.op == d.op || x.name == d.name),
                Some(i),
                "{} unique",
                d.name
            );
        }
    }
}
