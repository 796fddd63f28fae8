//! A netdev's ethtool statistics (`ethtool -S`): the driver's named counters,
//! where mlx5 keeps its pause and per-priority PFC counters (`rx_prio3_pause`).
//!
//! Why an ioctl and no crate: those counters are only in the ETHTOOL_GSTATS
//! string set, which the netlink API does not carry (its PAUSE_GET stats have
//! only the two 802.3x totals), and the netlink ethtool crate (rust-netlink's
//! `ethtool`) runs on tokio. SIOCETHTOOL answers GSTATS synchronously; three
//! calls on one datagram socket. Any failure (no such device, no permission,
//! a driver without statistics) is "not available", said by nobody.
//!
//! Under a fixture root the statistics are the file `ETHTOOL/DEV`, in
//! `ethtool -S`'s "name: value" lines (read through the root, so it can step).

use super::super::Root;
use std::path::Path;

/// Where a fixture tree keeps each netdev's statistics.
pub const ETHTOOL: &str = "/fabricbench-ethtool";

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// More statistics than any driver has (mlx5 has about 2000 with many queues).
const MAX_STATS: usize = 1 << 16;

impl Root {
    /// The ethtool statistics of `netdev`, by name; None where not available.
    pub fn ethtool_stats(&self, netdev: &str) -> Option<Vec<(String, u64)>> {
        if self.dir() != Path::new("/") {
            return self.read(&format!("{ETHTOOL}/{netdev}")).map(|t| parse(&t));
        }
        live(netdev)
    }
}

/// `ethtool -S` text: "     rx_prio3_pause: 12" lines (or comma-separated
/// pairs, so that one step line holds them all); others are skipped.
fn parse(text: &str) -> Vec<(String, u64)> {
    text.split(['\n', ','])
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            Some((name.trim().to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// One SIOCETHTOOL call with `buf` (u64s, so every ethtool struct is aligned).
fn call(fd: libc::c_int, netdev: &str, buf: &mut [u64]) -> Option<()> {
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: buf.as_mut_ptr().cast(),
        _pad: [0; 16],
    };
    if netdev.len() >= libc::IFNAMSIZ {
        return None;
    }
    for (d, s) in req.name.iter_mut().zip(netdev.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` names `buf`, which is as large as the command's reply says.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req) };
    (rc == 0).then_some(())
}

fn live(netdev: &str) -> Option<Vec<(String, u64)>> {
    // SAFETY: a plain socket, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return None;
    }
    let stats = read_stats(fd, netdev);
    // SAFETY: the socket opened above.
    unsafe { libc::close(fd) };
    stats
}

fn read_stats(fd: libc::c_int, netdev: &str) -> Option<Vec<(String, u64)>> {
    // ethtool_sset_info: cmd, reserved, sset_mask (u64), then one u32 per set.
    let mut info = [0u64; 3];
    info[0] = ETHTOOL_GSSET_INFO as u64;
    info[1] = 1 << ETH_SS_STATS;
    call(fd, netdev, &mut info)?;
    if info[1] & (1 << ETH_SS_STATS) == 0 {
        return None;
    }
    let n = (info[2] & 0xffff_ffff) as usize;
    if n == 0 || n > MAX_STATS {
        return None;
    }
    // ethtool_gstrings: cmd, string_set, len (u32 each), then the names.
    let mut strings = vec![0u64; 2 + (n * ETH_GSTRING_LEN).div_ceil(8)];
    strings[0] = ETHTOOL_GSTRINGS as u64 | (ETH_SS_STATS as u64) << 32;
    strings[1] = n as u64;
    call(fd, netdev, &mut strings)?;
    // ethtool_stats: cmd, n_stats (u32 each), then the values.
    let mut values = vec![0u64; 1 + n];
    values[0] = ETHTOOL_GSTATS as u64 | (n as u64) << 32;
    call(fd, netdev, &mut values)?;
    // SAFETY: a view of the u64 buffer's own bytes.
    let bytes: &[u8] =
        unsafe { std::slice::from_raw_parts(strings.as_ptr().cast::<u8>(), strings.len() * 8) };
    let names = &bytes[12..12 + n * ETH_GSTRING_LEN];
    Some(
        names
            .chunks_exact(ETH_GSTRING_LEN)
            .zip(&values[1..])
            .map(|(name, &v)| {
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                (String::from_utf8_lossy(&name[..end]).into_owned(), v)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_text_and_absent_devices() {
        let stats = parse("NIC statistics:\n     rx_prio3_pause: 12\n     tx_pause_ctrl_phy: 3\n");
        assert_eq!(
            stats,
            [
                ("rx_prio3_pause".to_string(), 12),
                ("tx_pause_ctrl_phy".to_string(), 3)
            ]
        );
        // A device that is not there is quietly not available.
        assert_eq!(live("fb-no-such0"), None);
        assert_eq!(live("a-name-longer-than-ifnamsiz"), None);
        // lo has no driver statistics: not available either, no error.
        assert_eq!(Root::new("/").ethtool_stats("lo"), None);
    }
}
