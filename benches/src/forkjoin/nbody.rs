//! n-body, rayon-demo's shape: N bodies under gravity-like attraction, a few
//! time steps; each step computes every body's new velocity from all the
//! others' positions (O(N^2)), then moves every body.
//!
//! The parallel part is a `join` recursion over ranges of bodies: each leaf
//! of at most [`NBODY_LEAF`] bodies reads the shared positions and writes
//! only its own slice of the next state. A body's update is computed by the
//! same loop in the same order whatever the split, so every implementation
//! should match the sequential run exactly; [`check_against`] allows
//! [`TOLERANCE`] (relative) all the same, and also checks the total energy.

use super::{ForkJoin, Sequential};
use crate::typed::mix64;

/// Bodies in the benchmark run.
pub const NBODY_N: usize = 4_000;
/// Time steps in the benchmark run.
pub const NBODY_STEPS: usize = 3;
/// Bodies per leaf of the `join` recursion.
pub const NBODY_LEAF: usize = 32;
/// Largest relative difference from the sequential run accepted in a
/// position or velocity.
pub const TOLERANCE: f64 = 1e-9;

const DT: f64 = 1e-4;
/// Softening: keeps close encounters finite.
const EPS2: f64 = 0.01;

/// One body: position, velocity, mass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Body {
    /// Position.
    pub pos: [f64; 3],
    /// Velocity.
    pub vel: [f64; 3],
    /// Mass.
    pub mass: f64,
}

fn unit(seed: u64) -> f64 {
    (mix64(seed) >> 11) as f64 / (1u64 << 53) as f64
}

/// `n` bodies from `seed`: positions in a unit cube, small velocities,
/// masses in 0.5..1.5.
pub fn initial(n: usize, seed: u64) -> Vec<Body> {
    (0..n as u64)
        .map(|i| {
            let r = |k: u64| unit(seed ^ (i * 8 + k).wrapping_mul(0xA24B_AED4_963E_E407));
            Body {
                pos: [r(0) - 0.5, r(1) - 0.5, r(2) - 0.5],
                vel: [
                    0.01 * (r(3) - 0.5),
                    0.01 * (r(4) - 0.5),
                    0.01 * (r(5) - 0.5),
                ],
                mass: 0.5 + r(6),
            }
        })
        .collect()
}

/// `body` after one step, given everyone's current state.
#[inline]
fn advance(all: &[Body], body: &Body) -> Body {
    let mut acc = [0.0f64; 3];
    for other in all {
        let d = [
            other.pos[0] - body.pos[0],
            other.pos[1] - body.pos[1],
            other.pos[2] - body.pos[2],
        ];
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + EPS2;
        let inv = other.mass / (r2 * r2.sqrt());
        for (a, dk) in acc.iter_mut().zip(d) {
            *a += dk * inv;
        }
    }
    let mut next = *body;
    for ((v, p), a) in next.vel.iter_mut().zip(&mut next.pos).zip(acc) {
        *v += a * DT;
        *p += *v * DT;
    }
    next
}

/// Writes the next state of `cur[first..first + out.len()]` into `out`.
fn step_range<F: ForkJoin>(fj: &F, cur: &[Body], first: usize, out: &mut [Body]) {
    if out.len() <= NBODY_LEAF {
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = advance(cur, &cur[first + i]);
        }
        return;
    }
    let mid = out.len() / 2;
    let (lo, hi) = out.split_at_mut(mid);
    fj.join(
        || step_range(fj, cur, first, lo),
        || step_range(fj, cur, first + mid, hi),
    );
}

/// Runs `steps` steps from `bodies` and returns the final state.
pub fn simulate<F: ForkJoin>(fj: &F, mut bodies: Vec<Body>, steps: usize) -> Vec<Body> {
    let mut next = bodies.clone();
    for _ in 0..steps {
        step_range(fj, &bodies, 0, &mut next);
        std::mem::swap(&mut bodies, &mut next);
    }
    bodies
}

/// The sequential result, the reference every run is checked against.
pub fn reference(bodies: Vec<Body>, steps: usize) -> Vec<Body> {
    simulate(&Sequential, bodies, steps)
}

/// Kinetic plus (softened) potential energy.
pub fn energy(bodies: &[Body]) -> f64 {
    let mut e = 0.0;
    for (i, b) in bodies.iter().enumerate() {
        e += 0.5 * b.mass * b.vel.iter().map(|v| v * v).sum::<f64>();
        for o in &bodies[i + 1..] {
            let r2: f64 = (0..3).map(|k| (o.pos[k] - b.pos[k]).powi(2)).sum::<f64>() + EPS2;
            e -= b.mass * o.mass / r2.sqrt();
        }
    }
    e
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()).max(1e-12)
}

/// Panics unless `got` matches `want` (the sequential run) body by body
/// within [`TOLERANCE`], and their energies agree as closely.
pub fn check_against(got: &[Body], want: &[Body], who: &str) {
    assert_eq!(got.len(), want.len(), "{who}: body count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        for k in 0..3 {
            assert!(
                close(g.pos[k], w.pos[k]) && close(g.vel[k], w.vel[k]),
                "{who}: body {i} differs from the sequential run: {g:?} vs {w:?}"
            );
        }
    }
    let (eg, ew) = (energy(got), energy(want));
    assert!(close(eg, ew), "{who}: energy {eg} vs sequential {ew}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forkjoin::{MagpieJoin, RayonJoin};

    #[test]
    fn parallel_nbody_matches_the_sequential_run() {
        let rayon = RayonJoin::new(2);
        let start = initial(300, 11);
        let want = reference(start.clone(), 3);
        let got = rayon.install(|| simulate(&rayon, start.clone(), 3));
        check_against(&got, &want, "rayon");
        let magpie = MagpieJoin::new(2);
        let got_m = magpie.install(|| simulate(&magpie, start.clone(), 3));
        check_against(&got_m, &want, "magpie");
        assert_ne!(got, start, "the bodies moved");
    }

    #[test]
    fn energy_is_nearly_conserved_over_a_few_steps() {
        let start = initial(200, 5);
        let (e0, e1) = (energy(&start), energy(&reference(start.clone(), 5)));
        assert!(((e1 - e0) / e0).abs() < 1e-3, "{e0} -> {e1}");
    }

    #[test]
    #[should_panic(expected = "differs from the sequential run")]
    fn check_against_catches_a_moved_body() {
        let want = initial(10, 1);
        let mut got = want.clone();
        got[3].pos[1] += 1e-6;
        check_against(&got, &want, "test");
    }
}
