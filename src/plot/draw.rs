//! What every chart is drawn with, on any plotters backend: a title and caption
//! band on top, the axes, and the legend in a panel of its own at the bottom;
//! the palette, strokes and axis labels; writing PNG and SVG.

use super::{Series, HEIGHT, WIDTH};
use crate::output::{write_whole, Replace};
use crate::sizes::human_bytes;
use anyhow::{anyhow, Context};
use plotters::coord::combinators::{LogCoord, WithKeyPoints};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Once;

pub(super) const FONT: &str = "sans-serif";
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
const GRID: RGBColor = RGBColor(225, 225, 225);

/// plotters draws text with the fonts registered here (DejaVu, built in), so
/// no system font is needed.
fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
            .and_then(|_| {
                plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold())
            })
            .unwrap_or_else(|_| panic!("the built-in DejaVu font is a valid font"));
    });
}

pub(super) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// How a line is stroked.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Stroke {
    Solid,
    Dashed,
    Dotted,
}

pub(super) struct LegendEntry {
    pub label: String,
    pub color: RGBColor,
    pub stroke: Stroke,
}

/// A chart that can be drawn on any backend.
pub trait Chart {
    /// The legend, drawn in a panel under the chart (its size sets the picture's height).
    fn legend(&self) -> Vec<LegendEntry>;

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// The least height of the title, captions and plot above the legend: a legend
/// of more rows than fit under it makes the picture taller, never the chart smaller.
const MIN_CHART_HEIGHT: u32 = 600;

/// Where each legend entry goes (x, row), how many rows they take and the
/// panel's height: entries flow left to right, wrapping at the picture's width.
struct LegendLayout {
    placed: Vec<(i32, i32)>,
    height: i32,
}

const LEGEND_SAMPLE: i32 = 36;
const LEGEND_ROW: i32 = 26;

fn legend_font() -> TextStyle<'static> {
    (FONT, 17).into()
}

fn legend_layout(legend: &[LegendEntry]) -> anyhow::Result<LegendLayout> {
    let (gap, margin) = (28, 20);
    let font = legend_font();
    let mut placed = Vec::new();
    let (mut x, mut row) = (margin, 0);
    for entry in legend {
        let (w, _) = font
            .font
            .box_size(&entry.label)
            .map_err(|e| anyhow!("the legend's font: {e:?}"))?;
        let width = LEGEND_SAMPLE + 8 + w as i32;
        if x + width > WIDTH as i32 - margin && x > margin {
            x = margin;
            row += 1;
        }
        placed.push((x, row));
        x += width + gap;
    }
    let height = match legend.is_empty() {
        true => 0,
        false => (row + 1) * LEGEND_ROW + 14,
    };
    Ok(LegendLayout { placed, height })
}

/// The picture's height: [`HEIGHT`], or more where the legend needs it.
fn picture_height(legend: &[LegendEntry]) -> anyhow::Result<u32> {
    let legend_height = legend_layout(legend)?.height as u32;
    Ok(HEIGHT.max(MIN_CHART_HEIGHT + legend_height))
}

/// Writes `<dir>/<stem>.png` and `.svg`, each drawn in memory and written whole
/// (`output::write_whole`): a full disk or a kill leaves the last chart of
/// that name or none, never a part of one; a link at either name is replaced,
/// not followed.
pub fn save(dir: &Path, stem: &str, chart: &impl Chart) -> anyhow::Result<Vec<PathBuf>> {
    register_fonts();
    let size = (WIDTH, picture_height(&chart.legend())?);
    let png = dir.join(format!("{stem}.png"));
    let bytes = png_bytes(size, |root| chart.draw(root))?;
    write(&png, &bytes)?;
    let svg = dir.join(format!("{stem}.svg"));
    write(&svg, svg_text(chart)?.as_bytes())?;
    Ok(vec![png, svg])
}

/// The chart as SVG text, as wide as [`WIDTH`] and as tall as its legend
/// needs. Its text names the font family only (`sans-serif`), so the picture
/// refers to nothing outside itself and can be embedded in a page.
pub fn svg_text(chart: &impl Chart) -> anyhow::Result<String> {
    // The legend's height is measured in the fonts.
    register_fonts();
    svg_string((WIDTH, picture_height(&chart.legend())?), |root| {
        chart.draw(root)
    })
}

