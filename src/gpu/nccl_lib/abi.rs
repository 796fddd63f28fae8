//! What fabricbench assumes of nccl.h, each fact as a C expression and the value
//! fabricbench's own definitions give it, so that a check can compile the
//! expressions against a real nccl.h and compare (tests/nccl_wheel.rs, on every
//! CI run): the layout and initial values of the structs fabricbench builds
//! (`setup::Config`, ncclUniqueId) and the codes it passes or expects.
//! `backend::nccl::abi_facts` adds the type, op and CTA-policy codes.

use super::setup::{self, Config};
use cudarc::nccl::sys::ncclUniqueId;

/// One assumption about nccl.h.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbiFact {
    /// What it is, for a mismatch message: "ncclConfig_t.minCTAs offset".
    pub what: String,
    /// A C expression of nccl.h with that value, evaluated after
    /// `ncclConfig_t init = NCCL_CONFIG_INITIALIZER;`.
    pub c_expr: String,
    /// fabricbench's value.
    pub ours: i64,
}

impl AbiFact {
    /// A macro or enumerator of nccl.h that fabricbench spells as `ours`.
    pub fn constant(name: &str, ours: i64) -> AbiFact {
        AbiFact {
            what: name.to_string(),
            c_expr: name.to_string(),
            ours,
        }
    }
}

/// The facts of this module's definitions: ncclConfig_t, ncclUniqueId, the result
/// codes and registration flags used here.
pub fn facts() -> Vec<AbiFact> {
    let mut facts = config_facts();
    let id_bytes = std::mem::size_of::<ncclUniqueId>() as i64;
    facts.push(AbiFact {
        what: "ncclUniqueId size".into(),
        c_expr: "sizeof(ncclUniqueId)".into(),
        ours: id_bytes,
    });
    facts.push(AbiFact::constant("NCCL_UNIQUE_ID_BYTES", id_bytes));
    facts.extend([
        AbiFact::constant("ncclSuccess", 0),
        AbiFact::constant("ncclInvalidUsage", setup::INVALID_USAGE.into()),
        AbiFact::constant("ncclInProgress", setup::IN_PROGRESS.into()),
        AbiFact::constant("NCCL_WIN_COLL_SYMMETRIC", setup::WIN_COLL_SYMMETRIC.into()),
    ]);
    facts
}

/// `Config`'s layout and initial values as facts about nccl.h's ncclConfig_t.
/// Ours is a prefix of newer ones: its size is compared with the end of its last
/// field in nccl.h, rounded up to the struct's alignment.
fn config_facts() -> Vec<AbiFact> {
    let fact = |what: String, c_expr: String, ours: usize| AbiFact {
        what,
        c_expr,
        ours: ours as i64,
    };
    let member = |c_name: &str| format!("((ncclConfig_t*)0)->{c_name}");
    let fields = Config::fields();
    let mut facts = Vec::new();
    for f in &fields {
        let what = format!("ncclConfig_t.{}", f.c_name);
        facts.push(fact(
            format!("{what} offset"),
            format!("offsetof(ncclConfig_t, {})", f.c_name),
            f.offset,
        ));
        facts.push(fact(
            format!("{what} size"),
            format!("sizeof({})", member(f.c_name)),
            f.size,
        ));
        if !matches!(f.c_name, "size" | "version") {
            facts.push(AbiFact {
                what: format!("{what} in NCCL_CONFIG_INITIALIZER"),
                c_expr: format!("(long long)(intptr_t)init.{}", f.c_name),
                ours: f.initial,
            });
        }
    }
    let last = fields.last().map_or("size", |f| f.c_name);
    let align = "_Alignof(ncclConfig_t)";
    facts.push(fact(
        format!("ncclConfig_t size up to {last}"),
        format!(
            "(offsetof(ncclConfig_t, {last}) + sizeof({}) + {align} - 1) / {align} * {align}",
            member(last)
        ),
        std::mem::size_of::<Config>(),
    ));
    facts.push(fact(
        "ncclConfig_t alignment".into(),
        align.into(),
        std::mem::align_of::<Config>(),
    ));
    facts
}
