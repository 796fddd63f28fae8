//! Which of NCCL's entry points fabricbench resolves, from which version each
//! optional one exists (first declared in NCCL's nccl.h.in at that release tag),
//! and what a loaded library has: for the header, doctor and the ABI check
//! (tests/nccl_wheel.rs compares these lists with the wheels' own library and nccl.h).

use super::setup::SetupFns;
use super::{Fns, GetVersionFn};
use anyhow::anyhow;
use libloading::Library;

/// Oldest NCCL driven here: bfloat16 and avg arrived in 2.10.
pub const MIN_VERSION: i32 = 2_10_00;
/// ncclRedOpCreatePreMulSum and ncclRedOpDestroy (mulsum).
pub const PREMULSUM_VERSION: i32 = 2_11_00;
/// ncclGetLastError.
pub const LAST_ERROR_VERSION: i32 = 2_13_00;
/// ncclCommInitRankConfig and ncclConfig_t.
pub const CONFIG_VERSION: i32 = 2_14_00;
/// ncclMemAlloc and ncclCommRegister (-R 1).
pub const REGISTER_VERSION: i32 = 2_19_00;
/// ncclCommWindowRegister (-R 2).
pub const WINDOW_VERSION: i32 = 2_27_00;
/// ncclAlltoAll, ncclGather and ncclScatter.
pub const NATIVE_ALLTOALL_VERSION: i32 = 2_28_00;

/// The entry points every NCCL from `MIN_VERSION` on has, and fabricbench needs.
pub const REQUIRED: &[&str] = &[
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclCommInitRank",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclGetErrorString",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclSend",
    "ncclRecv",
];

/// A group of optional entry points that arrived together and serve one purpose.
#[derive(Debug)]
pub struct Feature {
    /// How the header and doctor name it.
    pub name: &'static str,
    /// NCCL_VERSION_CODE of the first release that has every symbol.
    pub since: i32,
    pub symbols: &'static [&'static str],
}

pub const FEATURES: &[Feature] = &[
    Feature {
        name: "PreMulSum",
        since: PREMULSUM_VERSION,
        symbols: &["ncclRedOpCreatePreMulSum", "ncclRedOpDestroy"],
    },
    Feature {
        name: "GetLastError",
        since: LAST_ERROR_VERSION,
        symbols: &["ncclGetLastError"],
    },
    Feature {
        name: "InitRankConfig",
        since: CONFIG_VERSION,
        symbols: &["ncclCommInitRankConfig"],
    },
    Feature {
        name: "MemAlloc/Register",
        since: REGISTER_VERSION,
        symbols: &[
            "ncclMemAlloc",
            "ncclMemFree",
            "ncclCommRegister",
            "ncclCommDeregister",
        ],
    },
    Feature {
        name: "WindowRegister",
        since: WINDOW_VERSION,
        symbols: &["ncclCommWindowRegister", "ncclCommWindowDeregister"],
    },
    Feature {
        name: "AlltoAll/Gather/Scatter",
        since: NATIVE_ALLTOALL_VERSION,
        symbols: &["ncclAlltoAll", "ncclGather", "ncclScatter"],
    },
];

/// One entry point looked up in a library, and whether it was there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub name: &'static str,
    pub found: bool,
}

/// Looks entry points up by name and remembers every lookup.
pub(super) struct Resolver<'a> {
    lib: &'a Library,
    pub lookups: Vec<Lookup>,
}

