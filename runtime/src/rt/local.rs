//! [`LocalSet`] and [`spawn_local`]: futures that are not `Send`, run only on
//! the thread that runs their set (README, "LocalSet").
//!
//! magpie-core's task cells require `Send` futures (a `Notified` may be run
//! by any worker), so local tasks are kept here, in safe code: boxed futures
//! in a map owned by the set (`Rc`, so the set cannot leave its thread), and
//! one queue of woken task ids behind a mutex. Their wakers are `Send`: a
//! wake from any thread pushes the id and wakes whoever polls the set; the
//! future itself is only ever polled, and dropped, on the set's thread.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use magpie_core::sync::atomic::{AtomicBool, Ordering};
use magpie_core::task::{JoinError, TaskId};

use super::Runtime;
use crate::rt::coop;

/// Local tasks a set polls before it yields to the runtime (tokio's
/// `MAX_TASKS_PER_TICK` for `LocalSet`, 61): a set with a long queue still
/// lets the runtime's other tasks, timers and I/O run.
pub(super) const LOCAL_TASKS_PER_TICK: usize = 61;

thread_local! {
    /// The set being run (or entered) on this thread: where `spawn_local`
    /// puts its task.
    static CURRENT_LOCAL: RefCell<Option<Rc<LocalContext>>> = const { RefCell::new(None) };

    /// The local task being polled on this thread, if any: what
    /// `task::id()` returns inside it (set around each poll and drop).
    static CURRENT_LOCAL_TASK: Cell<Option<TaskId>> = const { Cell::new(None) };
}

/// The id of the local task being polled (or dropped) on this thread.
pub(crate) fn current_local_task_id() -> Option<TaskId> {
    CURRENT_LOCAL_TASK.try_with(Cell::get).ok().flatten()
}

/// Marks a local task as this thread's current one until dropped (nested
/// sets restore the outer task's id).
struct LocalIdGuard(Option<TaskId>);

impl LocalIdGuard {
    fn enter(id: TaskId) -> Self {
        LocalIdGuard(
            CURRENT_LOCAL_TASK
                .try_with(|c| c.replace(Some(id)))
                .ok()
                .flatten(),
        )
    }
}

impl Drop for LocalIdGuard {
    fn drop(&mut self) {
        let _ = CURRENT_LOCAL_TASK.try_with(|c| c.set(self.0));
    }
}

/// A set of `!Send` tasks that run on the thread that runs the set: inside
/// [`LocalSet::run_until`] or [`LocalSet::block_on`], or while the set itself
/// is awaited (it completes when all its tasks have). Tasks are added with
/// [`spawn_local`] from inside the set, or [`LocalSet::spawn_local`].
///
/// Not `Send`: the set, its tasks and their destructors stay on one thread.
/// Dropping the set drops every task it still holds, on that thread, and
/// their [`LocalJoinHandle`]s resolve to a cancelled [`JoinError`].
pub struct LocalSet {
    ctx: Rc<LocalContext>,
}

struct LocalContext {
    tasks: RefCell<HashMap<u64, Entry>>,
    next_id: Cell<u64>,
    shared: Arc<LocalShared>,
}

/// One local task: its future (which completes the join cell) and its waker.
struct Entry {
    future: Pin<Box<dyn Future<Output = ()>>>,
    waker: Arc<TaskWaker>,
}

/// The part of a set that wakers touch from any thread.
struct LocalShared {
    /// Ids of woken tasks, in wake order.
    queue: Mutex<VecDeque<u64>>,
    /// Whoever polls the set (the `run_until` future's task, `block_on`'s
    /// thread): woken with each local wake.
    waker: Mutex<Option<Waker>>,
    /// The set was dropped: wakes are ignored.
    closed: AtomicBool,
}

impl LocalShared {
    fn register(&self, waker: &Waker) {
        let mut slot = self.waker.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some(w) if w.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
    }

    fn wake_set(&self) {
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A local task's waker: `Send` and `Sync`, whatever the task holds.
struct TaskWaker {
    id: u64,
    /// Queued and not yet polled: further wakes add nothing.
    scheduled: AtomicBool,
    shared: Arc<LocalShared>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // AcqRel: the Release half pairs with the Acquire swap that clears
        // the flag before the poll, so a wake that found the task already
        // queued has its earlier writes seen by that poll.
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        // Relaxed: `closed` only saves work; the queue of a dropped set is
        // never read again.
        if self.shared.closed.load(Ordering::Relaxed) {
            return;
        }
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(self.id);
        self.shared.wake_set();
    }
}

impl Default for LocalSet {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for LocalSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalSet")
            .field("tasks", &self.ctx.tasks.borrow().len())
            .finish()
    }
}

impl LocalSet {
    /// An empty set.
    pub fn new() -> Self {
        Self {
            ctx: Rc::new(LocalContext {
                tasks: RefCell::new(HashMap::new()),
                next_id: Cell::new(1),
                shared: Arc::new(LocalShared {
                    queue: Mutex::new(VecDeque::new()),
                    waker: Mutex::new(None),
                    closed: AtomicBool::new(false),
                }),
            }),
        }
    }

