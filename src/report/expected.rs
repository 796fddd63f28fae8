//! A size's expected figures from the run's model, and the table's
//! `--expected` columns: the performance model's busbw for each
//! line, each placement's busbw as a percentage of it, and a line for each
//! bandwidth-bound size short of expected naming the link the model says binds
//! and what to check, in the guide's order.

use super::{Placement, RunInfo, SizeResult};
use crate::limits::trim_number;
use crate::model::{Expected, Model};

impl SizeResult {
    /// What `model` expects of this size, after taking its measured times into
    /// the model's latency calibration.
    pub fn expect(&self, model: &mut Model) -> Option<Expected> {
        let times: Vec<f64> = self.measurements.iter().map(|m| m.time_us).collect();
        model.expect(
            &self.collective,
            self.size_bytes,
            self.busbw_factor,
            &times,
            self.nccl_algo.as_deref(),
        )
    }
}

/// --expected: the last columns, name and unit lines: the model's busbw and
/// busbw as a percentage of it, out of place and in place.
pub fn columns(run: &RunInfo) -> [String; 2] {
    match run.expected_column {
        true => [
            format!("  {:>8}  {:>6}  {:>6}", "expected", "%exp", "%exp"),
            format!("  {:>8}  {:>6}  {:>6}", "(GB/s)", "(oop)", "(ip)"),
        ],
        false => [String::new(), String::new()],
    }
}

/// --expected: one line's expected busbw and each placement's percentage of it.
pub fn cells(r: &SizeResult) -> String {
    let Some(e) = &r.expected else {
        return format!("  {:>8}  {:>6}  {:>6}", "N/A", "N/A", "N/A");
    };
    let mut cells = format!("  {:>8.3}", e.busbw_gbs);
    for placement in Placement::BOTH {
        match r.measurements.iter().find(|m| m.placement == placement) {
            Some(m) => match e.percent(m.busbw_gbs) {
                Some(p) => cells += &format!("  {p:>6.1}"),
                None => cells += &format!("  {:>6}", "N/A"),
            },
            None => cells += &" ".repeat(8),
        }
    }
    cells
}

/// --expected: a line for each placement of a bandwidth-bound size short of
/// expected: the link the model says binds, and what to check.
pub fn shortfalls(run: &RunInfo, r: &SizeResult) -> Vec<String> {
    let (Some(e), Some(model)) = (&r.expected, &run.model) else {
        return Vec::new();
    };
    r.measurements
        .iter()
        .filter(|m| e.short(m.busbw_gbs))
        .filter_map(|m| Some((m, e.percent(m.busbw_gbs)?)))
        .map(|(m, percent)| {
            format!(
                "# Short of expected: {} B {}: busbw {} GB/s is {:.0}% of the {} GB/s the model expects ({}, bound {}); {}",
                r.size_bytes,
                m.placement.name(),
                trim_number(m.busbw_gbs),
                percent,
                trim_number(e.busbw_gbs),
                e.assumed(),
                e.bottleneck.as_deref().unwrap_or("by latency"),
                model.checks(&r.collective, e)
            )
        })
        .collect()
}
