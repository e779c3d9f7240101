//! How an idle worker sleeps with timers around (README, "Idle workers and
//! timers"): one worker at a time holds the *timer role* and sleeps until the
//! next deadline; the others sleep on their backoff, woken by new work only.
//! With a paused clock, the last participant to go idle moves time to the
//! next deadline instead (auto-advance).

use std::time::Duration;

use magpie_core::coalesce::Coalesce;
use magpie_core::park::ParkResult;
use magpie_core::sync::atomic::{fence, AtomicUsize, Ordering};

use super::{until_next_timer, AsyncWorker, RtShared, WORKER};
use crate::config::MAX_PARK_TIMEOUT;
use crate::io::driver::PollerGuard;

/// No worker holds the timer role.
const NO_HOLDER: usize = 0;

/// The timer role and the auto-advance inhibitors.
pub(super) struct TimerPark {
    /// `worker id + 1` of the worker asleep with the timer role, or
    /// [`NO_HOLDER`].
    holder: AtomicUsize,
    /// Participants that keep a paused clock from auto-advancing while they
    /// run: a `block_on` polling its future, a running `spawn_blocking`
    /// closure, a `block_in_place` section.
    inhibit: AtomicUsize,
    /// One auto-advance at a time, and one more for every participant that
    /// went idle during it (`try_auto_advance`).
    advance: Coalesce,
}

impl TimerPark {
    pub(super) fn new() -> Self {
        Self {
            holder: AtomicUsize::new(NO_HOLDER),
            inhibit: AtomicUsize::new(0),
            advance: Coalesce::new(),
        }
    }
}

