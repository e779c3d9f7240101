//! magpie's local queue against crossbeam-deque, in the same run.
//!
//! (a) push+pop on one thread: magpie `Local` (FIFO) against crossbeam's FIFO
//!     `Worker` (same discipline) and, for information, its LIFO `Worker`.
//!     Shapes: `pair` (push one, pop one), `burst64` (push 64, pop 64), and
//!     `pair128B` (`pair` with a 128-byte task, the size of a scanner task).
//! (b) steal-half: a victim filled with N tasks, half of them stolen into an
//!     empty queue (one returned to run), magpie `steal_into` against
//!     crossbeam `steal_batch_with_limit_and_pop` with no limit (crossbeam's
//!     `steal_batch_and_pop` caps a batch at 32, which equals half only up to
//!     N = 64). The timed part is the steal alone; filling is setup. At
//!     N = 256 crossbeam's fresh destination grows (allocates) during the
//!     steal, while magpie's ring is allocated up front: part of the design
//!     difference, reported as such.
//!
//! Every benchmark runs `ROUNDS` times, the implementations alternating
//! within each round, and the run ends with a table of medians and ratios read
//! back from criterion's estimates, plus a strictly alternating min/median
//! measurement of the `pair` shape (robust to a busy machine).

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use crossbeam_deque::{Steal as CbSteal, Worker};
use magpie_core::queue::{self, Inject};

const ROUNDS: usize = 3;
const GROUP_PAIRS: &str = "core_queue_push_pop";
const GROUP_STEAL: &str = "core_queue_steal_half";
/// Pairs per timed iteration (criterion reports per element).
const PAIRS: u64 = 64;
const STEAL_SIZES: [usize; 2] = [32, 256];

/// A scanner-sized task.
type Big = [u64; 16];
const _: () = assert!(std::mem::size_of::<Big>() == 128);

fn push_pop(c: &mut Criterion, round: usize) {
    let mut g = c.benchmark_group(GROUP_PAIRS);
    g.throughput(Throughput::Elements(PAIRS));
    let id = |name: &str, shape: &str| BenchmarkId::new(name, format!("{shape}-r{round}"));

    let inject = Inject::new();
    let (mut local, _steal) = queue::local::<u64>();
    g.bench_function(id("magpie", "pair"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                local.push_back_or_overflow(black_box(i), &inject);
                black_box(local.pop());
            }
        })
    });
    let fifo = Worker::<u64>::new_fifo();
    g.bench_function(id("crossbeam_fifo", "pair"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                fifo.push(black_box(i));
                black_box(fifo.pop());
            }
        })
    });
    let lifo = Worker::<u64>::new_lifo();
    g.bench_function(id("crossbeam_lifo", "pair"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                lifo.push(black_box(i));
                black_box(lifo.pop());
            }
        })
    });

    g.bench_function(id("magpie", "burst64"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                local.push_back_or_overflow(black_box(i), &inject);
            }
            for _ in 0..PAIRS {
                black_box(local.pop());
            }
        })
    });
    g.bench_function(id("crossbeam_fifo", "burst64"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                fifo.push(black_box(i));
            }
            for _ in 0..PAIRS {
                black_box(fifo.pop());
            }
        })
    });
    g.bench_function(id("crossbeam_lifo", "burst64"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                lifo.push(black_box(i));
            }
            for _ in 0..PAIRS {
                black_box(lifo.pop());
            }
        })
    });

    let big_inject = Inject::new();
    let (mut big_local, _big_steal) = queue::local::<Big>();
    g.bench_function(id("magpie", "pair128B"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                big_local.push_back_or_overflow(black_box([i; 16]), &big_inject);
                black_box(big_local.pop());
            }
        })
    });
    let big_fifo = Worker::<Big>::new_fifo();
    g.bench_function(id("crossbeam_fifo", "pair128B"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                big_fifo.push(black_box([i; 16]));
                black_box(big_fifo.pop());
            }
        })
    });
    let big_lifo = Worker::<Big>::new_lifo();
    g.bench_function(id("crossbeam_lifo", "pair128B"), |b| {
        b.iter(|| {
            for i in 0..PAIRS {
                big_lifo.push(black_box([i; 16]));
                black_box(big_lifo.pop());
            }
        })
    });
    assert!(
        inject.is_empty() && big_inject.is_empty(),
        "no overflow expected"
    );
    g.finish();
}

