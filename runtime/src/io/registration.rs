//! A `mio` source registered with the current runtime's I/O driver, and
//! the readiness loop every socket operation runs (README.md, R3-R4).

use std::fmt;
use std::io;
use std::task::{Context, Poll};

use magpie_core::sync::Arc;
use mio::event::Source;
use mio::Interest;

use super::driver::IoDriver;
use super::scheduled_io::{Direction, ReadyEvent, ScheduledIo};
use super::table::shutdown_error;
use crate::rt::coop;

/// A source and its registration. Dropping it deregisters the source (T3)
/// and then closes it.
pub(crate) struct PollEvented<S: Source> {
    io: Option<S>,
    token: usize,
    shared: Arc<ScheduledIo>,
    driver: std::sync::Arc<IoDriver>,
}

impl<S: Source> PollEvented<S> {
    /// Registers `io` for reading and writing with the current runtime's
    /// driver. Fails outside a runtime, or when the runtime shut down.
    pub(crate) fn new(io: S) -> io::Result<Self> {
        Self::new_with_interest(io, Interest::READABLE | Interest::WRITABLE)
    }

    pub(crate) fn new_with_interest(mut io: S, interest: Interest) -> io::Result<Self> {
        let driver = super::current_driver()?;
        let (token, shared) = driver.register(&mut io, interest)?;
        Ok(Self {
            io: Some(io),
            token,
            shared,
            driver,
        })
    }

    /// The source.
    #[inline]
    pub(crate) fn get_ref(&self) -> &S {
        self.io.as_ref().expect("the source is present until drop")
    }

    /// Waits until the source is ready in `dir` (or closed, or errored).
    /// Spends one unit of the task's cooperative budget when ready.
    pub(crate) fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        let spent = std::task::ready!(coop::poll_proceed(cx));
        match self.shared.poll_ready(cx, dir) {
            Poll::Ready(ev) if ScheduledIo::is_shutdown(&ev) => Poll::Ready(Err(shutdown_error())),
            Poll::Ready(ev) => Poll::Ready(Ok(ev)),
            Poll::Pending => {
                spent.refund();
                Poll::Pending
            }
        }
    }

    /// Waits until the source may be ready in `dir` (tokio's `readable` /
    /// `writable`).
    pub(crate) async fn ready(&self, dir: Direction) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_ready(cx, dir))
            .await
            .map(|_| ())
    }

    /// The readiness loop: wait for `dir`, run `f`; on `WouldBlock` clear
    /// the readiness that was observed (R3) and wait again.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut f: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let ev = std::task::ready!(self.poll_ready(cx, dir))?;
            match f(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.shared.clear_readiness(ev);
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// `f` once, without waiting: `WouldBlock` if the source is not ready
    /// (and its readiness is cleared, so the next wait really waits).
    pub(crate) fn try_io<R>(
        &self,
        dir: Direction,
        f: impl FnOnce(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        let ev = self.shared.ready_event(dir);
        if ScheduledIo::is_shutdown(&ev) {
            return Err(shutdown_error());
        }
        if ev.ready.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let r = f(self.get_ref());
        if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.shared.clear_readiness(ev);
        }
        r
    }

    /// R3 for a readiness observed through [`PollEvented::poll_ready`].
    pub(crate) fn clear_readiness(&self, ev: ReadyEvent) {
        self.shared.clear_readiness(ev);
    }
}

impl<S: Source> Drop for PollEvented<S> {
    fn drop(&mut self) {
        if let Some(mut io) = self.io.take() {
            // Errors here (the driver's poller already gone) leave nothing
            // to undo: closing the source removes it from the kernel's set.
            let _ = self.driver.deregister(&mut io, self.token);
        }
    }
}

impl<S: Source + fmt::Debug> fmt::Debug for PollEvented<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollEvented")
            .field("io", &self.io)
            .field("token", &self.token)
            .finish()
    }
}
