//! Drawing the three charts on any plotters backend: a title and caption band
//! on top, the chart, and the legend in a panel of its own at the bottom.

use super::{Distribution, Series, HEIGHT, WIDTH};
use crate::limits::Limit;
use crate::sizes::human_bytes;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Once;

const FONT: &str = "sans-serif";
/// Tableau 10: distinguishable, and readable by most colour-blind viewers.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const LIMIT_COLOR: RGBColor = RGBColor(120, 0, 0);
const GRID: RGBColor = RGBColor(225, 225, 225);

/// Limits more than this many times the best busbw are listed, not drawn:
/// scaling the axis to them would flatten every line.
const LIMIT_SCALE_CAP: f64 = 3.0;

/// plotters draws text with the fonts registered here (DejaVu, built in), so
/// no system font is needed.
pub(crate) fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
            .and_then(|_| {
                plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold())
            })
            .unwrap_or_else(|_| panic!("the built-in DejaVu font is a valid font"));
    });
}

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// How a line is stroked.
#[derive(Clone, Copy, PartialEq)]
enum Stroke {
    Solid,
    Dashed,
    Dotted,
}

struct LegendEntry {
    label: String,
    color: RGBColor,
    stroke: Stroke,
}

/// A chart that can be drawn on any backend.
pub trait Chart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// Writes `<dir>/<stem>.png` and `.svg`.
pub fn save(dir: &Path, stem: &str, chart: &impl Chart) -> anyhow::Result<Vec<PathBuf>> {
    register_fonts();
    let png = dir.join(format!("{stem}.png"));
    {
        let root = BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area();
        chart.draw(&root)?;
        root.present()?;
    }
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area();
        chart.draw(&root)?;
        root.present()?;
    }
    Ok(vec![png, svg])
}

/// Draws a segment of `stroke` from `a` to `b` (pixel coordinates).
fn stroke_line<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    a: (i32, i32),
    b: (i32, i32),
    color: RGBColor,
    stroke: Stroke,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let style = color.stroke_width(3);
    match stroke {
        Stroke::Solid => area.draw(&PathElement::new(vec![a, b], style))?,
        Stroke::Dashed => area.draw(&DashedPathElement::new(vec![a, b], 9, 5, style))?,
        Stroke::Dotted => area.draw(&DashedPathElement::new(vec![a, b], 3, 4, style))?,
    }
    Ok(())
}

