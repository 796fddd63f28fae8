//! The moves of an endpoint's queue pairs to RTR and RTS, with the peer's details.

use crate::verbs::device::path::route;
use crate::verbs::device::qp::{Endpoint, MIN_RNR_TIMER, RETRY_COUNT, RNR_RETRY};
use crate::verbs::device::ud::{self, UdDest};
use crate::verbs::device::Port;
use crate::verbs::exchange::wire::Hello;
use crate::verbs::flags::parity::Connection;
use crate::verbs::flags::Plan;
use rdma_mummy_sys::ibv_pd;
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::device_context::Mtu;
use sideway::ibverbs::queue_pair::{QueuePairAttribute, QueuePairState};
use std::net::Ipv6Addr;
use std::ptr::NonNull;

impl Endpoint {
    /// -R with UD: QP `qp` takes rdma_cm's Q_Key, moves to RTS and sends to
    /// the destination `dest` makes on this endpoint's protection domain.
    pub fn ready_ud(
        &mut self,
        qp: usize,
        qkey: u32,
        dest: impl FnOnce(NonNull<ibv_pd>) -> anyhow::Result<UdDest>,
    ) -> anyhow::Result<()> {
        // SAFETY: the PD is alive in `self`.
        let pd = unsafe { self._pd.pd() };
        let end = &mut self.qps[qp];
        ud::set_qkey(end.qp.raw(), qkey)?;
        ud::to_rts(end.qp.raw(), end.psn)?;
        end.ud = Some(dest(pd)?);
        Ok(())
    }

    /// Connects every QP to the peer's: RTR with the path `mtu`, then RTS.
    pub fn connect(
        &mut self,
        port: &Port,
        plan: &Plan,
        peer: &Hello,
        mtu: u32,
        out_reads: u8,
    ) -> anyhow::Result<()> {
        let path_mtu = match mtu {
            256 => Mtu::Mtu256,
            512 => Mtu::Mtu512,
            1024 => Mtu::Mtu1024,
            2048 => Mtu::Mtu2048,
            _ => Mtu::Mtu4096,
        };
        let peer_gid: Ipv6Addr = peer.gid;
        let reliable = plan.options.connection != Connection::Uc;
        for (qp_index, (end, remote)) in self.qps.iter_mut().zip(&peer.qps).enumerate() {
            if plan.options.connection == Connection::Ud {
                // SAFETY: the PD is alive in `self`.
                let (qp, pd) = (end.qp.raw(), unsafe { self._pd.pd() });
                ud::to_rts(qp, end.psn)?;
                end.ud = Some(ud::dest(
                    pd,
                    port,
                    peer,
                    (remote.qpn, ud::QKEY),
                    route(&plan.path, qp_index),
                )?);
                continue;
            }
            // -S, --tclass/-T, --flow_label, -L: as perftest's RTR address vector.
            let r = route(&plan.path, qp_index);
            let mut ah = AddressHandleAttribute::new();
            ah.setup_dest_lid(peer.lid)
                .setup_port(port.port)
                .setup_service_level(r.sl);
            if let Some(gid) = &port.gid {
                let sgid = gid.entry.index as u8;
                ah.setup_grh(
                    &Gid::from(peer_gid),
                    r.flow_label,
                    sgid,
                    r.hop_limit,
                    r.traffic_class,
                );
            }
            let mut rtr = QueuePairAttribute::new();
            rtr.setup_state(QueuePairState::ReadyToReceive)
                .setup_path_mtu(path_mtu)
                .setup_dest_qp_num(remote.qpn)
                .setup_rq_psn(remote.psn)
                .setup_address_vector(&ah);
            // UC has no responder resources, acknowledgements or retries.
            if reliable {
                rtr.setup_max_dest_read_atomic(out_reads)
                    .setup_min_rnr_timer(MIN_RNR_TIMER);
            }
            end.modify(
                &rtr,
                "RTR",
                ": check the GIDs (-x: both sides need a RoCE v2 GID of the same IP family, reachable from each other) and -m",
            )?;
            let mut rts = QueuePairAttribute::new();
            rts.setup_state(QueuePairState::ReadyToSend)
                .setup_sq_psn(end.psn);
            if reliable {
                rts.setup_timeout(plan.qp_timeout)
                    .setup_retry_cnt(RETRY_COUNT)
                    .setup_rnr_retry(RNR_RETRY)
                    .setup_max_read_atomic(out_reads);
            }
            end.modify(&rts, "RTS", "")?;
        }
        Ok(())
    }
}
