//! Which machine (and network namespace) a process runs on, as a rename cannot
//! fake: two ranks that claim one host name but differ here are two nodes.
//! Machine id and boot id tell machines apart; the network namespace tells
//! apart the nodes of one machine (the virtual rack's namespaces, containers).

use super::Root;

/// Characters of the machine and boot ids kept: enough to tell a rack's
/// machines apart, short enough to read in a finding.
const ID_CHARS: usize = 8;

/// "MACHINE-BOOT-net:[INODE]" under `root` ("?" for a part that cannot be read);
/// None when no part can (a fixture tree), so that names alone are compared.
pub fn machine_identity(root: &Root) -> Option<String> {
    let short = |abs: &str| {
        root.read(abs)
            .map(|id| {
                id.replace('-', "")
                    .chars()
                    .take(ID_CHARS)
                    .collect::<String>()
            })
            .filter(|id| !id.is_empty())
    };
    let parts = [
        short("/etc/machine-id"),
        short("/proc/sys/kernel/random/boot_id"),
        root.link_name("/proc/self/ns/net"),
    ];
    if parts.iter().all(Option::is_none) {
        return None;
    }
    let shown: Vec<String> = parts
        .into_iter()
        .map(|p| p.unwrap_or_else(|| "?".into()))
        .collect();
    Some(shown.join("-"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::Tree;

    #[test]
    fn the_identity_joins_what_can_be_read() {
        let tree = Tree::named("sysfs-no-fabric");
        assert_eq!(machine_identity(&tree.root()), None);
        tree.put("/etc/machine-id", "0123456789abcdef0123456789abcdef\n");
        tree.put(
            "/proc/sys/kernel/random/boot_id",
            "fedcba98-7654-3210-fedc-ba9876543210\n",
        );
        assert_eq!(
            machine_identity(&tree.root()).as_deref(),
            Some("01234567-fedcba98-?")
        );
        let live = machine_identity(&Root::new("/")).unwrap();
        assert!(live.contains("net:["), "{live}");
    }
}
