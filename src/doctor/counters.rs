//! RDMA port error counters that are not zero since boot (or since they were
//! last cleared): a marginal cable shows symbol errors and link recoveries long
//! before it fails, a flapping link shows link downs, a congested or stuck
//! path shows discards. Each is a warning with the fix for that counter.

use super::facts::{ErrorCounter, NodeFacts};
use super::ports::HcaFilter;
use super::{Finding, Severity};
use crate::sysfs::counters::{self, Class, Family};
use crate::sysfs::Root;

/// The non-zero error counters of the selected RDMA ports.
pub fn collect(root: &Root, filter: &[HcaFilter]) -> Vec<ErrorCounter> {
    let wanted = |dev: &str, port: Option<u32>| {
        filter.is_empty()
            || filter
                .iter()
                .any(|f| f.device == dev && (f.port.is_none() || f.port == port))
    };
    counters::read(root)
        .values
        .into_iter()
        .filter(|(k, v)| {
            *v > 0
                && matches!(k.family, Family::Port | Family::Hw)
                && k.class() == Class::Errors
                && wanted(&k.device, k.port)
        })
        .map(|(k, value)| ErrorCounter {
            port: k.place(),
            counter: format!("{}/{}", k.family.name(), k.name),
            name: k.name,
            value,
        })
        .collect()
}

/// What a non-zero error counter means, and what to do.
fn fix(name: &str, port: &str) -> String {
    let dev = port.split(':').next().unwrap_or(port);
    let clear = "clear the counters (perfquery -x -R) and rerun to see whether they grow";
    match name {
        "symbol_error" | "link_error_recovery" | "local_link_integrity_errors"
        | "port_rcv_remote_physical_errors" | "excessive_buffer_overrun_errors" => format!(
            "a marginal link (bit errors): check the cable and transceiver (mlxlink -d {dev} -m -c for BER), reseat or replace them; {clear}"
        ),
        "link_downed" => format!(
            "the link went down and retrained: check the cable and the switch port's log; a flapping link breaks RDMA connections; {clear}"
        ),
        "port_rcv_errors" => format!(
            "malformed packets were received: a bad cable or transceiver, or the peer's port (ibdiagnet finds which); {clear}"
        ),
        "port_xmit_discards" => format!(
            "packets were dropped on send (no credits or the path down): congestion or a stuck link downstream; check the switch, and PFC/ECN on RoCE; {clear}"
        ),
        "out_of_buffer" => "receives arrived with no receive posted (RNR): the application posts too few; raise its receive queue depth".into(),
        _ => format!("check the port with ibdiagnet or mlxlink -d {dev}; {clear}"),
    }
}

pub fn check(node: &NodeFacts, out: &mut Vec<Finding>) {
    for c in &node.error_counters {
        out.push(Finding::new(
            Severity::Warning,
            &node.node,
            c.port.as_str(),
            "port-errors",
            format!("{} = {} since boot or the last clear", c.counter, c.value),
            "0",
            fix(&c.name, &c.port),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{facts, findings};
    use super::*;
    use crate::sysfs::fixture::Tree;

    #[test]
    fn error_counters_since_boot_are_findings_with_their_fix() {
        let node = facts("doctor/port-errors", |_| {});
        let f = findings(&[node], "port-errors");
        let seen: Vec<(&str, &str)> = f
            .iter()
            .map(|f| (f.component.as_str(), f.seen.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "mlx5_1:1",
                    "counters/link_downed = 2 since boot or the last clear"
                ),
                (
                    "mlx5_1:1",
                    "counters/port_rcv_errors = 5 since boot or the last clear"
                ),
                (
                    "mlx5_1:1",
                    "counters/symbol_error = 17 since boot or the last clear"
                ),
            ]
        );
        assert!(f.iter().all(|f| f.severity == Severity::Warning));
        assert!(f[2].fix.starts_with("a marginal link (bit errors): check the cable and transceiver (mlxlink -d mlx5_1 -m -c"));
        // Counters at zero, and data counters, are no finding; nor a port not selected.
        let tree = Tree::named("doctor/port-errors");
        let only_0: Vec<HcaFilter> = vec!["mlx5_0".parse().unwrap()];
        assert!(collect(&tree.root(), &only_0).is_empty());
        assert_eq!(collect(&tree.root(), &[]).len(), 3);
        assert!(findings(&[facts("counters/two-rails", |_| {})], "port-errors").is_empty());
    }
}
