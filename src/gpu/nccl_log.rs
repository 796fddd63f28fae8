//! NCCL's own account of the transports it chose, read from its INFO log.
//!
//! NCCL says which network it uses ("Using network IB"), on which devices
//! ("NET/IB : Using [0]mlx5_0:1/IB ..."), and how each channel connects
//! ("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA", "via P2P/CUMEM/read",
//! "via SHM/direct/direct"). Nothing else tells a multi-node run that fell back to
//! TCP sockets, or that GPUDirect RDMA is off.
//!
//! Its TUNING lines (NCCL 2.22+, rank 0, one per call) give the algorithm and
//! protocol of each call: `Choice`.
//!
//! Capture: unless NCCL_DEBUG_FILE is set, NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,ENV,TUNING
//! and NCCL_DEBUG_FILE=<tmp>/fabricbench-nccl-XXXXXX/nccl-<host>-<pid>.log (a
//! folder of this process's, made with mkdtemp: NCCL opens the file with
//! fopen, which would follow a link planted at a predictable /tmp name) are set before NCCL
//! initialises (it reads them once). They stay set (changing the environment once
//! NCCL's threads run would race with their getenv); the run records the environment
//! as it was before. That folder is removed at exit unless the user had set
//! NCCL_DEBUG; NCCL's WARN lines are echoed to stderr either way. A user's own
//! NCCL_DEBUG_FILE is read (%h and %p expanded) and left alone.

use crate::input::{open_regular, read_text};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// What one rank's log says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TransportReport {
    /// "IB", "Socket", or a plugin's name ("AWS Libfabric").
    pub network: Option<String>,
    /// The devices NCCL listed for that network: "mlx5_0:1/IB mlx5_1:1/IB".
    pub net_devices: Option<String>,
    /// Network channel transports as logged, without the device index: "NET/IB/GDRDMA".
    pub net_channels: BTreeSet<String>,
    /// Intra-node transports: "P2P/CUMEM/read", "SHM/direct/direct", "NVLS".
    pub intra: BTreeSet<String>,
    pub nranks: Option<usize>,
    pub nnodes: Option<usize>,
    /// "2.21.5+cuda12.4"
    pub version: Option<String>,
    /// NCCL's WARN lines, message only.
    pub warnings: Vec<String>,
}

fn info_message(line: &str) -> Option<&str> {
    line.split_once(" NCCL INFO ").map(|(_, m)| m.trim())
}

/// "15[7] -> 0[0] [receive] via NET/IB/0/GDRDMA" -> "NET/IB/0/GDRDMA"
fn via(message: &str) -> Option<&str> {
    message.rsplit_once(" via ").map(|(_, t)| t.trim())
}

