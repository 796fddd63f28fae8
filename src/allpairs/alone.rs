//! The re-measurements alone as a CSV beside the matrices (NAME.alone.csv for
//! NAME.csv): one row per pair measured alone, with its figures, so that
//! rack_check can pool them over its launches and judge them against its own
//! limits, as the run judged them against its own.

use super::confirm::{Confirmation, Criterion, Measured, Whose};
use super::judging::{PairsVerdict, Thresholds};
use super::matrix::{read_csv, PairResults};
use crate::output::{write_whole, Replace};
use crate::report::csv::open_regular;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why a pair was measured alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// It crossed a limit.
    #[default]
    Suspect,
    /// Its criterion's typical pair, measured beside the suspects.
    Typical,
}

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
    /// Files written before it was added hold suspects only.
    #[serde(default)]
    pub role: Role,
    /// The share of each round's time the pair's ranks waited for a CPU, ';'
    /// between them; empty where it was not read.
    #[serde(default)]
    pub cpu_wait_shares: String,
}

/// Where the re-measurements of the matrices in `csv` go.
pub fn alone_csv_of(csv: &Path) -> PathBuf {
    csv.with_extension("alone.csv")
}

/// Figures as the CSV holds them, ';' between them.
fn joined(figures: &[f64]) -> String {
    figures
        .iter()
        .map(f64::to_string)
        .collect::<Vec<_>>()
        .join(";")
}

/// A CSV's figures; one that is not a number (an empty field too) is NaN,
/// never a pass.
fn split(figures: &str) -> Vec<f64> {
    figures
        .split(';')
        .map(|f| f.parse().unwrap_or(f64::NAN))
        .collect()
}

fn row(c: Criterion, size: u64, m: &Measured, role: Role, labels: &[String]) -> AloneRow {
    AloneRow {
        criterion: c,
        size_bytes: size,
        node_a: labels[m.a].clone(),
        node_b: labels[m.b].clone(),
        unit: c.unit().to_string(),
        figures: joined(&m.figures),
        role,
        cpu_wait_shares: joined(&m.cpu_wait),
    }
}

