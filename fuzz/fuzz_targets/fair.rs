//! Fuzz the fair lock's decisions (`redis_lock::logic::lock::fair_plans`): every fair-lock
//! operation on an arbitrary call (arbitrary ARGV bytes in the operation's layout) over
//! arbitrary keys (lock view, PTTL, queue, deadlines with any doubles, latch). Checked: no
//! panic; a decided call has a reply; a deadline it writes (an enqueue, a lowered deadline) is
//! a whole number of at most 2^53 in magnitude; a call the non-reentrant lock refuses writes
//! only its purge; nothing is popped from an empty queue.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::kinds;
use redis_lock::logic::lock::fair_plans::decide;
use redis_lock::logic::lock::fair_queue::{FairAct, FairKeys, FairReply, EXACT};
use redis_lock::logic::lock::fair_scripts::{FairOp, OPS};
use redis_lock::logic::lock::state::LockView;
use redis_lock::logic::plan::Latch;
use redis_lock::logic::scripts::parse;

#[derive(Arbitrary, Debug)]
struct Input {
    op: u8,
    args: Vec<Vec<u8>>,
    lock: u8,
    count: i64,
    pttl: i64,
    queue: Vec<u8>,
    scores: Vec<(u8, f64)>,
    latch: Option<Option<i64>>,
    now: i64,
    args_checked: bool,
}

struct Model<'a> {
    i: &'a Input,
}

fn name(n: u8) -> Vec<u8> {
    vec![b'o', n % 5]
}

impl FairKeys for Model<'_> {
    fn lock(&mut self) -> LockView {
        match self.i.lock % 4 {
            0 => LockView::Free,
            1 => LockView::Hash { mine: None },
            2 => LockView::Hash { mine: Some(Ok(self.i.count)) },
            _ => LockView::WrongType,
        }
    }
    fn pttl(&mut self) -> i64 {
        self.i.pttl
    }
    fn queue_len(&mut self) -> usize {
        self.i.queue.len()
    }
    fn queue_at(&mut self, i: usize) -> Option<Vec<u8>> {
        self.i.queue.get(i).map(|n| name(*n))
    }
    fn deadline(&mut self, member: &[u8]) -> Option<f64> {
        self.i.scores.iter().find(|(n, _)| name(*n) == member).map(|(_, s)| *s)
    }
    fn deadlines(&mut self) -> Vec<(Vec<u8>, f64)> {
        self.i.scores.iter().map(|(n, s)| (name(*n), *s)).collect()
    }
    fn latch(&mut self) -> Latch {
        match self.i.latch {
            None => Latch::Absent,
            Some(v) => Latch::Value(v),
        }
    }
}

fuzz_target!(|input: Input| {
    let def = &OPS[usize::from(input.op) % OPS.len()];
    let Some(op) = FairOp::of(def.op) else { return };
    let n = def.layout.keys.len();
    let mut rest: Vec<Vec<u8>> = vec![n.to_string().into_bytes()];
    rest.extend((0..n).map(|k| format!("key{k}").into_bytes()));
    rest.extend(input.args.iter().take(def.layout.args.len()).cloned());
    let rest: Vec<&[u8]> = rest.iter().map(Vec::as_slice).collect();
    let Ok(call) =
        parse(&kinds::OPS[kinds::OPS.iter().position(|d| d.op == def.op).unwrap_or(0)].layout, &rest)
    else {
        return;
    };
    let Ok(f) = decide(op, &call, &mut Model { i: &input }, input.now, input.args_checked) else { return };
    assert!(f.reply.is_some());
    let pops = f.acts.iter().filter(|a| **a == FairAct::LPop).count();
    assert!(pops <= input.queue.len(), "popped more than the queue held");
    for a in &f.acts {
        if let FairAct::Enqueue(s) | FairAct::ZIncr(_, s) = a {
            assert!(s.fract() == 0.0 && s.abs() <= EXACT, "{s}");
        }
        if let FairAct::LowerAll { members, .. } = a {
            assert!(members.iter().all(|(_, s)| s.fract() == 0.0 && s.abs() <= EXACT));
        }
    }
    if let Some(FairReply::ErrorArg(_)) = f.reply {
        assert!(f.acts.iter().all(|a| matches!(a, FairAct::ZRem(_) | FairAct::LPop)), "{:?}", f.acts);
    }
});
