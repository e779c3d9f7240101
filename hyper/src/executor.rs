//! `MagpieExecutor`: hyper's `Executor` on magpie's spawn.

use std::future::Future;

use magpie_runtime::Handle;

/// Spawns the futures hyper hands it (HTTP/2 connection and stream tasks,
/// hyper-util's pool tasks) as magpie tasks, detached: hyper never joins
/// them, it talks to them through its own channels.
///
/// - [`MagpieExecutor::new`] spawns on whichever magpie runtime is current
///   where hyper calls `execute` (hyper calls it from inside the connection
///   future, which runs as a magpie task). It panics there if there is none.
/// - [`MagpieExecutor::with_handle`] always spawns on the given runtime,
///   from any thread.
#[derive(Clone, Debug, Default)]
pub struct MagpieExecutor {
    handle: Option<Handle>,
}

impl MagpieExecutor {
    /// An executor that spawns on the runtime current at each `execute`.
    pub fn new() -> MagpieExecutor {
        MagpieExecutor { handle: None }
    }

    /// An executor that spawns on `handle`'s runtime, from any thread.
    pub fn with_handle(handle: Handle) -> MagpieExecutor {
        MagpieExecutor {
            handle: Some(handle),
        }
    }
}

impl<F> hyper::rt::Executor<F> for MagpieExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        // Dropping the JoinHandle detaches the task; it runs to completion.
        match &self.handle {
            Some(handle) => drop(handle.spawn(future)),
            None => drop(magpie_runtime::spawn(future)),
        }
    }
}
