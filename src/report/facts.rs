//! The run's facts that are one of a closed set, typed: what ran the calls, where
//! each rank's buffers sit, how per-rank times were combined and how the calls were
//! issued. Each has the one name the header, the CSV, the JSON and the HTML print.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What ran the calls: the CSV `backend` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunBackend {
    /// The MPI library's collectives, in host memory.
    Mpi,
    /// NCCL's collectives, in GPU memory.
    Nccl,
    /// libibverbs (the perftest binaries).
    Verbs,
    /// CUDA's copy engines (copy_bw).
    Cuda,
}

impl RunBackend {
    pub fn name(self) -> &'static str {
        match self {
            RunBackend::Mpi => "mpi",
            RunBackend::Nccl => "nccl",
            RunBackend::Verbs => "verbs",
            RunBackend::Cuda => "cuda",
        }
    }
}

/// Where one rank's buffers sit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Location {
    /// Host memory.
    #[default]
    Host,
    /// A GPU, by its PCI bus id ("0000:18:00.0").
    Gpu(String),
}

impl Location {
    /// "host", or the bus id.
    pub fn name(&self) -> &str {
        match self {
            Location::Host => "host",
            Location::Gpu(bus_id) => bus_id,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What holds one rank's buffers, as the header and the CSV `device` column name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceName {
    Host,
    /// The GPU's name and bus id.
    Gpu {
        name: String,
        bus_id: String,
    },
}

impl DeviceName {
    /// The device at `location`, called `name` (the GPU's; host memory's goes unsaid).
    pub fn at(location: &Location, name: &str) -> DeviceName {
        match location {
            Location::Host => DeviceName::Host,
            Location::Gpu(bus_id) => DeviceName::Gpu {
                name: name.to_string(),
                bus_id: bus_id.clone(),
            },
        }
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceName::Host => f.write_str("host"),
            DeviceName::Gpu { name, bus_id } => write!(f, "{name} {bus_id}"),
        }
    }
}

/// The run's devices: the CSV `device` column.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Devices {
    /// The family does not name one (verbs, copy_bw: their rows say it elsewhere).
    #[default]
    Unnamed,
    /// Every rank's is alike: "host", "NVIDIA H200 0000:18:00.0".
    Alike(DeviceName),
    /// They differ: "r0=host;r1=NVIDIA H200 0000:18:00.0".
    PerRank(Vec<(usize, DeviceName)>),
}

impl Devices {
    /// Each rank's device, in rank order: one name if all are alike.
    pub fn of(per_rank: Vec<(usize, DeviceName)>) -> Devices {
        match per_rank.as_slice() {
            [] => Devices::Unnamed,
            [(_, first), rest @ ..] if rest.iter().all(|(_, d)| d == first) => {
                Devices::Alike(first.clone())
            }
            _ => Devices::PerRank(per_rank),
        }
    }
}

impl fmt::Display for Devices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Devices::Unnamed => Ok(()),
            Devices::Alike(d) => d.fmt(f),
            Devices::PerRank(each) => {
                for (i, (rank, d)) in each.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ";" };
                    write!(f, "{sep}r{rank}={d}")?;
                }
                Ok(())
            }
        }
    }
}

/// How the per-rank times are combined (`-a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Average {
    Rank0,
    Mean,
    Min,
    Max,
}

impl Average {
    pub fn name(self) -> &'static str {
        match self {
            Average::Rank0 => "rank0",
            Average::Mean => "avg",
            Average::Min => "min",
            Average::Max => "max",
        }
    }
    pub fn combine(self, per_rank: &[f64]) -> f64 {
        match self {
            Average::Rank0 => per_rank[0],
            Average::Mean => per_rank.iter().sum::<f64>() / per_rank.len() as f64,
            Average::Min => per_rank.iter().copied().fold(f64::INFINITY, f64::min),
            Average::Max => per_rank.iter().copied().fold(0.0, f64::max),
        }
    }
}

/// How the timed calls are issued (`-z`, `-G`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launch {
    /// Back to back, completion awaited once per loop (nccl-tests' default).
    Stream,
    /// `-z 1`: each call completed, then a barrier, inside the timed time.
    Blocking,
    /// `-z 2`: each call completed before the next, no barrier.
    Synced,
    /// `-z 3`: each iteration completed and timed on its own, with a barrier between
    /// iterations outside the timed time (OSU's method).
    BarrierOutside,
    /// `-G N`: the loop captured in a CUDA graph, launched N times.
    Graph(usize),
}

impl Launch {
    /// The CSV `launch` column: "stream", "blocking", "synced", "barrier-outside"
    /// or "graph x N".
    pub fn name(self) -> String {
        match self {
            Launch::Stream => "stream".into(),
            Launch::Blocking => "blocking".into(),
            Launch::Synced => "synced".into(),
            Launch::BarrierOutside => "barrier-outside".into(),
            Launch::Graph(n) => format!("graph x{n}"),
        }
    }

    /// CUDA graph launches of the captured loop (0: no graph), as nccl-tests' header says.
    pub fn graph_launches(self) -> usize {
        match self {
            Launch::Graph(n) => n,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_print_one_name_when_alike_and_each_rank_when_not() {
        let gpu = |bus: &str| DeviceName::at(&Location::Gpu(bus.into()), "NVIDIA H200");
        assert_eq!(Devices::of(vec![]).to_string(), "");
        let host = Devices::of(vec![(0, DeviceName::Host), (1, DeviceName::Host)]);
        assert_eq!(host.to_string(), "host");
        let alike = Devices::of(vec![(0, gpu("0000:18:00.0")), (1, gpu("0000:18:00.0"))]);
        assert_eq!(alike.to_string(), "NVIDIA H200 0000:18:00.0");
        let mixed = Devices::of(vec![(0, DeviceName::Host), (1, gpu("0000:18:00.0"))]);
        assert_eq!(mixed.to_string(), "r0=host;r1=NVIDIA H200 0000:18:00.0");
        assert_eq!(
            DeviceName::at(&Location::Host, "Open MPI"),
            DeviceName::Host
        );
        assert_eq!(Location::Gpu("0000:18:00.0".into()).name(), "0000:18:00.0");
    }
}
