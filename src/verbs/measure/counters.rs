//! The fabric counters of a verbs run: snapshots of this node's counters
//! around each size (the same as the collectives'), shown as perftest's
//! `-W/--report-counters` (each named counter's change after each size's
//! line), the footer, and `--counters FILE`.

use crate::cli::CountersArgs;
use crate::job::UsageError;
use crate::output::{check_file, COUNTERS_FLAG};
use crate::report::counters::{
    CounterCsv, FabricPlan, Footer, Meant, SizeCounters, Watch, WithCounters,
};
use crate::report::verbs::VerbsResult;
use crate::report::{Exporter, RunInfo, Summary};
use crate::sysfs::counters::{classes, Delta, Family};
use crate::sysfs::rdma::port_dir;
use crate::sysfs::Root;
use std::path::PathBuf;

/// The verbs binaries' counter flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CounterArgs {
    /// Report these counters' change after each size, as perftest (e.g. "counters/port_xmit_data,hw_counters/out_of_buffer")
    #[arg(short = 'W', long = "report-counters", value_name = "LIST")]
    pub report_counters: Option<String>,
    #[command(flatten)]
    pub file: CountersArgs,
}

/// The validated counter flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CounterPlan {
    /// -W: the counters named, in order.
    pub report: Vec<(Family, String)>,
    /// --counters FILE.
    pub file: Option<PathBuf>,
}

impl CounterArgs {
    pub fn plan(&self) -> Result<CounterPlan, UsageError> {
        check_file(&COUNTERS_FLAG, self.file.counters.as_deref())?;
        let report = match &self.report_counters {
            None => Vec::new(),
            Some(list) => list
                .split(',')
                .map(|entry| parse_counter(entry.trim()))
                .collect::<Option<Vec<_>>>()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    UsageError(format!(
                        "-W/--report-counters '{list}': give counters/NAME or hw_counters/NAME, \
                         comma-separated (e.g. -W counters/port_xmit_data,hw_counters/out_of_buffer)"
                    ))
                })?,
        };
        Ok(CounterPlan {
            report,
            file: self.file.counters.clone(),
        })
    }
}

fn parse_counter(entry: &str) -> Option<(Family, String)> {
    let (dir, name) = entry.split_once('/')?;
    let family = match dir {
        "counters" => Family::Port,
        "hw_counters" => Family::Hw,
        _ => return None,
    };
    let plain = !name.is_empty() && !name.contains('/') && name != "..";
    plain.then(|| (family, name.to_string()))
}

/// This side's watch over its node's counters.
pub struct Fabric {
    watch: Watch,
    host: String,
}

impl Fabric {
    /// The watch of the side that prints (`printer`), and its exporters: the
    /// -W lines (after the table's line of each size), the footer, --counters.
    /// A -W counter that the port does not have is an error, as in perftest.
    pub fn open(
        plan: &CounterPlan,
        device: &str,
        port: u8,
        host: &str,
        printer: bool,
    ) -> anyhow::Result<(Fabric, Vec<Box<dyn Exporter<VerbsResult>>>)> {
        let live = Root::new("/");
        let dir = port_dir(device, port);
        for (family, name) in &plan.report {
            let file = format!("{dir}/{}/{name}", family.name());
            if !live.exists(&file) {
                anyhow::bail!(
                    "-W/--report-counters {}/{name}: {device} port {port} has no such counter \
                     (ls {dir}/{})",
                    family.name(),
                    family.name()
                );
            }
        }
        let fabric_plan = FabricPlan {
            meant: Some(Meant::device(device, port.into())),
            expects_rdma: true,
            ..FabricPlan::default()
        };
        let mut exporters: Vec<Box<dyn Exporter<VerbsResult>>> = Vec::new();
        if printer {
            if !plan.report.is_empty() {
                let view = ReportCounters {
                    names: plan.report.clone(),
                    device: device.to_string(),
                    port: port.into(),
                };
                exporters.push(Box::new(view));
            }
            let footer = Footer::new(std::io::stdout(), fabric_plan.clone());
            exporters.push(Box::new(footer));
            if let Some(path) = &plan.file {
                exporters.push(Box::new(CounterCsv::create(path)?));
            }
        }
        let fabric = Fabric {
            watch: Watch::new(&fabric_plan, if printer { 0 } else { 1 }),
            host: host.to_string(),
        };
        Ok((fabric, exporters))
    }

    /// `measure` between two snapshots (never inside its timed loop), and
    /// the deltas (on the side that prints).
    pub fn around<T>(
        &mut self,
        measure: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<(T, Option<SizeCounters>)> {
        let before = self.watch.before();
        let measured = measure()?;
        let node = self.watch.after_here(&self.host, before);
        Ok((measured, node.map(|n| SizeCounters { nodes: vec![n] })))
    }
}

/// perftest's -W: "\tcounters/port_xmit_data=N" per named counter, then a
/// blank line, after each size's line; N in the counter's own units, as
/// perftest prints it (4-byte words for port_xmit_data).
struct ReportCounters {
    names: Vec<(Family, String)>,
    device: String,
    port: u32,
}

impl Exporter<VerbsResult> for ReportCounters {
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
        Ok(())
    }

    fn record(&mut self, _run: &RunInfo, result: &VerbsResult) -> anyhow::Result<()> {
        let changes = result
            .counters()
            .into_iter()
            .flat_map(|c| &c.nodes)
            .flat_map(|n| &n.changes);
        let mut text = String::new();
        for (family, name) in &self.names {
            let change = changes.clone().find(|c| {
                c.key.family == *family
                    && &c.key.name == name
                    && c.key.device == self.device
                    && c.key.port == Some(self.port)
            });
            let shown = match change.map(|c| c.delta) {
                None => "0".to_string(),
                Some(Delta::Counted(d)) => (d / classes::bytes_per_unit(*family, name)).to_string(),
                Some(Delta::Unknown(why)) => format!("unknown ({})", why.name()),
            };
            text.push_str(&format!("\t{}/{name}={shown}\n", family.name()));
        }
        println!("{text}");
        Ok(())
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(w: Option<&str>) -> Result<CounterPlan, UsageError> {
        CounterArgs {
            report_counters: w.map(str::to_string),
            file: CountersArgs::default(),
        }
        .plan()
    }

    #[test]
    fn report_counters_parse_as_perftest_names_them() {
        assert_eq!(
            plan(Some("counters/port_xmit_data,hw_counters/out_of_buffer"))
                .unwrap()
                .report,
            [
                (Family::Port, "port_xmit_data".to_string()),
                (Family::Hw, "out_of_buffer".to_string())
            ]
        );
        assert_eq!(plan(None).unwrap(), CounterPlan::default());
        for bad in [
            "port_xmit_data",
            "stats/x",
            "counters/",
            "counters/../x",
            "",
        ] {
            let e = plan(Some(bad)).unwrap_err().0;
            assert!(
                e.starts_with(&format!("-W/--report-counters '{bad}': give counters/NAME")),
                "{e}"
            );
        }
    }
}