fn steal_half(c: &mut Criterion, round: usize) {
    let mut g = c.benchmark_group(GROUP_STEAL);
    for n in STEAL_SIZES {
        let param = format!("{n}-r{round}");
        g.bench_function(BenchmarkId::new("magpie", &param), |b| {
            b.iter_batched_ref(
                || {
                    let inject = Inject::new();
                    let (mut victim, steal) = queue::local::<u64>();
                    for i in 0..n as u64 {
                        victim.push_back_or_overflow(i, &inject);
                    }
                    let (dst, _) = queue::local::<u64>();
                    (victim, steal, dst)
                },
                |(_victim, steal, dst)| {
                    let got = steal.steal_into(dst);
                    debug_assert_eq!(dst.len() + 1, n / 2);
                    black_box(got)
                },
                BatchSize::SmallInput,
            )
        });
        g.bench_function(BenchmarkId::new("crossbeam_fifo", &param), |b| {
            b.iter_batched_ref(
                || {
                    let victim = Worker::<u64>::new_fifo();
                    for i in 0..n as u64 {
                        victim.push(i);
                    }
                    let stealer = victim.stealer();
                    // A fresh worker starts with 64 slots and grows inside
                    // the steal when the batch needs more (N = 256); it cannot
                    // be pre-grown, since a FIFO worker shrinks as it drains.
                    (victim, stealer, Worker::<u64>::new_fifo())
                },
                |(_victim, stealer, dst)| {
                    let got = stealer.steal_batch_with_limit_and_pop(dst, usize::MAX);
                    debug_assert_eq!(dst.len() + 1, n / 2);
                    match got {
                        CbSteal::Success(task) => black_box(Some(task)),
                        _ => None,
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// criterion's median (ns) for one benchmark, read from its estimates file.
fn median_ns(dir: &Path, group: &str, name: &str, param: &str) -> Option<f64> {
    let path = dir
        .join(group)
        .join(name)
        .join(param)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let median = &text[text.find("\"median\"")?..];
    let value = &median[median.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = value.find([',', '}'])?;
    value[..end].trim().parse().ok()
}

fn summary(dir: &Path) {
    println!("\n== core_queue summary (criterion medians, {ROUNDS} interleaved rounds) ==");
    println!(
        "{:<22} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "push+pop ns/pair", "round", "magpie", "cb fifo", "cb lifo", "m/cb_fifo"
    );
    for shape in ["pair", "burst64", "pair128B"] {
        for round in 1..=ROUNDS {
            let param = format!("{shape}-r{round}");
            let get = |name| median_ns(dir, GROUP_PAIRS, name, &param).map(|t| t / PAIRS as f64);
            if let (Some(m), Some(f), Some(l)) =
                (get("magpie"), get("crossbeam_fifo"), get("crossbeam_lifo"))
            {
                println!(
                    "{shape:<22} {round:>9} {m:>10.2} {f:>10.2} {l:>10.2} {:>10.2}",
                    m / f
                );
            }
        }
    }
    println!(
        "{:<22} {:>9} {:>10} {:>10} {:>10}",
        "steal-half ns/steal", "round", "magpie", "cb fifo", "m/cb"
    );
    for n in STEAL_SIZES {
        for round in 1..=ROUNDS {
            let param = format!("{n}-r{round}");
            let get = |name| median_ns(dir, GROUP_STEAL, name, &param);
            if let (Some(m), Some(c)) = (get("magpie"), get("crossbeam_fifo")) {
                println!(
                    "{:<22} {round:>9} {m:>10.1} {c:>10.1} {:>10.2}",
                    format!("N={n}"),
                    m / c
                );
            }
        }
    }
}

/// One timed run of `PAIRED_N` push+pop pairs on magpie's `Local`.
#[inline(never)]
fn paired_magpie(local: &mut queue::Local<u64>, inject: &Inject<u64>) {
    for i in 0..PAIRED_N {
        local.push_back_or_overflow(black_box(i), inject);
        black_box(magpie_pop(local));
    }
}

/// LLVM keeps crossbeam's `Worker::pop` out of line in `paired_crossbeam`
/// (checked with objdump), so magpie's pop gets the same call here.
#[inline(never)]
fn magpie_pop(local: &mut queue::Local<u64>) -> Option<u64> {
    local.pop()
}

/// One timed run of `PAIRED_N` push+pop pairs on crossbeam's FIFO `Worker`.
#[inline(never)]
fn paired_crossbeam(fifo: &Worker<u64>) {
    for i in 0..PAIRED_N {
        fifo.push(black_box(i));
        black_box(fifo.pop());
    }
}

const PAIRED_N: u64 = 20_000;
const PAIRED_RUNS: usize = 400;

/// A second estimate for the `pair` shape that shrugs off a busy machine:
/// `PAIRED_RUNS` runs of each, strictly alternating, and the minimum and the
/// median ns/pair of each. Both pops are out-of-line calls here (see
/// `magpie_pop`); in the criterion closures above both are inlined.
fn paired_pairs() {
    let inject = Inject::new();
    let (mut local, _steal) = queue::local::<u64>();
    let fifo = Worker::<u64>::new_fifo();
    let (mut m, mut c) = (Vec::new(), Vec::new());
    for _ in 0..PAIRED_RUNS {
        let t = std::time::Instant::now();
        paired_magpie(&mut local, &inject);
        m.push(t.elapsed().as_nanos() as f64 / PAIRED_N as f64);
        let t = std::time::Instant::now();
        paired_crossbeam(&fifo);
        c.push(t.elapsed().as_nanos() as f64 / PAIRED_N as f64);
    }
    m.sort_by(f64::total_cmp);
    c.sort_by(f64::total_cmp);
    let (m_min, m_med, c_min, c_med) = (m[0], m[m.len() / 2], c[0], c[c.len() / 2]);
    println!("pair, alternating {PAIRED_RUNS} x {PAIRED_N}: magpie min {m_min:.2} med {m_med:.2} ns, crossbeam fifo min {c_min:.2} med {c_med:.2} ns, ratio min {:.2} med {:.2}", m_min / c_min, m_med / c_med);
}

/// `<target>/criterion`, from this binary's path `<target>/<profile>/deps/..`.
fn output_dir() -> PathBuf {
    std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.parent()?.join("criterion"))
        })
        .unwrap_or_else(|| PathBuf::from("target/criterion"))
}

fn main() {
    let dir = output_dir();
    let mut c = Criterion::default()
        .output_directory(&dir)
        .warm_up_time(std::time::Duration::from_millis(700))
        .measurement_time(std::time::Duration::from_secs(2))
        .configure_from_args();
    for round in 1..=ROUNDS {
        push_pop(&mut c, round);
        steal_half(&mut c, round);
    }
    c.final_summary();
    if std::env::args().any(|a| a == "--bench") {
        summary(&dir);
        paired_pairs();
    }
}
