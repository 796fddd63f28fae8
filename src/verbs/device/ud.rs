//! UD queue pairs (-c UD, send tests only): the state moves with a Q_Key,
//! which sideway's attribute builder does not carry, and the address handle
//! every send names, both through libibverbs directly; a received message
//! starts with the 40-byte GRH the receive buffer must have room for.

use crate::verbs::device::path::Route;
use crate::verbs::device::Port;
use crate::verbs::exchange::wire::Hello;
use anyhow::bail;
use rdma_mummy_sys::{
    ibv_ah, ibv_ah_attr, ibv_create_ah, ibv_destroy_ah, ibv_global_route, ibv_modify_qp, ibv_pd,
    ibv_qp, ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_state, ud_t, wr_t,
};
use std::net::Ipv6Addr;
use std::ptr::NonNull;

/// Bytes of the Global Routing Header at the start of every UD receive.
pub const GRH_BYTES: u32 = 40;
/// perftest's Q_Key (DEF_QKEY); with -R, rdma_cm's instead.
pub const QKEY: u32 = 0x1111_1111;

/// Where this side's UD sends go: the peer's QP, its Q_Key and an address handle to it.
pub struct UdDest {
    ah: NonNull<ibv_ah>,
    qpn: u32,
    qkey: u32,
}

// The address handle is only read by the provider when a send names it.
unsafe impl Send for UdDest {}

impl Drop for UdDest {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_ah, destroyed once, before the PD (the
        // endpoint drops its QPs before its protection domain).
        unsafe { ibv_destroy_ah(self.ah.as_ptr()) };
    }
}

impl UdDest {
    /// The `wr` part of a send to the peer.
    pub fn wr(&self) -> wr_t {
        wr_t {
            ud: ud_t {
                ah: self.ah.as_ptr(),
                remote_qpn: self.qpn,
                remote_qkey: self.qkey,
            },
        }
    }
}

fn modify(
    qp: *mut ibv_qp,
    attr: &mut ibv_qp_attr,
    mask: ibv_qp_attr_mask,
    state: &str,
) -> anyhow::Result<()> {
    // SAFETY: `qp` is a live QP of the caller; the attribute lives across the call.
    let errno = unsafe { ibv_modify_qp(qp, attr, mask.0 as i32) };
    if errno != 0 {
        bail!(
            "moving UD QP to {state} failed: {}",
            std::io::Error::from_raw_os_error(errno)
        );
    }
    Ok(())
}

fn empty_attr() -> ibv_qp_attr {
    // SAFETY: ibv_qp_attr is plain data; all-zero is its empty value.
    unsafe { std::mem::zeroed() }
}

/// RESET -> INIT with perftest's Q_Key.
pub fn to_init(qp: *mut ibv_qp, port: u8, pkey_index: u16) -> anyhow::Result<()> {
    let mut attr = empty_attr();
    attr.qp_state = ibv_qp_state::IBV_QPS_INIT;
    attr.pkey_index = pkey_index;
    attr.port_num = port;
    attr.qkey = QKEY;
    let mask = ibv_qp_attr_mask::IBV_QP_STATE
        | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
        | ibv_qp_attr_mask::IBV_QP_PORT
        | ibv_qp_attr_mask::IBV_QP_QKEY;
    modify(qp, &mut attr, mask, "INIT")
}

/// -R: the Q_Key rdma_cm gives the connection, in INIT (as rdma_create_qp sets it).
pub fn set_qkey(qp: *mut ibv_qp, qkey: u32) -> anyhow::Result<()> {
    let mut attr = empty_attr();
    attr.qkey = qkey;
    modify(
        qp,
        &mut attr,
        ibv_qp_attr_mask::IBV_QP_QKEY,
        "INIT with rdma_cm's Q_Key",
    )
}

/// INIT -> RTR -> RTS: a UD QP needs no peer for either.
pub fn to_rts(qp: *mut ibv_qp, psn: u32) -> anyhow::Result<()> {
    let mut attr = empty_attr();
    attr.qp_state = ibv_qp_state::IBV_QPS_RTR;
    modify(qp, &mut attr, ibv_qp_attr_mask::IBV_QP_STATE, "RTR")?;
    let mut attr = empty_attr();
    attr.qp_state = ibv_qp_state::IBV_QPS_RTS;
    attr.sq_psn = psn;
    let mask = ibv_qp_attr_mask::IBV_QP_STATE | ibv_qp_attr_mask::IBV_QP_SQ_PSN;
    modify(qp, &mut attr, mask, "RTS")
}

/// An address handle to the peer's port (its GID when this side routes by
/// GID, else its LID) for sends of Q_Key `qkey` to its QP `qpn`, with the
/// path flags' `route`.
pub fn dest(
    pd: NonNull<ibv_pd>,
    port: &Port,
    peer: &Hello,
    (qpn, qkey): (u32, u32),
    route: Route,
) -> anyhow::Result<UdDest> {
    // SAFETY: plain data; all-zero is its empty value.
    let mut attr: ibv_ah_attr = unsafe { std::mem::zeroed() };
    attr.dlid = peer.lid;
    attr.sl = route.sl;
    attr.port_num = port.port;
    if let Some(gid) = &port.gid {
        let dgid: Ipv6Addr = peer.gid;
        attr.is_global = 1;
        attr.grh = ibv_global_route {
            dgid: rdma_mummy_sys::ibv_gid { raw: dgid.octets() },
            flow_label: route.flow_label,
            sgid_index: gid.entry.index as u8,
            hop_limit: route.hop_limit,
            traffic_class: route.traffic_class,
        };
    }
    let to = format!("{} {} port {}", peer.host, peer.device, peer.port);
    create(pd, &mut attr, (qpn, qkey), &to)
}

/// The address handle of `attr` (rdma_cm's, with -R) to QP `qpn` of `to`.
pub fn create(
    pd: NonNull<ibv_pd>,
    attr: &mut ibv_ah_attr,
    (qpn, qkey): (u32, u32),
    to: &str,
) -> anyhow::Result<UdDest> {
    // SAFETY: `pd` is the endpoint's live protection domain.
    let ah = unsafe { ibv_create_ah(pd.as_ptr(), attr) };
    match NonNull::new(ah) {
        Some(ah) => Ok(UdDest { ah, qpn, qkey }),
        None => bail!(
            "creating the UD address handle to {to} failed: {}; check the GIDs (-x)",
            std::io::Error::last_os_error()
        ),
    }
}
