//! AlltoAllv, as nccl-tests' alltoallv_perf: each rank sends a different byte count
//! to each peer, from a distance-weighted pattern (`NCCL_TESTS_ALLTOALLV_SPREAD`, 0
//! uniform to 1 fully weighted, default 1) or a traffic matrix file
//! (`NCCL_TESTS_ALLTOALLV_MATRIX_FILE`, scaled by `NCCL_TESTS_ALLTOALLV_MATRIX_SCALE`).
//! Every per-peer count is rounded down to 16 bytes; the size column and algbw are
//! the largest rank's send or receive total, busbw algbw x (n-1)/n, and
//! `NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY=1` prints each rank's figures. The variables
//! are read once, where the driver opens the job (`for_run`), into the run's `AlltoAllv`.

use super::{all_but_own_share, chunk_count, Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};
use crate::input::{self, InputError};
use crate::job::UsageError;
use crate::sizes::human_bytes;
use anyhow::{anyhow, bail};
use std::path::Path;

pub const SPREAD_ENV: &str = "NCCL_TESTS_ALLTOALLV_SPREAD";
pub const MATRIX_FILE_ENV: &str = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE";
pub const MATRIX_SCALE_ENV: &str = "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE";
pub const SUMMARY_ENV: &str = "NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY";

/// Bytes of the matrix file an entry may take: a byte count of up to 20 digits
/// (or a float such as 1.5e9) and its separator, with room to spare.
const MATRIX_ENTRY_BYTES: u64 = 32;
/// The least a matrix file may hold whatever the job: a matrix written for a
/// larger job (of which the first rows and columns are used) still loads.
const MATRIX_FILE_FLOOR: u64 = 1 << 20;

/// The most of the matrix file read for a job of `nranks` ranks: an N x N
/// matrix needs no more than [`MATRIX_ENTRY_BYTES`] an entry. /dev/zero or a
/// file of gigabytes is refused, never read into memory.
pub fn matrix_file_bound(nranks: usize) -> u64 {
    let n = nranks as u64;
    n.saturating_mul(n)
        .saturating_mul(MATRIX_ENTRY_BYTES)
        .max(MATRIX_FILE_FLOOR)
}

/// Why the matrix file could not be read, with the fix.
fn unreadable_matrix(file: &str, nranks: usize, e: &InputError) -> String {
    let fix = format!("give a file of {nranks} rows of {nranks} byte counts");
    match e {
        InputError::TooLarge { .. } => format!(
            "{MATRIX_FILE_ENV}={file}: {e}, the most read for {nranks} ranks ({MATRIX_ENTRY_BYTES} bytes \
             an entry of a {nranks}x{nranks} matrix, and at least {}); {fix}",
            human_bytes(MATRIX_FILE_FLOOR)
        ),
        _ => format!("{MATRIX_FILE_ENV}={file}: {e}; {fix}"),
    }
}

/// Where the per-peer byte counts come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Traffic {
    /// Each rank sends its total, split between uniform and weighted by the
    /// distance (to - from) mod n in rank space: `spread` of the latter.
    Generated { spread: f64 },
    /// `bytes[i * dim + j]` from rank i to rank j, already scaled and rounded.
    Matrix {
        file: String,
        scale: f64,
        dim: usize,
        bytes: Vec<u64>,
    },
}

/// The variables of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    pub traffic: Traffic,
    pub summary: bool,
}

fn number(var: &str, typed: &str, fix: &str) -> anyhow::Result<f64> {
    typed
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| anyhow!("{var}={typed}: not a number; {fix}"))
}

