//! Components shared by the lanes tests.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use magpie_runtime::lanes::{
    Component, ComponentError, GraphContext, Input, Invocation, LaneRuntime, Output, PortDecl,
};

pub const OUT: Output<u64> = Output::new("out");
pub const IN: Input<u64> = Input::new("in");

/// A shared, ordered log of what ran: (component, epoch, invocation).
pub type Log = Arc<Mutex<Vec<(String, u64, usize)>>>;

/// What a relay saw: (epoch, input values).
pub type Seen = Arc<Mutex<Vec<(u64, Vec<u64>)>>>;

pub fn seen() -> Seen {
    Arc::new(Mutex::new(Vec::new()))
}

pub fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

pub fn names(log: &Log) -> Vec<String> {
    log.lock()
        .unwrap()
        .iter()
        .map(|(n, _, _)| n.clone())
        .collect()
}

pub fn runtime(workers: usize) -> LaneRuntime {
    LaneRuntime::new(workers).unwrap()
}

/// Publishes `epoch * 10 + invocation` on `out` each invocation; logs.
pub struct Source {
    pub log: Log,
    pub cost: Duration,
}

impl Component for Source {
    fn ports(&self) -> Vec<PortDecl> {
        vec![OUT.decl()]
    }

    fn execute(&mut self, inv: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        self.log
            .lock()
            .unwrap()
            .push((inv.name().to_string(), inv.epoch(), inv.index()));
        ctx.simulate_work(self.cost);
        ctx.publish(OUT, inv.epoch() * 10 + inv.index() as u64)
    }
}

/// Adds `add` to every input and publishes the sum of what it saw; logs the
/// inputs it saw into `seen`.
pub struct Relay {
    pub add: u64,
    pub log: Log,
    pub seen: Seen,
}

impl Component for Relay {
    fn ports(&self) -> Vec<PortDecl> {
        vec![IN.decl(), OUT.decl()]
    }

    fn execute(&mut self, inv: &Invocation, ctx: &mut GraphContext) -> Result<(), ComponentError> {
        self.log
            .lock()
            .unwrap()
            .push((inv.name().to_string(), inv.epoch(), inv.index()));
        let got: Vec<u64> = ctx.inputs(IN).copied().collect();
        self.seen.lock().unwrap().push((inv.epoch(), got.clone()));
        for v in got {
            ctx.publish(OUT, v + self.add)?;
        }
        Ok(())
    }
}

/// Only logs.
pub struct Noop {
    pub log: Log,
}

impl Component for Noop {
    fn execute(&mut self, inv: &Invocation, _: &mut GraphContext) -> Result<(), ComponentError> {
        self.log
            .lock()
            .unwrap()
            .push((inv.name().to_string(), inv.epoch(), inv.index()));
        Ok(())
    }
}
