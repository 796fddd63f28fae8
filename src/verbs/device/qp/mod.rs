//! One side's verbs resources: protection domain, completion queues, RC queue
//! pairs with their registered buffers, the moves INIT -> RTR -> RTS, and
//! posting work requests (sideway sets everything up; the data path is plain
//! `ibv_post_send`/`ibv_post_recv`, as perftest's; `connect` the moves to RTR and RTS).
//!
//! Each QP owns one buffer: [local half | target half | control word]. The local
//! half is what this side writes or sends from (and reads into); the peer writes,
//! reads or sends into the target half; the control word ends a -D latency run.

mod connect;
use crate::verbs::device::completion::Wc;
use crate::verbs::device::events::Events;
use crate::verbs::device::memory::{allocate, register, Buffer};
use crate::verbs::device::post::{Chain, PostApi, PostState, Qp};
use crate::verbs::device::ud::{self, UdDest, GRH_BYTES};
use crate::verbs::device::{source_text, Port};
use crate::verbs::exchange::wire::{QpInfo, CONTROL_BYTES};
use crate::verbs::flags::benchmark::Verb;
use crate::verbs::flags::parity::{
    AtomicOp, Connection, ATOMIC_ADD_VALUE, ATOMIC_SIZE, ATOMIC_SWAP_VALUE,
};
use crate::verbs::flags::takes_receives;
use crate::verbs::flags::Plan;
use crate::verbs::measure::ring::{corrupt_at, remote_offset, Ring};
use crate::verbs::measure::validate;
use anyhow::anyhow;
use rdma_mummy_sys::{atomic_t, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wr_opcode, rdma_t, wr_t};
use sideway::ibverbs::completion::GenericCompletionQueue;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{QueuePairAttribute, QueuePairState, QueuePairType};
use sideway::ibverbs::AccessFlags;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

/// perftest's minimum RNR NAK timer (12: 0.64 ms) and retry counts (7: for ever for RNR).
pub(in crate::verbs) const MIN_RNR_TIMER: u8 = 12;
const RETRY_COUNT: u8 = 7;
const RNR_RETRY: u8 = 7;

/// Work request ids carry the message's sequence number in their low bits
/// (the bandwidth tests put the QP above them).
pub const SEQ_BITS: u32 = 40;
pub const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// --data_validation: every message in flight has a slot of its own.
#[derive(Clone, Copy, Debug)]
struct Slots {
    stride: usize,
    send: u64,
    recv: u64,
    /// The fault hook's message.
    corrupt: Option<u64>,
}

/// One queue pair and its buffer.
pub struct QpEnd {
    // Field order is drop order: the QP, then the region, then the memory.
    qp: Qp,
    mr: Arc<MemoryRegion>,
    buffer: Buffer,
    pub psn: u32,
    half: usize,
    /// What an atomic work request does (-A).
    atomic: AtomicOp,
    /// -c UD: where sends go (set when connecting).
    ud: Option<UdDest>,
    /// -c UD: the GRH before each received message.
    grh: u32,
    /// --data_validation's slots (None: every message uses the half's start).
    slots: Option<Slots>,
    /// --write_with_imm: writes carry an immediate (their sequence number).
    imm: bool,
}

impl QpEnd {
    pub fn qpn(&self) -> u32 {
        self.qp.qp_number()
    }

    fn local_addr(&self) -> u64 {
        self.buffer.addr()
    }

    fn target_addr(&self) -> u64 {
        self.buffer.addr() + self.half as u64
    }

    fn send_offset(&self, wr_id: u64) -> usize {
        self.slots
            .map_or(0, |s| ((wr_id & SEQ_MASK) % s.send) as usize * s.stride)
    }

    fn recv_offset(&self, wr_id: u64) -> usize {
        self.slots
            .map_or(0, |s| ((wr_id & SEQ_MASK) % s.recv) as usize * s.stride)
    }

    /// --data_validation: writes message `seq`'s pattern into its send slot
    /// (and the fault hook's flipped byte).
    #[inline(always)]
    fn fill_slot(&mut self, wr_id: u64, len: u32) {
        if let Some(slots) = self.slots {
            self.fill_pattern(slots, wr_id, len);
        }
    }

