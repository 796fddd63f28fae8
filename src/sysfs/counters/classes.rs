//! The one table of what each counter means: its class, and how many bytes
//! one unit of it is. A name the table does not know is kept, in `Other`.

use super::Family;
use serde::{Deserialize, Serialize};

/// What a counter counts, as the footer, the CSV and rack_check group them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Payload bytes sent or received.
    DataBytes,
    /// Packets sent or received.
    DataPackets,
    /// Link, symbol and receive errors, discards, drops, fatal QP errors.
    Errors,
    /// Retransmissions and what causes them: NAKs, timeouts, duplicates, out of sequence.
    Retransmits,
    /// ECN marks and congestion notifications (CNP), time waiting for credits.
    Congestion,
    /// Link-level (802.3x) and per-priority (PFC) pause frames.
    Pauses,
    Other,
}

impl Class {
    pub const ALL: [Class; 7] = [
        Class::DataBytes,
        Class::DataPackets,
        Class::Errors,
        Class::Retransmits,
        Class::Congestion,
        Class::Pauses,
        Class::Other,
    ];

    /// The four classes whose movement is a finding.
    pub const TROUBLE: [Class; 4] = [
        Class::Errors,
        Class::Retransmits,
        Class::Congestion,
        Class::Pauses,
    ];

    /// The CSV's name: "data_bytes".
    pub fn id(self) -> &'static str {
        match self {
            Class::DataBytes => "data_bytes",
            Class::DataPackets => "data_packets",
            Class::Errors => "errors",
            Class::Retransmits => "retransmits",
            Class::Congestion => "congestion",
            Class::Pauses => "pauses",
            Class::Other => "other",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Class::DataBytes => "data bytes",
            Class::DataPackets => "data packets",
            Class::Errors => "errors",
            Class::Retransmits => "retransmits",
            Class::Congestion => "congestion",
            Class::Pauses => "pauses",
            Class::Other => "other",
        }
    }
}

/// RDMA port counters (`ports/N/counters`, the IB PMA's, also on mlx5 RoCE)
/// and hardware counters (`ports/N/hw_counters`: mlx5's and rxe's).
const RDMA: &[(&str, Class)] = &[
    ("port_xmit_data", Class::DataBytes),
    ("port_rcv_data", Class::DataBytes),
    ("port_xmit_packets", Class::DataPackets),
    ("port_rcv_packets", Class::DataPackets),
    ("unicast_xmit_packets", Class::DataPackets),
    ("unicast_rcv_packets", Class::DataPackets),
    ("multicast_xmit_packets", Class::DataPackets),
    ("multicast_rcv_packets", Class::DataPackets),
    ("sent_pkts", Class::DataPackets),
    ("rcvd_pkts", Class::DataPackets),
    ("symbol_error", Class::Errors),
    ("link_error_recovery", Class::Errors),
    ("link_downed", Class::Errors),
    ("port_rcv_errors", Class::Errors),
    ("port_rcv_remote_physical_errors", Class::Errors),
    ("port_rcv_switch_relay_errors", Class::Errors),
    ("port_xmit_discards", Class::Errors),
    ("port_xmit_constraint_errors", Class::Errors),
    ("port_rcv_constraint_errors", Class::Errors),
    ("local_link_integrity_errors", Class::Errors),
    ("excessive_buffer_overrun_errors", Class::Errors),
    ("VL15_dropped", Class::Errors),
    ("out_of_buffer", Class::Errors),
    ("rx_icrc_encapsulated", Class::Errors),
    ("req_cqe_error", Class::Errors),
    ("resp_cqe_error", Class::Errors),
    ("req_remote_access_errors", Class::Errors),
    ("req_remote_invalid_request", Class::Errors),
    ("resp_local_length_error", Class::Errors),
    ("resp_remote_access_errors", Class::Errors),
    ("local_ack_timeout_err", Class::Retransmits),
    ("rnr_nak_retry_err", Class::Errors),
    ("retry_exceeded_err", Class::Errors),
    ("retry_rnr_exceeded_err", Class::Errors),
    ("send_err", Class::Errors),
    ("out_of_sequence", Class::Retransmits),
    ("packet_seq_err", Class::Retransmits),
    ("implied_nak_seq_err", Class::Retransmits),
    ("duplicate_request", Class::Retransmits),
    ("out_of_seq_request", Class::Retransmits),
    ("rcvd_seq_err", Class::Retransmits),
    ("completer_retry_err", Class::Retransmits),
    ("rcvd_rnr_err", Class::Retransmits),
    ("send_rnr_err", Class::Retransmits),
    ("roce_adp_retrans", Class::Retransmits),
    ("roce_slow_restart", Class::Retransmits),
    ("np_cnp_sent", Class::Congestion),
    ("rp_cnp_handled", Class::Congestion),
    ("rp_cnp_ignored", Class::Congestion),
    ("np_ecn_marked_roce_packets", Class::Congestion),
    ("port_xmit_wait", Class::Congestion),
];