/// Drops NET device indices ("0", "1(0)") so channels on different NICs read alike.
fn net_kind(transport: &str) -> String {
    transport
        .split('/')
        .filter(|part| !part.starts_with(|c: char| c.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join("/")
}

/// "[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]" -> "mlx5_0:1/IB mlx5_1:1/RoCE [RO]"
fn device_names(list: &str) -> String {
    list.split_whitespace()
        .map(
            |token| match token.strip_prefix('[').and_then(|t| t.split_once(']')) {
                Some((index, name))
                    if !index.is_empty() && index.chars().all(|c| c.is_ascii_digit()) =>
                {
                    name
                }
                _ => token,
            },
        )
        .collect::<Vec<_>>()
        .join(" ")
}

/// "comm 0x55 rank 0 nRanks 16 nNodes 2 localRanks 8 ..." -> value after `key`.
fn field(message: &str, key: &str) -> Option<usize> {
    let mut words = message.split_whitespace();
    words.find(|w| *w == key)?;
    words.next()?.parse().ok()
}

impl TransportReport {
    pub fn parse(log: &str) -> TransportReport {
        let mut r = TransportReport::default();
        for line in log.lines() {
            if let Some((_, warn)) = line.split_once(" NCCL WARN ") {
                r.warnings.push(warn.trim().to_string());
                continue;
            }
            let Some(m) = info_message(line) else {
                continue;
            };
            if let Some(v) = m.strip_prefix("NCCL version ") {
                r.version = Some(v.trim().to_string());
            } else if let Some(n) = m.strip_prefix("Using network ") {
                r.network = Some(n.trim().to_string());
            } else if m.starts_with("NET/") && m.contains(" : Using ") {
                let devices = m.split_once(" : Using ").map_or("", |(_, d)| d);
                r.net_devices = Some(device_names(devices.split(';').next().unwrap_or("")));
            } else if m.starts_with("comm ") && m.contains(" nRanks ") {
                r.nranks = field(m, "nRanks").or(r.nranks);
                r.nnodes = field(m, "nNodes").or(r.nnodes);
            } else if m.starts_with("Channel ") {
                if let Some(t) = via(m) {
                    if t.starts_with("NET/") {
                        r.net_channels.insert(net_kind(t));
                    } else {
                        r.intra.insert(t.to_string());
                    }
                }
            }
        }
        r
    }

    /// Whether the network channels use GPUDirect RDMA; None before any is connected.
    pub fn gdr(&self) -> Option<bool> {
        (!self.net_channels.is_empty())
            .then(|| self.net_channels.iter().any(|c| c.contains("GDRDMA")))
    }

    fn on_sockets(&self) -> bool {
        self.network.as_deref() == Some("Socket")
            || self
                .net_channels
                .iter()
                .any(|c| c.starts_with("NET/Socket"))
    }

    /// The `transport` column: "NET/IB GDRDMA [mlx5_0:1/IB]; intra-node P2P/CUMEM/read".
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        let multi_node = self.nnodes.is_some_and(|n| n > 1);
        if multi_node || !self.net_channels.is_empty() {
            let name = self.network.clone().unwrap_or_else(|| {
                let first = self.net_channels.iter().next().map_or("", String::as_str);
                first.split('/').nth(1).unwrap_or("?").to_string()
            });
            let gdr = match self.gdr() {
                Some(true) => " GDRDMA",
                Some(false) => " (no GDRDMA)",
                None => "",
            };
            let devices = self
                .net_devices
                .as_deref()
                .map(|d| format!(" [{d}]"))
                .unwrap_or_default();
            parts.push(format!("NET/{name}{gdr}{devices}"));
        }
        if !self.intra.is_empty() {
            let intra: Vec<&str> = self.intra.iter().map(String::as_str).collect();
            parts.push(format!("intra-node {}", intra.join(",")));
        }
        if parts.is_empty() {
            return match self.nranks {
                Some(1) => "none (single rank)".to_string(),
                _ => "unknown (no transport in NCCL's INFO log)".to_string(),
            };
        }
        parts.join("; ")
    }

    /// Loud warnings for a run across `nodes` nodes: the silent misconfigurations.
    pub fn misconfigurations(&self, nodes: usize) -> Vec<String> {
        let nodes = self.nnodes.unwrap_or(nodes);
        let mut out = Vec::new();
        if nodes < 2 {
            return out;
        }
        if self.on_sockets() {
            out.push(format!(
                "NCCL fell back to TCP sockets (NET/Socket) between the {nodes} nodes, not InfiniBand/RoCE: \
                 bandwidth will be a fraction of the fabric's. Check `ibv_devinfo` (ports ACTIVE), that \
                 libibverbs and the RDMA providers are installed, and NCCL_IB_HCA / NCCL_NET / NCCL_SOCKET_IFNAME{}",
                self.warnings
                    .iter()
                    .find(|w| w.contains("IB") || w.contains("NET"))
                    .map(|w| format!("; NCCL said: {w}"))
                    .unwrap_or_default()
            ));
        } else if self.gdr() == Some(false) {
            out.push(
                "NCCL's network channels run without GPUDirect RDMA (no GDRDMA): data is staged \
                 through host memory. Load nvidia_peermem or use a dma-buf capable driver and kernel, \
                 and check NCCL_NET_GDR_LEVEL"
                    .to_string(),
            );
        }
        out
    }
}

/// NCCL's choice for one call, from its TUNING log line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Choice {
    /// "RING", "TREE", "NVLS", "PAT", ..., "SYMMETRIC" or "COPY_ENGINE".
    pub algo: String,
    /// "LL", "LL128", "SIMPLE"; a symmetric kernel's or a copy's name.
    pub proto: String,
}

/// NCCL_ALGO_* and NCCL_PROTO_* in index order (2.22 and 2.23 log the numbers).
const ALGOS: [&str; 7] = [
    "TREE",
    "RING",
    "COLLNET_DIRECT",
    "COLLNET_CHAIN",
    "NVLS",
    "NVLS_TREE",
    "PAT",
];
const PROTOS: [&str; 3] = ["LL", "LL128", "SIMPLE"];

