//! The post path, as perftest 26.04 has it: extended QPs (`ibv_create_qp_ex`
//! with the test's send_ops_flags) posted through the `ibv_wr_*` API by
//! default, `ibv_post_send` with --use_old_post_send or where the device cannot
//! create extended QPs; and -l/--recv_post_list chains, `count` work requests
//! in one post call.
//!
//! Work requests are described as perftest describes them, as `ibv_send_wr`
//! templates; the `ibv_wr_*` path translates them call by call, as perftest's
//! `_new_post_send` does.

use crate::report::perftest::PostLines;
use crate::verbs::flags::benchmark::Verb;
use crate::verbs::flags::parity::Connection;
use crate::verbs::flags::post::CqeBatch;
use rdma_mummy_sys::{
    ibv_post_recv, ibv_post_send, ibv_qp, ibv_qp_ex, ibv_qp_to_qp_ex, ibv_recv_wr, ibv_send_flags,
    ibv_send_wr, ibv_sge, ibv_wr_atomic_cmp_swp, ibv_wr_atomic_fetch_add, ibv_wr_complete,
    ibv_wr_opcode, ibv_wr_rdma_read, ibv_wr_rdma_write, ibv_wr_rdma_write_imm, ibv_wr_send,
    ibv_wr_set_inline_data, ibv_wr_set_sge, ibv_wr_set_ud_addr, ibv_wr_start,
};
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, CreateQueuePairError, ExtendedQueuePair, ModifyQueuePairError, QueuePair,
    QueuePairAttribute, QueuePairBuilder, SendOperationFlags,
};
use std::ptr::NonNull;

/// How this side posts: perftest's "ibv_wr* API" header line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PostApi {
    /// Extended QPs, `ibv_wr_start` ... `ibv_wr_complete`.
    WrApi,
    /// `ibv_post_send`, as --use_old_post_send asked.
    OldPostSend,
    /// `ibv_post_send` because the device refused extended QPs (why).
    Fallback(String),
}

impl PostApi {
    pub fn wr_api(&self) -> bool {
        *self == PostApi::WrApi
    }

    /// The header's warning where the device made this side fall back.
    pub fn warning(&self, device: &str) -> Option<String> {
        match self {
            PostApi::Fallback(why) => Some(format!(
                "{device} cannot create extended QPs ({why}): posting with ibv_post_send, as --use_old_post_send"
            )),
            _ => None,
        }
    }
}

/// A post list: how many requests one post call carries and which of them
/// ask for a completion (by id).
#[derive(Clone, Copy)]
pub struct Chain<'a> {
    pub count: u32,
    pub signaled: &'a dyn Fn(u64) -> bool,
}

