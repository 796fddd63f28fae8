//! `<coll>_latency`: per-iteration p50/p99/p99.9 vs size (log-log), one colour
//! per series and one stroke per percentile.

use super::draw::{
    axes, color, draw_line, draw_markers, frame, positive_range, series_legend, size_axis,
    time_axis, Chart, LegendEntry, Stroke,
};
use super::points::Averaged;
use super::Series;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeSet;

pub struct LatencyChart<'a> {
    pub collective: &'a str,
    pub setting: &'a str,
    pub series: &'a [Series<'a>],
    /// Distinct -n values of the rows.
    pub iters: &'a BTreeSet<usize>,
}

const PERCENTILES: [(&str, Stroke); 3] = [
    ("p50", Stroke::Solid),
    ("p99", Stroke::Dashed),
    ("p99.9", Stroke::Dotted),
];

impl Chart for LatencyChart<'_> {
    fn legend(&self) -> Vec<LegendEntry> {
        let mut legend = series_legend(self.series, |_| Stroke::Solid);
        legend.extend(PERCENTILES.iter().map(|(name, stroke)| LegendEntry {
            label: name.to_string(),
            color: BLACK,
            stroke: *stroke,
        }));
        legend
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let lines: Vec<Vec<Vec<(f64, f64)>>> = self
            .series
            .iter()
            .map(|s| {
                [Averaged::P50, Averaged::P99, Averaged::P999]
                    .into_iter()
                    .map(|a| s.line(a).into_iter().filter(|p| p.1 > 0.0).collect())
                    .collect()
            })
            .collect();
        let (lo, hi) = positive_range(lines.iter().flatten().flatten().map(|p| p.1));

        let fewest = self.iters.first().copied().unwrap_or(0);
        let mut note = format!(
            "time of an iteration = when its last rank finished; {} iterations per size",
            self.iters
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join("/")
        );
        if fewest < 100 {
            note += "; under 100 iterations p99 and p99.9 are the max";
        } else if fewest < 1000 {
            note += "; under 1000 iterations p99.9 is the max";
        }
        let captions = vec![self.setting.to_string(), note];

        let area = frame(
            root,
            &format!(
                "{}: per-iteration latency p50 / p99 / p99.9 vs message size",
                self.collective
            ),
            &captions,
            &self.legend(),
        )?;
        let (x, _) = size_axis(self.series);
        let mut chart = axes(&area, x, time_axis(lo, hi))?;
        for (i, per_percentile) in lines.into_iter().enumerate() {
            for (points, (_, stroke)) in per_percentile.into_iter().zip(PERCENTILES) {
                draw_markers(&mut chart, &points, color(i))?;
                draw_line(&mut chart, points, color(i), stroke)?;
            }
        }
        Ok(())
    }
}
