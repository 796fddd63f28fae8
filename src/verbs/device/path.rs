//! The path flags applied as perftest applies them: the service level and the
//! GRH fields (traffic class, flow label per QP in turn, hop limit) of each
//! QP's address vector (RC/UC at RTR, UD in its address handle), the P_Key
//! index at INIT after checking it against the port's P_Key table, and the
//! header's line of what was set.

use crate::sysfs::rdma::port_dir;
use crate::sysfs::Root;
use crate::verbs::device::numa;
use crate::verbs::flags::path::{PathPlan, DEFAULT_HOP_LIMIT};
use anyhow::{anyhow, bail};

impl PathPlan {
    /// On the opened device: checks --pkey_index against the port's table
    /// and binds the process (--pin_cores, --numa_node or the device's node).
    pub fn on_device(&mut self, root: &Root, device: &str, port: u8) -> anyhow::Result<()> {
        self.pkey = check_pkey(root, device, port, self.pkey_index)?;
        self.placement = Some(numa::bind(root, &self.numa, device)?);
        Ok(())
    }
}

/// What one QP's address vector carries beyond the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub sl: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
}

/// The address vector fields of QP `qp` (perftest's round robin of --flow_label).
pub fn route(path: &PathPlan, qp: usize) -> Route {
    Route {
        sl: path.sl,
        traffic_class: path.traffic_class,
        flow_label: path.flow_label(qp),
        hop_limit: path.hop_limit,
    }
}

/// Checks --pkey_index against the port's P_Key table in sysfs; the P_Key
/// there (None where sysfs shows no table and the index is perftest's 0).
pub fn check_pkey(root: &Root, device: &str, port: u8, index: u16) -> anyhow::Result<Option<u16>> {
    let dir = format!("{}/pkeys", port_dir(device, port));
    let table: Vec<u16> = root.list_parsed(&dir);
    let read = |i: u16| {
        root.read_with(&format!("{dir}/{i}"), |t| {
            u16::from_str_radix(t.trim_start_matches("0x"), 16).ok()
        })
        .value()
    };
    if table.is_empty() {
        if index == 0 {
            return Ok(None);
        }
        bail!(
            "--pkey_index {index}: {device} port {port} shows no P_Key table ({dir} is empty or absent); drop --pkey_index"
        );
    }
    let len = table.len();
    if usize::from(index) >= len {
        let shown = table
            .iter()
            .take(4)
            .map(|&i| read(i).map_or(format!("{i}: ?"), |k| format!("{i}: {k:#06x}")))
            .collect::<Vec<_>>()
            .join(", ");
        bail!(
            "--pkey_index {index}: {device} port {port} has {len} P_Key entr{} ({shown}{}); use 0{}",
            if len == 1 { "y" } else { "ies" },
            if len > 4 { ", ..." } else { "" },
            if len > 1 { format!(" to {}", len - 1) } else { String::new() }
        );
    }
    match read(index) {
        Some(0) => Err(anyhow!(
            "--pkey_index {index}: entry {index} of {device} port {port}'s P_Key table is empty (0x0000); use an entry that holds a P_Key, e.g. 0"
        )),
        key => Ok(key),
    }
}

