//! NCCL's device-list syntax, as NCCL_IB_HCA and NCCL_SOCKET_IFNAME write it
//! (and UCX_NET_DEVICES, without the prefixes): the one parser of it, for
//! doctor's checks of the variables and for the counters' reading of which
//! ports a run was told to use.

/// NCCL's list syntax: "^a,b" excludes, "=a" matches exactly, else prefixes;
/// NCCL_IB_HCA's entries may name one port ("mlx5_0:1").
pub struct NameList<'a> {
    pub exclude: bool,
    pub exact: bool,
    pub entries: Vec<&'a str>,
}

impl<'a> NameList<'a> {
    pub fn parse(value: &'a str) -> NameList<'a> {
        let exclude = value.starts_with('^');
        let rest = value.trim_start_matches('^');
        let exact = rest.starts_with('=');
        NameList {
            exclude,
            exact,
            entries: rest
                .trim_start_matches('=')
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .collect(),
        }
    }

    pub fn matches(&self, entry: &str, name: &str) -> bool {
        if self.exact {
            name == entry
        } else {
            name.starts_with(entry)
        }
    }

    /// Whether NCCL uses RDMA device `name` through at least one of `ports`:
    /// an entry without ":port" names every port of the devices it matches.
    pub fn selects(&self, name: &str, ports: &[u32]) -> bool {
        ports.iter().any(|&p| {
            let named = self.entries.iter().any(|e| {
                let (hca, port) = split_port(e);
                self.matches(hca, name) && port.is_none_or(|q| q == p)
            });
            named != self.exclude
        })
    }

    /// Entries that match none of `names` (only meaningful for include lists).
    pub fn unmatched(&self, names: &[String], name_of: impl Fn(&str) -> &str) -> Vec<&'a str> {
        self.entries
            .iter()
            .copied()
            .filter(|e| !names.iter().any(|n| self.matches(name_of(e), n)))
            .collect()
    }
}

/// "mlx5_0:1" -> ("mlx5_0", Some(1)); "mlx5_0" -> ("mlx5_0", None).
pub fn split_port(entry: &str) -> (&str, Option<u32>) {
    match entry.split_once(':') {
        Some((device, port)) => (device, port.trim().parse().ok()),
        None => (entry, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_lists_follow_nccl() {
        let names = vec!["eth0".to_string(), "ib0".to_string()];
        let l = NameList::parse("eth,ens");
        assert_eq!(l.unmatched(&names, |e| e), vec!["ens"]);
        let l = NameList::parse("=eth");
        assert_eq!(l.unmatched(&names, |e| e), vec!["eth"]);
        let l = NameList::parse("^docker");
        assert!(l.exclude);
        let hcas = vec!["mlx5_0".to_string()];
        let l = NameList::parse("mlx5_0:1,mlx5_4:1");
        assert_eq!(
            l.unmatched(&hcas, |e| e.split(':').next().unwrap()),
            vec!["mlx5_4:1"]
        );
        // Which devices NCCL uses: prefixes, exact names, exclusions, ports.
        let uses = |v: &str, name: &str, ports: &[u32]| NameList::parse(v).selects(name, ports);
        assert!(uses("mlx5", "mlx5_10", &[1]));
        assert!(!uses("=mlx5_1", "mlx5_10", &[1]));
        assert!(uses("=mlx5_1,mlx5_10", "mlx5_10", &[1]));
        assert!(!uses("^mlx5_1", "mlx5_10", &[1]));
        assert!(uses("^=mlx5_1", "mlx5_10", &[1]));
        assert!(!uses("mlx5_0:2", "mlx5_0", &[1]));
        assert!(uses("mlx5_0:2", "mlx5_0", &[1, 2]));
        assert!(!uses("^mlx5_0:1", "mlx5_0", &[1]));
        assert!(uses("^mlx5_0:1", "mlx5_0", &[1, 2]));
    }
}