    /// Adds `future` to the set. It runs when the set runs.
    pub fn spawn_local<F>(&self, future: F) -> LocalJoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.ctx.spawn(future)
    }

    /// Runs `future` on this thread with the set as the context for
    /// [`spawn_local`], running the set's tasks whenever the future waits,
    /// until the future is ready. Tasks still pending then stay in the set.
    pub fn run_until<F: Future>(&self, future: F) -> RunUntil<'_, F> {
        RunUntil {
            set: self,
            future: Box::pin(future),
        }
    }

    /// `rt.block_on(self.run_until(future))`: the set runs on this thread,
    /// inside `rt`'s `block_on` (so `spawn`, timers and I/O of `rt` work
    /// in the local tasks).
    pub fn block_on<F: Future>(&self, rt: &Runtime, future: F) -> F::Output {
        rt.block_on(self.run_until(future))
    }

    /// Makes the set this thread's context for [`spawn_local`] until the
    /// guard is dropped, without running it.
    pub fn enter(&self) -> LocalEnterGuard {
        LocalEnterGuard::enter(&self.ctx)
    }

    /// Polls up to [`LOCAL_TASKS_PER_TICK`] woken tasks. `true` if woken
    /// tasks remain.
    fn tick(&self) -> bool {
        let ctx = &self.ctx;
        for _ in 0..LOCAL_TASKS_PER_TICK {
            let next = ctx
                .shared
                .queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            let Some(id) = next else {
                return false;
            };
            // Out of the map while polled: the task may spawn into it.
            let Some(mut entry) = ctx.tasks.borrow_mut().remove(&id) else {
                continue; // finished after this wake was queued
            };
            // Acquire: pairs with the AcqRel swap in `wake_by_ref`. Cleared
            // before the poll, so a wake during the poll queues it again.
            let _ = entry.waker.scheduled.swap(false, Ordering::Acquire);
            let waker = Waker::from(entry.waker.clone());
            let mut cx = Context::from_waker(&waker);
            let ready = coop::with_budget(|| entry.future.as_mut().poll(&mut cx)).is_ready();
            if ready {
                drop(entry);
            } else {
                ctx.tasks.borrow_mut().insert(id, entry);
            }
        }
        !ctx.shared
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

impl LocalContext {
    fn spawn<F>(&self, future: F) -> LocalJoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let join = Rc::new(RefCell::new(JoinCell {
            output: None,
            waker: None,
            finished: false,
            abort: false,
        }));
        let waker = Arc::new(TaskWaker {
            id,
            scheduled: AtomicBool::new(true),
            shared: self.shared.clone(),
        });
        let task_id = TaskId::fresh();
        let task = LocalTask {
            future: Some(Box::pin(future)),
            join: join.clone(),
            id: task_id,
        };
        self.tasks.borrow_mut().insert(
            id,
            Entry {
                future: Box::pin(task),
                waker: waker.clone(),
            },
        );
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(id);
        self.shared.wake_set();
        LocalJoinHandle {
            join,
            waker: Waker::from(waker),
            id: task_id,
            _not_send: PhantomData,
        }
    }
}

impl Drop for LocalSet {
    /// Drops the tasks still in the set, on this thread, with the set as
    /// the context (a destructor may call `spawn_local`; what it spawns is
    /// dropped too).
    fn drop(&mut self) {
        // Relaxed: see `TaskWaker::wake_by_ref`.
        self.ctx.shared.closed.store(true, Ordering::Relaxed);
        let _enter = LocalEnterGuard::enter(&self.ctx);
        loop {
            let tasks = std::mem::take(&mut *self.ctx.tasks.borrow_mut());
            if tasks.is_empty() {
                break;
            }
            drop(tasks);
        }
        self.ctx
            .shared
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        *self
            .ctx
            .shared
            .waker
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Awaiting the set runs its tasks until every one has finished.
impl Future for LocalSet {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.ctx.shared.register(cx.waker());
        let _enter = LocalEnterGuard::enter(&this.ctx);
        if this.tick() {
            cx.waker().wake_by_ref();
            Poll::Pending
        } else if this.ctx.tasks.borrow().is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// The future of [`LocalSet::run_until`].
#[must_use = "futures do nothing unless polled"]
pub struct RunUntil<'a, F: Future> {
    set: &'a LocalSet,
    future: Pin<Box<F>>,
}

impl<F: Future> fmt::Debug for RunUntil<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunUntil").finish_non_exhaustive()
    }
}

impl<F: Future> Future for RunUntil<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.set.ctx.shared.register(cx.waker());
        let _enter = LocalEnterGuard::enter(&this.set.ctx);
        if let Poll::Ready(out) = this.future.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        if this.set.tick() {
            // More woken tasks than one tick: come back after the runtime's
            // other work.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// The set is this thread's `spawn_local` context while the guard lives
/// (from [`LocalSet::enter`]). Guards nest.
#[must_use = "the set is the context only while the guard lives"]
pub struct LocalEnterGuard {
    previous: Option<Rc<LocalContext>>,
}

impl LocalEnterGuard {
    fn enter(ctx: &Rc<LocalContext>) -> Self {
        let previous = CURRENT_LOCAL.with(|c| c.replace(Some(ctx.clone())));
        Self { previous }
    }
}

impl fmt::Debug for LocalEnterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEnterGuard").finish_non_exhaustive()
    }
}