impl Setup {
    /// From the variables `get` returns (the environment, or a test's map) for a
    /// job of `nranks` ranks; the matrix file is read through `read`, which
    /// takes the path and the most it may read ([`matrix_file_bound`]).
    pub fn from_vars(
        nranks: usize,
        get: impl Fn(&str) -> Option<String>,
        read: impl Fn(&str, u64) -> Result<String, InputError>,
    ) -> anyhow::Result<Setup> {
        let summary = match get(SUMMARY_ENV) {
            None => false,
            Some(v) => v.trim().parse::<i64>().map(|n| n != 0).map_err(|_| {
                anyhow!("{SUMMARY_ENV}={v}: not an integer; give 1 to print each rank's figures, 0 not to")
            })?,
        };
        let Some(file) = get(MATRIX_FILE_ENV) else {
            let spread = match get(SPREAD_ENV) {
                None => 1.0,
                Some(v) => {
                    let fix =
                        "give a value from 0.0 (uniform) to 1.0 (distance-weighted, the default)";
                    let s = number(SPREAD_ENV, &v, fix)?;
                    if !(0.0..=1.0).contains(&s) {
                        bail!("{SPREAD_ENV}={v}: outside 0..1; {fix}");
                    }
                    s
                }
            };
            return Ok(Setup {
                traffic: Traffic::Generated { spread },
                summary,
            });
        };
        let scale = match get(MATRIX_SCALE_ENV) {
            None => 1.0,
            Some(v) => {
                let fix = "give a factor >= 0 for every matrix value, e.g. 2.0";
                let s = number(MATRIX_SCALE_ENV, &v, fix)?;
                if s < 0.0 {
                    bail!("{MATRIX_SCALE_ENV}={v}: negative; {fix}");
                }
                s
            }
        };
        let text = read(&file, matrix_file_bound(nranks))
            .map_err(|e| anyhow!(unreadable_matrix(&file, nranks, &e)))?;
        let (dim, bytes) =
            parse_matrix(&text, scale).map_err(|e| anyhow!("{MATRIX_FILE_ENV}={file}: {e}"))?;
        Ok(Setup {
            traffic: Traffic::Matrix {
                file,
                scale,
                dim,
                bytes,
            },
            summary,
        })
    }

    /// Bytes rank `from` sends rank `to` when each rank's total is `total_bytes`
    /// (generated) or as the matrix says; a multiple of 16.
    pub fn peer_bytes(&self, from: usize, to: usize, nranks: usize, total_bytes: u64) -> u64 {
        match &self.traffic {
            Traffic::Matrix { dim, bytes, .. } => bytes[from * dim + to],
            Traffic::Generated { .. } if nranks == 1 => total_bytes & !15,
            Traffic::Generated { spread } => {
                let distance = ((to + nranks - from) % nranks) as f64;
                let sum_distances = (nranks * (nranks - 1) / 2) as f64;
                let uniform = total_bytes as f64 / nranks as f64;
                let weighted = distance * total_bytes as f64 / sum_distances;
                ((1.0 - spread) * uniform + spread * weighted) as u64 & !15
            }
        }
    }

    /// Elements `from` sends `to` of a call whose count parameter is `param`.
    fn peer_elements(
        &self,
        from: usize,
        to: usize,
        nranks: usize,
        param: usize,
        elt: usize,
    ) -> usize {
        let total = (param * nranks * elt) as u64;
        (self.peer_bytes(from, to, nranks, total) / elt as u64) as usize
    }

    /// The largest send and receive totals over the ranks, in elements.
    fn max_counts(&self, nranks: usize, param: usize, elt: usize) -> (usize, usize) {
        let ranks = match self.traffic {
            // Generated patterns are balanced: rank 0's totals are everyone's.
            Traffic::Generated { .. } => 0..1,
            Traffic::Matrix { .. } => 0..nranks,
        };
        ranks.fold((0, 0), |(s, r), rank| {
            let sends = (0..nranks).map(|p| self.peer_elements(rank, p, nranks, param, elt));
            let recvs = (0..nranks).map(|p| self.peer_elements(p, rank, nranks, param, elt));
            (s.max(sends.sum()), r.max(recvs.sum()))
        })
    }

    fn check(&self, nranks: usize, min_bytes: u64, max_bytes: u64) -> anyhow::Result<()> {
        let Traffic::Matrix { file, dim, .. } = &self.traffic else {
            return Ok(());
        };
        if nranks > *dim {
            bail!(
                "{MATRIX_FILE_ENV}={file}: a {dim}x{dim} matrix for {nranks} ranks; give at least {nranks} rows and columns (the first {nranks} are used)"
            );
        }
        if min_bytes != max_bytes {
            bail!(
                "-b/--minbytes {min_bytes} and -e/--maxbytes {max_bytes} differ, but {MATRIX_FILE_ENV} sets every size: give -b and -e equal, e.g. -b {max_bytes} -e {max_bytes}"
            );
        }
        let (send, recv) = self.max_counts(nranks, 0, 1);
        let need = send.max(recv) as u64;
        if max_bytes < need {
            bail!(
                "-e/--maxbytes {max_bytes}: the matrix in {file} needs {need} bytes (the largest rank's send or receive total); give -b {need} -e {need} or more"
            );
        }
        Ok(())
    }