impl<'a> Chain<'a> {
    /// One request, signalled as `signaled` says.
    pub fn one(signaled: &'a dyn Fn(u64) -> bool) -> Chain<'a> {
        Chain { count: 1, signaled }
    }
}

enum Kind {
    Basic(BasicQueuePair),
    /// `qpx`: the handle the `ibv_wr_*` calls take, looked up once.
    /// `ud`: sends name their destination (ibv_wr_set_ud_addr).
    Extended {
        qp: ExtendedQueuePair,
        qpx: *mut ibv_qp_ex,
        ud: bool,
    },
}

/// One queue pair and the scratch its chained posts are built in (nothing
/// is allocated per message once a list has been posted).
pub struct Qp {
    kind: Kind,
    wrs: Vec<ibv_send_wr>,
    sges: Vec<ibv_sge>,
    /// Receives gathered for one ibv_post_recv.
    pub recv: RecvChain,
}

// SAFETY: the scratch's pointers are rebuilt before every post and point only
// into the scratch itself; the QPs are Send.
unsafe impl Send for Qp {}

/// The operations an extended QP of this test posts.
/// The operations a test posts (`imm`: --write_with_imm).
fn send_ops(verb: Verb, imm: bool, connection: Connection) -> SendOperationFlags {
    let data = match verb {
        Verb::Write if imm => SendOperationFlags::WriteWithImmediate,
        Verb::Write => SendOperationFlags::Write,
        Verb::Read => SendOperationFlags::Read,
        Verb::Send => SendOperationFlags::Send,
        Verb::Atomic => {
            SendOperationFlags::AtomicCompareAndSwap | SendOperationFlags::AtomicFetchAndAdd
        }
    };
    // The end of a -D latency run is an RDMA write (not on UD).
    match connection {
        Connection::Ud => data,
        _ => data | SendOperationFlags::Write,
    }
}

impl Qp {
    /// Creates the QP `builder` describes: extended when `wr_api` asks for it
    /// and the device can, else basic; the reason where it could not.
    pub fn create(
        builder: &mut QueuePairBuilder,
        wr_api: bool,
        verb: Verb,
        imm: bool,
        connection: Connection,
    ) -> Result<(Qp, PostApi), CreateQueuePairError> {
        let (kind, api) = if wr_api {
            builder.setup_send_ops_flags(send_ops(verb, imm, connection));
            match builder.build_ex() {
                Ok(qp) => {
                    let ud = connection == Connection::Ud;
                    // SAFETY: the QP is extended and outlives the pointer (both in `Kind`).
                    let qpx = unsafe { ibv_qp_to_qp_ex(qp.qp().as_ptr()) };
                    (Kind::Extended { qp, qpx, ud }, PostApi::WrApi)
                }
                Err(e) => {
                    let why = format!(
                        "ibv_create_qp_ex: {}",
                        crate::verbs::device::source_text(&e)
                    );
                    (Kind::Basic(builder.build()?), PostApi::Fallback(why))
                }
            }
        } else {
            (Kind::Basic(builder.build()?), PostApi::OldPostSend)
        };
        let qp = Qp {
            kind,
            wrs: Vec::new(),
            sges: Vec::new(),
            recv: RecvChain::default(),
        };
        Ok((qp, api))
    }

    /// The basic handle, for the verbs that take one.
    pub fn raw(&self) -> *mut ibv_qp {
        self.handle().as_ptr()
    }

    /// The basic handle, never null.
    pub fn handle(&self) -> NonNull<ibv_qp> {
        // SAFETY: the handle lives as long as `self`; callers use it no longer.
        unsafe {
            match &self.kind {
                Kind::Basic(qp) => qp.qp(),
                Kind::Extended { qp, .. } => qp.qp(),
            }
        }
    }

    pub fn qp_number(&self) -> u32 {
        match &self.kind {
            Kind::Basic(qp) => qp.qp_number(),
            Kind::Extended { qp, .. } => qp.qp_number(),
        }
    }

    pub fn modify(&mut self, attr: &QueuePairAttribute) -> Result<(), ModifyQueuePairError> {
        match &mut self.kind {
            Kind::Basic(qp) => qp.modify(attr),
            Kind::Extended { qp, .. } => qp.modify(attr),
        }
    }

