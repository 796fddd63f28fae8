//! -R and -z's link: the exchange carried over an rdma_cm connection, as
//! perftest's -z does: a small RC QP of its own, on the device rdma_cm
//! resolved, sending each message as SENDs of at most `CHUNK` bytes into
//! receives kept posted. What arrives is taken in while this side sends, so
//! two sides sending long messages at once cannot block each other.

use crate::verbs::cm::Cm;
use crate::verbs::device::completion::{describe_failure, poll, Wc, SUCCESS};
use crate::verbs::device::memory::{allocate, register, Buffer};
use crate::verbs::device::post::post_one_recv;
use crate::verbs::device::source_text;
use crate::verbs::exchange::wire::{decode_body, encode, Message, MAX_FRAME};
use crate::verbs::exchange::{
    accept, pair_order, Link, Patience, ARRIVAL_POLL_MAX, ARRIVAL_POLL_MIN,
};
use crate::verbs::flags::Memory;
use anyhow::{anyhow, bail};
use rdma_mummy_sys::{ibv_post_send, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wr_opcode};
use sideway::ibverbs::completion::{GenericCompletionQueue, WorkCompletionStatus as S};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{BasicQueuePair, QueuePair, QueuePairState, QueuePairType};
use sideway::ibverbs::AccessFlags;
use sideway::rdmacm::communication_manager::{EventType, Identifier};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of one SEND of the exchange.
const CHUNK: usize = 64 << 10;
/// Receives kept posted.
const RECV_SLOTS: usize = 4;
const SEND_ID: u64 = u64::MAX;
/// perftest's comm QP: RNR retries for ever (the peer reposts when it next looks).
const RNR_RETRY_FOREVER: u8 = 7;
/// How long a stopping side tries to deliver its stop.
const ABANDON_WAIT: Duration = Duration::from_secs(1);

/// The exchange's QP and its buffer: `RECV_SLOTS` receive slots, then one send slot.
struct ExchangeQp {
    qp: BasicQueuePair,
    cq: GenericCompletionQueue,
    mr: Arc<MemoryRegion>,
    buffer: Buffer,
    _pd: Arc<ProtectionDomain>,
}

impl ExchangeQp {
    /// Creates the QP on the device `id` is bound to and moves it to INIT.
    fn create(id: &Identifier) -> anyhow::Result<ExchangeQp> {
        let ctx = id
            .get_device_context()
            .ok_or_else(|| anyhow!("rdma_cm bound the exchange to no RDMA device"))?;
        let what = |step: &str, e: &(dyn std::error::Error + 'static)| {
            anyhow!("{step} for the rdma_cm exchange failed: {}", source_text(e))
        };
        let pd = ctx
            .alloc_pd()
            .map_err(|e| what("allocating a protection domain", &e))?;
        let mut cq = ctx.create_cq_builder();
        cq.setup_cqe(2 * RECV_SLOTS as u32 + 2);
        let cq: GenericCompletionQueue = cq
            .build()
            .map_err(|e| what("creating a completion queue", &e))?
            .into();
        let mut builder = pd.create_qp_builder();
        builder
            .setup_qp_type(QueuePairType::ReliableConnection)
            .setup_max_send_wr(1)
            .setup_max_recv_wr(RECV_SLOTS as u32)
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_send_cq(cq.clone())
            .setup_recv_cq(cq.clone());
        let qp = builder
            .build()
            .map_err(|e| what("creating a queue pair", &e))?;
        let len = (RECV_SLOTS + 1) * CHUNK;
        let buffer = allocate(Memory::Host, len)?;
        let mr = register(&pd, &buffer, len as u64, AccessFlags::LocalWrite)?;
        let mut comm = ExchangeQp {
            qp,
            cq,
            mr,
            buffer,
            _pd: pd,
        };
        comm.modify(id, QueuePairState::Init, None)?;
        for slot in 0..RECV_SLOTS {
            comm.post_recv(slot as u64)?;
        }
        Ok(comm)
    }

    /// Moves the QP to `state` with `id`'s attributes (RTS: with `retry_count`).
    fn modify(
        &mut self,
        id: &Identifier,
        state: QueuePairState,
        retry_count: Option<u8>,
    ) -> anyhow::Result<()> {
        let mut attr = id.get_qp_attr(state).map_err(|e| {
            anyhow!(
                "rdma_init_qp_attr({state:?}) for the rdma_cm exchange failed: {}",
                source_text(&e)
            )
        })?;
        if let Some(retry) = retry_count {
            attr.setup_retry_cnt(retry)
                .setup_rnr_retry(RNR_RETRY_FOREVER);
        }
        self.qp.modify(&attr).map_err(|e| {
            anyhow!(
                "moving the rdma_cm exchange's QP to {state:?} failed: {}",
                source_text(&e)
            )
        })
    }