fn by_index(names: &[&str], text: &str) -> String {
    match text.parse::<usize>() {
        Ok(i) if i < names.len() => names[i].to_string(),
        _ => text.to_string(),
    }
}

impl Choice {
    /// One TUNING line's message, as rank 0 of a communicator logs it for each call:
    /// - 2.24+: "AllReduce: 33554432 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}"
    /// - 2.22, 2.23: "33554432 Bytes -> Algo 1 proto 2 time 373.440002"
    /// - symmetric kernels: "AllReduce [Symmetric]: 4096 Bytes -> Kernel AllReduce_AGxLL_R nchannels 2 ..."
    /// - copy engine: "AllGather [Copy Engine]: 8388608 Bytes -> cudaMemcpyBatchAsync"
    pub fn parse(message: &str) -> Option<Choice> {
        let (head, tail) = message.split_once(" Bytes -> ")?;
        head.rsplit([' ', ':']).next()?.parse::<u64>().ok()?;
        let words: Vec<&str> = tail.split_whitespace().collect();
        match words.as_slice() {
            ["Algo", algo, "proto", proto, ..] => Some(Choice {
                algo: by_index(&ALGOS, algo),
                proto: by_index(&PROTOS, proto),
            }),
            ["Kernel", kernel, ..] => Some(Choice {
                algo: "SYMMETRIC".into(),
                proto: kernel.to_string(),
            }),
            _ if head.contains("[Copy Engine]") || head.contains("[Hierarchical CE]") => {
                Some(Choice {
                    algo: "COPY_ENGINE".into(),
                    proto: tail.trim().to_string(),
                })
            }
            _ => None,
        }
    }
}

/// The choices in an INFO log (or the part of it written since some point).
pub fn choices(log: &str) -> Vec<Choice> {
    log.lines()
        .filter_map(info_message)
        .filter_map(Choice::parse)
        .collect()
}

