//! The NCCL library a node would use: what the collectives' own search (or
//! FABRICBENCH_NCCL_LIB) opens there, its version and the optional entry points
//! it has (`compare` checks that every node runs the same version). Looked for
//! only on the live node (`--sysfs-root /`): a fixture tree or a mounted image
//! is not this process's to load.

use super::facts::{NcclLibrary, NodeFacts};
use super::{Finding, Severity};
use crate::gpu::nccl_lib::{self, symbols, NcclAbsent, NCCL_LIB_ENV};
use crate::gpu::nccl_search::SONAME;
use crate::sysfs::Root;
use std::path::{Path, PathBuf};

pub fn collect(root: &Root) -> NcclLibrary {
    if root.dir() != Path::new("/") {
        return NcclLibrary::Unchecked;
    }
    let named = std::env::var_os(NCCL_LIB_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    match nccl_lib::load(named.as_deref()) {
        Ok(nccl) => NcclLibrary::Found {
            path: nccl.path().to_string(),
            version: nccl
                .version_string()
                .trim_start_matches("NCCL ")
                .to_string(),
            symbols: symbols::summary(nccl.lookups()),
        },
        Err(NcclAbsent::Given { given, reason }) => NcclLibrary::Unusable {
            named: given,
            reason,
        },
        Err(NcclAbsent::NotFound { unusable }) => NcclLibrary::NotFound { unusable },
    }
}

pub fn check(node: &NodeFacts, out: &mut Vec<Finding>) {
    let finding = |severity, seen: String, expected: &str, fix: &str| {
        Finding::new(
            severity,
            &node.node,
            SONAME,
            "nccl-library",
            seen,
            expected,
            fix,
        )
    };
    let install =
        "install NCCL (the libnccl2 package, or `pip install nvidia-nccl-cu12`, -cu13 for \
                   CUDA 13) or set FABRICBENCH_NCCL_LIB to its libnccl.so.2";
    match &node.nccl.library {
        NcclLibrary::Unchecked => {}
        NcclLibrary::Found {
            path,
            version,
            symbols,
        } => out.push(finding(
            Severity::Info,
            format!("NCCL {version} at {path} (symbols: {symbols})"),
            "one NCCL, the same on every node",
            "none: the nccl backend loads this one (--nccl-lib or FABRICBENCH_NCCL_LIB choose another)",
        )),
        NcclLibrary::Unusable { named, reason } => out.push(finding(
            Severity::Error,
            format!("{named}: {reason}"),
            "a libnccl.so.2 that loads",
            "point FABRICBENCH_NCCL_LIB at libnccl.so.2 (or the directory holding it), or unset it",
        )),
        NcclLibrary::NotFound { unusable } => {
            // Without a GPU only the mpi backend runs here, and it needs no NCCL.
            let severity = match node.gpus.gpus.is_empty() {
                true => Severity::Info,
                false => Severity::Error,
            };
            let seen = format!("none found{unusable}");
            out.push(finding(severity, seen, "libnccl.so.2 on a GPU node", install));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{facts, findings};
    use super::*;

    #[test]
    fn a_fixture_root_is_not_searched() {
        let node = facts("doctor/healthy", |_| {});
        assert_eq!(node.nccl.library, NcclLibrary::Unchecked);
        assert!(findings(&[node], "nccl-library").is_empty());
    }

    #[test]
    fn none_found_is_an_error_only_where_gpus_need_it() {
        let mut node = facts("doctor/healthy", |_| {});
        node.nccl.library = NcclLibrary::NotFound {
            unusable: String::new(),
        };
        let f = findings(std::slice::from_ref(&node), "nccl-library");
        assert_eq!(
            (f[0].severity, f[0].seen.as_str()),
            (Severity::Error, "none found")
        );
        node.gpus.gpus.clear();
        let f = findings(&[node], "nccl-library");
        assert_eq!(f[0].severity, Severity::Info);
    }

    #[test]
    fn the_library_in_use_is_compared_across_nodes() {
        let found = |version: &str| NcclLibrary::Found {
            path: "/x/libnccl.so.2".into(),
            version: version.into(),
            symbols: "the 16 required".into(),
        };
        let mut a = facts("doctor/healthy", |_| {});
        a.nccl.library = found("2.32.3");
        let mut b = a.clone();
        b.node = "gpu-b".into();
        assert!(findings(&[a.clone(), b.clone()], "nccl-version").is_empty());
        b.nccl.library = found("2.28.9");
        // Two nodes, two versions: neither is the reference, both are named.
        let f = findings(&[a, b], "nccl-version");
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(f[0].expected.contains("2.28.9 on gpu-b"), "{f:#?}");
    }
}