    fn ready(&mut self, id: &Identifier, retry_count: u8) -> anyhow::Result<()> {
        self.modify(id, QueuePairState::ReadyToReceive, None)?;
        self.modify(id, QueuePairState::ReadyToSend, Some(retry_count))
    }

    fn slot(&self, slot: u64) -> *mut u8 {
        // SAFETY: slots lie inside the buffer (RECV_SLOTS + 1 of CHUNK bytes).
        unsafe { self.buffer.as_ptr().add(slot as usize * CHUNK) }
    }

    fn post_recv(&mut self, slot: u64) -> anyhow::Result<()> {
        let sge = ibv_sge {
            addr: self.slot(slot) as u64,
            length: CHUNK as u32,
            lkey: self.mr.lkey(),
        };
        // SAFETY: the QP, the buffer and its registration live in `self`.
        unsafe { post_one_recv(self.qp.qp().as_ptr(), slot, sge) }
            .map_err(|e| anyhow!("posting a receive of the rdma_cm exchange failed: {e}"))
    }

    fn post_send(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let at = self.slot(RECV_SLOTS as u64);
        // SAFETY: a chunk fits the send slot, which no receive uses.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len()) };
        let mut sge = ibv_sge {
            addr: at as u64,
            length: bytes.len() as u32,
            lkey: self.mr.lkey(),
        };
        // SAFETY: an all-zero work request is a valid empty one.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = SEND_ID;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
        let mut bad = std::ptr::null_mut();
        // SAFETY: as in post_recv.
        match unsafe { ibv_post_send(self.qp.qp().as_ptr(), &mut wr, &mut bad) } {
            0 => Ok(()),
            errno => bail!(
                "posting a send of the rdma_cm exchange failed: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
        }
    }
}

/// A start with -R or -z: the server and client's messages over rdma_cm.
pub struct CmLink {
    comm: ExchangeQp,
    /// The exchange's connection, then (-R) each QP's.
    ids: Vec<Arc<Identifier>>,
    cm: Cm,
    client: bool,
    /// Bytes received and not yet taken as a message.
    inbox: Vec<u8>,
    /// A send is in flight.
    sending: bool,
    wcs: Vec<Wc>,
}

impl CmLink {
    /// The server: waits at most the --timeout for a client on `cm`'s port.
    pub fn serve(cm: Cm) -> anyhow::Result<CmLink> {
        let retry_count = cm.retry_count;
        let mut comm = None;
        let id = cm.accept("the rdma_cm exchange", &mut |id| {
            let mut c = ExchangeQp::create(id)?;
            c.ready(id, retry_count)?;
            let qpn = c.qp.qp_number();
            comm = Some(c);
            Ok(qpn)
        })?;
        Ok(CmLink::new(
            comm.expect("accepted with its QP"),
            id,
            cm,
            false,
        ))
    }

    /// The client of `cm`'s server, retrying for at most the --timeout.
    pub fn connect(cm: Cm) -> anyhow::Result<CmLink> {
        let retry_count = cm.retry_count;
        let mut comm: Option<ExchangeQp> = None;
        let id = {
            let slot = std::cell::RefCell::new(&mut comm);
            cm.connect(
                "the rdma_cm exchange",
                &mut |id| {
                    let mut slot = slot.borrow_mut();
                    if slot.is_none() {
                        **slot = Some(ExchangeQp::create(id)?);
                    }
                    Ok(slot.as_ref().map(|c| c.qp.qp_number()).unwrap_or_default())
                },
                &mut |id| match slot.borrow_mut().as_mut() {
                    Some(c) => c.ready(id, retry_count),
                    None => bail!("the rdma_cm exchange has no QP"),
                },
            )?
        };
        Ok(CmLink::new(
            comm.expect("connected with its QP"),
            id,
            cm,
            true,
        ))
    }

    fn new(comm: ExchangeQp, id: Arc<Identifier>, cm: Cm, client: bool) -> CmLink {
        CmLink {
            comm,
            ids: vec![id],
            cm,
            client,
            inbox: Vec::new(),
            sending: false,
            wcs: Vec::new(),
        }
    }

    pub fn is_client(&self) -> bool {
        self.client
    }

    pub fn cm(&self) -> &Cm {
        &self.cm
    }

    /// Keeps a QP's connection open for the run.
    pub fn keep(&mut self, id: Arc<Identifier>) {
        self.ids.push(id);
    }

