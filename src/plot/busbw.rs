//! `<coll>_busbw`: busbw vs size (log2 x), one line per run and placement, the
//! limits as labelled horizontal lines, each line's best point ringed with its %
//! of limit.

use super::draw::{
    axes, axis_number, color, draw_line, draw_markers, frame, series_legend, series_stroke,
    size_axis, Axis, Chart, LegendEntry, Stroke, FONT,
};
use super::Series;
use crate::limits::Limit;
use crate::sizes::human_bytes;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const LIMIT_COLOR: RGBColor = RGBColor(120, 0, 0);

/// Limits more than this many times the best busbw are listed, not drawn:
/// scaling the axis to them would flatten every line.
const LIMIT_SCALE_CAP: f64 = 3.0;

pub struct BusbwChart<'a> {
    pub collective: &'a str,
    pub setting: &'a str,
    pub series: &'a [Series],
    pub limits: &'a [Limit],
}

impl BusbwChart<'_> {
    /// The setting, the best point against its limit, and the limits (those
    /// `above` the chart named as such).
    fn captions(&self, above: &[&Limit]) -> Vec<String> {
        let mut captions = vec![self.setting.to_string()];
        let overall = self
            .series
            .iter()
            .filter_map(|s| s.best().map(|b| (s, b)))
            .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1));
        if let Some((s, (size, busbw, pct))) = overall {
            let limit = s.by_size[&size][0].limit_name.clone();
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
        captions.push(if self.limits.is_empty() {
            "no limit (none given with --limit, none detected)".to_string()
        } else if above.is_empty() {
            format!(
                "limits (per direction): {}",
                self.limits
                    .iter()
                    .map(Limit::label)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!(
                "above the chart (over {LIMIT_SCALE_CAP}x the best busbw): {}",
                above
                    .iter()
                    .map(|l| l.label())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        captions
    }
}

impl Chart for BusbwChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let best_data = self
            .series
            .iter()
            .flat_map(|s| s.busbw())
            .map(|p| p.1)
            .fold(0.0, f64::max);
        let cap = if best_data > 0.0 {
            best_data * LIMIT_SCALE_CAP
        } else {
            f64::INFINITY
        };
        let (drawn, above): (Vec<&Limit>, Vec<&Limit>) =
            self.limits.iter().partition(|l| l.gbs <= cap);
        let top = drawn
            .iter()
            .map(|l| l.gbs)
            .fold(best_data, f64::max)
            .max(1e-9)
            * 1.15;

        let captions = self.captions(&above);
        let mut legend = series_legend(self.series, series_stroke);
        if !drawn.is_empty() {
            legend.push(LegendEntry {
                label: "limit".into(),
                color: LIMIT_COLOR,
                stroke: Stroke::Dotted,
            });
        }
        let area = frame(
            root,
            &format!("{}: bus bandwidth vs message size", self.collective),
            &captions,
            &legend,
        )?;

        let (x, (x_lo, x_hi)) = size_axis(self.series);
        let y = Axis {
            desc: "busbw (GB/s, 1 GB/s = 1e9 B/s)",
            labels: Some(10),
            format: &axis_number,
        };
        let mut chart = axes(&area, x, (0f64..top, y))?;

        for l in &drawn {
            draw_line(
                &mut chart,
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
        let mut best = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            let points = s.busbw();
            draw_line(&mut chart, points.clone(), color(i), series_stroke(s))?;
            draw_markers(&mut chart, &points, color(i))?;
            if let Some((size, busbw, pct)) = s.best() {
                let text = match pct {
                    Some(p) => format!("{p:.1}%"),
                    None => format!("{busbw:.2} GB/s"),
                };
                best.push((i, chart.backend_coord(&(size as f64, busbw)), text));
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
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

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