    fn fill_pattern(&mut self, slots: Slots, wr_id: u64, len: u32) {
        let at = self.send_offset(wr_id);
        assert!(at + len as usize <= self.half);
        // SAFETY: the slot lies in the local half, and no request in flight
        // uses it: a slot is reused only after its last message completed.
        let buf =
            unsafe { std::slice::from_raw_parts_mut(self.buffer.as_ptr().add(at), len as usize) };
        let seq = wr_id & SEQ_MASK;
        validate::fill(buf, seq);
        if slots.corrupt == Some(seq) && len > 0 {
            buf[corrupt_at(len)] ^= 0x5a;
        }
    }

    /// --data_validation of writes and reads: this QP's buffer as a ring.
    pub fn ring(&self) -> Option<Ring> {
        let s = self.slots?;
        Some(Ring::new(self.buffer.as_ptr(), self.half, s.stride, s.send))
    }

    /// --data_validation: whether the receive `wc` holds message `seq` of
    /// `size` bytes (always true without validation).
    #[inline]
    pub fn received_ok(&self, wc: &Wc, seq: u64, size: u32) -> bool {
        self.slots.is_none() || self.received_pattern(wc, seq, size)
    }

    fn received_pattern(&self, wc: &Wc, seq: u64, size: u32) -> bool {
        if self.payload_len(wc) != size {
            return false;
        }
        let at = self.half + self.recv_offset(wc.wr_id) + self.grh as usize;
        assert!(at + size as usize <= 2 * self.half);
        // SAFETY: in the target half; the NIC finished writing it (its
        // completion arrived) and it is not reposted before this check.
        let buf =
            unsafe { std::slice::from_raw_parts(self.buffer.as_ptr().add(at), size as usize) };
        validate::matches(buf, seq)
    }

    /// The bytes a received message carried (UD's GRH left out).
    #[inline]
    pub fn payload_len(&self, wc: &Wc) -> u32 {
        wc.byte_len.saturating_sub(self.grh)
    }

    /// What the peer needs to reach this QP's target half.
    pub fn info(&self) -> QpInfo {
        QpInfo {
            qpn: self.qpn(),
            psn: self.psn,
            rkey: self.mr.rkey(),
            addr: self.target_addr(),
            len: self.half as u64,
        }
    }

    /// perftest's "local address" line.
    pub fn vaddr(&self) -> u64 {
        self.target_addr()
    }

    pub fn rkey(&self) -> u32 {
        self.mr.rkey()
    }

    /// Sets byte `offset` of the local half (what the next write or send carries).
    #[inline]
    pub fn set_local_byte(&mut self, offset: usize, value: u8) {
        assert!(offset < self.half);
        // SAFETY: in bounds of the buffer; volatile so the store is not elided.
        unsafe { self.buffer.as_ptr().add(offset).write_volatile(value) };
    }

    /// Byte `offset` of the target half, as the peer's last write left it.
    #[inline]
    pub fn target_byte(&self, offset: usize) -> u8 {
        assert!(offset < self.half);
        // SAFETY: in bounds; volatile because the NIC writes it behind our back.
        unsafe { self.buffer.as_ptr().add(self.half + offset).read_volatile() }
    }

    /// Clears byte `offset` of the target half before a ping-pong starts.
    pub fn clear_target_byte(&mut self, offset: usize) {
        assert!(offset < self.half);
        // SAFETY: in bounds; no write from the peer is in flight between sizes.
        unsafe {
            self.buffer
                .as_ptr()
                .add(self.half + offset)
                .write_volatile(0)
        };
    }

    /// The control word the peer writes to end a -D latency run.
    #[inline]
    pub fn control(&self) -> u8 {
        // SAFETY: the control area follows the target half inside the buffer.
        unsafe { self.buffer.as_ptr().add(2 * self.half).read_volatile() }
    }

    pub fn clear_control(&mut self) {
        // SAFETY: as in `control`.
        unsafe { self.buffer.as_ptr().add(2 * self.half).write_volatile(0) };
        // SAFETY: as in `control`; the second byte carries the stop value to send.
        unsafe {
            self.buffer
                .as_ptr()
                .add(2 * self.half + 1)
                .write_volatile(1)
        };
    }

    /// Posts one work request of `len` bytes to the peer's `remote` QP.
    #[inline]
    pub fn post(
        &mut self,
        op: Verb,
        wr_id: u64,
        len: u32,
        signaled: bool,
        inline: bool,
        remote: &QpInfo,
    ) -> anyhow::Result<()> {
        self.post_list(op, wr_id, len, Chain::one(&|_| signaled), inline, remote)
    }

