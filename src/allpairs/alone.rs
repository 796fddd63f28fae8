//! The re-measurements alone as a CSV beside the matrices (NAME.alone.csv for
//! NAME.csv): one row per pair measured alone, with its figures, so that
//! rack_check can pool them over its launches and judge them against its own
//! limits, as the run judged them against its own.

use super::confirm::{Confirmation, Criterion};
use super::judging::{PairsVerdict, Thresholds};
use super::matrix::{read_csv, PairResults};
use crate::output::{write_whole, Replace};
use crate::report::csv::open_regular;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One pair measured alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AloneRow {
    pub criterion: Criterion,
    pub size_bytes: u64,
    pub node_a: String,
    pub node_b: String,
    /// What the figures are: "GB/s algbw" or "us median time".
    pub unit: String,
    /// The figures of the rounds alone, ';' between them.
    pub figures: String,
}

/// Where the re-measurements of the matrices in `csv` go.
pub fn alone_csv_of(csv: &Path) -> PathBuf {
    csv.with_extension("alone.csv")
}

/// The rows of the pairs `confirmation` measured alone.
pub fn rows(confirmation: &Confirmation, labels: &[String]) -> Vec<AloneRow> {
    confirmation
        .checked
        .iter()
        .filter(|c| !c.figures.is_empty())
        .map(|c| AloneRow {
            criterion: c.criterion,
            size_bytes: c.size,
            node_a: labels[c.pair.a].clone(),
            node_b: labels[c.pair.b].clone(),
            unit: c.criterion.unit().to_string(),
            figures: c
                .figures
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(";"),
        })
        .collect()
}

/// Writes `rows` whole at `path`, never over an existing file.
pub fn write(path: &Path, rows: &[AloneRow]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r)?;
    }
    let bytes = w.into_inner().context("the re-measurements alone")?;
    write_whole(path, Replace::Never, &bytes)
        .with_context(|| format!("{}: not written", path.display()))?;
    Ok(())
}

/// The rows at `path`; none when there is no such file (no pair was measured alone).
pub fn read(path: &Path) -> anyhow::Result<Vec<AloneRow>> {
    if path.symlink_metadata().is_err() {
        return Ok(Vec::new());
    }
    let (file, _) = open_regular(path, &path.display().to_string())?;
    csv::Reader::from_reader(file)
        .deserialize()
        .collect::<Result<Vec<AloneRow>, _>>()
        .with_context(|| format!("{}: not a CSV of re-measurements alone", path.display()))
}

/// The figures alone of the pair (a, b) at `size` on `criterion`, from the
/// rows of every launch, pooled; None where no launch measured it alone.
pub fn figures_of(
    launches: &[Vec<AloneRow>],
    labels: &[String],
    criterion: Criterion,
    size: u64,
    a: usize,
    b: usize,
) -> Option<Vec<f64>> {
    let names = [labels[a].as_str(), labels[b].as_str()];
    let figures: Vec<f64> = launches
        .iter()
        .flatten()
        .filter(|r| r.criterion == criterion && r.size_bytes == size)
        .filter(|r| [r.node_a.as_str(), r.node_b.as_str()] == names)
        .flat_map(|r| r.figures.split(';').map(|f| f.parse().unwrap_or(f64::NAN)))
        .collect();
    (!figures.is_empty()).then_some(figures)
}

/// Launches of an all-pairs test judged together.
pub struct Judged {
    /// The medians over the launches.
    pub results: PairResults,
    /// Only the pairs confirmed slow are left in it.
    pub verdict: PairsVerdict,
    pub confirmation: Confirmation,
}

