//! `#[magpie_runtime::main]` and `#[magpie_runtime::test]` with their
//! arguments.
#![cfg(not(loom))]

use std::time::Duration;

use magpie_runtime::time::{self, Instant};
use magpie_runtime::{spawn, Handle};

#[magpie_runtime::test]
async fn test_attribute_runs_the_body_on_the_current_thread_by_default() {
    // tokio's default for `test`: the tasks run on the test's own thread.
    let me = std::thread::current().id();
    assert_eq!(Handle::current().metrics().workers, 1);
    assert_eq!(
        spawn(async { (std::thread::current().id(), 6 * 7) })
            .await
            .unwrap(),
        (me, 42)
    );
}

#[magpie_runtime::test(flavor = "multi_thread", worker_threads = 3)]
async fn worker_threads_sets_the_worker_count() {
    assert_eq!(Handle::current().metrics().workers, 3);
}

#[magpie_runtime::test(flavor = "multi_thread", start_paused = true, worker_threads = 2)]
async fn start_paused_gives_a_clock_that_auto_advances() {
    let start = Instant::now();
    time::sleep(Duration::from_secs(24 * 3600)).await;
    assert_eq!(Instant::now() - start, Duration::from_secs(24 * 3600));
    assert_eq!(Handle::current().metrics().workers, 2);
}

#[magpie_runtime::test]
async fn a_test_may_return_a_result() -> Result<(), std::num::ParseIntError> {
    let n: u32 = "17".parse()?;
    assert_eq!(n, 17);
    Ok(())
}

#[magpie_runtime::main(worker_threads = 2)]
async fn not_main(x: u64) -> u64 {
    let workers = Handle::current().metrics().workers as u64;
    spawn(async move { x * workers }).await.unwrap()
}

#[test]
fn main_attribute_builds_a_runtime_and_returns_the_bodys_value() {
    assert_eq!(not_main(21), 42);
}

#[magpie_runtime::test(flavor = "current_thread")]
async fn current_thread_flavor_runs_tasks_on_the_test_thread() {
    let me = std::thread::current().id();
    assert_eq!(Handle::current().metrics().workers, 1);
    assert_eq!(
        spawn(async { std::thread::current().id() }).await.unwrap(),
        me
    );
}

#[magpie_runtime::test(flavor = "current_thread", start_paused = true)]
async fn current_thread_flavor_takes_start_paused() {
    let start = Instant::now();
    time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(Instant::now() - start, Duration::from_secs(3600));
}

#[magpie_runtime::main(flavor = "current_thread")]
async fn current_main() -> std::thread::ThreadId {
    spawn(async { std::thread::current().id() }).await.unwrap()
}

#[test]
fn main_attribute_takes_the_current_thread_flavor() {
    assert_eq!(current_main(), std::thread::current().id());
}
