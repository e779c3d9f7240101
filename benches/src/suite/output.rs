//! What a [`Run`] writes: `results.md` (machine, validity, per-group times
//! and ratios with their spread), `results.tsv` (the same numbers, one row
//! each, for baselines and scripts), `plots/<group>.svg`, and
//! `comparison.md` against a baseline run's `results.tsv`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::{GroupResult, Run, MIN_SPEED};
use crate::forkjoin::quantile;
use crate::report::Spread;

/// The TSV header; [`parse_tsv`] reads rows in this shape.
pub const TSV_HEADER: &str = "kind\tgroup\tname\tn\tmin\tq1\tmedian\tq3\tmax\tp99\tunit\tvalid";

/// One row of `results.tsv`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `time` (a peer's per-round times), `ratio` (per-round `a / b`) or
    /// `latency` (every sample of a round trip).
    pub kind: String,
    /// Group.
    pub group: String,
    /// Peer, or the ratio's label.
    pub name: String,
    /// The spread of the values.
    pub spread: Spread,
    /// 99th percentile (latency rows only).
    pub p99: Option<f64>,
    /// `ms`, `ns` or `x`.
    pub unit: String,
    /// Whether the run was valid.
    pub valid: bool,
}

impl Row {
    fn tsv(&self) -> String {
        let s = &self.spread;
        format!(
            "{}\t{}\t{}\t{}\t{:.6}\t{:.6}\t{:.6}\t{:.6}\t{:.6}\t{}\t{}\t{}",
            self.kind,
            self.group,
            self.name,
            s.n,
            s.min,
            s.q1,
            s.median,
            s.q3,
            s.max,
            self.p99.map_or(String::new(), |p| format!("{p:.6}")),
            self.unit,
            u8::from(self.valid)
        )
    }
}

/// Every row a run reports.
pub fn rows(run: &Run) -> Vec<Row> {
    let valid = run.validity.is_valid();
    let mut out = Vec::new();
    for g in &run.groups {
        for (peer, times) in &g.peers {
            let ms: Vec<f64> = times.iter().map(|t| t * 1e3).collect();
            if let Some(spread) = Spread::of(&ms) {
                out.push(Row {
                    kind: "time".into(),
                    group: g.name.clone(),
                    name: peer.clone(),
                    spread,
                    p99: None,
                    unit: "ms".into(),
                    valid,
                });
            }
        }
        for (label, a, b) in g.ratio_pairs() {
            if let Some(spread) = g.round_ratios(&a, &b).and_then(|r| Spread::of(&r)) {
                out.push(Row {
                    kind: "ratio".into(),
                    group: g.name.clone(),
                    name: label,
                    spread,
                    p99: None,
                    unit: "x".into(),
                    valid,
                });
            }
        }
        for (peer, xs) in &g.latencies {
            if let Some(spread) = Spread::of(xs) {
                out.push(Row {
                    kind: "latency".into(),
                    group: g.name.clone(),
                    name: peer.clone(),
                    spread,
                    p99: quantile(xs, 0.99),
                    unit: "ns".into(),
                    valid,
                });
            }
        }
    }
    out
}

/// Parses a `results.tsv` written by [`write_all`].
pub fn parse_tsv(text: &str) -> Vec<Row> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() != 12 {
                return None;
            }
            let num = |i: usize| f[i].parse::<f64>().ok();
            Some(Row {
                kind: f[0].into(),
                group: f[1].into(),
                name: f[2].into(),
                spread: Spread {
                    n: f[3].parse().ok()?,
                    min: num(4)?,
                    q1: num(5)?,
                    median: num(6)?,
                    q3: num(7)?,
                    max: num(8)?,
                },
                p99: num(9),
                unit: f[10].into(),
                valid: f[11] == "1",
            })
        })
        .collect()
}

