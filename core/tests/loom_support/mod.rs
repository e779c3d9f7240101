//! Runs one loom model the way `loom::model` does (the `LOOM_*` variables,
//! loom's log on the test's output when `LOOM_LOG` is set), with two things
//! `loom::model` cannot do:
//!
//! - adjust the [`Builder`] (the shield model raises `max_branches`), and
//!   still get loom's "Completed in N iterations" line, which
//!   `Builder::check` alone never prints (the log is installed by
//!   `loom::model`, not by `check`);
//! - give each pass of a model that calls loom several times (the queue
//!   models' `explore`) its own checkpoint file, `$LOOM_CHECKPOINT_FILE.pass-N`,
//!   so that a failure recorded in pass N replays from its own file instead of
//!   from another pass's path ("Reached unexpected exploration state").
//!
//! See "Reproduce a failure" in `docs/loom.md`.

use loom::model::Builder;

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
