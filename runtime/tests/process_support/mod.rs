//! A process made of closures, for the process tests.
#![allow(dead_code)]

use magpie_core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use magpie_runtime::process::{Events, InitError, Process, StepOutput};

/// The step function of a [`Script`].
pub type StepFn<M> = Box<dyn FnMut(Events<'_, M>, &mut StepOutput<'_, M>) + Send>;

/// A process whose step is a closure; `close` bumps `closes` and runs
/// `on_close`.
pub struct Script<M: Send + 'static> {
    pub step: StepFn<M>,
    pub closes: Arc<AtomicUsize>,
    pub on_close: Option<Box<dyn FnMut() + Send>>,
}

impl<M: Send + 'static> Script<M> {
    pub fn new(step: impl FnMut(Events<'_, M>, &mut StepOutput<'_, M>) + Send + 'static) -> Self {
        Self {
            step: Box::new(step),
            closes: Arc::new(AtomicUsize::new(0)),
            on_close: None,
        }
    }

    pub fn on_close(mut self, f: impl FnMut() + Send + 'static) -> Self {
        self.on_close = Some(Box::new(f));
        self
    }

    pub fn closes(&self) -> Arc<AtomicUsize> {
        self.closes.clone()
    }
}

impl<M: Send + 'static> Process<M> for Script<M> {
    fn init(&mut self, method: &str, _input: Option<M>) -> Result<(), InitError> {
        match method {
            "main" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: Events<'_, M>, out: &mut StepOutput<'_, M>) {
        (self.step)(events, out)
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
        if let Some(f) = self.on_close.as_mut() {
            f();
        }
    }
}

/// Waits (generously) until `cond` holds; panics after 20 s: a hang
/// detector, not a timing assertion.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Shutdown timeout for tests whose processes all answer Cancel.
pub const GRACE: Duration = Duration::from_secs(10);