    /// -l: `list.count` work requests (ids `wr_id`, `wr_id + 1`, ...) in one post call.
    #[inline(always)]
    pub fn post_list(
        &mut self,
        op: Verb,
        wr_id: u64,
        len: u32,
        list: Chain,
        inline: bool,
        remote: &QpInfo,
    ) -> anyhow::Result<()> {
        // The requests of a list share one buffer (-l refuses --data_validation).
        assert!(list.count == 1 || self.slots.is_none());
        // --data_validation: writes and reads use the peer's slot of their message.
        let slot = match (self.slots, op) {
            (Some(s), Verb::Write | Verb::Read) => {
                remote_offset(wr_id & SEQ_MASK, s.stride, remote)
            }
            _ => 0,
        };
        let rdma = wr_t {
            rdma: rdma_t {
                remote_addr: remote.addr + slot,
                rkey: remote.rkey,
            },
        };
        let (opcode, wr, len) = match op {
            Verb::Write if self.imm => (ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM, rdma, len),
            Verb::Write => (ibv_wr_opcode::IBV_WR_RDMA_WRITE, rdma, len),
            Verb::Read => (ibv_wr_opcode::IBV_WR_RDMA_READ, rdma, len),
            Verb::Send => {
                let wr = self.ud.as_ref().map_or(rdma, UdDest::wr);
                (ibv_wr_opcode::IBV_WR_SEND, wr, len)
            }
            // The word's old value lands in the local half; the target half's
            // first word (64-byte aligned) is the one operated on.
            Verb::Atomic => {
                let (opcode, compare_add, swap) = match self.atomic {
                    AtomicOp::FetchAndAdd => (
                        ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD,
                        ATOMIC_ADD_VALUE,
                        0,
                    ),
                    AtomicOp::CmpAndSwap => (
                        ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP,
                        0,
                        ATOMIC_SWAP_VALUE,
                    ),
                };
                let atomic = atomic_t {
                    remote_addr: remote.addr,
                    compare_add,
                    swap,
                    rkey: remote.rkey,
                };
                (opcode, wr_t { atomic }, ATOMIC_SIZE as u32)
            }
        };
        let mut flags = 0;
        if inline {
            flags |= ibv_send_flags::IBV_SEND_INLINE.0;
        }
        if matches!(op, Verb::Send | Verb::Write) && wr_id != u64::MAX {
            self.fill_slot(wr_id, len);
        }
        let sge = (self.local_addr() + self.send_offset(wr_id) as u64, len);
        self.post_send(wr_id, list, opcode, flags, sge, wr)
            .map_err(|e| {
                anyhow!(
                    "posting a {op:?} of {len} B on QP 0x{:x} failed: {e}",
                    self.qpn()
                )
            })
    }

    /// Writes the stop value into the peer's control word (ends a -D latency run).
    pub fn post_stop(&mut self, remote: &QpInfo) -> anyhow::Result<()> {
        let stop = self.buffer.addr() + 2 * self.half as u64 + 1;
        let target = wr_t {
            rdma: rdma_t {
                remote_addr: remote.addr + remote.len,
                rkey: remote.rkey,
            },
        };
        let one = Chain::one(&|_| true);
        self.post_send(
            u64::MAX,
            one,
            ibv_wr_opcode::IBV_WR_RDMA_WRITE,
            0,
            (stop, 1),
            target,
        )
        .map_err(|e| {
            anyhow!(
                "posting the end of the run on QP 0x{:x} failed: {e}",
                self.qpn()
            )
        })
    }

    /// One post call (`ibv_wr_*` or `ibv_post_send`, see `post`) of a work
    /// request built on the stack, `list.count` times: perftest's data path,
    /// with nothing allocated per message. `local` is (address, length) in
    /// this QP's buffer, `remote` the peer's side of the request.
    #[inline(always)]
    pub(in crate::verbs) fn post_send(
        &mut self,
        wr_id: u64,
        list: Chain,
        opcode: ibv_wr_opcode::Type,
        flags: u32,
        local: (u64, u32),
        remote: wr_t,
    ) -> Result<(), std::io::Error> {
        let mut sge = ibv_sge {
            addr: local.0,
            length: local.1,
            lkey: self.mr.lkey(),
        };
        // SAFETY: ibv_send_wr is plain data; all-zero is its empty value.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = opcode;
        wr.send_flags = flags;
        wr.wr = remote;
        if opcode == ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM {
            wr.imm_data_invalidated_rkey_union.imm_data = (wr_id as u32).to_be();
        }
        // The SGE lies in this QP's registered buffer (callers pass lengths
        // within it); inline data is copied before the post returns.
        self.qp.post_send(&wr, list.count, list.signaled)
    }