fn header(run: &Run) -> String {
    let m = &run.machine;
    let v = &run.validity;
    let mut s = String::new();
    let problems = v.problems();
    if problems.is_empty() {
        s.push_str("# benches/run: VALID\n\n");
    } else {
        s.push_str("# benches/run: INVALID\n\n");
        for p in &problems {
            let _ = writeln!(s, "- INVALID: {p}");
        }
        s.push_str(
            "\nThe times below are what was measured; no ratio or speedup of this run is a result.\n\n",
        );
    }
    let _ = writeln!(s, "| | |\n| --- | --- |");
    let _ = writeln!(s, "| CPU | {} |", m.cpu);
    let _ = writeln!(s, "| cores | {} |", m.cores);
    let _ = writeln!(s, "| workers per pool | {} |", run.options.workers);
    let _ = writeln!(s, "| rustc | {} |", m.rustc);
    let _ = writeln!(s, "| commit | {} |", m.commit);
    let _ = writeln!(
        s,
        "| load average at start / end | {} / {} |",
        m.load_start, run.load_end
    );
    let _ = writeln!(s, "| highest 1-min load sampled | {:.2} |", v.max_load());
    let _ = writeln!(
        s,
        "| calibration idle | {:.3} ns/iter |",
        v.idle_ns_per_iter
    );
    if let Some(sp) = v.speed() {
        let _ = writeln!(
            s,
            "| calibration during the run, % of idle speed | median {:.1} (min {:.1}, q1 {:.1}, q3 {:.1}; {} spot checks; valid needs median >= {:.0}) |",
            100.0 * sp.median,
            100.0 * sp.min,
            100.0 * sp.q1,
            100.0 * sp.q3,
            sp.n,
            100.0 * MIN_SPEED
        );
    }
    let _ = writeln!(
        s,
        "| mode | {} |",
        if run.options.quick {
            "--quick (small sizes, few rounds)"
        } else {
            "full"
        }
    );
    let _ = writeln!(s, "| wall time | {:.1} s |", run.elapsed.as_secs_f64());
    s
}

fn group_md(g: &GroupResult, rows: &[Row], valid: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n## {}\n\n{}\n", g.name, g.what);
    if g.latencies.is_empty() {
        let rounds = g.peers.first().map_or(0, |(_, t)| t.len());
        let _ = writeln!(
            s,
            "{rounds} rounds, every peer once per round in a balanced order. Time per run, ms: median (min, q1-q3, max){}.\n",
            if g.tasks > 0 { "; ns per task from the median" } else { "" }
        );
        let _ = writeln!(
            s,
            "| peer | median ms | min | q1 | q3 | max |{}",
            if g.tasks > 0 { " ns/task |" } else { "" }
        );
        let _ = writeln!(
            s,
            "| --- | ---: | ---: | ---: | ---: | ---: |{}",
            if g.tasks > 0 { " ---: |" } else { "" }
        );
        for r in rows
            .iter()
            .filter(|r| r.kind == "time" && r.group == g.name)
        {
            let sp = &r.spread;
            let _ = write!(
                s,
                "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                r.name, sp.median, sp.min, sp.q1, sp.q3, sp.max
            );
            if g.tasks > 0 {
                let _ = write!(s, " {:.2} |", sp.median * 1e6 / g.tasks as f64);
            }
            s.push('\n');
        }
    }
    let lat: Vec<&Row> = rows
        .iter()
        .filter(|r| r.kind == "latency" && r.group == g.name)
        .collect();
    if !lat.is_empty() {
        let _ = writeln!(s, "\nEvery round trip, ns:\n\n| peer | samples | p50 | p99 | min | q1 | q3 | max |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        for r in lat {
            let sp = &r.spread;
            let _ = writeln!(
                s,
                "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                r.name,
                sp.n,
                sp.median,
                r.p99.unwrap_or(f64::NAN),
                sp.min,
                sp.q1,
                sp.q3,
                sp.max
            );
        }
    }
    let ratios: Vec<&Row> = rows
        .iter()
        .filter(|r| r.kind == "ratio" && r.group == g.name)
        .collect();
    if !ratios.is_empty() {
        if valid {
            let _ = writeln!(s, "\nPer-round ratios (time / time{}; speedup = seq / peer): median (min, q1-q3, max).", if g.latencies.is_empty() { "" } else { ", a round's time is the median of its round trips" });
            let _ = writeln!(s, "\n| ratio | median | min | q1 | q3 | max |\n| --- | ---: | ---: | ---: | ---: | ---: |");
            for r in ratios {
                let sp = &r.spread;
                let _ = writeln!(
                    s,
                    "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    r.name, sp.median, sp.min, sp.q1, sp.q3, sp.max
                );
            }
        } else {
            let _ = writeln!(s, "\nRatios and speedups withheld: the run is INVALID (they are in results.tsv with valid = 0).");
        }
    }
    s
}

