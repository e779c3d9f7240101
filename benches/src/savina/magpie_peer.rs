//! The Savina workloads on magpie's processes: `Process` closures sending
//! with `out.send`, on a `ProcessRuntime` with the given number of workers.
//! Each function builds its runtime, runs the workload once, checks the
//! answer and returns the time from the first message (or spawn) to the
//! answer; the shutdown is outside the timed part.

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use magpie_runtime::process::{Event, Events, InitError, Pid, Process, ProcessRuntime, StepOutput};

use super::{
    big_pings, big_sum, check, hops, round_trips, Neighbours, BIG, COUNT, FORK, FORK_SUM, RING,
};

type Done = Arc<Mutex<std_mpsc::Sender<u64>>>;

/// How long a magpie run's shutdown waits for its processes. They ignore
/// `Event::Cancel`, so shutdown closes them by force at this deadline; it is
/// outside the measured time and only keeps the run short.
const SHUTDOWN: Duration = Duration::from_millis(100);

/// A process made of one closure.
struct P<F>(F);

impl<F> Process<u64> for P<F>
where
    F: FnMut(Events<'_, u64>, &mut StepOutput<'_, u64>) + Send + 'static,
{
    fn init(&mut self, _method: &str, _input: Option<u64>) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: Events<'_, u64>, out: &mut StepOutput<'_, u64>) {
        (self.0)(events, out)
    }
}

fn proc_rt(workers: usize) -> ProcessRuntime<u64> {
    ProcessRuntime::builder().workers(workers).build().unwrap()
}

fn signal(done: &Done, result: u64) {
    done.lock().unwrap().send(result).unwrap();
}

pub fn ping_pong(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let done: Done = Arc::new(Mutex::new(tx));
    let pong = rt
        .spawn(
            P(|events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                for e in events {
                    if let Event::Message {
                        from: Some(f), msg, ..
                    } = e
                    {
                        out.send(f, msg).unwrap();
                    }
                }
                out.idle();
            }),
            "main",
            None,
        )
        .unwrap();
    let d = done.clone();
    let ping = rt
        .spawn(
            P(
                move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                    for e in events {
                        if let Event::Message { msg, .. } = e {
                            if msg == round_trips() {
                                signal(&d, msg);
                            } else {
                                out.send(pong, msg + 1).unwrap();
                            }
                        }
                    }
                    out.idle();
                },
            ),
            "main",
            None,
        )
        .unwrap();
    let start = Instant::now();
    rt.send(ping, 0).unwrap();
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("ping-pong", "magpie", got, round_trips());
    rt.shutdown(SHUTDOWN);
    t
}

pub fn counting(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let done: Done = Arc::new(Mutex::new(tx));
    let mut n = 0;
    let counter = rt
        .spawn(
            P(
                move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                    for e in events {
                        if let Event::Message { from: Some(f), .. } = e {
                            n += 1;
                            if n == COUNT {
                                out.send(f, n).unwrap();
                            }
                        }
                    }
                    out.idle();
                },
            ),
            "main",
            None,
        )
        .unwrap();
    let d = done.clone();
    let mut sent = 0;
    let sender = rt
        .spawn(
            P(
                move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                    let mut go = false;
                    for e in events {
                        if let Event::Message { from, msg, .. } = e {
                            if from.is_none() {
                                go = true;
                            } else {
                                signal(&d, msg);
                            }
                        }
                    }
                    if go || (sent > 0 && sent < COUNT) {
                        // Send while the step's budget lasts: a send into a
                        // counter already holding `SEND_PUNISH_THRESHOLD`
                        // messages spends it (back-pressure), so the counter
                        // drains meanwhile.
                        while sent < COUNT && !out.should_yield() {
                            out.send(counter, sent).unwrap();
                            sent += 1;
                        }
                        if sent < COUNT {
                            return out.keep_running();
                        }
                    }
                    out.idle();
                },
            ),
            "main",
            None,
        )
        .unwrap();
    let start = Instant::now();
    rt.send(sender, 0).unwrap();
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("counting", "magpie", got, COUNT);
    let report = rt.shutdown(SHUTDOWN);
    if std::env::var_os("SAVINA_METRICS").is_some() {
        eprintln!("magpie-{workers}w counting: {:?}", report.metrics);
    }
    t
}

