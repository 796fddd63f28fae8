//! What carries the mpi backend's traffic between nodes, read from the Open MPI
//! components the process has loaded.

/// Open MPI's components of `framework` this process has loaded, from
/// /proc/self/maps ("/usr/lib/.../openmpi3/mca_btl_tcp.so" is "tcp"). Open MPI
/// unloads the components it did not select, so these are what it uses.
fn loaded_components(maps: &str, framework: &str) -> Vec<String> {
    let prefix = format!("mca_{framework}_");
    let mut names: Vec<String> = maps
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .filter_map(|f| f.strip_prefix(prefix.as_str())?.strip_suffix(".so"))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// What carries the traffic between nodes: the network BTL under Open MPI's
/// ob1, or UCX, or an MTL, as loaded. MPI itself does not say; where the
/// components are not to be seen (another MPI, a static build), what pins them.
pub(super) fn inter_node_transport(maps: &str) -> String {
    let pml = loaded_components(maps, "pml");
    let network = |framework: &str, local: &[&str]| -> Vec<String> {
        let all = loaded_components(maps, framework);
        all.into_iter()
            .filter(|c| !local.contains(&c.as_str()))
            .collect()
    };
    match pml.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["ob1"] => {
            let btls = network("btl", &["self", "vader", "sm", "smcuda"]);
            if !btls.is_empty() {
                let names: Vec<String> = btls
                    .iter()
                    .map(|b| format!("{} BTL", b.to_uppercase()))
                    .collect();
                return format!(
                    "mpi/inter-node: Open MPI {} between nodes (pml ob1; btl {})",
                    names.join(" + "),
                    loaded_components(maps, "btl").join(",")
                );
            }
        }
        ["ucx"] => {
            let tls = std::env::var("UCX_TLS").map_or(String::new(), |t| format!(", UCX_TLS={t}"));
            return format!("mpi/inter-node: Open MPI UCX between nodes (pml ucx{tls})");
        }
        ["cm"] => {
            let mtls = network("mtl", &[]);
            if !mtls.is_empty() {
                return format!(
                    "mpi/inter-node: Open MPI {} MTL between nodes (pml cm)",
                    mtls.join(" + ")
                );
            }
        }
        _ => {}
    }
    let pinned: Vec<String> = [
        "OMPI_MCA_pml",
        "OMPI_MCA_btl",
        "OMPI_MCA_mtl",
        "UCX_TLS",
        "FI_PROVIDER",
    ]
    .iter()
    .filter_map(|v| std::env::var(v).ok().map(|val| format!("{v}={val}")))
    .collect();
    if pinned.is_empty() {
        "mpi/inter-node (library's choice; set OMPI_MCA_pml or UCX_TLS to pin it)".to_string()
    } else {
        format!("mpi/inter-node ({})", pinned.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps(libs: &[&str]) -> String {
        libs.iter()
            .map(|l| {
                format!("7f00-7f01 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/{l}\n")
            })
            .collect()
    }

    #[test]
    fn the_loaded_components_name_the_transport() {
        let tcp = maps(&[
            "mca_pml_ob1.so",
            "mca_btl_self.so",
            "mca_btl_tcp.so",
            "mca_btl_tcp.so",
            "mca_bml_r2.so",
        ]);
        assert_eq!(loaded_components(&tcp, "btl"), ["self", "tcp"]);
        assert_eq!(
            inter_node_transport(&tcp),
            "mpi/inter-node: Open MPI TCP BTL between nodes (pml ob1; btl self,tcp)"
        );
        let ofi = maps(&["mca_pml_cm.so", "mca_mtl_ofi.so", "mca_btl_vader.so"]);
        assert_eq!(
            inter_node_transport(&ofi),
            "mpi/inter-node: Open MPI ofi MTL between nodes (pml cm)"
        );
        // No component to be seen: what the environment pins, or that nothing does.
        assert!(inter_node_transport("").starts_with("mpi/inter-node ("));
    }
}
