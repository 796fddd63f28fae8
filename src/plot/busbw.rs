//! `<coll>_busbw`: busbw vs size (log2 x), one line per run and placement, the
//! limits as labelled horizontal lines (always drawn: the y axis turns to a log
//! scale when one is far above the data), the performance model's expected
//! busbw of each run as a dashed curve beside them, each line's best point
//! ringed with its % of limit; and, where the caller gives them, bounds that
//! hold at one size only (rack_check's busbw floors) as short dashed segments
//! at that size.

use super::draw::{
    axes, axis_number, color, draw_line, draw_markers, frame, log_axis, positive_range,
    series_legend, series_stroke, size_axis, stroke_line, Axis, Chart, LegendEntry, Stroke, FONT,
};
use super::Series;
use crate::limits::Limit;
use crate::sizes::human_bytes;
use plotters::coord::combinators::LogCoord;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const LIMIT_COLOR: RGBColor = RGBColor(120, 0, 0);
const EXPECTED_COLOR: RGBColor = RGBColor(70, 70, 70);
const MARK_COLOR: RGBColor = RGBColor(214, 39, 40);
/// Pixels a mark reaches either side of its size.
const MARK_HALF_WIDTH: i32 = 24;

/// A limit or mark more than this many times the best busbw (or a mark less
/// than its fraction) puts the y axis on a log scale: on a linear one every
/// line, or the mark, would be flattened against the bottom, and leaving the
/// limit out would hide how far the fabric is from it.
const LOG_SCALE_ABOVE: f64 = 3.0;

/// A busbw bound that holds at one size: drawn there, named in the legend.
#[derive(Clone, Debug)]
pub struct SizeMark {
    pub gbs: f64,
    pub label: String,
    pub size: u64,
}

pub struct BusbwChart<'a> {
    pub collective: &'a str,
    pub setting: &'a str,
    pub series: &'a [Series<'a>],
    pub limits: &'a [Limit],
    pub marks: &'a [SizeMark],
    /// The caption when no limit is known.
    pub no_limit: &'a str,
}