impl<'a> Resolver<'a> {
    pub fn new(lib: &'a Library) -> Resolver<'a> {
        Resolver {
            lib,
            lookups: Vec::new(),
        }
    }

    /// # Safety
    /// `T` must be the C signature of `name` in nccl.h.
    pub unsafe fn optional<T: Copy>(&mut self, name: &'static str) -> Option<T> {
        let symbol = self.lib.get::<T>(name.as_bytes()).ok().map(|s| *s);
        self.lookups.push(Lookup {
            name,
            found: symbol.is_some(),
        });
        symbol
    }

    /// # Safety
    /// As `optional`.
    pub unsafe fn required<T: Copy>(
        &mut self,
        name: &'static str,
        version: i32,
    ) -> anyhow::Result<T> {
        self.optional(name).ok_or_else(|| {
            anyhow!(
                "{} lacks {name}, which every NCCL from 2.10 on has: a broken or modified build",
                super::version_string(version)
            )
        })
    }
}

/// Every entry point of `Fns`, by its nccl.h name; `version` for the message when a
/// required one is missing.
pub(super) fn resolve(
    r: &mut Resolver,
    get_version: GetVersionFn,
    version: i32,
) -> anyhow::Result<Fns> {
    // SAFETY: every signature below is nccl.h's (NCCL 2.10 to 2.32).
    unsafe {
        Ok(Fns {
            get_version,
            get_unique_id: r.required("ncclGetUniqueId", version)?,
            comm_init_rank: r.required("ncclCommInitRank", version)?,
            comm_destroy: r.required("ncclCommDestroy", version)?,
            comm_abort: r.required("ncclCommAbort", version)?,
            comm_get_async_error: r.required("ncclCommGetAsyncError", version)?,
            get_error_string: r.required("ncclGetErrorString", version)?,
            get_last_error: r.optional("ncclGetLastError"),
            group_start: r.required("ncclGroupStart", version)?,
            group_end: r.required("ncclGroupEnd", version)?,
            all_reduce: r.required("ncclAllReduce", version)?,
            broadcast: r.required("ncclBroadcast", version)?,
            reduce: r.required("ncclReduce", version)?,
            all_gather: r.required("ncclAllGather", version)?,
            reduce_scatter: r.required("ncclReduceScatter", version)?,
            send: r.required("ncclSend", version)?,
            recv: r.required("ncclRecv", version)?,
            alltoall: r.optional("ncclAlltoAll"),
            gather: r.optional("ncclGather"),
            scatter: r.optional("ncclScatter"),
            setup: SetupFns {
                init_config: r.optional("ncclCommInitRankConfig"),
                mem_alloc: r.optional("ncclMemAlloc"),
                mem_free: r.optional("ncclMemFree"),
                register: r.optional("ncclCommRegister"),
                deregister: r.optional("ncclCommDeregister"),
                window_register: r.optional("ncclCommWindowRegister"),
                window_deregister: r.optional("ncclCommWindowDeregister"),
            },
            premulsum: r.optional("ncclRedOpCreatePreMulSum"),
            red_op_destroy: r.optional("ncclRedOpDestroy"),
        })
    }
}

/// "the 16 required and PreMulSum, GetLastError, ...; lacks WindowRegister (2.27+)":
/// what `lookups` found of the required and the optional entry points.
pub fn summary(lookups: &[Lookup]) -> String {
    let found = |name: &str| lookups.iter().any(|l| l.name == name && l.found);
    let (has, lacks): (Vec<&Feature>, Vec<&Feature>) = FEATURES
        .iter()
        .partition(|f| f.symbols.iter().all(|s| found(s)));
    let names = |fs: &[&Feature], since: bool| {
        fs.iter()
            .map(|f| match since {
                true => format!("{} ({}+)", f.name, short_version(f.since)),
                false => f.name.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let required = REQUIRED.iter().filter(|s| found(s)).count();
    let mut text = format!("the {required} required");
    if !has.is_empty() {
        text += &format!(" and {}", names(&has, false));
    }
    if !lacks.is_empty() {
        text += &format!("; lacks {}", names(&lacks, true));
    }
    text
}

/// "2.27" from a version code.
pub fn short_version(code: i32) -> String {
    format!("{}.{}", code / 10000, code % 10000 / 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookups(found: &[&'static str]) -> Vec<Lookup> {
        REQUIRED
            .iter()
            .chain(FEATURES.iter().flat_map(|f| f.symbols))
            .map(|&name| Lookup {
                name,
                found: REQUIRED.contains(&name) || found.contains(&name),
            })
            .collect()
    }

    #[test]
    fn summary_names_what_the_library_has_and_lacks() {
        let all: Vec<&'static str> = FEATURES.iter().flat_map(|f| f.symbols).copied().collect();
        assert_eq!(
            summary(&lookups(&all)),
            "the 16 required and PreMulSum, GetLastError, InitRankConfig, MemAlloc/Register, \
             WindowRegister, AlltoAll/Gather/Scatter"
        );
        // NCCL 2.21: no windows, no native AlltoAll; a feature missing one symbol is lacking.
        let some = [
            "ncclRedOpCreatePreMulSum",
            "ncclRedOpDestroy",
            "ncclGetLastError",
            "ncclCommInitRankConfig",
            "ncclMemAlloc",
            "ncclMemFree",
            "ncclCommRegister",
            "ncclCommDeregister",
            "ncclAlltoAll",
        ];
        assert_eq!(
            summary(&lookups(&some)),
            "the 16 required and PreMulSum, GetLastError, InitRankConfig, MemAlloc/Register; \
             lacks WindowRegister (2.27+), AlltoAll/Gather/Scatter (2.28+)"
        );
    }

    #[test]
    fn features_are_in_version_order_and_never_overlap_the_required() {
        assert!(FEATURES.windows(2).all(|w| w[0].since <= w[1].since));
        assert!(FEATURES.iter().all(|f| f.since > MIN_VERSION));
        for f in FEATURES {
            assert!(f.symbols.iter().all(|s| !REQUIRED.contains(s)), "{f:?}");
        }
    }
}