/// `results.md`'s text.
pub fn markdown(run: &Run, rows: &[Row]) -> String {
    let valid = run.validity.is_valid();
    let mut s = header(run);
    for g in &run.groups {
        s.push_str(&group_md(g, rows, valid));
    }
    s
}

/// `comparison.md`'s text: every row present in both runs, this run's
/// median against the baseline's.
pub fn comparison(rows: &[Row], base: &[Row], base_dir: &Path) -> String {
    let index: HashMap<(&str, &str, &str), &Row> = base
        .iter()
        .map(|r| ((r.kind.as_str(), r.group.as_str(), r.name.as_str()), r))
        .collect();
    let validity = |v: bool| if v { "valid" } else { "INVALID" };
    let mut s = format!("# Against the baseline {}\n\n", base_dir.display());
    let (this_valid, base_valid) = (rows.iter().all(|r| r.valid), base.iter().all(|r| r.valid));
    let _ = writeln!(
        s,
        "This run is {}, the baseline {}. Medians; `this / baseline` above 1 means this run's time (or ratio) is larger. For a time row the baseline's own q1-q3 is given, to judge whether a change is outside its spread.\n",
        validity(this_valid),
        validity(base_valid)
    );
    let _ = writeln!(s, "| kind | group | name | baseline median (q1-q3) | this median (q1-q3) | this / baseline |\n| --- | --- | --- | ---: | ---: | ---: |");
    let mut matched = 0;
    for r in rows {
        let Some(b) = index.get(&(r.kind.as_str(), r.group.as_str(), r.name.as_str())) else {
            continue;
        };
        matched += 1;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3} ({:.3}-{:.3}) {} | {:.3} ({:.3}-{:.3}) {} | {:.3} |",
            r.kind,
            r.group,
            r.name,
            b.spread.median,
            b.spread.q1,
            b.spread.q3,
            b.unit,
            r.spread.median,
            r.spread.q1,
            r.spread.q3,
            r.unit,
            r.spread.median / b.spread.median
        );
    }
    if matched == 0 {
        s.push_str("\nNo row of this run is in the baseline (different sizes? `--quick` runs name their groups by their smaller sizes).\n");
    }
    s
}