impl BusbwChart<'_> {
    /// The expected curve of each run (its placements share one), from the
    /// first series of the run that has one.
    fn expected_curves(&self) -> Vec<Vec<(f64, f64)>> {
        let mut runs = std::collections::BTreeSet::new();
        self.series
            .iter()
            .map(|s| (s.run, s.expected()))
            .filter(|(run, points)| !points.is_empty() && runs.insert(*run))
            .map(|(_, points)| points)
            .collect()
    }

    /// Why the y axis is a log one, if it is: a limit or mark far above the
    /// best busbw, or a mark far below it.
    fn log_reason(&self, best: f64) -> Option<String> {
        if best <= 0.0 {
            return None;
        }
        let highest_limit = self.limits.iter().map(|l| l.gbs).fold(0.0, f64::max);
        if highest_limit > best * LOG_SCALE_ABOVE {
            let r = highest_limit / best;
            return Some(format!(
                "log y axis: the highest limit is {r:.0}x the best busbw"
            ));
        }
        let far = |m: &&SizeMark| m.gbs > best * LOG_SCALE_ABOVE || m.gbs * LOG_SCALE_ABOVE < best;
        let mark = self.marks.iter().find(far)?;
        Some(format!(
            "log y axis: {} is {}x the best busbw",
            mark.label,
            axis_number(&(mark.gbs / best))
        ))
    }

    /// The setting, the best point against its limit, and the limits (and
    /// why the axis is a log one, when it is).
    fn captions(&self, log_reason: Option<String>) -> Vec<String> {
        let mut captions = vec![self.setting.to_string()];
        let overall = self
            .series
            .iter()
            .filter_map(|s| s.best().map(|b| (s, b)))
            .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1));
        if let Some((s, (size, busbw, pct))) = overall {
            let limit = s.by_size[&size].first.limit_name.clone();
            let of_limit = match (pct, limit) {
                (Some(p), Some(name)) if p > 100.0 => format!(
                    " = {p:.1}% of {name}: over 100%, so this link is not on the path measured"
                ),
                (Some(p), Some(name)) => format!(" = {p:.1}% of {name}"),
                _ => String::new(),
            };
            captions.push(format!(
                "best: {busbw:.3} GB/s at {} ({}){of_limit}",
                human_bytes(size),
                s.label
            ));
        }
        let limits = if self.limits.is_empty() {
            self.no_limit.to_string()
        } else {
            let labels: Vec<String> = self.limits.iter().map(Limit::label).collect();
            format!("limits (per direction): {}", labels.join(", "))
        };
        captions.push(match log_reason {
            Some(reason) => format!("{limits}; {reason}"),
            None => limits,
        });
        captions
    }

    /// The limits as labelled lines, the series, each best point ringed, and
    /// the marks at their sizes.
    fn plot<DB, Y>(
        &self,
        chart: &mut ChartContext<DB, Cartesian2d<LogCoord<f64>, Y>>,
        (x_lo, x_hi): (f64, f64),
        log: bool,
    ) -> anyhow::Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
        Y: Ranged<ValueType = f64>,
    {
        for l in self.limits {
            draw_line(
                chart,
                vec![(x_lo, l.gbs), (x_hi, l.gbs)],
                LIMIT_COLOR,
                Stroke::Dotted,
            )?;
            chart.draw_series(std::iter::once(
                EmptyElement::at((x_lo, l.gbs))
                    + Text::new(
                        format!("limit: {}", l.label()),
                        (8, -6),
                        (FONT, 17)
                            .into_font()
                            .color(&LIMIT_COLOR)
                            .pos(Pos::new(HPos::Left, VPos::Bottom)),
                    ),
            ))?;
        }
        for points in self.expected_curves() {
            let points = points.into_iter().filter(|p| !log || p.1 > 0.0).collect();
            draw_line(chart, points, EXPECTED_COLOR, Stroke::Dashed)?;
        }
        let mut best = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            // A log axis has no place for 0.
            let points: Vec<(f64, f64)> = s
                .busbw()
                .into_iter()
                .filter(|p| !log || p.1 > 0.0)
                .collect();
            draw_line(chart, points.clone(), color(i), series_stroke(s))?;
            draw_markers(chart, &points, color(i))?;
            if let Some((size, busbw, pct)) = s.best().filter(|b| !log || b.1 > 0.0) {
                best.push((
                    i,
                    chart.backend_coord(&(size as f64, busbw)),
                    best_label(busbw, pct),
                ));
            }
        }
        // The best point of each line, ringed, with its % of limit (or its busbw)
        // up and to the left; labels that would collide move down, tied to
        // their point by a thin line.
        let plot = chart.plotting_area().strip_coord_spec();
        let base = plot.get_base_pixel();
        let wanted: Vec<(i32, i32)> = best
            .iter()
            .map(|(_, p, _)| (p.0 - base.0 - 12, p.1 - base.1 - 10))
            .collect();
        for ((i, point, text), label) in best.iter().zip(spread(&wanted)) {
            let point = (point.0 - base.0, point.1 - base.1);
            plot.draw(&Circle::new(point, 8, color(*i).stroke_width(2)))?;
            if label != (point.0 - 12, point.1 - 10) {
                plot.draw(&PathElement::new(
                    vec![(label.0 + 2, label.1 - 8), point],
                    color(*i).mix(0.6).stroke_width(1),
                ))?;
            }
            let style = (FONT, 17)
                .into_font()
                .color(&color(*i))
                .pos(Pos::new(HPos::Right, VPos::Bottom));
            // A light backing keeps the label legible over the lines it sits on.
            let (w, h) = plot.estimate_text_size(text, &style)?;
            plot.draw(&Rectangle::new(
                [
                    (label.0 - w as i32 - 3, label.1 - h as i32 - 1),
                    (label.0 + 3, label.1 + 2),
                ],
                WHITE.mix(0.85).filled(),
            ))?;
            plot.draw(&Text::new(text.clone(), label, style))?;
        }
        // Last, so that no label's backing hides a mark.
        self.draw_marks(chart, (x_lo, x_hi))
    }

    /// Each mark as a short dashed segment at its size, not across the sizes
    /// it does not hold at; one at a size off the axis is named in the legend only.
    fn draw_marks<DB, Y>(
        &self,
        chart: &ChartContext<DB, Cartesian2d<LogCoord<f64>, Y>>,
        (x_lo, x_hi): (f64, f64),
    ) -> anyhow::Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
        Y: Ranged<ValueType = f64>,
    {
        let plot = chart.plotting_area().strip_coord_spec();
        let base = plot.get_base_pixel();
        for m in self
            .marks
            .iter()
            .filter(|m| (x_lo..=x_hi).contains(&(m.size as f64)))
        {
            let (x, y) = chart.backend_coord(&(m.size as f64, m.gbs));
            let (x, y) = (x - base.0, y - base.1);
            stroke_line(
                &plot,
                (x - MARK_HALF_WIDTH, y),
                (x + MARK_HALF_WIDTH, y),
                MARK_COLOR,
                Stroke::Dashed,
            )?;
        }
        Ok(())
    }
}