    /// Posts receives into the target half, one per id (with room for UD's GRH).
    pub fn post_recvs(&mut self, ids: impl Iterator<Item = u64>, len: u32) -> anyhow::Result<()> {
        for id in ids {
            self.post_recv(id, len)?;
        }
        Ok(())
    }

    /// One receive, posted straight from the stack: the latency loops' re-post
    /// after each message, without a chain to fill, link and empty.
    #[inline]
    pub fn post_recv(&mut self, id: u64, len: u32) -> anyhow::Result<()> {
        let sge = self.recv_sge(id, len);
        // SAFETY: the QP and the registered buffer the SGE lies in live in `self`.
        unsafe { crate::verbs::device::post::post_one_recv(self.qp.raw(), id, sge) }
            .map_err(|e| self.recv_failed(e))
    }

    /// The SGE of receive `id`: its slot of the target half (>= len).
    fn recv_sge(&self, id: u64, len: u32) -> ibv_sge {
        ibv_sge {
            addr: self.target_addr() + self.recv_offset(id) as u64,
            length: len + self.grh,
            lkey: self.mr.lkey(),
        }
    }

    #[cold]
    fn recv_failed(&self, e: std::io::Error) -> anyhow::Error {
        anyhow!("posting a receive on QP 0x{:x} failed: {e}", self.qpn())
    }

    /// --recv_post_list: the receives chained `list` to a post call (a list of 1
    /// posts each alone, as `post_recvs`).
    pub fn post_recv_lists(
        &mut self,
        ids: impl Iterator<Item = u64>,
        len: u32,
        list: usize,
    ) -> anyhow::Result<()> {
        if list <= 1 {
            return self.post_recvs(ids, len);
        }
        let mut chain = std::mem::take(&mut self.qp.recv);
        for id in ids {
            chain.push(id, self.recv_sge(id, len));
            if chain.len() == list {
                self.post_recv_chain(&mut chain)?;
            }
        }
        if !chain.is_empty() {
            self.post_recv_chain(&mut chain)?;
        }
        self.qp.recv = chain;
        Ok(())
    }

    fn post_recv_chain(
        &self,
        chain: &mut crate::verbs::device::post::RecvChain,
    ) -> anyhow::Result<()> {
        chain
            .post(self.qp.handle())
            .map_err(|e| self.recv_failed(e))
    }

    pub(in crate::verbs) fn modify(
        &mut self,
        attr: &QueuePairAttribute,
        state: &str,
        hint: &str,
    ) -> anyhow::Result<()> {
        let qpn = self.qpn();
        self.qp.modify(attr).map_err(|e| {
            anyhow!(
                "moving QP 0x{qpn:x} to {state} failed: {e} ({}){hint}",
                source_text(&e)
            )
        })
    }
}

/// One side's resources.
pub struct Endpoint {
    pub qps: Vec<QpEnd>,
    pub send_cq: GenericCompletionQueue,
    pub recv_cq: GenericCompletionQueue,
    /// -l, -e, --cqe_poll, the post API.
    pub post: PostState,
    _pd: Arc<ProtectionDomain>,
}

fn random_psn() -> u32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() & 0xff_ffff) as u32
}

/// A basic CQ (`ibv_create_cq`): `completion::poll` reads it with ibv_poll_cq.
fn create_cq(
    port: &Port,
    entries: u32,
    what: &str,
    events: Option<&Arc<Events>>,
) -> anyhow::Result<GenericCompletionQueue> {
    let mut builder = port.ctx.create_cq_builder();
    builder.setup_cqe(entries);
    if let Some(events) = events {
        events.attach(&mut builder);
    }
    builder.build().map(Into::into).map_err(|e| {
        anyhow!(
            "creating the {what} completion queue ({entries} entries) on {} failed: {}; lower -t/-r/-q",
            port.device,
            source_text(&e)
        )
    })
}

