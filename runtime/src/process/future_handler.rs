//! Command handlers that run a command as a future on the async runtime
//! ([`future_handler`]): the bridge issue 15 asks for between processes and
//! futures. The process side sees an ordinary custom command; the async side
//! sees an ordinary spawned task.

use std::future::Future;

use super::{CommandError, Completer, Outcome, Pid, Request, Tag};
use crate::rt::Handle;

/// A command handler, for [`Builder::handler`](super::Builder::handler), that
/// runs each command as a future on `handle`'s async runtime: `f(input)` is
/// spawned there, and its output completes the process's yield.
///
/// The yield always completes, once:
/// - with the future's `Result` when it finishes;
/// - with [`CommandError::Failed`] when the future panics, or is dropped
///   unfinished (its runtime shut down, or it was never started because the
///   runtime was already shut down). A process blocked on the yield is never
///   left waiting for a task that is gone.
///
/// A completion for a process that has ended meanwhile is dropped, as any
/// late completion is.
///
/// ```
/// use magpie_runtime::process::{future_handler, Outcome, ProcessRuntime};
/// use magpie_runtime::Runtime;
///
/// let rt = Runtime::builder().worker_threads(1).build().unwrap();
/// let processes = ProcessRuntime::<u64>::builder()
///     .workers(1)
///     .handler(
///         "lookup",
///         future_handler(rt.handle().clone(), |key: u64| async move {
///             magpie_runtime::time::sleep(std::time::Duration::from_millis(1)).await;
///             Ok(Outcome::Value(Box::new(key * 2)))
///         }),
///     )
///     .build()
///     .unwrap();
/// # drop(processes);
/// ```
pub fn future_handler<M, F, Fut>(
    handle: Handle,
    f: F,
) -> impl Fn(Request<M>) + Send + Sync + 'static
where
    M: Send + 'static,
    F: Fn(M) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome<M>, CommandError>> + Send + 'static,
{
    move |req: Request<M>| {
        let Request {
            pid,
            tag,
            input,
            completer,
            ..
        } = req;
        let future = f(input);
        let mut pending = Pending {
            completer,
            pid,
            tag,
            done: false,
        };
        // The task is detached: its completion goes through the completer.
        drop(handle.spawn(async move {
            let result = future.await;
            pending.finish(result);
        }));
    }
}

/// The yield a spawned command owes: completed by [`Pending::finish`], or on
/// drop with an error (a panic in the future, or the task dropped
/// unfinished).
struct Pending<M: Send + 'static> {
    completer: Completer<M>,
    pid: Pid,
    tag: Tag,
    done: bool,
}

impl<M: Send + 'static> Pending<M> {
    fn finish(&mut self, result: Result<Outcome<M>, CommandError>) {
        self.done = true;
        // An ended process (or runtime) drops the completion, as for any
        // handler.
        let _ = self.completer.complete(self.pid, self.tag, result);
    }
}

impl<M: Send + 'static> Drop for Pending<M> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let why = if std::thread::panicking() {
            "the command's future panicked"
        } else {
            "the command's future was dropped unfinished (its runtime shut down)"
        };
        let _ = self
            .completer
            .complete(self.pid, self.tag, Err(CommandError::Failed(why.into())));
    }
}
