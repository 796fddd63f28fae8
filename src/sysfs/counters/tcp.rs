//! TCP's own loss counters, per network namespace (`/proc/net/snmp`'s `Tcp:`
//! and `/proc/net/netstat`'s `TcpExt:` tables): MPI, NCCL's socket transport
//! and the watchdog run over TCP, which hides loss in retransmits that no
//! netdev counter shows. Only the counters that say loss are kept, each once
//! (a segment retransmitted is counted in `RetransSegs`, not again in the
//! fast or slow retransmit counters that break it down).

use super::Class;
use crate::sysfs::Root;

/// The TCP counters kept, by table, with their class.
const KEPT: &[(&str, &str, Class)] = &[
    ("/proc/net/snmp", "RetransSegs", Class::Retransmits),
    ("/proc/net/snmp", "InErrs", Class::Errors),
    ("/proc/net/snmp", "InCsumErrors", Class::Errors),
    ("/proc/net/netstat", "TCPTimeouts", Class::Retransmits),
    ("/proc/net/netstat", "TCPLostRetransmit", Class::Retransmits),
];

/// The device name TCP's counters are kept under: one per network namespace.
pub const DEVICE: &str = "tcp";

/// The class of TCP counter `name`.
pub fn class(name: &str) -> Class {
    KEPT.iter()
        .find(|(_, n, _)| *n == name)
        .map_or(Class::Other, |(_, _, c)| *c)
}

/// The kept counters that `root` has, as (name, value).
pub fn read(root: &Root) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for file in ["/proc/net/snmp", "/proc/net/netstat"] {
        let Some(text) = root.read(file) else {
            continue;
        };
        let prefix = if file.ends_with("snmp") {
            "Tcp:"
        } else {
            "TcpExt:"
        };
        for (name, value) in table(&text, prefix) {
            if KEPT.iter().any(|(f, n, _)| *f == file && *n == name) {
                out.push((name.to_string(), value));
            }
        }
    }
    out
}

/// The named values of one table: the kernel prints a line of names and then a
/// line of values, both starting with `prefix`. A value that is no number is
/// left out, and so is a table whose two lines do not pair up.
fn table<'a>(text: &'a str, prefix: &str) -> Vec<(&'a str, u64)> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return Vec::new();
    };
    let names: Vec<&str> = names.split_whitespace().skip(1).collect();
    let values: Vec<&str> = values.split_whitespace().skip(1).collect();
    if names.len() != values.len() {
        return Vec::new();
    }
    names
        .into_iter()
        .zip(values)
        .filter_map(|(n, v)| Some((n, v.parse().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::Tree;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
        Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
        Tcp: 1 200 120000 -1 10 5 0 0 3 1000 900 17 2 4 0\n\
        Udp: InDatagrams\nUdp: 5\n";
    const NETSTAT: &str = "TcpExt: SyncookiesSent TCPTimeouts TCPLostRetransmit TCPFastRetrans\n\
        TcpExt: 0 6 3 11\n\
        IpExt: InNoRoutes\nIpExt: 0\n";

    #[test]
    fn keeps_the_loss_counters_of_both_tables() {
        let t = Tree::temp("counters-tcp");
        t.put_bytes("/proc/net/snmp", SNMP.as_bytes());
        t.put_bytes("/proc/net/netstat", NETSTAT.as_bytes());
        let mut got = read(&t.root());
        got.sort();
        let expected = [
            ("InCsumErrors", 0),
            ("InErrs", 2),
            ("RetransSegs", 17),
            ("TCPLostRetransmit", 3),
            ("TCPTimeouts", 6),
        ];
        assert_eq!(got, expected.map(|(n, v)| (n.to_string(), v)));
        assert_eq!(class("RetransSegs"), Class::Retransmits);
        assert_eq!(class("InErrs"), Class::Errors);
        // MaxConn's -1 and a fast retransmit, counted in RetransSegs, are not kept.
        assert_eq!(class("TCPFastRetrans"), Class::Other);
    }

    #[test]
    fn a_malformed_or_missing_table_gives_nothing() {
        let t = Tree::temp("counters-tcp-bad");
        assert!(read(&t.root()).is_empty());
        t.put_bytes("/proc/net/snmp", b"Tcp: RetransSegs InErrs\nTcp: 5\n");
        t.put_bytes("/proc/net/netstat", b"TcpExt: TCPTimeouts\nTcpExt: many\n");
        assert!(read(&t.root()).is_empty());
        t.put_bytes("/proc/net/snmp", b"Tcp: RetransSegs\n");
        assert!(read(&t.root()).is_empty());
    }

    /// procfs files report a size of 0: the bounded reader must still read them.
    #[test]
    fn this_hosts_tables_are_read() {
        if !std::path::Path::new("/proc/net/snmp").exists() {
            eprintln!("skipped: no /proc/net/snmp on this host");
            return;
        }
        let got = read(&Root::new("/"));
        assert!(got.iter().any(|(n, _)| n == "RetransSegs"), "{got:?}");
    }
}