pub fn ring(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let done: Done = Arc::new(Mutex::new(tx));
    let pids: Arc<OnceLock<Vec<Pid>>> = Arc::new(OnceLock::new());
    let mut all = Vec::with_capacity(RING);
    for i in 0..RING {
        let pids = pids.clone();
        let d = done.clone();
        let pid = rt
            .spawn(
                P(
                    move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                        for e in events {
                            if let Event::Message { msg, .. } = e {
                                if msg == hops() {
                                    signal(&d, msg);
                                } else {
                                    let next = pids.get().unwrap()[(i + 1) % RING];
                                    out.send(next, msg + 1).unwrap();
                                }
                            }
                        }
                        out.idle();
                    },
                ),
                "main",
                None,
            )
            .unwrap();
        all.push(pid);
    }
    let first = all[0];
    pids.set(all).unwrap();
    let start = Instant::now();
    rt.send(first, 0).unwrap();
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("thread-ring", "magpie", got, hops());
    rt.shutdown(SHUTDOWN);
    t
}

/// Spawns a process that sums the messages of `expect` senders and signals
/// the sum.
fn spawn_collector(rt: &ProcessRuntime<u64>, expect: u64, done: Done) -> Pid {
    let (mut n, mut sum) = (0, 0);
    rt.spawn(
        P(
            move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                for e in events {
                    if let Event::Message { msg, .. } = e {
                        n += 1;
                        sum += msg;
                        if n == expect {
                            signal(&done, sum);
                        }
                    }
                }
                out.idle();
            },
        ),
        "main",
        None,
    )
    .unwrap()
}

pub fn fork_join(workers: usize) -> Duration {
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let collector = spawn_collector(&rt, FORK, Arc::new(Mutex::new(tx)));
    let start = Instant::now();
    let h = rt.handle();
    for i in 0..FORK {
        h.spawn(
            P(move |_e: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                out.send(collector, i).unwrap();
                out.complete(None);
            }),
            "main",
            None,
        )
        .unwrap();
    }
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("fork-join", "magpie", got, FORK_SUM);
    rt.shutdown(SHUTDOWN);
    t
}

/// Big: `BIG` processes each ping random neighbours `BIG_PINGS` times, one
/// ping at a time; a message from outside starts a process, `BIG_PING` from
/// a process is a ping, `BIG_PONG` its answer.
pub fn big(workers: usize) -> Duration {
    const BIG_PING: u64 = 0;
    const BIG_PONG: u64 = 1;
    let rt = proc_rt(workers);
    let (tx, rx) = std_mpsc::channel();
    let sink = spawn_collector(&rt, BIG as u64, Arc::new(Mutex::new(tx)));
    let pids: Arc<OnceLock<Vec<Pid>>> = Arc::new(OnceLock::new());
    let mut all = Vec::with_capacity(BIG);
    for me in 0..BIG {
        let pids = pids.clone();
        let mut rng = Neighbours::new(me);
        let mut pongs = 0;
        let pid = rt
            .spawn(
                P(
                    move |events: Events<'_, u64>, out: &mut StepOutput<'_, u64>| {
                        // Set before the first message is sent (a process
                        // may step once before that, with no events).
                        let pids = || pids.get().expect("pids set before the start");
                        for e in events {
                            if let Event::Message { from, msg, .. } = e {
                                match (from, msg) {
                                    (Some(f), BIG_PING) => out.send(f, BIG_PONG).unwrap(),
                                    (Some(_), _) => {
                                        pongs += 1;
                                        if pongs == big_pings() {
                                            out.send(sink, pongs).unwrap();
                                        } else {
                                            out.send(pids()[rng.pick()], BIG_PING).unwrap();
                                        }
                                    }
                                    (None, _) => out.send(pids()[rng.pick()], BIG_PING).unwrap(),
                                }
                            }
                        }
                        out.idle();
                    },
                ),
                "main",
                None,
            )
            .unwrap();
        all.push(pid);
    }
    pids.set(all.clone()).unwrap();
    let start = Instant::now();
    for pid in all {
        rt.send(pid, 0).unwrap();
    }
    let got = rx.recv().unwrap();
    let t = start.elapsed();
    check("big", "magpie", got, big_sum());
    rt.shutdown(SHUTDOWN);
    t
}