/// A netdev's `statistics/`.
const NETDEV: &[(&str, Class)] = &[
    ("tx_bytes", Class::DataBytes),
    ("rx_bytes", Class::DataBytes),
    ("tx_packets", Class::DataPackets),
    ("rx_packets", Class::DataPackets),
    ("multicast", Class::DataPackets),
    ("rx_errors", Class::Errors),
    ("tx_errors", Class::Errors),
    ("rx_dropped", Class::Errors),
    ("tx_dropped", Class::Errors),
    ("rx_crc_errors", Class::Errors),
    ("rx_frame_errors", Class::Errors),
    ("rx_fifo_errors", Class::Errors),
    ("rx_missed_errors", Class::Errors),
    ("rx_over_errors", Class::Errors),
    ("rx_length_errors", Class::Errors),
    ("tx_aborted_errors", Class::Errors),
    ("tx_carrier_errors", Class::Errors),
    ("tx_fifo_errors", Class::Errors),
    ("tx_heartbeat_errors", Class::Errors),
    ("tx_window_errors", Class::Errors),
];

/// The class of counter `name` of `family`; TCP's counters are classed where
/// they are read (`tcp::class`, which `Counter::class` asks).
pub fn class(family: Family, name: &str) -> Class {
    let table = match family {
        Family::Port | Family::Hw => RDMA,
        Family::Netdev => NETDEV,
        Family::Ethtool => return ethtool_class(name),
        Family::Tcp => &[],
    };
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(Class::Other, |(_, c)| *c)
}

/// Bytes per unit of a data-bytes counter: the IB PMA counts
/// port_xmit_data/port_rcv_data in 4-byte words (octets divided by 4).
pub fn bytes_per_unit(family: Family, name: &str) -> u64 {
    match (family, name) {
        (Family::Port, "port_xmit_data" | "port_rcv_data") => 4,
        _ => 1,
    }
}

/// ethtool statistics: only pause frames are kept (mlx5 `rx_pause_ctrl_phy`,
/// `rx_prio3_pause`; the standard `tx_pause_frames`; most drivers' `rx_pause`),
/// durations and transitions, which count time rather than frames, aside.
fn ethtool_class(name: &str) -> Class {
    let pause = name.contains("pause") || name.contains("pfc");
    let not_frames = name.contains("duration") || name.contains("transition");
    match pause && !not_frames {
        true => Class::Pauses,
        false => Class::Other,
    }
}

/// Whether an ethtool statistic is kept in a snapshot (pause and PFC ones).
pub fn keeps_ethtool(name: &str) -> bool {
    name.contains("pause") || name.contains("pfc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_classified_and_unknown_names_are_other() {
        assert_eq!(class(Family::Port, "port_xmit_data"), Class::DataBytes);
        assert_eq!(bytes_per_unit(Family::Port, "port_rcv_data"), 4);
        assert_eq!(bytes_per_unit(Family::Netdev, "rx_bytes"), 1);
        assert_eq!(class(Family::Port, "symbol_error"), Class::Errors);
        assert_eq!(class(Family::Hw, "duplicate_request"), Class::Retransmits);
        assert_eq!(class(Family::Hw, "np_cnp_sent"), Class::Congestion);
        assert_eq!(class(Family::Hw, "sent_pkts"), Class::DataPackets);
        assert_eq!(class(Family::Netdev, "rx_dropped"), Class::Errors);
        assert_eq!(class(Family::Ethtool, "rx_prio3_pause"), Class::Pauses);
        assert_eq!(class(Family::Ethtool, "tx_pause_ctrl_phy"), Class::Pauses);
        assert_eq!(
            class(Family::Ethtool, "rx_prio3_pause_duration"),
            Class::Other
        );
        assert_eq!(class(Family::Hw, "lifespan"), Class::Other);
        assert!(keeps_ethtool("rx_prio0_pause") && !keeps_ethtool("rx_bytes_phy"));
    }
}