impl Chart for BusbwChart<'_> {
    fn legend(&self) -> Vec<LegendEntry> {
        let mut legend = series_legend(self.series, series_stroke);
        if !self.limits.is_empty() {
            legend.push(LegendEntry {
                label: "limit".into(),
                color: LIMIT_COLOR,
                stroke: Stroke::Dotted,
            });
        }
        if !self.expected_curves().is_empty() {
            legend.push(LegendEntry {
                label: "expected (model)".into(),
                color: EXPECTED_COLOR,
                stroke: Stroke::Dashed,
            });
        }
        legend.extend(self.marks.iter().map(|m| LegendEntry {
            label: m.label.clone(),
            color: MARK_COLOR,
            stroke: Stroke::Dashed,
        }));
        legend
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let busbw: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.busbw())
            .map(|p| p.1)
            .collect();
        let best_data = busbw.iter().copied().fold(0.0, f64::max);
        let expected: Vec<f64> = self
            .expected_curves()
            .into_iter()
            .flatten()
            .map(|p| p.1)
            .collect();
        let highest_limit = self.limits.iter().map(|l| l.gbs).fold(0.0, f64::max);
        let marks = self.marks.iter().map(|m| m.gbs);
        let log_reason = self.log_reason(best_data);
        let log = log_reason.is_some();

        let captions = self.captions(log_reason);
        let area = frame(
            root,
            &format!("{}: bus bandwidth vs message size", self.collective),
            &captions,
            &self.legend(),
        )?;

        let (x, x_ends) = size_axis(self.series);
        if log {
            let limits = self.limits.iter().map(|l| l.gbs);
            let drawn = busbw.iter().chain(&expected).copied().chain(limits);
            let (lo, hi) = positive_range(drawn.chain(marks));
            let y = log_axis(lo, hi, "busbw (GB/s, 1 GB/s = 1e9 B/s, log scale)");
            let mut chart = axes(&area, x, y)?;
            self.plot(&mut chart, x_ends, true)
        } else {
            let top = expected
                .iter()
                .copied()
                .chain(marks)
                .fold(best_data.max(highest_limit), f64::max)
                .max(1e-9)
                * 1.15;
            let y = Axis {
                desc: "busbw (GB/s, 1 GB/s = 1e9 B/s)",
                labels: Some(10),
                format: &axis_number,
            };
            let mut chart = axes(&area, x, (0f64..top, y))?;
            self.plot(&mut chart, x_ends, false)
        }
    }
}

/// Vertical room of one annotation, and how close in x two may be before they collide.
const LABEL_HEIGHT: i32 = 20;
const LABEL_WIDTH: i32 = 110;

/// Positions for labels that want to sit at `wanted` (pixels, their lower right
/// corner): from the top down, each label that would overlap one already placed
/// moves below it.
fn spread(wanted: &[(i32, i32)]) -> Vec<(i32, i32)> {
    let mut order: Vec<usize> = (0..wanted.len()).collect();
    order.sort_by_key(|&i| (wanted[i].1, i));
    let mut placed: Vec<(i32, i32)> = wanted.to_vec();
    let mut done: Vec<usize> = Vec::new();
    for i in order {
        let (x, mut y) = wanted[i];
        // Placed labels are visited top-down, so one pass settles each move.
        let mut others: Vec<(i32, i32)> = done.iter().map(|&j| placed[j]).collect();
        others.sort_by_key(|p| p.1);
        for (ox, oy) in others {
            if (ox - x).abs() < LABEL_WIDTH && (oy - y).abs() < LABEL_HEIGHT {
                y = oy + LABEL_HEIGHT;
            }
        }
        placed[i] = (x, y);
        done.push(i);
    }
    placed
}

/// The best point's label: its % of limit, or its busbw.
fn best_label(busbw: f64, pct: Option<f64>) -> String {
    match pct {
        Some(p) => format!("{p:.1}%"),
        // Two decimals read 0.00 below 0.005: three significant digits there.
        None if busbw.abs() < 0.01 => format!("{} GB/s", axis_number(&busbw)),
        None => format!("{busbw:.2} GB/s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_best_point_is_not_labelled_zero() {
        assert_eq!(best_label(0.00458, None), "0.00458 GB/s");
        assert_eq!(best_label(1.327, None), "1.33 GB/s");
        assert_eq!(best_label(0.0, None), "0 GB/s");
        assert_eq!(best_label(0.5, Some(81.25)), "81.2%");
    }

    #[test]
    fn labels_spread_apart() {
        // Two labels at the same point, one far away: the second moves down, the far one stays.
        let placed = spread(&[(500, 100), (505, 104), (100, 100)]);
        assert_eq!(placed[0], (500, 100));
        assert_eq!(placed[1], (505, 120));
        assert_eq!(placed[2], (100, 100));
        // A chain: each collision pushes the next one further.
        let placed = spread(&[(500, 100), (500, 100), (500, 110)]);
        assert_eq!(placed, [(500, 100), (500, 120), (500, 140)]);
    }
}
