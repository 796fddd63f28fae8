//! `<coll>_latency_dist_<size>B`: the per-iteration latency distribution at one
//! size, as HdrHistogram draws it (latency vs percentile, both log scales).

use super::draw::{
    axes, color, draw_line, draw_markers, frame, positive_range, time_axis, Axis, Chart,
    LegendEntry, Stroke,
};
use super::Distribution;
use crate::sizes::human_bytes;
use plotters::coord::Shift;
use plotters::prelude::*;

pub struct DistributionChart<'a> {
    pub collective: &'a str,
    pub setting: &'a str,
    pub size: u64,
    pub distributions: &'a [Distribution],
}

/// Where the distribution's x axis is labelled.
const TICK_PERCENTILES: [f64; 11] = [
    0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999,
];

/// "0%", "90%", "99.9%": the percentile at x = 1/(1-p).
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    let s = format!("{p:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

impl Chart for DistributionChart<'_> {
    fn legend(&self) -> Vec<LegendEntry> {
        let full = self.distributions.iter().filter(|d| d.full).count();
        self.distributions
            .iter()
            .enumerate()
            .map(|(i, d)| LegendEntry {
                label: if d.full || full == 0 {
                    d.label.clone()
                } else {
                    format!("{} (CSV)", d.label)
                },
                color: color(i),
                stroke: if d.full {
                    Stroke::Solid
                } else {
                    Stroke::Dotted
                },
            })
            .collect()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        // x = 1/(1-p): 50% at 2, 99% at 100; the max (p = 1) sits at the sample
        // count, the finest step the iterations resolve.
        let curves: Vec<Vec<(f64, f64)>> = self
            .distributions
            .iter()
            .map(|d| {
                let n = d.points.last().map_or(1, |p| p.total_count).max(1) as f64;
                d.points
                    .iter()
                    .map(|p| {
                        let x = if p.quantile >= 1.0 {
                            n
                        } else {
                            (1.0 / (1.0 - p.quantile)).min(n)
                        };
                        (x, p.value_us)
                    })
                    .collect()
            })
            .collect();
        let x_max = curves.iter().flatten().map(|p| p.0).fold(2.0, f64::max);
        let x_hi = x_max * 1.5;
        // Log y: one slow iteration can be 1000 times the median, and both must be read.
        let (y_lo, y_hi) = positive_range(curves.iter().flatten().map(|p| p.1));

        let full = self.distributions.iter().filter(|d| d.full).count();
        let source = if full == self.distributions.len() {
            "full distributions from the HdrHistogram of every iteration".to_string()
        } else if full == 0 {
            "CSV percentiles only: min, p50, p99, p99.9, max (those the iteration count resolves); \
             dotted lines join them"
                .to_string()
        } else {
            "full distributions where --hist files were found; lines marked (CSV) have the CSV's percentiles only"
                .to_string()
        };
        let mut captions = vec![self.setting.to_string(), source];
        captions.push(if full < self.distributions.len() {
            "for every iteration's time: run the benchmark with --hist DIR, then plot --hist DIR".to_string()
        } else {
            "time of an iteration = when its last rank finished; the max sits at the iteration count".to_string()
        });

        let area = frame(
            root,
            &format!(
                "{}: per-iteration latency distribution at {}",
                self.collective,
                human_bytes(self.size)
            ),
            &captions,
            &self.legend(),
        )?;
        // Percentile ticks, and "max" where the largest sample count puts the max.
        let mut ticks: Vec<f64> = TICK_PERCENTILES
            .iter()
            .map(|p| 1.0 / (1.0 - p))
            .filter(|&x| x < x_max / 1.2)
            .collect();
        ticks.push(x_max);
        let x_format = |v: &f64| {
            if *v == x_max {
                "max".to_string()
            } else {
                percentile_label(*v)
            }
        };
        let x = Axis {
            desc: "percentile (spaced by 1/(1-p), log scale)",
            labels: None,
            format: &x_format,
        };
        let x_range = (1f64..x_hi).log_scale().base(10.0).with_key_points(ticks);
        let mut chart = axes(&area, (x_range, x), time_axis(y_lo, y_hi))?;
        for (i, (points, d)) in curves.into_iter().zip(self.distributions).enumerate() {
            draw_markers(&mut chart, &points, color(i))?;
            let stroke = if d.full {
                Stroke::Solid
            } else {
                Stroke::Dotted
            };
            draw_line(&mut chart, points, color(i), stroke)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels() {
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(2.0), "50%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(1000.0), "99.9%");
    }
}
