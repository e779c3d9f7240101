//! Runs one loom model the way `loom::model` does (the `LOOM_*` variables,
//! loom's log on the test's output when `LOOM_LOG` is set), with two things
//! `loom::model` cannot do:
//!
//! - adjust the [`Builder`] (the shield model raises `max_branches`), and
//!   still get loom's "Completed in N iterations" line, which
//!   `Builder::check` alone never prints (the log is installed by
//!   `loom::model`, not by `check`);
//! - give each pass of a model that calls loom several times ([`explore`],
//!   used by the queue models and the shield model) its own checkpoint file, `$LOOM_CHECKPOINT_FILE.pass-N`,
//!   so that a failure recorded in pass N replays from its own file instead of
//!   from another pass's path ("Reached unexpected exploration state").
//!
//! See "Reproduce a failure" in `docs/loom.md`.

use loom::model::Builder;
use loom::thread;

/// Runs `model` under loom with the builder from the environment, changed by
/// `configure`. `pass` numbers the runs of a model that runs loom more than
/// once; it suffixes the checkpoint file.
pub fn check(
    pass: Option<usize>,
    configure: impl FnOnce(&mut Builder),
    model: impl Fn() + Sync + Send + 'static,
) {
    let mut builder = Builder::new();
    configure(&mut builder);
    if let (Some(pass), Some(file)) = (pass, builder.checkpoint_file.as_mut()) {
        let mut name = file.clone().into_os_string();
        name.push(format!(".pass-{pass}"));
        *file = name.into();
    }
    let log = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("LOOM_LOG"))
        .with_test_writer()
        .without_time()
        .finish();
    tracing::subscriber::with_default(log, || builder.check(model));
}

/// Which thread runs first in one pass of an [`explore`] model (`None`: loom
/// decides).
#[derive(Clone, Copy, Debug)]
pub struct Start {
    pub leader: Option<usize>,
}

impl Start {
    /// Called by thread `me` (0 is the model's main thread, spawned threads
    /// count from 1) before its first racing step: with a leader chosen,
    /// every other thread yields once, so the leader runs first.
    pub fn gate(self, me: usize) {
        if self.leader.is_some_and(|leader| leader != me) {
            thread::yield_now();
        }
    }
}

/// Runs `model` under loom with no leader (pass 0), then once per choice of
/// leader among its `threads` threads, main included (pass `1 + leader`).
///
/// Why: loom 0.7's partial-order reduction decides where to try another order
/// from the last access to each atomic, and a thread's own load hides an
/// earlier load by another thread (tokio-rs/loom#392), so loom never tries
/// the second thread's write before the first thread's load. Choosing who
/// runs first puts that load on the side where loom does backtrack.
///
/// Each pass is a loom run of its own: its own "Completed in N iterations"
/// line, and its own checkpoint file (`$LOOM_CHECKPOINT_FILE.pass-N`), so a
/// failure recorded in one pass replays from that file. `MAGPIE_LOOM_PASS=N`
/// runs pass N alone; a failing pass names itself on the test's output.
#[allow(dead_code)] // not every model file runs passes
pub fn explore(threads: usize, model: impl Fn(Start) + Sync + Send + 'static) {
    explore_with(threads, |_| {}, model);
}

/// [`explore`], with the builder changed by `configure` in every pass.
#[allow(dead_code)] // not every model file runs passes
pub fn explore_with(
    threads: usize,
    configure: impl Fn(&mut Builder),
    model: impl Fn(Start) + Sync + Send + 'static,
) {
    let only: Option<usize> = std::env::var("MAGPIE_LOOM_PASS")
        .ok()
        .map(|n| n.parse().expect("MAGPIE_LOOM_PASS is a pass number"));
    let model = std::sync::Arc::new(model);
    let leaders = std::iter::once(None).chain((0..threads).map(Some));
    for (pass, leader) in leaders.enumerate() {
        if only.is_some_and(|only| only != pass) {
            continue;
        }
        // Shown by the test harness if the pass fails (or with --nocapture).
        println!("explore: pass {pass} (leader {leader:?})");
        let model = model.clone();
        check(Some(pass), &configure, move || model(Start { leader }));
    }
}