    /// Posts `count` copies of `template` in one call, the k-th with id
    /// `template.wr_id + k`, signalled where `signaled(id)` says. Inlined into the
    /// timed loops: every call and return costs there (Soft-RoCE's emulated CPU).
    #[inline(always)]
    pub fn post_send(
        &mut self,
        template: &ibv_send_wr,
        count: u32,
        signaled: &dyn Fn(u64) -> bool,
    ) -> std::io::Result<()> {
        let flags = |k: u32| {
            let id = template.wr_id.wrapping_add(k as u64);
            let mut f = template.send_flags & !ibv_send_flags::IBV_SEND_SIGNALED.0;
            if signaled(id) {
                f |= ibv_send_flags::IBV_SEND_SIGNALED.0;
            }
            (id, f)
        };
        let errno = match &self.kind {
            Kind::Basic(qp) => {
                // SAFETY: the template's SGE points into this QP's registered
                // buffer (the caller's contract).
                let sge = unsafe { *template.sg_list };
                self.wrs.clear();
                self.sges.clear();
                for k in 0..count {
                    let (id, f) = flags(k);
                    // SAFETY: plain C data without Drop: a bitwise copy.
                    let mut wr = unsafe { std::ptr::read(template) };
                    wr.wr_id = id;
                    wr.send_flags = f;
                    self.wrs.push(wr);
                    self.sges.push(sge);
                }
                let base = link(&mut self.wrs, &mut self.sges);
                let mut bad = std::ptr::null_mut();
                // SAFETY: a chain of `n` valid requests on a live QP; inline
                // data is copied before ibv_post_send returns.
                unsafe { ibv_post_send(qp.qp().as_ptr(), base, &mut bad) }
            }
            &Kind::Extended { qpx, ud, .. } => {
                // SAFETY: the QP was created with ibv_create_qp_ex and the
                // operations this test posts; the template's SGE (and UD
                // destination) are valid for the call.
                unsafe {
                    ibv_wr_start(qpx);
                    for k in 0..count {
                        let (id, f) = flags(k);
                        (*qpx).wr_id = id;
                        (*qpx).wr_flags = f;
                        wr_op(qpx, template);
                        if ud {
                            let d = template.wr.ud;
                            ibv_wr_set_ud_addr(qpx, d.ah, d.remote_qpn, d.remote_qkey);
                        }
                        let sge = *template.sg_list;
                        if f & ibv_send_flags::IBV_SEND_INLINE.0 != 0 {
                            ibv_wr_set_inline_data(qpx, sge.addr as *mut _, sge.length as usize);
                        } else {
                            ibv_wr_set_sge(qpx, sge.lkey, sge.addr, sge.length);
                        }
                    }
                    ibv_wr_complete(qpx)
                }
            }
        };
        match errno {
            0 => Ok(()),
            e => Err(std::io::Error::from_raw_os_error(e)),
        }
    }
}

/// The `ibv_wr_*` call of the template's opcode.
///
/// # Safety
/// `qpx` is between ibv_wr_start and ibv_wr_complete and supports the opcode.
unsafe fn wr_op(qpx: *mut ibv_qp_ex, wr: &ibv_send_wr) {
    match wr.opcode {
        ibv_wr_opcode::IBV_WR_RDMA_WRITE => {
            ibv_wr_rdma_write(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr)
        }
        ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM => ibv_wr_rdma_write_imm(
            qpx,
            wr.wr.rdma.rkey,
            wr.wr.rdma.remote_addr,
            wr.imm_data_invalidated_rkey_union.imm_data,
        ),
        ibv_wr_opcode::IBV_WR_RDMA_READ => {
            ibv_wr_rdma_read(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr)
        }
        ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD => {
            let a = wr.wr.atomic;
            ibv_wr_atomic_fetch_add(qpx, a.rkey, a.remote_addr, a.compare_add)
        }
        ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP => {
            let a = wr.wr.atomic;
            ibv_wr_atomic_cmp_swp(qpx, a.rkey, a.remote_addr, a.compare_add, a.swap)
        }
        _ => ibv_wr_send(qpx),
    }
}

/// A work request of a chain: its SGE and the next request.
trait Linked {
    fn link(&mut self, sge: *mut ibv_sge, next: *mut Self);
}

impl Linked for ibv_send_wr {
    fn link(&mut self, sge: *mut ibv_sge, next: *mut Self) {
        (self.sg_list, self.next) = (sge, next);
    }
}

impl Linked for ibv_recv_wr {
    fn link(&mut self, sge: *mut ibv_sge, next: *mut Self) {
        (self.sg_list, self.next) = (sge, next);
    }
}

/// Links request k to SGE k and to request k + 1, for one post call; the
/// chain's head. The links hold while neither vector changes.
fn link<W: Linked>(wrs: &mut [W], sges: &mut [ibv_sge]) -> *mut W {
    let n = wrs.len();
    let (base, sge) = (wrs.as_mut_ptr(), sges.as_mut_ptr());
    for k in 0..n {
        // SAFETY: k < n = the length of both slices.
        unsafe {
            let next = if k + 1 < n {
                base.add(k + 1)
            } else {
                std::ptr::null_mut()
            };
            (*base.add(k)).link(sge.add(k), next);
        }
    }
    base
}

/// Receives gathered for one `ibv_post_recv` (--recv_post_list).
#[derive(Default)]
pub struct RecvChain {
    wrs: Vec<ibv_recv_wr>,
    sges: Vec<ibv_sge>,
}

// SAFETY: as for `Qp`: the links are rebuilt before each post.
unsafe impl Send for RecvChain {}

impl RecvChain {
    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }

