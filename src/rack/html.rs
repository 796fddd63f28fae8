//! report.html: the acceptance report as one self-contained page to hand over
//! (no script, no file it links to is needed to read it): the verdict, every
//! node with PASS or FAIL and the fix for each finding, the checks, each
//! all-pairs heatmap and each test's busbw against the spec's floor and the
//! link limit, inline SVG drawn by the engines of pairs.png and of `plot`.

use super::check::{Check, CheckKind, RowMetric};
use super::evaluate::Verdict;
use super::nodes::{NodeVerdict, PairsOutcome};
use super::report::RunReport;
use crate::cli::shown;
use crate::plot::{busbw_svg, SizeMark};
use crate::report::csv::read_rows;
use crate::report::Row;
use crate::sizes::human_bytes;
use std::fmt::Write;

/// Text as HTML content or an attribute value.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:24px}h2{font-size:19px;margin-top:28px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #bbb;padding:4px 8px;text-align:left;vertical-align:top;font-size:14px}\
th{background:#eee}.pass{background:#d9f2d9;font-weight:bold}.fail{background:#f8d0d0;font-weight:bold}.open{background:#f8ecc0;font-weight:bold}\
.verdict{font-size:20px;padding:8px 12px;display:inline-block}.fix{color:#444}code{font-size:12px}\
.chart svg{max-width:100%;height:auto}";

fn verdict_cell(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "<td class=\"pass\">PASS</td>",
        Verdict::Fail => "<td class=\"fail\">FAIL</td>",
        Verdict::Inconclusive => "<td class=\"open\">INCONCLUSIVE</td>",
    }
}

/// The whole page.
pub fn render(report: &RunReport, pairs: &[PairsOutcome], checks: &[Check]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Rack acceptance: {0}</title><style>{STYLE}</style></head><body>\n<h1>Rack acceptance: {0}</h1>\n",
        esc(&report.name)
    );
    let failing: Vec<&str> = report
        .nodes
        .iter()
        .filter(|n| n.verdict() == Verdict::Fail)
        .map(|n| n.node.as_str())
        .collect();
    let _ = writeln!(
        h,
        "<p class=\"verdict {}\">{}</p>",
        match report.verdict() {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Inconclusive => "open",
        },
        esc(&report.headline())
    );
    let _ = writeln!(
        h,
        "<p>{} nodes, {}. Spec {}, started {}, fabricbench {}.</p>",
        report.nodes.len(),
        if failing.is_empty() {
            "no failing node".to_string()
        } else {
            format!("failing: {}", esc(&failing.join(", ")))
        },
        esc(&report.spec_file),
        esc(&report.started),
        env!("CARGO_PKG_VERSION")
    );
    nodes_table(&mut h, &report.nodes);
    checks_table(&mut h, report);
    for p in pairs {
        let _ = writeln!(h, "<h2>{}: pair heatmap</h2>", esc(&p.label));
        heatmap(&mut h, p);
    }
    // The first round's curve: the checks' intervals are in the table above.
    for t in &report.tests {
        if t.all_pairs || t.round > 1 {
            continue;
        }
        let Ok(rows) = read_rows(&t.csv) else {
            continue;
        };
        let _ = writeln!(h, "<h2>{}: busbw against the limit</h2>", esc(&t.name));
        busbw_chart(&mut h, &t.name, &rows, checks);
    }
    h.push_str("<h2>Steps</h2>\n<table><tr><th>step</th><th>command</th><th>status</th><th>log</th></tr>\n");
    let steps = report
        .doctor
        .iter()
        .map(|d| ("doctor".to_string(), &d.outcome, d.status()))
        .chain(
            report
                .tests
                .iter()
                .map(|t| (t.title(), &t.outcome, t.status())),
        );
    for (name, o, status) in steps {
        let log = o
            .log
            .file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
        let _ = writeln!(
            h,
            "<tr><td>{0}</td><td><code>{1}</code></td><td>{3}</td><td><a href=\"{2}\">{2}</a></td></tr>",
            esc(&name),
            esc(&o.command_line()),
            esc(&log),
            esc(&status)
        );
    }
    h.push_str("</table>\n</body></html>\n");
    h
}