/// Title and caption lines on top, legend at the bottom; returns the area left
/// for the chart.
fn frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    captions: &[String],
    legend: &[LegendEntry],
) -> anyhow::Result<DrawingArea<DB, Shift>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let title_style = (FONT, 28).into_font().style(FontStyle::Bold);
    root.draw(&Text::new(title.to_string(), (20, 12), title_style))?;
    let caption_style = (FONT, 18).into_font().color(&RGBColor(60, 60, 60));
    for (i, line) in captions.iter().enumerate() {
        root.draw(&Text::new(
            line.clone(),
            (20, 50 + 24 * i as i32),
            caption_style.clone(),
        ))?;
    }
    let top = 56 + 24 * captions.len() as i32;

    // Legend: entries flow left to right, wrapping at the picture's width.
    let font: TextStyle = (FONT, 17).into();
    let (sample, gap, row_height, margin) = (36, 28, 26, 20);
    let mut placed = Vec::new();
    let (mut x, mut row) = (margin, 0);
    for entry in legend {
        let (w, _) = root.estimate_text_size(&entry.label, &font)?;
        let width = sample + 8 + w as i32;
        if x + width > WIDTH as i32 - margin && x > margin {
            x = margin;
            row += 1;
        }
        placed.push((x, row));
        x += width + gap;
    }
    let rows = if legend.is_empty() { 0 } else { row + 1 };
    let legend_height = rows * row_height + if rows > 0 { 14 } else { 0 };
    let (upper, panel) = root.split_vertically(HEIGHT as i32 - legend_height);
    for (entry, (x, row)) in legend.iter().zip(placed) {
        let y = 4 + row * row_height + row_height / 2;
        stroke_line(&panel, (x, y), (x + sample, y), entry.color, entry.stroke)?;
        panel.draw(&Text::new(
            entry.label.clone(),
            (x + sample + 8, y),
            font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    let (_, chart_area) = upper.split_vertically(top);
    Ok(chart_area)
}

/// Tick labels of a value axis: "0", "0.25", "12.5", "50000".
fn axis_number(v: f64) -> String {
    let a = v.abs();
    let decimals = match a {
        _ if a == 0.0 || a >= 100.0 => 0,
        _ if a >= 10.0 => 1,
        _ if a >= 1.0 => 2,
        _ => 3,
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A log axis around the positive values, with room either side.
fn positive_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo.is_finite() {
        (lo / 1.5, hi * 1.5)
    } else {
        (0.1, 10.0)
    }
}

/// "8 B", "64 KiB", "1 MiB": tick labels of a size axis.
fn size_label(bytes: f64) -> String {
    human_bytes(bytes.round() as u64)
}

/// The log2 size axis: the measured sizes with a quarter step of room either side.
fn size_range<'a>(series: impl Iterator<Item = &'a Series>) -> (f64, f64, usize) {
    let sizes: BTreeSet<u64> = series.flat_map(|s| s.by_size.keys().copied()).collect();
    let lo = *sizes.first().unwrap_or(&1) as f64;
    let hi = *sizes.last().unwrap_or(&1) as f64;
    let room = 2f64.powf(0.25);
    let powers = (hi / lo).log2().floor() as usize + 1;
    // One label per power of two, at most 12 of them (plotters then skips powers evenly).
    (lo / room, hi * room, powers.clamp(1, 12))
}

fn draw_line<DB: DrawingBackend, X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<DB, Cartesian2d<X, Y>>,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    stroke: Stroke,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let style = color.stroke_width(2);
    match stroke {
        Stroke::Solid => chart.draw_series(LineSeries::new(points, style))?,
        Stroke::Dashed => chart.draw_series(DashedLineSeries::new(points, 9, 5, style))?,
        Stroke::Dotted => chart.draw_series(DashedLineSeries::new(points, 3, 4, style))?,
    };
    Ok(())
}

fn draw_markers<DB: DrawingBackend, X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<DB, Cartesian2d<X, Y>>,
    points: &[(f64, f64)],
    color: RGBColor,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    Ok(())
}

fn series_stroke(s: &Series) -> Stroke {
    if s.in_place {
        Stroke::Dashed
    } else {
        Stroke::Solid
    }
}

pub struct BusbwChart<'a> {
    pub collective: &'a str,
    pub setting: &'a str,
    pub series: &'a [Series],
    pub limits: &'a [Limit],
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

        let mut legend: Vec<LegendEntry> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| LegendEntry {
                label: s.label.clone(),
                color: color(i),
                stroke: series_stroke(s),
            })
            .collect();
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

        let (x_lo, x_hi, x_labels) = size_range(self.series.iter());
        let mut chart = ChartBuilder::on(&area)
            .margin(20)
            .x_label_area_size(60)
            .y_label_area_size(90)
            .build_cartesian_2d((x_lo..x_hi).log_scale().base(2.0), 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("message size (bytes, log2 scale)")
            .y_desc("busbw (GB/s, 1 GB/s = 1e9 B/s)")
            .x_labels(x_labels)
            .y_labels(10)
            .x_label_formatter(&|v| size_label(*v))
            .y_label_formatter(&|v| axis_number(*v))
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 19))
            .bold_line_style(GRID)
            .light_line_style(WHITE)
            .draw()?;

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

pub struct LatencyChart<'a> {
    pub collective: &'a str,
    pub setting: &'a str,
    pub series: &'a [Series],
    /// Distinct -n values of the rows.
    pub iters: &'a BTreeSet<usize>,
}

const PERCENTILES: [(&str, Stroke); 3] = [
    ("p50", Stroke::Solid),
    ("p99", Stroke::Dashed),
    ("p99.9", Stroke::Dotted),
];