/// Sleeps a worker whose park sequence (`sched::prepare_park`) said `Sleep`:
/// it is in the parked set and has given back its gate token.
///
/// 1. Paused clock: if every worker is parked, nothing is queued and no
///    inhibitor runs, move the clock to the next deadline and fire it
///    (`try_auto_advance`); the woken tasks go to the global queue and wake
///    a worker, maybe this one (its park then returns at once).
/// 2. Claim the timer role (one CAS). The holder sleeps until the next
///    deadline (read *after* the claim, see `on_earlier_timer`), capped at
///    `MAX_PARK_TIMEOUT`; on a paused clock real time does not move it, so
///    it keeps the backoff.
/// 3. Everyone else sleeps for `MAX_PARK_TIMEOUT` (100 ms; a safety net, as
///    the typed executor's backoff ends at): new work or a new earliest
///    timer wakes them, never the clock.
/// 4. On waking, the holder gives the role back.
///
/// A worker that holds the I/O poller (`poller`) sleeps in it instead of on
/// its futex, for the same timeout (io/README.md, P2): readiness or an
/// unpark (through the poller's waker) ends the sleep.
///
/// 5. The holder never oversleeps a timer's deadline: in the poller it arms the
///    poller's timer descriptor for its exact timeout (Linux); elsewhere the
///    poller's millisecond timeout is rounded down for it ([`whole_millis`])
///    and a sub-millisecond remainder is slept on the futex. A timeout that
///    is not a timer's (the backoff, the 100 ms cap) takes the poller's own
///    rounding: no timer descriptor is armed for it.
pub(super) fn park_worker(
    worker: &mut AsyncWorker,
    inner: &RtShared,
    backoff: Duration,
    poller: Option<&mut PollerGuard<'_>>,
) -> ParkResult {
    let tp = &inner.ext.timer_park;
    let paused = inner.driver.clock().is_paused();
    if paused {
        try_auto_advance(inner);
    }
    let me = worker.core.id + 1;
    // SeqCst: the claim and the hint read below against a timer inserter's
    // hint write and role read in `on_earlier_timer` (store-buffer shape):
    // the fence pairs with the fence there.
    let holder = tp
        .holder
        .compare_exchange(NO_HOLDER, me, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok();
    // `timed`: the timeout ends at a timer's deadline, so waking late
    // would make the timer late (step 5). A backoff or safety-net timeout
    // has no such deadline: nothing but new work, which comes with a
    // notification or a readiness event, ends that sleep usefully.
    let (timeout, timed) = if holder {
        fence(Ordering::SeqCst);
        match until_next_timer(inner) {
            Some(t) if !paused && t < MAX_PARK_TIMEOUT => (t, true),
            Some(_) if !paused => (MAX_PARK_TIMEOUT, false),
            _ => (backoff, false),
        }
    } else {
        // Not the timer-watcher: only new work (or a new earliest timer when
        // nobody holds the role) wakes it, so the timeout is a safety net.
        // Starting it at the backoff's 200 us made every worker that had
        // just run a task wake 3-4 times per millisecond, and take the role
        // from the worker running the ticks.
        (MAX_PARK_TIMEOUT.max(backoff), false)
    };
    let result = match poller {
        // The poller's timeout is whole milliseconds, rounded up (epoll;
        // mio rounds up so that a short wait is never a busy poll). A
        // holder that slept through it would wake up to 1 ms past its
        // deadline, and a 1 ms interval would lose every other tick
        // (README, "Idle workers and timers", step 5).
        // So the holder arms the poller's timer descriptor for the exact
        // timeout; without one (off Linux) it sleeps whole milliseconds in
        // the poller and the remainder on its futex.
        // Only a timer's deadline needs the precise wake: the holder with
        // no timer due sleeps on its backoff (200 us at first), which the
        // poller rounds up to 1 ms. Arming the timer descriptor for that
        // cost one `timerfd_settime` per park: 0.86 per echo round trip
        // over one connection (strace, 1 897 round trips), for a wake
        // nothing waits for.
        Some(p) if !timed || coarse_lateness(timeout) <= COARSE_SLACK => {
            worker.core.parker.park_in_driver(|| p.poll(Some(timeout)))
        }
        // From here on `timed`, so this worker is the holder.
        Some(p) if p.has_precise_timer() => worker
            .core
            .parker
            .park_in_driver(|| p.poll_precise(timeout)),
        Some(p) => match whole_millis(timeout) {
            Some(whole) => worker.core.parker.park_in_driver(|| p.poll(Some(whole))),
            None => worker.core.parker.park_timeout(timeout),
        },
        None => worker.core.parker.park_timeout(timeout),
    };
    if holder {
        // Relaxed: the role carries no data; a timer inserter that still
        // reads us as holder only unparks us once more (a spurious wake).
        let _ = tp
            .holder
            .compare_exchange(me, NO_HOLDER, Ordering::Relaxed, Ordering::Relaxed);
    }
    result
}

/// How late the poller's own timeout (whole milliseconds, rounded up) would
/// wake a sleeper due in `timeout`.
fn coarse_lateness(timeout: Duration) -> Duration {
    let rem = timeout.subsec_nanos() % 1_000_000;
    Duration::from_nanos(u64::from((1_000_000 - rem) % 1_000_000))
}

/// The lateness past its deadline the holder accepts from the poller's
/// millisecond timeout before it pays for a precise wake. A precise wake
/// (`timerfd` or futex) costs more CPU than the poller's own timeout on this
/// project's VMs: one 1 ms interval took 45-47 ms of CPU per second with
/// every wake precise, 38-41 with sub-millisecond naps on the futex, and
/// 24-26 with the poller's timeout alone, which lost 7-9 % of the ticks
/// (docs/benchmarks.md). The poller's wake drifts later by the timer slack
/// at each tick; once the drift passes this slack, one precise wake puts
/// the holder back on its deadline.
const COARSE_SLACK: Duration = Duration::from_micros(250);

/// How long the timer-role holder may sleep in the poller: its timeout
/// rounded *down* to whole milliseconds, so that the poller (whose timeout
/// is whole milliseconds, rounded up) wakes it before its deadline, never
/// after. `None` when less than a millisecond is left: that remainder is
/// slept on the futex, whose timeout is exact, with the poller held but not
/// waited on, so readiness that arrives meanwhile waits for at most that
/// remainder. An exact multiple of a millisecond is kept as it is.
fn whole_millis(timeout: Duration) -> Option<Duration> {
    let whole = Duration::from_millis(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
    (!whole.is_zero()).then_some(whole)
}

/// The driver's unparker: a new timer became the earliest (the hint moved
/// earlier). Wake whoever must re-arm:
///
/// - a worker asleep with the timer role: it sleeps past the new deadline;
/// - nobody holds the role and this is one of the runtime's workers running
///   a task: nothing, it reads the hint when it next parks;
/// - nobody holds the role, from another thread: one parked worker, which
///   finds nothing, parks again and takes the role.
///
/// Why no deadline is missed: the inserter writes the hint, fences, reads
/// the role; a parking worker claims the role, fences, reads the hint. With
/// both fences SeqCst, either the inserter sees the claim (and unparks the
/// holder, whose parker keeps an unpark that comes before its park) or the
/// holder reads the new hint.
pub(super) fn on_earlier_timer(inner: &RtShared) {
    // SeqCst: pairs with the fence in `park_worker`.
    fence(Ordering::SeqCst);
    match inner.ext.timer_park.holder.load(Ordering::Relaxed) {
        NO_HOLDER => {
            if on_own_worker_in_poll(inner) {
                return;
            }
            inner.sched.notify_parked();
        }
        h => {
            inner.sched.remotes[h - 1].unparker.unpark();
        }
    }
}

/// Whether this thread is one of `inner`'s workers, inside a task poll or a
/// timer pass (its scheduling state lent to the thread-local).
fn on_own_worker_in_poll(inner: &RtShared) -> bool {
    WORKER.with(|w| match w.try_borrow() {
        Ok(slot) => slot
            .as_ref()
            .is_some_and(|w| std::ptr::eq(&*w.handle.inner, inner)),
        // Borrowed mutably: some worker is inside its queue code; waking one
        // more worker than needed is the safe side.
        Err(_) => false,
    })
}

/// An inhibitor starts running (see [`TimerPark::inhibit`]).
pub(super) fn inhibit(inner: &RtShared) {
    inner.ext.timer_park.inhibit.fetch_add(1, Ordering::Relaxed);
}

/// An inhibitor stops running. If it was the last one and every worker is
/// parked, nobody else will notice that the runtime went idle: advance here.
pub(super) fn release(inner: &RtShared) {
    // SeqCst RMW then the fence in `try_auto_advance`: against a parking
    // worker's idle RMW, fence, inhibit read (store-buffer shape again).
    if inner.ext.timer_park.inhibit.fetch_sub(1, Ordering::SeqCst) == 1
        && inner.driver.clock().is_paused()
    {
        try_auto_advance(inner);
    }
}

/// Auto-advance (tokio's `start_paused` rule): every worker parked, nothing
/// queued, no inhibitor running: jump the paused clock to the next deadline
/// and fire it. Each participant asks after registering as idle, so the
/// last one to go idle sees the others.
///
/// The check and the advance run as one job of `TimerPark::advance`
/// (`magpie_core::coalesce`): one participant at a time, and once more for
/// each that went idle meanwhile. Two at once both saw "everybody idle"; the
/// first fired a timer and the second, not yet seeing the woken task (still
/// in the first one's wake batch), moved the clock on to the next deadline,
/// so the woken task read a later time than its own deadline.
/// Returns whether this call's runs fired a timer (`false` also when another
/// participant's run answers the request).
fn try_auto_advance(inner: &RtShared) -> bool {
    let mut fired = false;
    inner.ext.timer_park.advance.request(|| {
        // SeqCst: pairs with the SeqCst RMW in `release` and orders this
        // worker's own idle registration (prepare_park) before the loads.
        // The requests of other participants are ordered before the loads
        // by the coalescer's Acquire (README, C2 and C4).
        fence(Ordering::SeqCst);
        if inner.ext.timer_park.inhibit.load(Ordering::Relaxed) != 0
            || inner.sched.idle.num_parked() < inner.sched.workers
            || inner.sched.has_visible_work()
        {
            return;
        }
        fired |= inner.driver.auto_advance_if_idle();
    });
    fired
}