impl Drop for LocalEnterGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let replaced = CURRENT_LOCAL.try_with(|c| c.replace(previous));
        drop(replaced);
    }
}

/// Spawns a `!Send` future onto the [`LocalSet`] this thread is running
/// (tokio's `task::spawn_local`).
///
/// # Panics
/// Outside a `LocalSet` (not inside its `run_until`/`block_on`, nor one of
/// its tasks, nor an [`LocalSet::enter`] guard), as tokio does.
#[track_caller]
pub fn spawn_local<F>(future: F) -> LocalJoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let ctx = CURRENT_LOCAL.with(|c| c.borrow().clone());
    match ctx {
        Some(ctx) => ctx.spawn(future),
        None => panic!(
            "`spawn_local` called from outside of a `task::LocalSet`: run the future with \
             LocalSet::run_until or LocalSet::block_on (magpie_runtime::task::LocalSet)"
        ),
    }
}

/// What a local task's future and its handle share.
struct JoinCell<T> {
    output: Option<Result<T, JoinError>>,
    waker: Option<Waker>,
    finished: bool,
    abort: bool,
}

/// A local task: the user's future, and the completion of its join cell.
struct LocalTask<F: Future> {
    future: Option<Pin<Box<F>>>,
    join: Rc<RefCell<JoinCell<F::Output>>>,
    /// Its id among all tasks' (`TaskId::fresh`): in its `JoinError`s and
    /// what `task::id()` returns while it runs.
    id: TaskId,
}

impl<F: Future> LocalTask<F> {
    fn finish(&mut self, out: Result<F::Output, JoinError>) {
        let waker = {
            let mut cell = self.join.borrow_mut();
            cell.output = Some(out);
            cell.finished = true;
            cell.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<F: Future> Future for LocalTask<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let _current = LocalIdGuard::enter(this.id);
        if this.join.borrow().abort {
            this.future = None;
            this.finish(Err(JoinError::new_cancelled(this.id)));
            return Poll::Ready(());
        }
        let Some(future) = this.future.as_mut() else {
            return Poll::Ready(());
        };
        // A panic becomes the handle's JoinError, as for spawned tasks.
        match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => {
                this.future = None;
                this.finish(Ok(out));
                Poll::Ready(())
            }
            Err(payload) => {
                let dropped = catch_unwind(AssertUnwindSafe(|| this.future = None));
                drop(dropped);
                this.finish(Err(JoinError::new_panic(this.id, payload)));
                Poll::Ready(())
            }
        }
    }
}

impl<F: Future> Drop for LocalTask<F> {
    /// Dropped unfinished (its set was dropped): the future goes first, on
    /// this thread, then the handle learns it was cancelled.
    fn drop(&mut self) {
        if self.join.borrow().finished {
            return;
        }
        let _current = LocalIdGuard::enter(self.id);
        self.future = None;
        self.finish(Err(JoinError::new_cancelled(self.id)));
    }
}

/// The handle of a local task: a future of its output, or a [`JoinError`]
/// if it was aborted, panicked or its set was dropped. Dropping it detaches
/// the task. Not `Send` (tokio's `JoinHandle` of a local task is `Send` when
/// the output is; see README, "LocalSet").
pub struct LocalJoinHandle<T> {
    join: Rc<RefCell<JoinCell<T>>>,
    /// The task's waker: `abort` wakes the task so its set drops it.
    waker: Waker,
    id: TaskId,
    _not_send: PhantomData<Rc<()>>,
}

impl<T> LocalJoinHandle<T> {
    /// Cancels the task: its set drops its future the next time it runs
    /// (at once if the set is running), and the handle resolves to a
    /// cancelled [`JoinError`]. No effect on a finished task.
    pub fn abort(&self) {
        let mut cell = self.join.borrow_mut();
        if cell.finished {
            return;
        }
        cell.abort = true;
        drop(cell);
        self.waker.wake_by_ref();
    }

    /// Whether the task has finished (output ready, cancelled or panicked).
    pub fn is_finished(&self) -> bool {
        self.join.borrow().finished
    }

    /// The task's id: the one its [`JoinError`] carries and `task::id()`
    /// returns inside it.
    pub fn id(&self) -> TaskId {
        self.id
    }
}

impl<T> Future for LocalJoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut cell = self.join.borrow_mut();
        if let Some(out) = cell.output.take() {
            return Poll::Ready(out);
        }
        assert!(
            !cell.finished,
            "LocalJoinHandle polled after it returned its output"
        );
        match &cell.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => cell.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> fmt::Debug for LocalJoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalJoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}
