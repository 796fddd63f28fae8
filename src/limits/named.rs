//! The named links of `--limit`: nvlink, PCIe x16 and network rates, each with
//! where its per-direction figure comes from.

/// One row of the table of named links.
#[derive(Clone, Copy, Debug)]
pub struct NamedLink {
    /// Names accepted by `--limit` (case-insensitive); the first is canonical.
    pub names: &'static [&'static str],
    /// Per direction, GB/s.
    pub gbs: f64,
    /// Whether the vendor's headline figure is a bidirectional total (then
    /// `gbs` is half of it).
    pub vendor_bidirectional: bool,
    /// Where the figure comes from and how it was converted.
    pub source: &'static str,
}

/// The named links of `--limit`. PCIe figures are the x16 link after encoding
/// (rounded as PCI-SIG's tables round them); network figures are the data rate
/// in Gb/s over 8.
pub const NAMED_LINKS: &[NamedLink] = &[
    NamedLink {
        names: &["nvlink3"],
        gbs: 300.0,
        vendor_bidirectional: true,
        source: "NVIDIA A100 datasheet: 600 GB/s NVLink per GPU (12 links), a bidirectional total; halved",
    },
    NamedLink {
        names: &["nvlink4"],
        gbs: 450.0,
        vendor_bidirectional: true,
        source: "NVIDIA H100 SXM datasheet: 900 GB/s NVLink per GPU (18 links), a bidirectional total; halved",
    },
    NamedLink {
        names: &["nvlink5"],
        gbs: 900.0,
        vendor_bidirectional: true,
        source: "NVIDIA Blackwell (B200/GB200) datasheet: 1.8 TB/s NVLink per GPU (18 links), a bidirectional total; halved",
    },
    NamedLink {
        names: &["pcie3x16"],
        gbs: 15.75,
        vendor_bidirectional: false,
        source: "PCI-SIG PCIe 3.0: 8 GT/s x16, 128b/130b encoding = 15.75 GB/s per direction",
    },
    NamedLink {
        names: &["pcie4x16"],
        gbs: 31.5,
        vendor_bidirectional: false,
        source: "PCI-SIG PCIe 4.0: 16 GT/s x16, 128b/130b encoding = 31.5 GB/s per direction",
    },
    NamedLink {
        names: &["pcie5x16"],
        gbs: 63.0,
        vendor_bidirectional: false,
        source: "PCI-SIG PCIe 5.0: 32 GT/s x16, 128b/130b encoding = 63 GB/s per direction",
    },
    NamedLink {
        names: &["pcie6x16"],
        gbs: 121.0,
        vendor_bidirectional: false,
        source: "PCI-SIG PCIe 6.0: 64 GT/s x16 = 128 GB/s raw per direction (PCI-SIG quotes 256 GB/s bidirectional); \
                 FLIT mode carries 242 data bytes per 256 (CRC and FEC), so 121 GB/s",
    },
    NamedLink {
        names: &["ib-xdr", "800g"],
        gbs: 100.0,
        vendor_bidirectional: false,
        source: "IBTA XDR 4x / IEEE 802.3df 800GbE: 800 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["ib-ndr", "400g"],
        gbs: 50.0,
        vendor_bidirectional: false,
        source: "IBTA NDR 4x / IEEE 802.3bs 400GbE: 400 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["ib-hdr", "200g"],
        gbs: 25.0,
        vendor_bidirectional: false,
        source: "IBTA HDR 4x / IEEE 802.3bs 200GbE: 200 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["100g", "ib-edr"],
        gbs: 12.5,
        vendor_bidirectional: false,
        source: "IEEE 802.3 100GbE / IBTA EDR 4x: 100 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["25g"],
        gbs: 3.125,
        vendor_bidirectional: false,
        source: "IEEE 802.3by 25GbE: 25 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["10g"],
        gbs: 1.25,
        vendor_bidirectional: false,
        source: "IEEE 802.3ae 10GbE: 10 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["2.5g"],
        gbs: 0.3125,
        vendor_bidirectional: false,
        source: "IEEE 802.3bz 2.5GBASE-T: 2.5 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["1g"],
        gbs: 0.125,
        vendor_bidirectional: false,
        source: "IEEE 802.3ab 1000BASE-T: 1 Gb/s data rate per direction, /8",
    },
];