fn nodes_table(h: &mut String, nodes: &[NodeVerdict]) {
    h.push_str("<h2>Nodes</h2>\n<table><tr><th>node</th><th>result</th><th>finding</th><th>fix</th></tr>\n");
    for n in nodes {
        let shown: Vec<_> = n.problems.iter().collect();
        let span = shown.len().max(1);
        let _ = write!(
            h,
            "<tr><td rowspan=\"{span}\">{}</td>{}",
            esc(&n.node),
            verdict_cell(n.verdict()).replace("<td", &format!("<td rowspan=\"{span}\""))
        );
        if shown.is_empty() {
            h.push_str("<td>nothing found</td><td></td></tr>\n");
        }
        for (i, p) in shown.iter().enumerate() {
            if i > 0 {
                h.push_str("<tr>");
            }
            let _ = writeln!(
                h,
                "<td>{}{}</td><td class=\"fix\">{}</td></tr>",
                p.effect.prefix(),
                esc(&p.what),
                esc(&p.fix)
            );
        }
    }
    h.push_str("</table>\n");
}

fn checks_table(h: &mut String, report: &RunReport) {
    h.push_str("<h2>Checks</h2>\n<table><tr><th>check</th><th>measured</th><th>threshold</th><th>result</th></tr>\n");
    for r in report.verdict_rows() {
        let details = if r.verdict == Verdict::Pass || r.details.is_empty() {
            String::new()
        } else {
            format!(
                "<br><span class=\"fix\">{}</span>",
                esc(&r.details.join("; "))
            )
        };
        let _ = writeln!(
            h,
            "<tr><td>{}{details}</td><td>{}</td><td>{}</td>{}</tr>",
            esc(&r.what),
            esc(&r.measured),
            esc(&r.threshold),
            verdict_cell(r.verdict)
        );
    }
    h.push_str("</table>\n");
}

/// The algbw matrix at the size bandwidth was judged at, slow pairs outlined,
/// drawn by all-pairs' own heatmap (pairs.png), with the suspects under it.
fn heatmap(h: &mut String, p: &PairsOutcome) {
    let v = &p.verdict;
    let drawn = match v.bw_judged {
        true => crate::allpairs::heatmap::svg(&p.results, v, &p.test),
        false => Ok(None),
    };
    match drawn {
        Ok(Some(svg)) => {
            let _ = writeln!(h, "<div class=\"chart\">{svg}</div>");
        }
        Ok(None) => {
            let _ = writeln!(h, "<p>{}: no heatmap.</p>", esc(&v.bandwidth(human_bytes)));
            return;
        }
        Err(e) => {
            let _ = writeln!(
                h,
                "<p>The heatmap could not be drawn: {}</p>",
                esc(&format!("{e:#}"))
            );
        }
    }
    let suspects: Vec<&str> = v
        .suspects
        .iter()
        .map(|&s| p.results.labels[s].as_str())
        .collect();
    let _ = writeln!(
        h,
        "<p>Outlined: slow, below {} x the median pair. {}</p>",
        shown(p.thresholds.bw_fraction),
        if suspects.is_empty() {
            "no suspect node".to_string()
        } else {
            format!("suspect node: {}", esc(&suspects.join(", ")))
        }
    );
}