/// Draws `g`'s per-round times as one box per peer: whiskers min-max, box
/// q1-q3, a line at the median.
fn plot_group(g: &GroupResult, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let stats: Vec<(&str, Spread)> = g
        .peers
        .iter()
        .filter_map(|(p, t)| {
            let ms: Vec<f64> = t.iter().map(|x| x * 1e3).collect();
            Spread::of(&ms).map(|s| (p.as_str(), s))
        })
        .collect();
    if stats.is_empty() {
        return Ok(());
    }
    let top = stats
        .iter()
        .map(|(_, s)| s.max)
        .fold(0.0, f64::max)
        .max(1e-6)
        * 1.1;
    let bottom = -0.08 * top;
    let n = stats.len() as f64;
    let root = SVGBackend::new(path, (120 + 110 * stats.len() as u32, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{}: time per run (ms)", g.name), ("sans-serif", 18))
        .margin(12)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..n - 0.5, bottom..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(1)
        .x_label_formatter(&|_| String::new())
        .y_desc("ms")
        .draw()?;
    for (i, (name, s)) in stats.iter().enumerate() {
        let x = i as f64;
        let colour = Palette99::pick(i).to_rgba();
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x - 0.3, s.q1), (x + 0.3, s.q3)],
            colour.mix(0.35).filled(),
        )))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x - 0.3, s.median), (x + 0.3, s.median)],
            BLACK.stroke_width(2),
        )))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, s.min), (x, s.q1)],
            BLACK,
        )))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, s.q3), (x, s.max)],
            BLACK,
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            name.to_string(),
            (x - 0.3, bottom * 0.4),
            ("sans-serif", 13),
        )))?;
    }
    root.present()?;
    Ok(())
}

/// Writes everything into `run.options.out`, and `comparison.md` when a
/// baseline was given; returns the files written.
pub fn write_all(run: &Run) -> io::Result<Vec<PathBuf>> {
    let dir = &run.options.out;
    fs::create_dir_all(dir.join("plots"))?;
    let rows = rows(run);
    let mut written = Vec::new();
    let md = dir.join("results.md");
    fs::write(&md, markdown(run, &rows))?;
    written.push(md);
    let tsv = dir.join("results.tsv");
    let mut text = String::from(TSV_HEADER);
    text.push('\n');
    for r in &rows {
        text.push_str(&r.tsv());
        text.push('\n');
    }
    fs::write(&tsv, text)?;
    written.push(tsv);
    for g in &run.groups {
        let path = dir.join("plots").join(format!("{}.svg", g.name));
        match plot_group(g, &path) {
            Ok(()) => written.push(path),
            Err(e) => eprintln!("plot {}: {e}", path.display()),
        }
    }
    if let Some(base) = &run.options.baseline {
        let base_rows = parse_tsv(&fs::read_to_string(base.join("results.tsv"))?);
        let path = dir.join("comparison.md");
        fs::write(&path, comparison(&rows, &base_rows, base))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: &str, name: &str, median: f64, valid: bool) -> Row {
        Row {
            kind: kind.into(),
            group: "g".into(),
            name: name.into(),
            spread: Spread {
                n: 4,
                min: median / 2.0,
                q1: median - 1.0,
                median,
                q3: median + 1.0,
                max: median * 2.0,
            },
            p99: (kind == "latency").then_some(median * 3.0),
            unit: "ms".into(),
            valid,
        }
    }

    #[test]
    fn tsv_rows_read_back_as_written() {
        let rows = vec![
            row("time", "magpie", 12.5, true),
            row("latency", "rayon_join", 4000.0, false),
        ];
        let mut text = String::from(TSV_HEADER);
        for r in &rows {
            text.push('\n');
            text.push_str(&r.tsv());
        }
        assert_eq!(parse_tsv(&text), rows);
    }

    #[test]
    fn comparison_divides_this_run_by_the_baseline_row_by_row() {
        let base = vec![
            row("time", "magpie", 10.0, true),
            row("time", "gone", 1.0, true),
        ];
        let this = vec![
            row("time", "magpie", 12.0, false),
            row("time", "new", 1.0, false),
        ];
        let text = comparison(&this, &base, Path::new("/b"));
        assert!(
            text.contains("This run is INVALID, the baseline valid"),
            "{text}"
        );
        assert!(text.contains("| time | g | magpie | 10.000"), "{text}");
        assert!(text.contains("| 1.200 |"), "{text}");
        assert!(
            !text.contains("| new |") && !text.contains("| gone |"),
            "{text}"
        );
        let none = comparison(&this[1..], &base, Path::new("/b"));
        assert!(none.contains("No row of this run is in the baseline"));
    }
}