impl Endpoint {
    /// Creates the CQs and `plan.qps` QPs in INIT, each with a registered buffer
    /// for the largest size.
    pub fn create(port: &Port, plan: &Plan) -> anyhow::Result<Endpoint> {
        let pd = port.ctx.alloc_pd().map_err(|e| {
            anyhow!(
                "allocating a protection domain on {} failed: {}",
                port.device,
                source_text(&e)
            )
        })?;
        let recv = takes_receives(plan);
        let rx_depth = if recv { plan.rx_depth } else { 1 };
        let events = plan.post.events.then(|| Events::open(port)).transpose()?;
        let send_cq = create_cq(port, plan.tx_depth * plan.qps, "send", events.as_ref())?;
        let recv_cq = create_cq(port, rx_depth * plan.qps, "receive", events.as_ref())?;
        events
            .as_ref()
            .map_or(Ok(()), |e| e.arm(&[&send_cq, &recv_cq]))?;
        let mut api = PostApi::OldPostSend;
        let connection = plan.options.connection;
        let grh = if connection == Connection::Ud {
            GRH_BYTES
        } else {
            0
        };
        let stride = (plan.max_size() as usize + grh as usize).next_multiple_of(64);
        let slots = plan.options.validate.then_some(Slots {
            stride,
            send: plan.tx_depth as u64,
            recv: rx_depth as u64,
            corrupt: plan.options.corrupt,
        });
        let half = stride * slots.map_or(1, |s| s.send.max(s.recv) as usize);
        let total = plan.qps as u64 * (2 * half + CONTROL_BYTES) as u64;
        let qp_type = match connection {
            Connection::Uc => QueuePairType::UnreliableConnection,
            Connection::Ud => QueuePairType::UnreliableDatagram,
            _ => QueuePairType::ReliableConnection,
        };
        let mut access =
            AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead;
        if plan.bench.verb == Verb::Atomic {
            access |= AccessFlags::RemoteAtomic;
        }
        if connection == Connection::Uc {
            // A UC responder takes no reads (and refuses the flag on some devices).
            access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite;
        }
        let mut qps = Vec::with_capacity(plan.qps as usize);
        for _ in 0..plan.qps {
            let mut builder = pd.create_qp_builder();
            builder
                .setup_qp_type(qp_type)
                .setup_max_send_wr(plan.tx_depth)
                .setup_max_recv_wr(rx_depth)
                .setup_max_send_sge(1)
                .setup_max_recv_sge(1)
                .setup_max_inline_data(plan.inline_size)
                .setup_send_cq(send_cq.clone())
                .setup_recv_cq(recv_cq.clone());
            let verb = plan.bench.verb;
            let imm = plan.timing.write_imm;
            let created = Qp::create(&mut builder, plan.post.wr_api, verb, imm, connection);
            let (qp, how) = created.map_err(|e| {
                anyhow!(
                    "creating a{} {} queue pair on {} failed: {} (send depth {}, receive depth {rx_depth}, inline {} B): lower -t/-r or -I",
                    if connection == Connection::Rc { "n" } else { "" },
                    connection.name(),
                    port.device,
                    source_text(&e),
                    plan.tx_depth,
                    plan.inline_size
                )
            })?;
            api = how;
            let buffer = allocate(plan.memory, 2 * half + CONTROL_BYTES)?;
            let mr = register(&pd, &buffer, total, access)?;
            let mut end = QpEnd {
                qp,
                mr,
                buffer,
                psn: random_psn(),
                half,
                atomic: plan.options.atomic,
                ud: None,
                grh,
                slots,
                imm: plan.timing.write_imm,
            };
            if connection == Connection::Ud {
                ud::to_init(end.qp.raw(), port.port, plan.path.pkey_index)?;
                qps.push(end);
                continue;
            }
            let mut attr = QueuePairAttribute::new();
            attr.setup_state(QueuePairState::Init)
                .setup_pkey_index(plan.path.pkey_index)
                .setup_port(port.port)
                .setup_access_flags(access);
            end.modify(&attr, "INIT", "")?;
            qps.push(end);
        }
        Ok(Endpoint {
            qps,
            send_cq,
            recv_cq,
            post: PostState::new(api, events),
            _pd: pd,
        })
    }
}