    /// The segments of `rank`'s receive buffer, one per source in rank order, of a
    /// call whose count parameter is `param` (elements of `elt` bytes).
    fn segments(&self, rank: usize, nranks: usize, param: usize, elt: usize) -> Vec<Segment> {
        let mut start = 0;
        (0..nranks)
            .map(|source| {
                let len = self.peer_elements(source, rank, nranks, param, elt);
                let source_offset = (0..rank)
                    .map(|k| self.peer_elements(source, k, nranks, param, elt))
                    .sum();
                let seg = Segment {
                    start,
                    len,
                    source,
                    source_offset,
                };
                start += len;
                seg
            })
            .collect()
    }
}

/// A whitespace-separated square matrix, one row per line, each value times
/// `scale` rounded down to 16 bytes, as nccl-tests reads it.
fn parse_matrix(text: &str, scale: f64) -> anyhow::Result<(usize, Vec<u64>)> {
    let fix = "give a square matrix of non-negative byte counts, one row per line (row i: what rank i sends each rank)";
    let mut bytes = Vec::new();
    let mut cols = 0;
    let rows: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    for (r, line) in rows.iter().enumerate() {
        let values: Vec<&str> = line.split_whitespace().collect();
        if r == 0 {
            cols = values.len();
        } else if values.len() != cols {
            bail!(
                "row {} has {} values, row 1 has {cols}; {fix}",
                r + 1,
                values.len()
            );
        }
        for (c, v) in values.iter().enumerate() {
            let value = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
            let Some(value) = value else {
                bail!(
                    "row {} column {}: '{v}' is not a byte count; {fix}",
                    r + 1,
                    c + 1
                );
            };
            let scaled = value * scale;
            if scaled >= u64::MAX as f64 {
                bail!(
                    "row {} column {}: {v} x {scale} overflows; {fix}",
                    r + 1,
                    c + 1
                );
            }
            bytes.push(scaled as u64 & !15);
        }
    }
    match rows.len() {
        0 => Err(anyhow!("the file is empty; {fix}")),
        n if n != cols => Err(anyhow!("{n} rows of {cols} values, not square; {fix}")),
        n => Ok((n, bytes)),
    }
}

/// One source's segment of a rank's receive buffer: where it starts, its length,
/// the source, and where in the source's send stream it begins (elements).
#[derive(Clone, Copy)]
struct Segment {
    start: usize,
    len: usize,
    source: usize,
    source_offset: usize,
}

/// AlltoAllv with one run's variables. The registry's (`ALLTOALLV`, what the binary
/// and `collective::all()` hold) has nccl-tests' default pattern, until `for_run`
/// reads the job's variables into the run's own.
pub struct AlltoAllv {
    setup: Setup,
}

/// The registry's AlltoAllv: the generated, fully distance-weighted pattern, no summary.
pub static ALLTOALLV: AlltoAllv = AlltoAllv {
    setup: Setup {
        traffic: Traffic::Generated { spread: 1.0 },
        summary: false,
    },
};