/// A picture of `size` pixels drawn by `draw` as SVG text: fonts by family name,
/// nothing linked, so a page can hold it inline.
pub fn svg_string(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<String> {
    register_fonts();
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        draw(&root)?;
        root.present()?;
    }
    Ok(text)
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_whole(path, Replace::Always, bytes)
        .map(drop)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A picture of `size` pixels drawn in memory by `draw`, encoded as PNG as
/// plotters' own file backend encodes it.
pub fn png_bytes(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<u8>> {
    use image::ImageEncoder;
    register_fonts();
    let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
        draw(&root)?;
        root.present()
            .map_err(|e| anyhow!("the picture could not be drawn: {e}"))?;
    }
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png).write_image(
        &pixels,
        size.0,
        size.1,
        image::ColorType::Rgb8,
    )?;
    Ok(png)
}

/// Draws a segment of `stroke` from `a` to `b` (pixel coordinates).
pub(super) fn stroke_line<DB: DrawingBackend>(
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

/// Title and caption lines on top, legend in a panel at the bottom (the picture
/// is as tall as [`picture_height`] says, so neither covers the other or the
/// chart); returns the area left for the chart.
pub(super) fn frame<DB: DrawingBackend>(
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
    let layout = legend_layout(legend)?;
    let height = root.dim_in_pixel().1 as i32;
    let (upper, panel) = root.split_vertically(height - layout.height);
    for (entry, (x, row)) in legend.iter().zip(layout.placed) {
        let y = 4 + row * LEGEND_ROW + LEGEND_ROW / 2;
        stroke_line(
            &panel,
            (x, y),
            (x + LEGEND_SAMPLE, y),
            entry.color,
            entry.stroke,
        )?;
        panel.draw(&Text::new(
            entry.label.clone(),
            (x + LEGEND_SAMPLE + 8, y),
            legend_font().pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    let (_, chart_area) = upper.split_vertically(top);
    Ok(chart_area)
}

/// Tick labels of a value axis: "0", "0.25", "12.5", "50000", "0.0002".
pub(super) fn axis_number(v: &f64) -> String {
    let (v, a) = (*v, v.abs());
    let decimals = match a {
        _ if a == 0.0 || a >= 100.0 => 0,
        _ if a >= 10.0 => 1,
        _ if a >= 1.0 => 2,
        // Two digits past the first significant one: 0.125, 0.0166, 0.0002.
        _ => ((2.0 - a.log10().floor()) as usize).min(12),
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A log axis around the positive values, with room either side (a factor of
/// 2.25 at the least, which [`log_ticks`] labels at least three times).
pub(super) fn positive_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo.is_finite() {
        (lo / 1.5, hi * 1.5)
    } else {
        (0.1, 10.0)
    }
}

/// "8 B", "64 KiB", "1 MiB": tick labels of a size axis.
fn size_label(bytes: &f64) -> String {
    human_bytes(bytes.round() as u64)
}

/// The log2 size axis: the measured sizes with a quarter step of room either side.
fn size_range<'a>(series: impl Iterator<Item = &'a Series<'a>>) -> (f64, f64, usize) {
    let sizes: BTreeSet<u64> = series.flat_map(|s| s.by_size.keys().copied()).collect();
    let lo = *sizes.first().unwrap_or(&1) as f64;
    let hi = *sizes.last().unwrap_or(&1) as f64;
    let room = 2f64.powf(0.25);
    let powers = (hi / lo).log2().floor() as usize + 1;
    // One label per power of two, at most 12 of them (plotters then skips powers evenly).
    (lo / room, hi * room, powers.clamp(1, 12))
}

pub(super) fn draw_line<
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
>(
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

pub(super) fn draw_markers<
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
>(
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

/// A legend entry per series, in the series' colours.
pub(super) fn series_legend(
    series: &[Series<'_>],
    stroke: impl Fn(&Series<'_>) -> Stroke,
) -> Vec<LegendEntry> {
    series
        .iter()
        .enumerate()
        .map(|(i, s)| LegendEntry {
            label: s.label.clone(),
            color: color(i),
            stroke: stroke(s),
        })
        .collect()
}

pub(super) fn series_stroke(s: &Series<'_>) -> Stroke {
    if s.in_place {
        Stroke::Dashed
    } else {
        Stroke::Solid
    }
}

/// One axis of a chart: what it shows, how many labels (None: plotters' own, or
/// the range's key points) and their text.
pub(super) struct Axis<'a> {
    pub desc: &'a str,
    pub labels: Option<usize>,
    pub format: &'a dyn Fn(&f64) -> String,
}

/// A chart's drawing context over the coordinates of `X` and `Y`.
pub(super) type Plot<'a, DB, X, Y> = ChartContext<
    'a,
    DB,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// The axes and grid of a chart in `area`, the same margins, fonts and grid
/// for every chart; `x` and `y` say what differs.
pub(super) fn axes<'a, DB, X, Y>(
    area: &'a DrawingArea<DB, Shift>,
    (x_range, x): (X, Axis),
    (y_range, y): (Y, Axis),
) -> anyhow::Result<Plot<'a, DB, X, Y>>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(90)
        .build_cartesian_2d(x_range, y_range)?;
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x.desc)
        .y_desc(y.desc)
        .x_label_formatter(x.format)
        .y_label_formatter(y.format)
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 19))
        .bold_line_style(GRID)
        .light_line_style(WHITE);
    if let Some(n) = x.labels {
        mesh.x_labels(n);
    }
    if let Some(n) = y.labels {
        mesh.y_labels(n);
    }
    mesh.draw()?;
    Ok(chart)
}

/// The log2 message-size axis of the busbw and latency charts, and its ends.
pub(super) fn size_axis(series: &[Series<'_>]) -> ((LogCoord<f64>, Axis<'static>), (f64, f64)) {
    let (lo, hi, labels) = size_range(series.iter());
    let axis = Axis {
        desc: "message size (bytes, log2 scale)",
        labels: Some(labels),
        format: &size_label,
    };
    (((lo..hi).log_scale().base(2.0).into(), axis), (lo, hi))
}

/// Where a log axis from `lo` to `hi` is labelled: every decade, else 1-2-5 of
/// each, else every digit and 1.5, whichever first gives four labels (plotters
/// labels only the decades, and a range within one decade had none).
pub(super) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const LADDERS: [&[f64]; 3] = [
        &[1.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ];
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let ticks = |ladder: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|e| ladder.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|t| *t >= lo && *t <= hi)
            .collect()
    };
    let mut best = Vec::new();
    for ladder in LADDERS {
        best = ticks(ladder);
        if best.len() >= 4 {
            break;
        }
    }
    best
}

/// A log10 value axis from `lo` to `hi`, labelled at [`log_ticks`].
pub(super) fn log_axis(
    lo: f64,
    hi: f64,
    desc: &'static str,
) -> (WithKeyPoints<LogCoord<f64>>, Axis<'static>) {
    let axis = Axis {
        desc,
        labels: None,
        format: &axis_number,
    };
    let range = (lo..hi)
        .log_scale()
        .base(10.0)
        .with_key_points(log_ticks(lo, hi));
    (range, axis)
}

/// The log10 per-iteration time axis of the latency and distribution charts.
pub(super) fn time_axis(lo: f64, hi: f64) -> (WithKeyPoints<LogCoord<f64>>, Axis<'static>) {
    log_axis(lo, hi, "per-iteration time (µs, log scale)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_numbers() {
        assert_eq!(axis_number(&0.0), "0");
        assert_eq!(axis_number(&0.25), "0.25");
        assert_eq!(axis_number(&12.5), "12.5");
        assert_eq!(axis_number(&50000.0), "50000");
        assert_eq!(axis_number(&20.000000000000004), "20");
        assert_eq!(axis_number(&0.125), "0.125");
        assert_eq!(axis_number(&0.0002), "0.0002");
        assert_eq!(axis_number(&0.05), "0.05");
    }

    /// Every log axis gets values: the narrowest range positive_range makes
    /// (a factor of 2.25) still has three labels, a wide one one per decade.
    #[test]
    fn log_axes_are_labelled() {
        assert_eq!(log_ticks(0.5, 5000.0), [1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_ticks(0.9, 60.0), [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]);
        assert!(log_ticks(66.0, 150.0).len() >= 4);
        for lo in [1e-4, 0.3, 7.0, 9.1, 95.0, 4.4e5] {
            let (a, b) = positive_range([lo * 1.5].into_iter());
            let ticks = log_ticks(a, b);
            assert!(ticks.len() >= 3, "{a}..{b}: {ticks:?}");
            assert!(ticks.iter().all(|t| *t >= a && *t <= b));
        }
    }
}
