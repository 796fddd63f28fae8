//! The all-pairs heatmap: one cell per pair, coloured from red (slowest pair) to
//! green (fastest), with its bandwidth written in it and slow pairs outlined.
//! Above `MAX_CELLS` ranks a cell is a block of ranks showing its worst pair, so
//! the image stays the same size whatever N (one cell a rank overflows the
//! plotting library's integer arithmetic from about 722 ranks).

use super::judging::{gbs, three_significant, PairsVerdict};
use super::matrix::{Matrix, PairResults, SizeMatrices};
use crate::output::{write_whole, Replace};
use anyhow::{anyhow, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

const CELL: u32 = 64;
const MARGIN_LEFT: u32 = 150;
const MARGIN_TOP: u32 = 70;
const MARGIN_RIGHT: u32 = 20;
const MARGIN_BOTTOM: u32 = 40;
/// Cells a side at most.
const MAX_CELLS: usize = 48;

/// What is drawn: a cell per rank, or per block of `per` ranks.
struct View {
    labels: Vec<String>,
    algbw: Matrix,
    /// Cells outlined (a slow pair in them), each once.
    slow: Vec<(usize, usize)>,
    per: usize,
}

impl View {
    fn of(results: &PairResults, sizes: &SizeMatrices, verdict: &PairsVerdict) -> View {
        let n = results.labels.len();
        let per = n.div_ceil(MAX_CELLS).max(1);
        let cells = n.div_ceil(per);
        let mut algbw = Matrix::empty(cells);
        for (a, b, v) in sizes.algbw_gbs.pairs() {
            let (x, y) = (a / per, b / per);
            if algbw.get(x, y).is_none_or(|worst| v < worst) {
                algbw.set(x, y, v);
            }
        }
        let mut slow: Vec<(usize, usize)> = verdict
            .slow_bw
            .iter()
            .map(|p| (p.a / per, p.b / per))
            .collect();
        slow.sort_unstable();
        slow.dedup();
        let labels = (0..cells)
            .map(|c| {
                let (first, last) = (c * per, ((c + 1) * per).min(n) - 1);
                match per {
                    1 => results.labels[first].clone(),
                    _ => format!("{} .. {}", results.labels[first], results.labels[last]),
                }
            })
            .collect();
        View {
            labels,
            algbw,
            slow,
            per,
        }
    }

    /// The picture's width and height in pixels.
    fn size(&self) -> (u32, u32) {
        let n = self.labels.len() as u32;
        (
            (MARGIN_LEFT + n * CELL + MARGIN_RIGHT).max(480),
            MARGIN_TOP + n * CELL + MARGIN_BOTTOM,
        )
    }
}

/// Draws the algbw matrix of the size bandwidth was judged at into a new PNG,
/// written whole (never over a file or through a link at `path`).
pub fn write_png(
    path: &Path,
    results: &PairResults,
    verdict: &PairsVerdict,
    what: &str,
) -> anyhow::Result<()> {
    let Some(sizes) = results.at(verdict.bw_size) else {
        return Ok(());
    };
    let view = View::of(results, sizes, verdict);
    let png = crate::plot::png_bytes(view.size(), |root| {
        draw(root, &view, verdict, what).map_err(|e| anyhow!("heatmap {}: {e}", path.display()))
    })?;
    write_whole(path, Replace::Never, &png)
        .map(drop)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The same picture as SVG text, for a page to hold inline; None where the
/// size bandwidth was judged at has no matrix.
pub fn svg(
    results: &PairResults,
    verdict: &PairsVerdict,
    what: &str,
) -> anyhow::Result<Option<String>> {
    let Some(sizes) = results.at(verdict.bw_size) else {
        return Ok(None);
    };
    let view = View::of(results, sizes, verdict);
    crate::plot::svg_string(view.size(), |root| draw(root, &view, verdict, what)).map(Some)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &View,
    verdict: &PairsVerdict,
    what: &str,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let n = view.labels.len();
    let plot = |e: &dyn std::fmt::Display| anyhow!("{e}");
    root.fill(&WHITE).map_err(|e| plot(&e))?;
    let values: Vec<f64> = view.algbw.pairs().iter().map(|p| p.2).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let title = ("sans-serif", 16).into_font();
    let label = ("sans-serif", 12).into_font();
    let each = match view.per {
        1 => "each pair".to_string(),
        per => format!("the worst pair of each block of {per} ranks"),
    };
    root.draw(&Text::new(
        format!("{what}: algbw (GB/s) of {each} at {} B", verdict.bw_size),
        (10, 10),
        title,
    ))
    .map_err(|e| plot(&e))?;
    let subtitle = if verdict.bw_judged {
        format!(
            "median {} GB/s; outlined: below the slow threshold ({} pair(s))",
            gbs(verdict.median_gbs),
            verdict.slow_bw.len()
        )
    } else {
        format!(
            "{}: no pair outlined",
            verdict.bandwidth(|s| format!("{s} B"))
        )
    };
    root.draw(&Text::new(subtitle, (10, 32), label.clone()))
        .map_err(|e| plot(&e))?;
    let cell = |i: u32| (i * CELL) as i32;
    for (i, name) in view.labels.iter().enumerate() {
        let y = MARGIN_TOP as i32 + cell(i as u32) + CELL as i32 / 2 - 6;
        root.draw(&Text::new(format!("{i}  {name}"), (10, y), label.clone()))
            .map_err(|e| plot(&e))?;
        let x = MARGIN_LEFT as i32 + cell(i as u32) + 4;
        root.draw(&Text::new(
            format!("{i}"),
            (x, MARGIN_TOP as i32 - 16),
            label.clone(),
        ))
        .map_err(|e| plot(&e))?;
    }
    for a in 0..n {
        for b in 0..n {
            let x0 = MARGIN_LEFT as i32 + cell(b as u32);
            let y0 = MARGIN_TOP as i32 + cell(a as u32);
            let corners = [(x0, y0), (x0 + CELL as i32 - 2, y0 + CELL as i32 - 2)];
            let Some(v) = view.algbw.get(a, b) else {
                root.draw(&Rectangle::new(corners, RGBColor(230, 230, 230).filled()))
                    .map_err(|e| plot(&e))?;
                continue;
            };
            // Red for the slowest pair, green for the fastest.
            let t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
            root.draw(&Rectangle::new(
                corners,
                HSLColor(t / 3.0, 0.65, 0.55).filled(),
            ))
            .map_err(|e| plot(&e))?;
            let slow = view.slow.contains(&(a.min(b), a.max(b)));
            if slow {
                root.draw(&Rectangle::new(corners, BLACK.stroke_width(3)))
                    .map_err(|e| plot(&e))?;
            }
            root.draw(&Text::new(
                three_significant(v),
                (x0 + 6, y0 + CELL as i32 / 2 - 6),
                label.clone(),
            ))
            .map_err(|e| plot(&e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::judging::Thresholds;
    use super::super::matrix::tests::results;
    use super::*;

    #[test]
    fn a_large_job_is_drawn_in_blocks_and_names_its_worst_pair() {
        // 800 ranks: past where one cell a rank overflowed the plotting library.
        let mut r = results(800, None, 45.0, 0.0);
        r.sizes[1].algbw_gbs.set(3, 700, 4.5);
        let verdict = r.judge(&Thresholds::default());
        let view = View::of(&r, r.at(verdict.bw_size).unwrap(), &verdict);
        assert_eq!((view.per, view.labels.len()), (17, 48));
        assert_eq!(view.labels[0], "node0 .. node16");
        assert_eq!(view.algbw.get(0, 700 / 17), Some(4.5));
        assert_eq!(view.algbw.get(1, 2), Some(45.0));
        assert_eq!(view.slow, vec![(0, 700 / 17)]);
        let dir = std::env::temp_dir().join(format!("heatmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let png = dir.join("pairs.png");
        write_png(&png, &r, &verdict, "sendrecv_perf").unwrap();
        assert!(std::fs::metadata(&png).unwrap().len() > 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