impl Chart for LatencyChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let lines: Vec<Vec<Vec<(f64, f64)>>> = self
            .series
            .iter()
            .map(|s| {
                let pick: [fn(&crate::report::Row) -> f64; 3] =
                    [|r| r.p50_us, |r| r.p99_us, |r| r.p999_us];
                pick.iter()
                    .map(|f| {
                        s.by_size
                            .keys()
                            .map(|&size| (size as f64, s.mean(size, f)))
                            .filter(|p| p.1 > 0.0)
                            .collect()
                    })
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
        let mut legend: Vec<LegendEntry> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| LegendEntry {
                label: s.label.clone(),
                color: color(i),
                stroke: Stroke::Solid,
            })
            .collect();
        legend.extend(PERCENTILES.iter().map(|(name, stroke)| LegendEntry {
            label: name.to_string(),
            color: BLACK,
            stroke: *stroke,
        }));
        let area = frame(
            root,
            &format!(
                "{}: per-iteration latency p50 / p99 / p99.9 vs message size",
                self.collective
            ),
            &captions,
            &legend,
        )?;
        let (x_lo, x_hi, x_labels) = size_range(self.series.iter());
        let mut chart = ChartBuilder::on(&area)
            .margin(20)
            .x_label_area_size(60)
            .y_label_area_size(90)
            .build_cartesian_2d(
                (x_lo..x_hi).log_scale().base(2.0),
                (lo..hi).log_scale().base(10.0),
            )?;
        chart
            .configure_mesh()
            .x_desc("message size (bytes, log2 scale)")
            .y_desc("per-iteration time (µs, log scale)")
            .x_labels(x_labels)
            .y_labels(12)
            .x_label_formatter(&|v| size_label(*v))
            .y_label_formatter(&|v| axis_number(*v))
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 19))
            .bold_line_style(GRID)
            .light_line_style(WHITE)
            .draw()?;
        for (i, per_percentile) in lines.into_iter().enumerate() {
            for (points, (_, stroke)) in per_percentile.into_iter().zip(PERCENTILES) {
                draw_markers(&mut chart, &points, color(i))?;
                draw_line(&mut chart, points, color(i), stroke)?;
            }
        }
        Ok(())
    }
}

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
        let legend: Vec<LegendEntry> = self
            .distributions
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
            .collect();
        let area = frame(
            root,
            &format!(
                "{}: per-iteration latency distribution at {}",
                self.collective,
                human_bytes(self.size)
            ),
            &captions,
            &legend,
        )?;
        // Percentile ticks, and "max" where the largest sample count puts the max.
        let mut ticks: Vec<f64> = TICK_PERCENTILES
            .iter()
            .map(|p| 1.0 / (1.0 - p))
            .filter(|&x| x < x_max / 1.2)
            .collect();
        ticks.push(x_max);
        let mut chart = ChartBuilder::on(&area)
            .margin(20)
            .x_label_area_size(60)
            .y_label_area_size(90)
            .build_cartesian_2d(
                (1f64..x_hi).log_scale().base(10.0).with_key_points(ticks),
                (y_lo..y_hi).log_scale().base(10.0),
            )?;
        chart
            .configure_mesh()
            .x_desc("percentile (spaced by 1/(1-p), log scale)")
            .y_desc("per-iteration time (µs, log scale)")
            .y_labels(12)
            .x_label_formatter(&|v| {
                if *v == x_max {
                    "max".to_string()
                } else {
                    percentile_label(*v)
                }
            })
            .y_label_formatter(&|v| axis_number(*v))
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 19))
            .bold_line_style(GRID)
            .light_line_style(WHITE)
            .draw()?;
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

    #[test]
    fn axis_numbers() {
        assert_eq!(axis_number(0.0), "0");
        assert_eq!(axis_number(0.25), "0.25");
        assert_eq!(axis_number(12.5), "12.5");
        assert_eq!(axis_number(50000.0), "50000");
        assert_eq!(axis_number(20.000000000000004), "20");
    }
}
