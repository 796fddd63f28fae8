//! `--plot DIR`: the charts of this module for a benchmark's run, drawn when the run
//! ends into `DIR/<run_id>/`, with each size's full latency distribution (the
//! per-iteration histograms are at hand here, unlike in the CSV).

use super::{render, Added, RunData};
use crate::output::create_subfolder;
use crate::report::{hist, Exporter, Row, RunInfo, SizeResult, Summary};
use anyhow::Context;
use std::path::{Path, PathBuf};

pub struct PlotExport {
    dir: PathBuf,
    run: RunData,
}

impl PlotExport {
    pub fn new(dir: &Path) -> anyhow::Result<PlotExport> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--plot {}: cannot create the directory", dir.display()))?;
        Ok(PlotExport {
            dir: dir.to_path_buf(),
            run: RunData::default(),
        })
    }
}

impl Exporter for PlotExport {
    fn start(&mut self, run: &RunInfo) -> anyhow::Result<()> {
        self.run.label = run.run_id.clone();
        Ok(())
    }

    fn record(&mut self, run: &RunInfo, result: &SizeResult) -> anyhow::Result<()> {
        for m in &result.measurements {
            let row = Row::collective(run, result, m);
            let name = hist::file_name(&row);
            // The chart draws the first cycle's distribution: later cycles (-N 0
            // runs without end) take no memory beyond their sums.
            if self.run.add(row) == Added::NewPoint {
                self.run
                    .insert_distribution(name, hist::percentiles(&m.histogram));
            }
        }
        Ok(())
    }

    fn finish(&mut self, run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        if self.run.points.is_empty() && self.run.left_out.count == 0 {
            return Ok(());
        }
        let dir = self.dir.join(&run.run_id);
        create_subfolder(&dir)
            .with_context(|| format!("--plot: cannot create {}", dir.display()))?;
        let written = render(std::slice::from_ref(&self.run), &run.limits, None, &dir)
            .with_context(|| format!("--plot {}", dir.display()))?;
        if let Some(line) = &written.left_out {
            eprintln!("fabricbench: warning: --plot: {line}");
        }
        eprintln!(
            "fabricbench: {} plots (PNG and SVG) in {}",
            written.files.len(),
            dir.display()
        );
        Ok(())
    }
}