/// The header's "Path" line: what each QP's address vector and INIT carry.
/// `routed`: the QPs use a GRH (a GID); `pkey` the P_Key of the index.
pub fn describe(path: &PathPlan, routed: bool, pkey: Option<u16>) -> String {
    let mut parts = vec![format!("SL {}", path.sl)];
    parts.push(match pkey {
        Some(key) => format!("P_Key index {} ({key:#06x})", path.pkey_index),
        None => format!("P_Key index {}", path.pkey_index),
    });
    if routed {
        let mut class = format!("traffic class {}", path.traffic_class);
        if let Some(flag) = path.traffic_class_flag {
            class.push_str(&format!(
                " ({flag}; DSCP {}, ECN {})",
                path.traffic_class >> 2,
                path.traffic_class & 3
            ));
        }
        parts.push(class);
        parts.push(match path.flow_labels.as_slice() {
            [] => "flow label 0".to_string(),
            [one] => format!("flow label {one:#x}"),
            many => format!(
                "flow labels {} (QP i takes label i mod {})",
                many.iter()
                    .map(|l| format!("{l:#x}"))
                    .collect::<Vec<_>>()
                    .join(","),
                many.len()
            ),
        });
        parts.push(format!("hop limit {}", path.hop_limit));
    } else if path.traffic_class_flag.is_some()
        || !path.flow_labels.is_empty()
        || path.hop_limit != DEFAULT_HOP_LIMIT
    {
        parts.push("no GRH (LID routing): traffic class, flow label and hop limit unused; pass -x to route by GID".into());
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::Tree;
    use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
    use crate::verbs::flags::parse;

    /// `super::check_pkey` with its message as the user reads it.
    fn check_pkey(root: &Root, device: &str, port: u8, index: u16) -> Result<Option<u16>, String> {
        super::check_pkey(root, device, port, index).map_err(|e| format!("{e:#}"))
    }

    fn path(args: &[&str]) -> PathPlan {
        let bench = Benchmark::new(Verb::Write, Test::Bw);
        parse(
            bench,
            std::iter::once("ib_write_bw").chain(args.iter().copied()),
        )
        .unwrap()
        .path
    }

    #[test]
    fn routes_take_the_flow_labels_in_turn() {
        let p = path(&[
            "-S",
            "2",
            "--tclass",
            "104",
            "--flow_label",
            "5,6",
            "-L",
            "9",
        ]);
        assert_eq!(
            route(&p, 0),
            Route {
                sl: 2,
                traffic_class: 104,
                flow_label: 5,
                hop_limit: 9
            }
        );
        assert_eq!(route(&p, 1).flow_label, 6);
        assert_eq!(route(&p, 2).flow_label, 5);
        assert_eq!(
            route(&path(&[]), 3),
            Route {
                sl: 0,
                traffic_class: 0,
                flow_label: 0,
                hop_limit: 255
            }
        );
    }

    #[test]
    fn pkey_index_within_the_ports_table() {
        let t = Tree::temp("pkeys");
        let dir = format!("{}/pkeys", port_dir("rxe1", 1));
        t.put(&format!("{dir}/0"), "0xffff");
        let root = t.root();
        assert_eq!(check_pkey(&root, "rxe1", 1, 0), Ok(Some(0xffff)));
        assert_eq!(
            check_pkey(&root, "rxe1", 1, 1).unwrap_err(),
            "--pkey_index 1: rxe1 port 1 has 1 P_Key entry (0: 0xffff); use 0"
        );
        t.put(&format!("{dir}/1"), "0x8001");
        t.put(&format!("{dir}/2"), "0x0000");
        assert_eq!(check_pkey(&root, "rxe1", 1, 1), Ok(Some(0x8001)));
        assert!(check_pkey(&root, "rxe1", 1, 2)
            .unwrap_err()
            .contains("is empty (0x0000)"));
        assert!(check_pkey(&root, "rxe1", 1, 3)
            .unwrap_err()
            .contains("has 3 P_Key entries (0: 0xffff, 1: 0x8001, 2: 0x0000); use 0 to 2"));
        // No table in sysfs: perftest's 0 still goes, another index does not.
        assert_eq!(check_pkey(&root, "mlx5_0", 1, 0), Ok(None));
        assert!(check_pkey(&root, "mlx5_0", 1, 1)
            .unwrap_err()
            .contains("shows no P_Key table"));
    }

    #[test]
    fn the_header_line_says_what_was_set() {
        assert_eq!(
            describe(&path(&[]), true, Some(0xffff)),
            "SL 0, P_Key index 0 (0xffff), traffic class 0, flow label 0, hop limit 255"
        );
        assert_eq!(
            describe(&path(&["-T", "106", "--flow_label", "1,2", "-S", "3"]), true, None),
            "SL 3, P_Key index 0, traffic class 106 (-T/--tos; DSCP 26, ECN 2), flow labels 0x1,0x2 (QP i takes label i mod 2), hop limit 255"
        );
        assert_eq!(
            describe(&path(&["-S", "1"]), false, None),
            "SL 1, P_Key index 0"
        );
        assert!(describe(&path(&["--tclass", "8"]), false, None).contains("no GRH (LID routing)"));
    }

    #[test]
    fn ipv6_and_source_ip_choose_their_gid() {
        use crate::verbs::device::{GidEntry, GidKind, LinkLayer, PortGids};
        use crate::verbs::flags::path::GidPreference;
        let entry = |index, gid: &str, kind| GidEntry {
            index,
            gid: gid.parse().unwrap(),
            kind,
            netdev: Some("veth0".into()),
        };
        let table = vec![
            entry(0, "fe80::cc00:c0ff:fe10:7b4d", GidKind::RoceV2),
            entry(1, "::ffff:10.99.0.1", GidKind::RoceV2),
            entry(2, "fd00::1", GidKind::RoceV1),
            entry(3, "fd00::1", GidKind::RoceV2),
            entry(4, "::ffff:10.99.0.9", GidKind::RoceV2),
        ];
        let pick = |prefer: &GidPreference, t: &[GidEntry]| {
            PortGids::new("rxe1", 1, LinkLayer::Ethernet, t, 1024).choose_for(prefer, None)
        };
        let v6 = pick(&GidPreference::Ipv6, &table).unwrap().unwrap();
        assert_eq!(
            v6.describe(),
            "3 (RoCE v2 fd00::1 on veth0, chosen by --ipv6; -x overrides; other candidates: 0)"
        );
        // Link-local only: taken, as perftest's scoring takes it.
        let v6 = pick(&GidPreference::Ipv6, &table[..2]).unwrap().unwrap();
        assert_eq!(v6.entry.index, 0);
        let src = GidPreference::Source("10.99.0.9".parse().unwrap());
        let c = pick(&src, &table).unwrap().unwrap();
        assert_eq!(
            c.describe(),
            "4 (RoCE v2 ::ffff:10.99.0.9 on veth0, chosen by --bind_source_ip; -x overrides)"
        );
        let c = pick(&GidPreference::Source("fd00::1".parse().unwrap()), &table)
            .unwrap()
            .unwrap();
        assert_eq!(c.entry.index, 3);
        let e = pick(&GidPreference::Source("10.0.0.7".parse().unwrap()), &table)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--bind_source_ip 10.0.0.7: no RoCE v2 GID of rxe1 port 1 carries this address (GIDs: 0 fe80::"), "{e}");
        let e = pick(&GidPreference::Ipv6, &table[1..2])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--ipv6: rxe1 port 1 has no RoCE v2 GID with an IPv6 address"),
            "{e}"
        );
        let e = PortGids::new("mlx5_0", 1, LinkLayer::InfiniBand, &table, 128)
            .choose_for(&GidPreference::Ipv6, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is InfiniBand, whose GIDs carry no IP address"),
            "{e}"
        );
        // -x wins; the default rule is the one before.
        let x = PortGids::new("rxe1", 1, LinkLayer::Ethernet, &table, 1024)
            .choose_for(&GidPreference::Ipv6, Some(1))
            .unwrap()
            .unwrap();
        assert_eq!((x.entry.index, x.by_flag), (1, None));
        assert_eq!(
            pick(&GidPreference::Ipv4, &table)
                .unwrap()
                .unwrap()
                .entry
                .index,
            1
        );
    }
}