/// The choice made most often (ties: the first in order), or None.
pub fn most_frequent(choices: &[Choice]) -> Option<Choice> {
    let mut counts: Vec<(&Choice, usize)> = Vec::new();
    for c in choices {
        match counts.iter_mut().find(|(k, _)| *k == c) {
            Some((_, n)) => *n += 1,
            None => counts.push((c, 1)),
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max()?;
    counts
        .into_iter()
        .find(|(_, n)| *n == best)
        .map(|(c, _)| c.clone())
}

/// Expands NCCL_DEBUG_FILE's %h (host name) and %p (pid).
fn expand(pattern: &str, host: &str, pid: u32) -> String {
    pattern.replace("%h", host).replace("%p", &pid.to_string())
}

/// The most of NCCL's log read at once: an INFO log of a long run is a few MiB.
const MAX_LOG_BYTES: u64 = 64 << 20;

/// The INFO log of this process's NCCL: where it goes and the environment set for it.
pub struct LogCapture {
    path: PathBuf,
    /// The private folder of our own log (None: the user's NCCL_DEBUG_FILE).
    folder: Option<tempfile::TempDir>,
    /// Remove it at exit (ours, and the user did not ask for NCCL_DEBUG).
    remove: bool,
}

impl LogCapture {
    /// Call before NCCL's first call that logs (ncclGetUniqueId, ncclCommInitRank),
    /// while no thread of NCCL's runs.
    pub fn start() -> LogCapture {
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "host".into());
        let pid = std::process::id();
        if let Ok(file) = std::env::var("NCCL_DEBUG_FILE") {
            return LogCapture {
                path: PathBuf::from(expand(&file, &host, pid)),
                folder: None,
                remove: false,
            };
        }
        let folder = match tempfile::Builder::new()
            .prefix("fabricbench-nccl-")
            .tempdir()
        {
            Ok(folder) => folder,
            Err(e) => {
                eprintln!(
                    "fabricbench: warning: cannot make a folder for NCCL's log in {} ({e}); NCCL's transports are not reported",
                    std::env::temp_dir().display()
                );
                return LogCapture {
                    path: PathBuf::new(),
                    folder: None,
                    remove: false,
                };
            }
        };
        let path = folder.path().join(format!("nccl-{host}-{pid}.log"));
        let user_level = std::env::var("NCCL_DEBUG").ok();
        let level = match user_level.as_deref() {
            Some(l) if l.eq_ignore_ascii_case("TRACE") => "TRACE",
            _ => "INFO",
        };
        std::env::set_var("NCCL_DEBUG", level);
        std::env::set_var("NCCL_DEBUG_FILE", &path);
        // TUNING: NCCL 2.22+ logs its algorithm and protocol for each call (rank 0 only).
        if std::env::var_os("NCCL_DEBUG_SUBSYS").is_none() {
            std::env::set_var("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV,TUNING");
        }
        LogCapture {
            path,
            folder: Some(folder),
            remove: user_level.is_none(),
        }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The log as far as it is a regular file of at most [`MAX_LOG_BYTES`]: the
    /// user's NCCL_DEBUG_FILE may be /dev/stderr, a FIFO or a TRACE log of gigabytes.
    pub fn read(&self) -> TransportReport {
        TransportReport::parse(&read_text(&self.path, MAX_LOG_BYTES).unwrap_or_default())
    }

    /// Bytes NCCL has written so far: where `choices_since` starts reading.
    pub fn written(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// NCCL's choices logged since byte `from` (lines whole: NCCL's file is line buffered).
    pub fn choices_since(&self, from: u64) -> Vec<Choice> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok((mut file, _)) = open_regular(&self.path, u64::MAX) else {
            return Vec::new();
        };
        let mut text = String::new();
        let read = file
            .seek(SeekFrom::Start(from))
            .and_then(|_| file.take(MAX_LOG_BYTES).read_to_string(&mut text));
        match read {
            Ok(_) => choices(&text),
            Err(_) => Vec::new(),
        }
    }
}

impl Drop for LogCapture {
    fn drop(&mut self) {
        let report = self.read();
        for warning in &report.warnings {
            eprintln!("NCCL WARN {warning}");
        }
        match (self.folder.take(), self.remove) {
            // Dropped: the folder and the log go.
            (Some(_folder), true) => {}
            (folder, _) => {
                folder.map(tempfile::TempDir::keep);
                if self.path.is_file() {
                    eprintln!("NCCL log kept in {}", self.path.display());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MULTI_NODE_IB: &str = "\
gpu01:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
gpu01:4242:4300 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.
gpu01:4242:4300 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>
gpu01:4242:4300 [0] NCCL INFO Using network IB
gpu01:4242:4300 [0] NCCL INFO comm 0x5588a0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
gpu01:4242:4300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
gpu01:4242:4300 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [receive] via NET/IB/0/GDRDMA
gpu01:4242:4300 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1(0)/GDRDMA
gpu01:4242:4300 [0] NCCL INFO Connected all rings
";

    const SOCKET_FALLBACK: &str = "\
gpu01:77:77 [0] NCCL INFO NET/IB : No device found.
gpu01:77:90 [0] NCCL WARN NET/IB : ibv_open_device failed for mlx5_0
gpu01:77:90 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.1.1<0>
gpu01:77:90 [0] NCCL INFO Using network Socket
gpu01:77:90 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0
gpu01:77:90 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0
gpu01:77:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
";

    #[test]
    fn multi_node_infiniband_with_gpudirect() {
        let r = TransportReport::parse(MULTI_NODE_IB);
        assert_eq!(r.version.as_deref(), Some("2.21.5+cuda12.4"));
        assert_eq!(r.network.as_deref(), Some("IB"));
        assert_eq!((r.nranks, r.nnodes), (Some(16), Some(2)));
        assert_eq!(
            r.net_channels.iter().collect::<Vec<_>>(),
            vec!["NET/IB/GDRDMA"]
        );
        assert_eq!(r.gdr(), Some(true));
        assert_eq!(
            r.summary(),
            "NET/IB GDRDMA [mlx5_0:1/IB mlx5_1:1/IB]; intra-node P2P/CUMEM/read"
        );
        assert!(r.misconfigurations(2).is_empty());
    }

    #[test]
    fn socket_fallback_is_called_out() {
        let r = TransportReport::parse(SOCKET_FALLBACK);
        assert_eq!(r.summary(), "NET/Socket (no GDRDMA) [eth0:10.1.1.1<0>]");
        assert_eq!(
            r.warnings,
            vec!["NET/IB : ibv_open_device failed for mlx5_0"]
        );
        let warnings = r.misconfigurations(2);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("NCCL fell back to TCP sockets"),
            "{}",
            warnings[0]
        );
        assert!(warnings[0].contains("ibv_open_device failed"));
    }

    #[test]
    fn infiniband_without_gpudirect_is_called_out() {
        let log = MULTI_NODE_IB.replace("/GDRDMA", "");
        let r = TransportReport::parse(&log);
        assert_eq!(r.gdr(), Some(false));
        assert!(r.summary().starts_with("NET/IB (no GDRDMA)"));
        let warnings = r.misconfigurations(2);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("without GPUDirect RDMA"));
    }

    #[test]
    fn single_node_shows_only_intra_node_transports() {
        let log = "\
h:1:1 [0] NCCL INFO Using network IB
h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
h:1:1 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via P2P/IPC
";
        let r = TransportReport::parse(log);
        assert_eq!(r.summary(), "intra-node P2P/IPC,SHM/direct/direct");
        // One node: sockets or not, nothing crosses a network.
        assert!(r.misconfigurations(1).is_empty());
    }

    #[test]
    fn single_rank_and_empty_logs() {
        let one = "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0\n";
        assert_eq!(TransportReport::parse(one).summary(), "none (single rank)");
        assert_eq!(
            TransportReport::parse("").summary(),
            "unknown (no transport in NCCL's INFO log)"
        );
    }

    #[test]
    fn device_lists_lose_their_indices() {
        assert_eq!(
            device_names(" [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO] "),
            "mlx5_0:1/IB mlx5_3:1/RoCE [RO]"
        );
    }

    /// Lines as NCCL 2.27 (enqueue.cc), 2.22 (topoGetAlgoInfo) and the symmetric
    /// and copy-engine schedulers write them.
    const TUNING: &str = "\
gpu01:4242:4242 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..15}
gpu01:4242:4242 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..15}
gpu01:4242:4242 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..15}
gpu01:4242:4242 [0] NCCL INFO 33554432 Bytes -> Algo 0 proto 2 time 373.440002
gpu01:4242:4242 [0] NCCL INFO AllReduce [Symmetric]: 4096 Bytes -> Kernel AllReduce_AGxLL_R nchannels 2 nthreads 512 nWorks 2
gpu01:4242:4242 [0] NCCL INFO AllGather [Copy Engine]: 8388608 Bytes -> cudaMemcpyBatchAsync
gpu01:4242:4242 [0] NCCL INFO   Algorithm   |             Tree |            Ring |
gpu01:4242:4242 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
";

    fn choice(algo: &str, proto: &str) -> Choice {
        Choice {
            algo: algo.into(),
            proto: proto.into(),
        }
    }

    #[test]
    fn tuning_lines_of_every_nccl_format() {
        let all = choices(TUNING);
        assert_eq!(
            all,
            vec![
                choice("RING", "LL128"),
                choice("RING", "LL128"),
                choice("NVLS", "SIMPLE"),
                choice("TREE", "SIMPLE"),
                choice("SYMMETRIC", "AllReduce_AGxLL_R"),
                choice("COPY_ENGINE", "cudaMemcpyBatchAsync"),
            ]
        );
        assert_eq!(most_frequent(&all), Some(choice("RING", "LL128")));
        assert_eq!(most_frequent(&[]), None);
        // An index NCCL may add later reads as its number, never as a wrong name.
        assert_eq!(
            Choice::parse("8 Bytes -> Algo 9 proto 7 time 1.0"),
            Some(choice("9", "7"))
        );
        assert_eq!(
            Choice::parse("AllReduce: x Bytes -> Algo RING proto LL"),
            None
        );
        // The transport report ignores them.
        assert_eq!(TransportReport::parse(TUNING).intra.len(), 1);
    }

    #[test]
    fn choices_are_read_from_where_the_timed_loop_began() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("nccl.log");
        std::fs::write(&path, TUNING.lines().next().unwrap().to_string() + "\n").unwrap();
        let log = LogCapture {
            path: path.clone(),
            folder: Some(folder),
            remove: true,
        };
        let from = log.written();
        assert_eq!(log.choices_since(0).len(), 1);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text += "h:1:1 [0] NCCL INFO AllGather: 64 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..0}\n";
        std::fs::write(&path, text).unwrap();
        assert_eq!(log.choices_since(from), vec![choice("PAT", "SIMPLE")]);
        drop(log);
        assert!(!path.exists() && !path.parent().unwrap().exists());
    }

    #[test]
    fn debug_file_patterns() {
        assert_eq!(
            expand("/tmp/nccl.%h.%p.log", "gpu01", 42),
            "/tmp/nccl.gpu01.42.log"
        );
    }
}
