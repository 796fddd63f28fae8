//! Named bandwidth limits that spec thresholds may be a percentage of ("85% of
//! ib-ndr x 8"): the line rate of one link, per direction, in GB/s (1e9 bytes/s),
//! the unit of busbw and algbw.
//!
//! A minimal table of its own until the crate-wide limits table (`crate::limits`)
//! lands; `lookup` is the one function to point at it then.

/// (name, GB/s, what it is).
const LIMITS: &[(&str, f64, &str)] = &[
    ("ib-edr", 12.5, "InfiniBand EDR 4X, 100 Gb/s"),
    ("ib-hdr", 25.0, "InfiniBand HDR 4X, 200 Gb/s"),
    ("ib-ndr", 50.0, "InfiniBand NDR 4X, 400 Gb/s"),
    ("ib-xdr", 100.0, "InfiniBand XDR 4X, 800 Gb/s"),
    ("eth-100g", 12.5, "100 Gb/s Ethernet (RoCE)"),
    ("eth-200g", 25.0, "200 Gb/s Ethernet (RoCE)"),
    ("eth-400g", 50.0, "400 Gb/s Ethernet (RoCE)"),
    ("eth-800g", 100.0, "800 Gb/s Ethernet (RoCE)"),
    (
        "pcie-gen4-x16",
        31.5,
        "PCIe 4.0 x16, 16 GT/s x 16 lanes, 128b/130b",
    ),
    (
        "pcie-gen5-x16",
        63.0,
        "PCIe 5.0 x16, 32 GT/s x 16 lanes, 128b/130b",
    ),
    ("nvlink4", 450.0, "NVLink 4 (H100), per GPU per direction"),
    ("nvlink5", 900.0, "NVLink 5 (B200), per GPU per direction"),
];

/// The limit's GB/s and description.
pub fn lookup(name: &str) -> Option<(f64, &'static str)> {
    LIMITS
        .iter()
        .find(|(n, _, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, gbs, what)| (gbs, what))
}

/// Every name, for error messages.
pub fn names() -> Vec<&'static str> {
    LIMITS.iter().map(|(n, _, _)| *n).collect()
}
