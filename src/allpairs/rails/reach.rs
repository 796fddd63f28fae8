//! Which of a rail's pairs could not connect, as findings named by node and
//! rail: a node without the rail's address (its rails differ from the
//! others'), a node that reaches no other node on the rail (a cable on another
//! rail's leaf, a link down), and any other pair cut off.

use super::pair::RailPair;
use crate::allpairs::labels;
use crate::job::world::World;
use std::collections::BTreeMap;
use std::net::SocketAddrV4;

/// The rail's findings on its first rank (none elsewhere); every rank of the
/// rail calls it.
pub fn findings(rail: &World, pair: &RailPair) -> Vec<String> {
    let mine: String = pair
        .unreached
        .iter()
        .map(|(peer, why)| format!("{peer}\t{}\n", why.replace(['\n', '\t'], " ")))
        .collect();
    let all = rail.all_gather_bytes(mine.as_bytes());
    if !rail.is_root() {
        return Vec::new();
    }
    let mut cut = BTreeMap::new();
    for (me, text) in all.iter().enumerate() {
        for line in String::from_utf8_lossy(text).lines() {
            let Some((peer, why)) = line.split_once('\t') else {
                continue;
            };
            let Ok(peer) = peer.parse::<usize>() else {
                continue;
            };
            cut.entry((me.min(peer), me.max(peer)))
                .or_insert_with(|| why.to_string());
        }
    }
    lines(
        &labels(&rail.hosts),
        pair.netdev(),
        pair.rail_number(),
        pair.peers(),
        &cut,
    )
}

/// The findings of one rail (`rail` 1-based) from every rank's address and the
/// pairs that could not connect (a < b, with what one side saw).
pub fn lines(
    labels: &[String],
    netdev: &str,
    rail: usize,
    addresses: &[Result<SocketAddrV4, String>],
    cut: &BTreeMap<(usize, usize), String>,
) -> Vec<String> {
    let mut out = Vec::new();
    let present: Vec<usize> = (0..labels.len())
        .filter(|&r| addresses[r].is_ok())
        .collect();
    if present.is_empty() {
        let why = addresses
            .iter()
            .find_map(|a| a.as_ref().err())
            .cloned()
            .unwrap_or_default();
        return vec![format!(
            "unreachable: no node has rail {rail} ({why}): nothing on rail {rail} was measured; \
             check the netdev given to --rails ({netdev}) against `ip -br addr` on a node"
        )];
    }
    for (r, why) in addresses
        .iter()
        .enumerate()
        .filter_map(|(r, a)| Some((r, a.as_ref().err()?)))
    {
        out.push(format!(
            "unreachable: {} has no rail {rail} ({why}): its pairs on rail {rail} were not measured; \
             its rails differ from the other nodes': check `ip -br addr show {netdev}` and the NIC's driver and cable",
            labels[r]
        ));
    }
    let is_cut = |a: usize, b: usize| cut.contains_key(&(a.min(b), a.max(b)));
    // A node cut off from every other node, where the others reach each other.
    let isolated: Vec<usize> = present
        .iter()
        .copied()
        .filter(|&r| present.len() >= 3 && present.iter().all(|&q| q == r || is_cut(r, q)))
        .filter(|&r| {
            let rest: Vec<usize> = present.iter().copied().filter(|&q| q != r).collect();
            rest.iter()
                .any(|&a| rest.iter().any(|&b| a < b && !is_cut(a, b)))
        })
        .collect();
    for &r in &isolated {
        let ip = addresses[r]
            .as_ref()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        out.push(format!(
            "unreachable: {}'s {netdev} ({ip}) reaches none of the other {} nodes on rail {rail}: \
             a cable on another rail's leaf (crossed cables), the link down, or an address on another rail's network; \
             check `ip -br link show {netdev}`, the switch port its cable lands on (LLDP: `lldpctl {netdev}`) and `ip -br addr show {netdev}`",
            labels[r],
            present.len() - 1
        ));
    }
    let explained = |r: usize| addresses[r].is_err() || isolated.contains(&r);
    for (&(a, b), why) in cut
        .iter()
        .filter(|((a, b), _)| !explained(*a) && !explained(*b))
    {
        out.push(format!(
            "unreachable: {} <-> {} on rail {rail} ({netdev}): no connection ({why}); \
             check both ends' links and the leaf between them",
            labels[a], labels[b]
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("node{i}")).collect()
    }

    fn at(i: usize) -> Result<SocketAddrV4, String> {
        Ok(SocketAddrV4::new([198, 18, 1, i as u8].into(), 4000))
    }

    fn cut(pairs: &[(usize, usize)]) -> BTreeMap<(usize, usize), String> {
        pairs
            .iter()
            .map(|&p| (p, "no route to host".to_string()))
            .collect()
    }

    #[test]
    fn a_clean_rail_has_no_finding() {
        let addresses: Vec<_> = (1..=4).map(at).collect();
        assert!(lines(&names(4), "eth1", 1, &addresses, &cut(&[])).is_empty());
    }

    #[test]
    fn a_node_cut_off_from_every_other_is_named_alone() {
        let addresses: Vec<_> = (1..=4).map(at).collect();
        let found = lines(
            &names(4),
            "eth1",
            1,
            &addresses,
            &cut(&[(0, 1), (1, 2), (1, 3)]),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("unreachable: node2's eth1 (198.18.1.2) reaches none of the other 3 nodes on rail 1"),
            "{found:?}"
        );
    }

    #[test]
    fn a_node_without_the_rail_and_a_lone_cut_pair() {
        let mut addresses: Vec<_> = (1..=4).map(at).collect();
        addresses[2] = Err("no netdev eth2".into());
        let found = lines(&names(4), "eth2", 2, &addresses, &cut(&[(0, 3)]));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("unreachable: node3 has no rail 2 (no netdev eth2)"),
            "{found:?}"
        );
        assert!(
            found[1].starts_with(
                "unreachable: node1 <-> node4 on rail 2 (eth2): no connection (no route to host)"
            ),
            "{found:?}"
        );
    }

    #[test]
    fn a_rail_no_node_has_is_one_line() {
        let addresses: Vec<_> = (1..=4).map(|_| Err("no netdev eth9".to_string())).collect();
        let found = lines(&names(4), "eth9", 2, &addresses, &cut(&[]));
        assert_eq!(
            found,
            ["unreachable: no node has rail 2 (no netdev eth9): nothing on rail 2 was measured; \
              check the netdev given to --rails (eth9) against `ip -br addr` on a node"]
        );
    }

    #[test]
    fn two_nodes_that_cannot_connect_name_the_pair_not_a_node() {
        let addresses: Vec<_> = (1..=2).map(at).collect();
        let found = lines(&names(2), "eth1", 1, &addresses, &cut(&[(0, 1)]));
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("node1 <-> node2 on rail 1"), "{found:?}");
        // Every pair cut: no node is named, each pair is.
        let addresses: Vec<_> = (1..=3).map(at).collect();
        let found = lines(
            &names(3),
            "eth1",
            1,
            &addresses,
            &cut(&[(0, 1), (0, 2), (1, 2)]),
        );
        assert_eq!(found.len(), 3, "{found:?}");
    }
}