    pub fn push(&mut self, wr_id: u64, sge: ibv_sge) {
        self.wrs.push(ibv_recv_wr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 1,
        });
        self.sges.push(sge);
    }

    /// Posts the gathered receives on `qp` in one call and empties the chain.
    pub fn post(&mut self, qp: NonNull<ibv_qp>) -> std::io::Result<()> {
        let base = link(&mut self.wrs, &mut self.sges);
        // SAFETY: a chain of `n` receives into the QP's registered buffer.
        let posted = unsafe { post_recv_list(qp.as_ptr(), base) };
        self.wrs.clear();
        self.sges.clear();
        posted
    }
}

/// Posts one receive of `sge` on `qp`, built on the stack: no chain to fill, link
/// and empty.
///
/// # Safety
/// `qp` is live and `sge` lies in a buffer registered for it.
#[inline]
pub unsafe fn post_one_recv(qp: *mut ibv_qp, wr_id: u64, mut sge: ibv_sge) -> std::io::Result<()> {
    let mut wr = ibv_recv_wr {
        wr_id,
        next: std::ptr::null_mut(),
        sg_list: &mut sge,
        num_sge: 1,
    };
    post_recv_list(qp, &mut wr)
}

/// `ibv_post_recv` of the chain at `head`.
///
/// # Safety
/// `qp` is live and the chain's requests and SGEs are valid for the call.
#[inline]
unsafe fn post_recv_list(qp: *mut ibv_qp, head: *mut ibv_recv_wr) -> std::io::Result<()> {
    let mut bad = std::ptr::null_mut();
    match ibv_post_recv(qp, head, &mut bad) {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

/// One side's post and completion settings as the device took them.
pub struct PostState {
    pub api: PostApi,
    /// -e: the completion channel both CQs report to.
    pub events: Option<std::sync::Arc<crate::verbs::device::events::Events>>,
    /// perftest's dynamic CQE batch is still adapting (off for the rest of
    /// the run once it was stable).
    pub dynamic_cqe: bool,
}

impl PostState {
    pub fn new(
        api: PostApi,
        events: Option<std::sync::Arc<crate::verbs::device::events::Events>>,
    ) -> Self {
        PostState {
            api,
            events,
            dynamic_cqe: true,
        }
    }
}

/// perftest's header lines of the post path on this side.
pub fn header_lines(plan: &crate::verbs::flags::Plan, state: &PostState) -> PostLines {
    PostLines {
        wr_api: state.api.wr_api(),
        events: state.events.as_ref().map(|e| e.name.clone()),
        post_list: plan.post.post_list,
        recv_post_list: plan.post.recv_post_list,
        cqe_batch: (plan.bench.test == crate::verbs::flags::benchmark::Test::Bw).then(
            || match plan.post.cqe_batch {
                CqeBatch::Dynamic => "Dynamic".to_string(),
                CqeBatch::Fixed(n) => n.to_string(),
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::flags::benchmark::{Benchmark, Test};
    use crate::verbs::flags::parse;

    #[test]
    fn header_lines_and_the_fallback_warning() {
        let bench = Benchmark::new(Verb::Read, Test::Bw);
        let plan = parse(bench, ["ib_read_bw", "-l", "8", "-n", "80"]).unwrap();
        let why = "ibv_create_qp_ex: Operation not supported".to_string();
        let state = PostState::new(PostApi::Fallback(why), None);
        let want = PostLines {
            wr_api: false,
            events: None,
            post_list: 8,
            recv_post_list: 1,
            // 80 iterations: below 3000, no dynamic batch.
            cqe_batch: Some("16".into()),
        };
        assert_eq!(header_lines(&plan, &state), want);
        assert_eq!(
            state.api.warning("rxe0").unwrap(),
            "rxe0 cannot create extended QPs (ibv_create_qp_ex: Operation not supported): \
             posting with ibv_post_send, as --use_old_post_send"
        );
        assert_eq!(PostApi::WrApi.warning("rxe0"), None);
        assert!(PostApi::WrApi.wr_api() && !PostApi::OldPostSend.wr_api());
    }
}