/// The rows of the pairs `confirmation` measured alone: the suspects, then
/// each typical pair once.
pub fn rows(confirmation: &Confirmation, labels: &[String]) -> Vec<AloneRow> {
    let measured = confirmation
        .checked
        .iter()
        .filter(|c| !c.measured.figures.is_empty());
    let suspects = measured
        .clone()
        .map(|c| row(c.criterion, c.size, &c.measured, Role::Suspect, labels));
    let typical = measured.filter_map(|c| {
        let t = &c.compared.as_ref()?.typical;
        Some(row(c.criterion, c.size, t, Role::Typical, labels))
    });
    let mut out: Vec<AloneRow> = Vec::new();
    for r in suspects.chain(typical) {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
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

/// The figures alone of `whose` at `size` on `criterion`, from the rows of
/// every launch, pooled; None where no launch measured it alone. The typical
/// pair may differ from launch to launch: each launch's is a typical pair,
/// named by the first. The shares of time waited for a CPU are pooled only
/// where every row has them.
pub fn figures_of(
    launches: &[Vec<AloneRow>],
    labels: &[String],
    criterion: Criterion,
    size: u64,
    whose: Whose,
) -> Option<Measured> {
    let index = |name: &str| labels.iter().position(|l| l == name);
    let rows: Vec<&AloneRow> = launches
        .iter()
        .flatten()
        .filter(|r| r.criterion == criterion && r.size_bytes == size)
        .filter(|r| match whose {
            Whose::Pair(a, b) => {
                r.role == Role::Suspect
                    && [r.node_a.as_str(), r.node_b.as_str()]
                        == [labels[a].as_str(), labels[b].as_str()]
            }
            Whose::Typical => r.role == Role::Typical,
        })
        .collect();
    let first = rows.first()?;
    let figures: Vec<f64> = rows.iter().flat_map(|r| split(&r.figures)).collect();
    let shares: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| match r.cpu_wait_shares.is_empty() {
            true => Vec::new(),
            false => split(&r.cpu_wait_shares),
        })
        .collect();
    // A share is of a round's time: one outside 0..=1 (or NaN) was not read.
    let whole = rows.iter().zip(&shares).all(|(r, s)| {
        split(&r.figures).len() == s.len() && s.iter().all(|x| (0.0..=1.0).contains(x))
    });
    Some(Measured {
        a: index(&first.node_a)?,
        b: index(&first.node_b)?,
        figures,
        cpu_wait: if whole { shares.concat() } else { Vec::new() },
    })
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
    let figures = |c, size, whose| figures_of(&alone, &labels, c, size, whose);
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
            role: Role::Suspect,
            cpu_wait_shares: String::new(),
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
        let typical = |a: &str, b: &str, figures: &str, shares: &str| AloneRow {
            role: Role::Typical,
            cpu_wait_shares: shares.into(),
            ..row(Criterion::Bandwidth, a, b, figures)
        };
        let second = vec![
            row(Criterion::Bandwidth, "n1", "n3", "0.51"),
            typical("n1", "n2", "0.9;0.95", "0.1;0.2"),
        ];
        let third = vec![typical("n2", "n3", "1", "0.3")];
        let labels: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
        let launches = [back, second, third];
        let pair = Whose::Pair(0, 2);
        let bw = figures_of(&launches, &labels, Criterion::Bandwidth, 65536, pair).unwrap();
        assert_eq!(bw.figures, [0.5, 0.52, 0.49, 0.51]);
        assert!(bw.cpu_wait.is_empty(), "not read: no share");
        let lat = figures_of(&launches, &labels, Criterion::Latency, 65536, pair).unwrap();
        assert!(
            lat.figures[1].is_nan(),
            "NaN stays a figure that is not a measurement"
        );
        let t = figures_of(
            &launches,
            &labels,
            Criterion::Bandwidth,
            65536,
            Whose::Typical,
        )
        .unwrap();
        assert_eq!((t.a, t.b), (0, 1), "named by the first launch's");
        assert_eq!(t.figures, [0.9, 0.95, 1.0]);
        assert_eq!(t.cpu_wait, [0.1, 0.2, 0.3]);
        // A share that is no share of a round's time: none is taken.
        for bad in ["NaN", "-0.5", "1.5", "inf", "x"] {
            let planted = [vec![typical("n1", "n2", "0.9", bad)]];
            let t = figures_of(
                &planted,
                &labels,
                Criterion::Bandwidth,
                65536,
                Whose::Typical,
            )
            .unwrap();
            assert!(t.cpu_wait.is_empty(), "{bad}: {t:?}");
        }
        assert_eq!(
            figures_of(
                &launches,
                &labels,
                Criterion::Bandwidth,
                65536,
                Whose::Pair(0, 1)
            ),
            None,
            "a typical pair is not a suspect"
        );
        assert_eq!(
            figures_of(&launches, &labels, Criterion::Bandwidth, 8, pair),
            None
        );
        assert_eq!(
            figures_of(
                &launches,
                &labels,
                Criterion::Latency,
                65536,
                Whose::Typical
            ),
            None
        );
        // A file of before the roles: every row a suspect, no shares.
        let old = dir.join("old.alone.csv");
        std::fs::write(&old, "criterion,size_bytes,node_a,node_b,unit,figures\nlatency,8,n1,n2,us median time,5;6;7\n").unwrap();
        let rows = read(&old).unwrap();
        assert_eq!(
            (rows[0].role, rows[0].cpu_wait_shares.as_str()),
            (Role::Suspect, "")
        );
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        assert!(read(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Three launches in which node2's pairs were slow with the other pairs
    /// running (20 GB/s against 45, 50 us against 5), and what measuring them
    /// alone in the first launch said.
    fn launches(name: &str, alone_bw: Option<&str>, alone_us: &str) -> anyhow::Result<Judged> {
        launches_beside(name, alone_bw, alone_us, None)
    }

    /// As `launches`, with the typical pair node0 <-> node1 measured alone
    /// beside them as `typical` (bandwidth, latency).
    fn launches_beside(
        name: &str,
        alone_bw: Option<&str>,
        alone_us: &str,
        typical: Option<(&str, &str)>,
    ) -> anyhow::Result<Judged> {
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
            if let Some((bw, us)) = typical {
                for (c, size, figures) in [
                    (Criterion::Bandwidth, 1 << 20, bw),
                    (Criterion::Latency, 8, us),
                ] {
                    rows.push(AloneRow {
                        size_bytes: size,
                        role: Role::Typical,
                        ..row(c, "node0", "node1", figures)
                    });
                }
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
        // Slow alone, and so was the typical pair beside it (a busy host): not named.
        let busy = Some(("19;21;20", "50;49;52"));
        let j = launches_beside("busy", Some("19;20;21"), "49;50;51", busy).unwrap();
        assert!(
            j.verdict.passed() && j.verdict.suspects.is_empty() && !j.confirmation.inconclusive(),
            "{:?}",
            j.confirmation
        );
        // Slow alone beside a healthy typical pair: named.
        let healthy = Some(("44;45;46", "5;5.2;4.9"));
        let j = launches_beside("beside", Some("19;20;21"), "49;50;51", healthy).unwrap();
        assert_eq!(j.verdict.suspects, [2]);
        assert!(j.confirmation.lines(&j.results.labels)[0]
            .contains("x the typical pair node0 <-> node1 alone"));
    }
}