    /// Takes in completions and rdma_cm events; true when something arrived.
    fn pump(&mut self, waiting: &str) -> anyhow::Result<bool> {
        if let Some(event) = self.cm.poll_event()? {
            let kind = event.event_type();
            if matches!(kind, EventType::Disconnected | EventType::DeviceRemoval) {
                bail!(
                    "{} disconnected (rdma_cm {kind:?}) while this side waited for {waiting} (see the peer's output)",
                    self.cm.peer
                );
            }
        }
        poll(&self.comm.cq, &mut self.wcs)?;
        let wcs = std::mem::take(&mut self.wcs);
        for wc in &wcs {
            if wc.status != SUCCESS {
                let mut line = describe_failure(
                    wc,
                    &format!("on the rdma_cm exchange with {} ({waiting})", self.cm.peer),
                );
                // A peer with smaller receives than CHUNK: another program on the port.
                if [
                    S::RemoteOperationError as u32,
                    S::RemoteInvalidRequestError as u32,
                ]
                .contains(&wc.status)
                {
                    line.push_str(
                        "; is the peer a fabricbench verbs benchmark of this version? (perftest's own binaries do not speak this exchange)",
                    );
                }
                bail!(line);
            }
            if wc.wr_id == SEND_ID {
                self.sending = false;
                continue;
            }
            let len = (wc.byte_len as usize).min(CHUNK);
            // SAFETY: the receive completed: its slot holds `len` bytes.
            let got = unsafe { std::slice::from_raw_parts(self.comm.slot(wc.wr_id), len) };
            self.inbox.extend_from_slice(got);
            self.comm.post_recv(wc.wr_id)?;
        }
        let progress = !wcs.is_empty();
        self.wcs = wcs;
        Ok(progress)
    }

    /// Pumps until `done`, asleep between empty looks; Prompt waits at most `limit`.
    fn wait(
        &mut self,
        waiting: &str,
        limit: Option<Duration>,
        done: impl Fn(&CmLink) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = limit.map(|l| Instant::now() + l);
        let mut pause = ARRIVAL_POLL_MIN;
        while !done(self) {
            if self.pump(waiting)? {
                pause = ARRIVAL_POLL_MIN;
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                bail!(
                    "{} sent nothing for {} s while this side waited for {waiting} (raise --timeout if it is slow)",
                    self.cm.peer,
                    limit.unwrap_or_default().as_secs()
                );
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(ARRIVAL_POLL_MAX);
        }
        Ok(())
    }

    fn send(&mut self, mine: &Message, limit: Option<Duration>) -> anyhow::Result<()> {
        let frame = encode(mine);
        let what = format!("the delivery of {}", mine.kind());
        for chunk in frame.chunks(CHUNK) {
            self.wait(&what, limit, |l| !l.sending)?;
            self.comm.post_send(chunk)?;
            self.sending = true;
        }
        self.wait(&what, limit, |l| !l.sending)
    }

    /// The length of the first message in the inbox, once its length arrived.
    fn announced(&self) -> Option<usize> {
        let len = self.inbox.first_chunk::<4>()?;
        Some(u32::from_be_bytes(*len) as usize)
    }

    fn receive(&mut self, expected: &str, patience: Patience) -> anyhow::Result<Message> {
        let limit = match patience {
            Patience::Prompt => Some(self.cm.timeout),
            Patience::WhileMeasuring => None,
        };
        self.wait(expected, limit, |l| l.announced().is_some())?;
        let len = self.announced().unwrap_or_default();
        if len > MAX_FRAME {
            bail!(
                "{} announced a {len}-byte message (at most {MAX_FRAME}): it is not a fabricbench verbs benchmark of this version",
                self.cm.peer
            );
        }
        self.wait(expected, limit, |l| l.inbox.len() >= 4 + len)?;
        let body: Vec<u8> = self.inbox.drain(..4 + len).skip(4).collect();
        decode_body(&body).map_err(|e| {
            anyhow!(
                "{} sent {e:#}: it is not a fabricbench verbs benchmark of this version",
                self.cm.peer
            )
        })
    }
}

impl Link for CmLink {
    fn swap(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Message> {
        let limit = match patience {
            Patience::Prompt => Some(self.cm.timeout),
            Patience::WhileMeasuring => None,
        };
        self.send(mine, limit)?;
        let theirs = self.receive(mine.kind(), patience)?;
        let peer = self.cm.peer.clone();
        accept(theirs, &peer)
    }

    fn gather(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Vec<Message>> {
        let theirs = self.swap(mine, patience)?;
        Ok(pair_order(self.client, mine, theirs))
    }

    fn abandon(&mut self, reason: &str) {
        // Best effort, briefly: the peer may be gone already.
        let stop = Message::Abort {
            reason: reason.into(),
        };
        let _ = self.send(&stop, Some(ABANDON_WAIT));
    }
}
