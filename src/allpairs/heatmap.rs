//! The all-pairs heatmap: one cell per pair, coloured from red (slowest pair) to
//! green (fastest), with its bandwidth written in it and slow pairs outlined.

use super::judging::{gbs, three_significant, Verdict};
use super::matrix::{PairResults, SizeMatrices};
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

/// Draws the algbw matrix of the size bandwidth was judged at into a new PNG,
/// written whole (never over a file or through a link at `path`).
pub fn write_png(
    path: &Path,
    results: &PairResults,
    verdict: &Verdict,
    what: &str,
) -> anyhow::Result<()> {
    let Some(sizes) = results.at(verdict.bw_size) else {
        return Ok(());
    };
    let n = results.labels.len() as u32;
    let size = (
        (MARGIN_LEFT + n * CELL + MARGIN_RIGHT).max(480),
        MARGIN_TOP + n * CELL + MARGIN_BOTTOM,
    );
    let png = crate::plot::png_bytes(size, |root| {
        draw(root, results, sizes, verdict, what)
            .map_err(|e| anyhow!("heatmap {}: {e}", path.display()))
    })?;
    write_whole(path, Replace::Never, &png)
        .map(drop)
        .with_context(|| format!("cannot write {}", path.display()))
}

fn draw(
    root: &DrawingArea<BitMapBackend, Shift>,
    results: &PairResults,
    sizes: &SizeMatrices,
    verdict: &Verdict,
    what: &str,
) -> anyhow::Result<()> {
    let n = results.labels.len();
    let plot = |e: &dyn std::fmt::Display| anyhow!("{e}");
    root.fill(&WHITE).map_err(|e| plot(&e))?;
    let values: Vec<f64> = sizes.algbw_gbs.pairs().iter().map(|p| p.2).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let title = ("sans-serif", 16).into_font();
    let label = ("sans-serif", 12).into_font();
    root.draw(&Text::new(
        format!("{what}: algbw (GB/s) of each pair at {} B", verdict.bw_size),
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
    for (i, name) in results.labels.iter().enumerate() {
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
            let Some(v) = sizes.algbw_gbs.get(a, b) else {
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
            let slow = verdict
                .slow_bw
                .iter()
                .any(|p| (p.a, p.b) == (a.min(b), a.max(b)));
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
