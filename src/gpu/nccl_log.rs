//! NCCL's own account of the transports it chose, read from its INFO log.
//!
//! NCCL says which network it uses ("Using network IB"), on which devices
//! ("NET/IB : Using [0]mlx5_0:1/IB ..."), and how each channel connects
//! ("Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA", "via P2P/CUMEM/read",
//! "via SHM/direct/direct"). Nothing else tells a multi-node run that fell back to
//! TCP sockets, or that GPUDirect RDMA is off.
//!
//! Capture: unless NCCL_DEBUG_FILE is set, NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,ENV
//! and NCCL_DEBUG_FILE=<tmp>/fabricbench-nccl-<host>-<pid>.log are set before NCCL
//! initialises (it reads them once). They stay set (changing the environment once
//! NCCL's threads run would race with their getenv); the run records the environment
//! as it was before. That file is removed at exit unless the user had set
//! NCCL_DEBUG; NCCL's WARN lines are echoed to stderr either way. A user's own
//! NCCL_DEBUG_FILE is read (%h and %p expanded) and left alone.

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

/// Expands NCCL_DEBUG_FILE's %h (host name) and %p (pid).
fn expand(pattern: &str, host: &str, pid: u32) -> String {
    pattern.replace("%h", host).replace("%p", &pid.to_string())
}

/// The INFO log of this process's NCCL: where it goes and the environment set for it.
pub struct LogCapture {
    path: PathBuf,
    /// Remove the file at exit (ours, and the user did not ask for NCCL_DEBUG).
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
                remove: false,
            };
        }
        let path = std::env::temp_dir().join(format!("fabricbench-nccl-{host}-{pid}.log"));
        let _ = std::fs::remove_file(&path);
        let user_level = std::env::var("NCCL_DEBUG").ok();
        let level = match user_level.as_deref() {
            Some(l) if l.eq_ignore_ascii_case("TRACE") => "TRACE",
            _ => "INFO",
        };
        std::env::set_var("NCCL_DEBUG", level);
        std::env::set_var("NCCL_DEBUG_FILE", &path);
        if std::env::var_os("NCCL_DEBUG_SUBSYS").is_none() {
            std::env::set_var("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV");
        }
        LogCapture {
            path,
            remove: user_level.is_none(),
        }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    pub fn read(&self) -> TransportReport {
        TransportReport::parse(&std::fs::read_to_string(&self.path).unwrap_or_default())
    }
}

impl Drop for LogCapture {
    fn drop(&mut self) {
        let report = self.read();
        for warning in &report.warnings {
            eprintln!("NCCL WARN {warning}");
        }
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        } else if self.path.exists() {
            eprintln!("NCCL log kept in {}", self.path.display());
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

    #[test]
    fn debug_file_patterns() {
        assert_eq!(
            expand("/tmp/nccl.%h.%p.log", "gpu01", 42),
            "/tmp/nccl.gpu01.42.log"
        );
    }
}
