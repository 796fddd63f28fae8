//! Checks of the peer's connection details against this side's, and the path
//! MTU the pair agrees on.

use crate::verbs::device::show_gid;
use crate::verbs::exchange::wire::Hello;
use anyhow::{anyhow, bail};

/// Checks the peer's details against this side's: same program and shared
/// flags, QPs that can hold the largest size, a compatible port and GID.
pub fn check_peer(mine: &Hello, peer: &Hello, max_size: u64) -> anyhow::Result<()> {
    let who = format!(
        "the peer ({} {} port {})",
        peer.host, peer.device, peer.port
    );
    if peer.program != mine.program {
        bail!(
            "{who} runs {}, this side {}: start the same benchmark on both sides",
            peer.program,
            mine.program
        );
    }
    let differences: Vec<String> = mine
        .settings
        .iter()
        .filter_map(|(flag, value)| {
            let theirs = peer
                .settings
                .iter()
                .find(|(f, _)| f == flag)
                .map_or("(not given)", |(_, v)| v.as_str());
            (theirs != value).then(|| format!("{flag} is {theirs} there but {value} here"))
        })
        .collect();
    if !differences.is_empty() || peer.settings.len() != mine.settings.len() {
        bail!(
            "{who} was started with other flags ({}): give both sides the same flags",
            differences.join("; ")
        );
    }
    if peer.qps.len() != mine.qps.len() {
        bail!(
            "{who} has {} QPs, this side {}",
            peer.qps.len(),
            mine.qps.len()
        );
    }
    if let Some(q) = peer.qps.iter().find(|q| q.len < max_size) {
        bail!(
            "{who} has a {}-byte buffer, too small for {max_size}-byte messages",
            q.len
        );
    }
    if peer.link != mine.link {
        bail!(
            "{who} is on {}, this side on {}: both ports need the same link layer",
            peer.link.name(),
            mine.link.name()
        );
    }
    if mine.gid_index.is_some() != peer.gid_index.is_some() {
        bail!(
            "one side routes by GID (-x) and the other by LID: give -x on both sides or on neither ({who})"
        );
    }
    if mine.gid_index.is_some() {
        if peer.gid.is_unspecified() {
            bail!("{who} sent an empty GID");
        }
        if mine.gid.to_ipv4_mapped().is_some() != peer.gid.to_ipv4_mapped().is_some() {
            bail!(
                "GID families differ: {} here, {} at {who}: pick GIDs of the same IP version (-x)",
                show_gid(&mine.gid),
                show_gid(&peer.gid)
            );
        }
    } else if peer.lid == 0 {
        bail!("{who} has LID 0: its InfiniBand port has no LID (is a subnet manager running?)");
    }
    Ok(())
}

/// The path MTU of a pair: -m if both ports allow it, else the smaller active MTU.
pub fn path_mtu(
    requested: Option<u32>,
    mine: u32,
    peer: u32,
    my_name: &str,
    peer_name: &str,
) -> anyhow::Result<u32> {
    let too_large = |m: u32, active: u32, name: &str| {
        anyhow!(
            "-m/--mtu {m}: larger than the active MTU {active} of {name}; use -m {active} or less"
        )
    };
    match requested {
        Some(m) if m > mine => Err(too_large(m, mine, my_name)),
        Some(m) if m > peer => Err(too_large(m, peer, peer_name)),
        Some(m) => Ok(m),
        None => Ok(mine.min(peer)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::device::LinkLayer;
    use crate::verbs::exchange::wire::tests::hello;

    /// The check's result, its error as text.
    fn check_peer(mine: &Hello, peer: &Hello, max_size: u64) -> Result<(), String> {
        super::check_peer(mine, peer, max_size).map_err(|e| format!("{e:#}"))
    }

    fn path_mtu(
        requested: Option<u32>,
        mine: u32,
        peer: u32,
        my_name: &str,
        peer_name: &str,
    ) -> Result<u32, String> {
        super::path_mtu(requested, mine, peer, my_name, peer_name).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn peers_must_match() {
        let mine = hello();
        assert_eq!(check_peer(&mine, &hello(), 65536), Ok(()));
        let differ = |f: &dyn Fn(&mut Hello), max: u64| {
            let mut p = hello();
            f(&mut p);
            check_peer(&mine, &p, max).unwrap_err()
        };
        assert!(differ(&|p| p.program = "ib_read_bw".into(), 8).contains("runs ib_read_bw"));
        let e = differ(&|p| p.settings[0].1 = "8".into(), 8);
        assert!(e.contains("-s/--size is 8 there but 65536 here"), "{e}");
        assert!(differ(&|_| {}, 1 << 20).contains("too small"));
        assert!(differ(&|p| p.link = LinkLayer::InfiniBand, 8).contains("same link layer"));
        assert!(differ(&|p| p.gid = "fe80::1".parse().unwrap(), 8).contains("GID families differ"));
        assert!(differ(&|p| p.gid_index = None, 8).contains("-x on both sides"));
        assert!(differ(&|p| p.qps.push(p.qps[0].clone()), 8).contains("2 QPs"));
    }

    #[test]
    fn mtu_negotiation() {
        assert_eq!(path_mtu(None, 4096, 1024, "me", "peer"), Ok(1024));
        assert_eq!(path_mtu(Some(2048), 4096, 4096, "me", "peer"), Ok(2048));
        let e = path_mtu(Some(4096), 4096, 1024, "rxe0 port 1", "rxe1 port 1").unwrap_err();
        assert_eq!(
            e,
            "-m/--mtu 4096: larger than the active MTU 1024 of rxe1 port 1; use -m 1024 or less"
        );
        let e = path_mtu(Some(2048), 1024, 4096, "rxe0 port 1", "rxe1 port 1").unwrap_err();
        assert!(e.contains("active MTU 1024 of rxe0 port 1"), "{e}");
    }
}