impl Collective for AlltoAllv {
    fn name(&self) -> &'static str {
        "AlltoAllv"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::AlltoAllv
    }
    fn counts(&self, count: usize, elt_size: usize, nranks: usize) -> Counts {
        let s = &self.setup;
        // The count column: elements per peer of the generated pattern, 0 for a matrix.
        let param = match s.traffic {
            Traffic::Generated { .. } => chunk_count(count, elt_size, nranks),
            Traffic::Matrix { .. } => 0,
        };
        let (send, recv) = s.max_counts(nranks, param, elt_size);
        Counts {
            send,
            recv,
            param,
            send_inplace_offset: 0,
            recv_inplace_offset: 0,
        }
    }
    fn busbw_factor(&self, nranks: usize) -> f64 {
        all_but_own_share(nranks)
    }
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64> {
        self.expected_of(layout)(index)
    }
    /// Segment after segment in rank order, worked out once per layout; nothing is
    /// defined past this rank's total.
    fn expected_of<'a>(&'a self, layout: &'a Layout) -> Box<dyn Fn(usize) -> Option<f64> + 'a> {
        let elt = layout.pattern.dtype.size();
        let segments = (self.setup).segments(layout.rank, layout.nranks, layout.counts.param, elt);
        Box::new(move |index| {
            let at = segments.partition_point(|s| s.start + s.len <= index);
            let s = segments.get(at).filter(|s| index >= s.start)?;
            Some(
                layout
                    .pattern
                    .input(s.source, s.source_offset + index - s.start),
            )
        })
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        let (s, n, elt) = (&self.setup, backend.nranks(), args.dtype.size());
        backend.alltoallv(args, &|from, to| {
            s.peer_elements(from, to, n, args.count, elt)
        })
    }
    fn for_run(
        &self,
        nranks: usize,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<Box<dyn Collective>>> {
        let read = |f: &str, max| input::read_text(Path::new(f), max);
        let setup = Setup::from_vars(nranks, vars, read)?;
        Ok(Some(Box::new(AlltoAllv { setup })))
    }
    fn check(&self, nranks: usize, min_bytes: u64, max_bytes: u64) -> Result<(), UsageError> {
        Ok(self.setup.check(nranks, min_bytes, max_bytes)?)
    }
    fn report_lines(
        &self,
        counts: &Counts,
        elt: usize,
        nranks: usize,
        seconds: f64,
    ) -> Vec<String> {
        let s = &self.setup;
        if !s.summary {
            return Vec::new();
        }
        let total = (counts.param * nranks * elt) as u64;
        let mut lines = vec![match &s.traffic {
            Traffic::Generated { spread } => format!(
                "# {SUMMARY_ENV}: mode=generated nranks={nranks} total_bytes={total} spread={spread:.3} time_usec={:.2}",
                seconds * 1e6
            ),
            Traffic::Matrix { dim, scale, .. } => format!(
                "# {SUMMARY_ENV}: mode=matrix nranks={nranks} matrix_dim={dim} scale={scale:.3} time_usec={:.2}",
                seconds * 1e6
            ),
        }];
        for rank in 0..nranks {
            let send: u64 = (0..nranks)
                .map(|p| s.peer_bytes(rank, p, nranks, total))
                .sum();
            let recv: u64 = (0..nranks)
                .map(|p| s.peer_bytes(p, rank, nranks, total))
                .sum();
            let alg = send.max(recv) as f64 / 1e9 / seconds;
            lines.push(format!(
                "#   rank={rank} send_bytes={send} recv_bytes={recv} alg_bw={alg:.2} bus_bw={:.2}",
                alg * all_but_own_share(nranks)
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn setup_of(vars: &[(&str, &str)], file: &str) -> Result<Setup, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let file = file.to_string();
        Setup::from_vars(4, |k| vars.get(k).cloned(), move |_, _| Ok(file.clone()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn generated_pattern_as_nccl_tests() {
        let s = setup_of(&[], "").unwrap();
        assert_eq!(s.traffic, Traffic::Generated { spread: 1.0 });
        // 4 ranks, 1 KiB each: distances 0..3 of 6 in all: 0, 1/6, 2/6, 3/6 of 1024.
        let row: Vec<u64> = (0..4).map(|j| s.peer_bytes(0, j, 4, 1024)).collect();
        assert_eq!(row, [0, 160, 336, 512]);
        assert_eq!(s.peer_bytes(3, 0, 4, 1024), 160);
        let uniform = setup_of(&[(SPREAD_ENV, "0")], "").unwrap();
        assert_eq!(uniform.peer_bytes(2, 1, 4, 1024), 256);
        // Balanced: every rank's totals are rank 0's.
        assert_eq!(s.max_counts(4, 64, 4), (252, 252));
    }

    #[test]
    fn matrix_file_scaled_and_rounded() {
        let s = setup_of(
            &[(MATRIX_FILE_ENV, "t.txt"), (MATRIX_SCALE_ENV, "2")],
            "100 200 150\n50 100 75\n\n300 150 200\n",
        )
        .unwrap();
        let Traffic::Matrix { dim, bytes, .. } = &s.traffic else {
            panic!()
        };
        assert_eq!(*dim, 3);
        assert_eq!(bytes[..3], [192, 400, 288]);
        // Rank 2 sends 592 + 288 + 400 = 1280; ranks 0 and 1 receive 880.
        assert_eq!(s.max_counts(3, 0, 1), (1280, 880));
        assert!(s.check(3, 1280, 1280).is_ok());
        let refused = |n, min, max| s.check(n, min, max).unwrap_err().to_string();
        assert!(refused(3, 1279, 1279).contains("give -b 1280 -e 1280"));
        assert!(refused(3, 8, 1280).contains("-b/--minbytes 8"));
        assert!(refused(4, 1280, 1280).contains("3x3 matrix for 4 ranks"));
    }

    #[test]
    fn malformed_variables_name_the_variable_and_the_fix() {
        let file = [(MATRIX_FILE_ENV, "t.txt")];
        let e = setup_of(&file, "1 2\n3\n").unwrap_err();
        assert_eq!(
            e,
            "NCCL_TESTS_ALLTOALLV_MATRIX_FILE=t.txt: row 2 has 1 values, row 1 has 2; give a square matrix of non-negative byte counts, one row per line (row i: what rank i sends each rank)"
        );
        assert!(setup_of(&file, "1 x\n3 4\n")
            .unwrap_err()
            .contains("row 1 column 2: 'x'"));
        assert!(setup_of(&file, "1 -2\n3 4\n").unwrap_err().contains("'-2'"));
        assert!(setup_of(&file, "1 2 3\n4 5 6\n")
            .unwrap_err()
            .contains("not square"));
        assert!(setup_of(&file, " \n").unwrap_err().contains("empty"));
        let e = setup_of(&[(SPREAD_ENV, "lots")], "").unwrap_err();
        assert!(
            e.starts_with("NCCL_TESTS_ALLTOALLV_SPREAD=lots: not a number; give a value from 0.0"),
            "{e}"
        );
        assert!(setup_of(&[(SPREAD_ENV, "1.5")], "")
            .unwrap_err()
            .contains("outside 0..1"));
        let e = setup_of(&[(MATRIX_FILE_ENV, "t"), (MATRIX_SCALE_ENV, "-1")], "1").unwrap_err();
        assert!(
            e.starts_with("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE=-1: negative"),
            "{e}"
        );
        assert!(setup_of(&[(SUMMARY_ENV, "yes")], "")
            .unwrap_err()
            .contains("not an integer"));
        let from_file = |path: &str| {
            Setup::from_vars(
                4,
                |k| (k == MATRIX_FILE_ENV).then(|| path.to_string()),
                |f, max| input::read_text(Path::new(f), max),
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            from_file("/no/such"),
            "NCCL_TESTS_ALLTOALLV_MATRIX_FILE=/no/such: no such file; give a file of 4 rows of 4 byte counts"
        );
        assert_eq!(
            from_file("/dev/zero"),
            "NCCL_TESTS_ALLTOALLV_MATRIX_FILE=/dev/zero: is a character device, not a regular file; \
             give a file of 4 rows of 4 byte counts"
        );
    }

    #[test]
    fn the_run_takes_the_variables_it_is_given_and_validates_by_segments() {
        use crate::datatype::{DataType, RedOp};
        use crate::pattern::Pattern;
        let uniform = |k: &str| (k == SPREAD_ENV).then(|| "0".to_string());
        let run = ALLTOALLV.for_run(4, &uniform).unwrap().unwrap();
        // 1 KiB of float on each of 4 ranks, uniform: 64 elements to each peer.
        let counts = run.counts(256, 4, 4);
        assert_eq!((counts.param, counts.send, counts.recv), (64, 256, 256));
        let pattern = Pattern {
            dtype: DataType::Float,
            op: RedOp::Sum,
            nranks: 4,
        };
        let layout = Layout {
            rank: 1,
            nranks: 4,
            root: 0,
            counts,
            pattern,
        };
        let expected = run.expected_of(&layout);
        // Element 130 is source 2's 3rd element for rank 1, from its send offset 64.
        assert_eq!(expected(130), Some(pattern.input(2, 64 + 2)));
        assert_eq!(expected(256), None);
        assert_eq!(run.expected(&layout, 130), expected(130));
        // The registry's own keeps nccl-tests' default, the weighted pattern.
        assert_ne!(ALLTOALLV.counts(256, 4, 4), counts);
        let bad = |k: &str| (k == SPREAD_ENV).then(|| "2".to_string());
        let e = ALLTOALLV.for_run(4, &bad).err().unwrap().to_string();
        assert!(
            e.starts_with("NCCL_TESTS_ALLTOALLV_SPREAD=2: outside 0..1"),
            "{e}"
        );
    }

    #[test]
    fn the_matrix_file_is_read_up_to_a_bound_of_the_job() {
        assert_eq!(matrix_file_bound(2), 1 << 20);
        assert_eq!(matrix_file_bound(1024), 32 << 20);
        assert_eq!(matrix_file_bound(usize::MAX), u64::MAX);
        let e = unreadable_matrix("big", 4, &InputError::TooLarge { max: 1 << 20 });
        assert_eq!(
            e,
            "NCCL_TESTS_ALLTOALLV_MATRIX_FILE=big: holds more than 1 MiB, the most read for 4 ranks \
             (32 bytes an entry of a 4x4 matrix, and at least 1 MiB); give a file of 4 rows of 4 byte counts"
        );
    }
}