/// busbw against size, drawn by the charts' engine (`plot`) and embedded as
/// SVG: the worst row at each size per placement (as the checks judge it),
/// the run's link limit, and each spec busbw floor at the size its check reads.
fn busbw_chart(h: &mut String, test: &str, rows: &[Row], checks: &[Check]) {
    let mut worst: Vec<Row> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.busbw_gbs > 0.0 && r.busbw_gbs.is_finite())
    {
        let same = |w: &&mut Row| w.placement == r.placement && w.size_bytes == r.size_bytes;
        match worst.iter_mut().find(same) {
            Some(w) if w.busbw_gbs > r.busbw_gbs => *w = r.clone(),
            Some(_) => {}
            None => worst.push(r.clone()),
        }
    }
    let floors: Vec<SizeMark> = checks
        .iter()
        .filter(|c| c.test == test)
        .filter_map(|c| match &c.kind {
            CheckKind::Row {
                metric: RowMetric::Busbw,
                min: Some(t),
                size,
                ..
            } => Some(SizeMark {
                gbs: t.value,
                label: format!("floor {} at {}", t.text, human_bytes(*size)),
                size: *size,
            }),
            _ => None,
        })
        .filter(|f| f.gbs > 0.0 && f.gbs.is_finite())
        .collect();
    match busbw_svg(worst, &floors, "no link limit known") {
        Ok(Some(svg)) => {
            let _ = writeln!(h, "<div class=\"chart\">{svg}</div>");
        }
        Ok(None) => h.push_str("<p>No busbw row to draw.</p>\n"),
        Err(e) => {
            let _ = writeln!(
                h,
                "<p>The busbw chart could not be drawn: {}</p>",
                esc(&format!("{e:#}"))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }

    /// The floor of a check at 256 KiB is drawn there, not across 16 B to 1 MiB.
    #[test]
    fn a_busbw_floor_is_drawn_at_its_size_only() {
        let checks = crate::rack::spec::Spec::parse(
            "name = \"t\"\n[launch]\n[[test]]\nname = \"ar\"\nbinary = \"all_reduce_perf\"\n\
             [[check]]\ntest = \"ar\"\nmetric = \"busbw\"\nsize = \"256K\"\nmin = 0.005\n",
        )
        .unwrap()
        .checks;
        let rows: Vec<Row> = [16u64, 256 << 10, 1 << 20]
            .map(|size_bytes| Row {
                size_bytes,
                placement: "out-of-place".into(),
                busbw_gbs: 0.1,
                ..Row::default()
            })
            .to_vec();
        let mut h = String::new();
        busbw_chart(&mut h, "ar", &rows, &checks);
        assert!(h.contains("floor 0.005 GB/s at 256 KiB"), "{h}");
        // The points' markers, left to right: the second is at 256 KiB.
        let number = |tag: &str, name: &str| -> f64 {
            let tag = format!(" {tag}");
            let at = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            tag[at..].split('"').next().unwrap().parse().unwrap()
        };
        let markers: Vec<f64> = h
            .split("<circle ")
            .filter(|t| t.contains("r=\"3\""))
            .map(|t| number(t, "cx"))
            .collect();
        assert_eq!(markers.len(), 3, "{h}");
        // The floor's dashes, (x, y) of each end; the lowest ones are its legend sample.
        let dashes: Vec<(f64, f64)> = h
            .split("<polyline ")
            .filter(|t| t.contains("stroke=\"#D62728\""))
            .flat_map(|t| {
                let points = t
                    .split("points=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let ends: Vec<(f64, f64)> = points
                    .split_whitespace()
                    .map(|p| p.split_once(',').unwrap())
                    .map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap()))
                    .collect();
                ends
            })
            .collect();
        let legend = dashes.iter().map(|d| d.1).fold(0.0, f64::max);
        let xs: Vec<f64> = dashes
            .iter()
            .filter(|d| d.1 < legend)
            .map(|d| d.0)
            .collect();
        let (lo, hi) = xs
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        assert!(
            lo >= markers[1] - 24.5 && hi <= markers[1] + 24.5 && hi - lo > 40.0,
            "the floor spans {lo}..{hi}, 256 KiB is at {}: {h}",
            markers[1]
        );
    }

    /// The limit is named on its line; without one the chart says so; with
    /// no row to draw there is no chart, and the page says that instead.
    #[test]
    fn the_chart_names_its_limit_or_its_absence() {
        let row = |limit: Option<f64>| Row {
            collective: "all_reduce".into(),
            size_bytes: 1024,
            placement: "in-place".into(),
            busbw_gbs: 2.0,
            limit_gbs: limit,
            limit_name: limit.map(|_| "nvlink".into()),
            ..Row::default()
        };
        let mut h = String::new();
        busbw_chart(&mut h, "ar", &[row(Some(50.0))], &[]);
        assert!(h.contains("\nlimit: nvlink 50 GB/s\n</text>"), "{h}");
        let mut h = String::new();
        busbw_chart(&mut h, "ar", &[row(None)], &[]);
        assert!(h.contains("\nno link limit known\n</text>"), "{h}");
        let mut h = String::new();
        busbw_chart(
            &mut h,
            "ar",
            &[Row {
                busbw_gbs: f64::NAN,
                ..row(None)
            }],
            &[],
        );
        assert_eq!(h, "<p>No busbw row to draw.</p>\n");
    }
}
