//! Model test: random single-threaded sequences of push, pop, steal,
//! overflow and global fetch on two local queues and an inject queue, checked
//! step by step against `VecDeque`s (order, contents, lengths, free slots).
#![cfg(not(loom))]

use std::collections::VecDeque;

use magpie_core::queue::{self, Inject, Local, Steal, LOCAL_QUEUE_CAPACITY, MAX_GLOBAL_BATCH};
use proptest::prelude::*;
use proptest::test_runner::Config;

const CAP: usize = LOCAL_QUEUE_CAPACITY;
const HALF: usize = CAP / 2;

#[derive(Debug, Clone)]
enum Op {
    /// Push `count` new tasks onto queue `side` (overflowing when full).
    Push { side: usize, count: usize },
    /// Pop once from queue `side`.
    Pop { side: usize },
    /// Steal from queue `from` into the other one.
    Steal { from: usize },
    /// Push `count` new tasks to the inject queue, one by one or as a batch.
    Inject { count: usize, batch: bool },
    /// Fetch a fair-share batch from the inject queue into queue `side`.
    Fetch { side: usize, workers: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let side = 0..2usize;
    prop_oneof![
        6 => (side.clone(), 1..4usize).prop_map(|(side, count)| Op::Push { side, count }),
        // Big bursts reach "full" and exercise overflow.
        1 => (side.clone(), 1..CAP + 40).prop_map(|(side, count)| Op::Push { side, count }),
        5 => side.clone().prop_map(|side| Op::Pop { side }),
        2 => side.clone().prop_map(|from| Op::Steal { from }),
        1 => (1..100usize, any::<bool>()).prop_map(|(count, batch)| Op::Inject { count, batch }),
        2 => (side, 0..6usize).prop_map(|(side, workers)| Op::Fetch { side, workers }),
    ]
}

/// The queues under test and their models.
struct Harness {
    locals: [Local<u32>; 2],
    steals: [Steal<u32>; 2],
    inject: Inject<u32>,
    model: [VecDeque<u32>; 2],
    model_inject: VecDeque<u32>,
    next_id: u32,
}

impl Harness {
    fn new() -> Self {
        let (a, sa) = queue::local();
        let (b, sb) = queue::local();
        Harness {
            locals: [a, b],
            steals: [sa, sb],
            inject: Inject::new(),
            model: [VecDeque::new(), VecDeque::new()],
            model_inject: VecDeque::new(),
            next_id: 0,
        }
    }

    fn fresh(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id - 1
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Push { side, count } => {
                for _ in 0..count {
                    let task = self.fresh();
                    let moved = self.locals[side].push_back_or_overflow(task, &self.inject);
                    let model = &mut self.model[side];
                    if model.len() < CAP {
                        model.push_back(task);
                        assert_eq!(moved, 0, "push with room must stay local");
                    } else {
                        self.model_inject.extend(model.drain(..HALF));
                        self.model_inject.push_back(task);
                        assert_eq!(moved, HALF + 1, "overflow moves half plus the task");
                    }
                }
            }
            Op::Pop { side } => {
                assert_eq!(self.locals[side].pop(), self.model[side].pop_front());
            }
            Op::Steal { from } => {
                let to = 1 - from;
                let (src, dst) = (&self.steals[from], &mut self.locals[to]);
                let got = src.steal_into(dst);
                let expected = if self.model[to].len() > HALF || self.model[from].is_empty() {
                    None
                } else {
                    let len = self.model[from].len();
                    let n = len - len / 2;
                    let mut run: VecDeque<u32> = self.model[from].drain(..n).collect();
                    let first = run.pop_front();
                    self.model[to].extend(run);
                    first
                };
                assert_eq!(got, expected);
            }
            Op::Inject { count, batch } => {
                let tasks: Vec<u32> = (0..count).map(|_| self.fresh()).collect();
                self.model_inject.extend(tasks.iter().copied());
                if batch {
                    self.inject.push_batch(tasks).unwrap();
                } else {
                    for task in tasks {
                        self.inject.push(task).unwrap();
                    }
                }
            }
            Op::Fetch { side, workers } => {
                let got = self.inject.pop_batch_into(&mut self.locals[side], workers);
                let len = self.model_inject.len();
                let free = CAP - self.model[side].len();
                let expected = if len == 0 {
                    None
                } else {
                    let n = (len / workers.max(1) + 1)
                        .min(free + 1)
                        .min(MAX_GLOBAL_BATCH)
                        .min(len);
                    let first = self.model_inject.pop_front();
                    self.model[side].extend(self.model_inject.drain(..n - 1));
                    first
                };
                assert_eq!(got, expected);
            }
        }
        self.check_sizes();
    }

    fn check_sizes(&self) {
        for side in 0..2 {
            let len = self.model[side].len();
            assert_eq!(self.locals[side].len(), len);
            assert_eq!(self.steals[side].len(), len);
            assert_eq!(self.locals[side].is_empty(), len == 0);
            assert_eq!(self.locals[side].remaining_slots(), CAP - len);
        }
        assert_eq!(self.inject.len(), self.model_inject.len());
    }

    /// Drains everything and checks it against the models, in order.
    fn finish(mut self) {
        for side in 0..2 {
            let rest: Vec<u32> = core::iter::from_fn(|| self.locals[side].pop()).collect();
            assert_eq!(rest, Vec::from(std::mem::take(&mut self.model[side])));
        }
        assert_eq!(self.inject.drain(), Vec::from(self.model_inject));
    }
}

fn config() -> Config {
    Config {
        cases: if cfg!(miri) { 4 } else { 256 },
        // Miri runs isolated from the file system.
        failure_persistence: None,
        ..Config::default()
    }
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 1..if cfg!(miri) { 24 } else { 300 })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn queues_match_a_vecdeque_model(ops in ops()) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.apply(op);
        }
        harness.finish();
    }
}