/// The launches whose matrices are in `csvs` (each with its re-measurements
/// alone, where it made any) judged by `t`: the medians over the launches
/// name the pairs that cross a limit; each is then judged on its figures alone
/// pooled over the launches, or, where no launch measured it alone, on the
/// interval of its figures over the launches.
pub fn judge_launches(csvs: &[PathBuf], t: &Thresholds) -> anyhow::Result<Judged> {
    let launches = csvs
        .iter()
        .map(|p| read_csv(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let alone = csvs
        .iter()
        .map(|p| read(&alone_csv_of(p)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let Some(first) = launches.first() else {
        bail!("no launch to judge");
    };
    let sizes = |r: &PairResults| r.sizes.iter().map(|s| s.size_bytes).collect::<Vec<_>>();
    for (path, l) in csvs.iter().zip(&launches).skip(1) {
        if l.labels != first.labels || sizes(l) != sizes(first) {
            bail!(
                "{}: other nodes or sizes than {} ({:?} at {:?}, against {:?} at {:?}): the launches cannot be pooled",
                path.display(),
                csvs[0].display(),
                l.labels,
                sizes(l),
                first.labels,
                sizes(first)
            );
        }
    }
    let results = PairResults::median_over(&launches).context("no launch to judge")?;
    let mut verdict = results.judge(t);
    let labels = results.labels.clone();
    let figures = |c, size, a, b| figures_of(&alone, &labels, c, size, a, b);
    let confirmation = Confirmation::judge_with(&mut verdict, &results, &launches, &figures);
    Ok(Judged {
        results,
        verdict,
        confirmation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(criterion: Criterion, a: &str, b: &str, figures: &str) -> AloneRow {
        AloneRow {
            criterion,
            size_bytes: 65536,
            node_a: a.into(),
            node_b: b.into(),
            unit: criterion.unit().into(),
            figures: figures.into(),
        }
    }

    #[test]
    fn rows_round_trip_and_launches_pool() {
        let dir = std::env::temp_dir().join(format!("fb-alone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = alone_csv_of(&dir.join("pairs.csv"));
        assert_eq!(path.file_name().unwrap(), "pairs.alone.csv");
        assert_eq!(read(&path).unwrap(), Vec::new(), "no file: nothing alone");
        let first = vec![
            row(Criterion::Bandwidth, "n1", "n3", "0.5;0.52;0.49"),
            row(Criterion::Latency, "n1", "n3", "50;NaN;49"),
        ];
        write(&path, &first).unwrap();
        assert!(write(&path, &first).is_err(), "never over an existing file");
        let back = read(&path).unwrap();
        assert_eq!(back, first);
        let second = vec![row(Criterion::Bandwidth, "n1", "n3", "0.51")];
        let labels: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
        let launches = [back, second];
        let bw = figures_of(&launches, &labels, Criterion::Bandwidth, 65536, 0, 2).unwrap();
        assert_eq!(bw, [0.5, 0.52, 0.49, 0.51]);
        let lat = figures_of(&launches, &labels, Criterion::Latency, 65536, 0, 2).unwrap();
        assert!(
            lat[1].is_nan(),
            "NaN stays a figure that is not a measurement"
        );
        assert_eq!(
            figures_of(&launches, &labels, Criterion::Bandwidth, 65536, 0, 1),
            None
        );
        assert_eq!(
            figures_of(&launches, &labels, Criterion::Bandwidth, 8, 0, 2),
            None
        );
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        assert!(read(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Three launches in which node2's pairs were slow with the other pairs
    /// running (20 GB/s against 45, 50 us against 5), and what measuring them
    /// alone in the first launch said.
    fn launches(name: &str, alone_bw: Option<&str>, alone_us: &str) -> anyhow::Result<Judged> {
        use super::super::matrix::{tests::results, write_csv};
        let dir = std::env::temp_dir().join(format!("fb-launches-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let r = results(4, Some(2), 45.0, 20.0);
        let csvs: Vec<PathBuf> = ["p.csv", "p.r2.csv", "p.r3.csv"]
            .iter()
            .map(|f| dir.join(f))
            .collect();
        for path in &csvs {
            write_csv(std::fs::File::create(path).unwrap(), &r).unwrap();
        }
        if let Some(bw) = alone_bw {
            let mut rows = Vec::new();
            for other in ["node0", "node1", "node3"] {
                let (a, b) = if other < "node2" {
                    (other, "node2")
                } else {
                    ("node2", other)
                };
                rows.push(AloneRow {
                    size_bytes: 1 << 20,
                    ..row(Criterion::Bandwidth, a, b, bw)
                });
                rows.push(AloneRow {
                    size_bytes: 8,
                    ..row(Criterion::Latency, a, b, alone_us)
                });
            }
            write(&alone_csv_of(&csvs[0]), &rows).unwrap();
        }
        let judged = judge_launches(&csvs, &Thresholds::default());
        std::fs::remove_dir_all(&dir).unwrap();
        judged
    }

    #[test]
    fn launches_name_a_node_only_where_alone_agrees() {
        // Not measured alone: slow over the whole interval of the launches.
        let j = launches("none", None, "").unwrap();
        assert_eq!(j.verdict.suspects, [2], "{:?}", j.verdict);
        assert!(!j.confirmation.inconclusive());
        // Healthy alone: slow only while the other pairs ran.
        let j = launches("healthy", Some("44;45;46"), "5;5.5;6").unwrap();
        assert!(
            j.verdict.passed() && j.verdict.suspects.is_empty(),
            "{:?}",
            j.verdict
        );
        assert!(j.confirmation.lines(&j.results.labels)[0].contains("not confirmed"));
        // Slow alone too: named.
        let j = launches("slow", Some("19;20;21"), "49;50;51").unwrap();
        assert_eq!(j.verdict.suspects, [2]);
        // Alone across the limit (0.9 x the median pair's 32.5 GB/s): cannot
        // tell, not named.
        let j = launches("across", Some("25;29;33"), "5;5.5;6").unwrap();
        assert!(j.verdict.suspects.is_empty() && j.confirmation.inconclusive());
    }
}
