//! Work completions: polling a CQ into plain records, and naming a failed
//! completion with its likely cause (the seed's failure table).

use anyhow::{anyhow, bail};
use sideway::ibverbs::completion::{
    CompletionQueue, GenericCompletionQueue, WorkCompletionStatus as S,
};
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};
// -e: an idle loop sleeps on the completion channel.
use crate::verbs::device::events::Events;
use crate::verbs::flags::parity::Connection;
use std::sync::Arc;

/// Completions fetched by one `ibv_poll_cq` call (perftest's CTX_POLL_BATCH).
const POLL_BATCH: usize = crate::verbs::flags::post::POLL_BATCH as usize;

/// One polled work completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wc {
    pub wr_id: u64,
    pub status: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
}

/// Replaces `out` with the completions waiting on `cq` (at most `POLL_BATCH`).
///
/// Plain `ibv_poll_cq` into a stack array, as perftest polls: sideway's
/// extended poller calls `ibv_end_poll` after `ibv_next_poll` returned ENOENT,
/// which rxe (rdma-core 44) has already ended, so its consumer index moves
/// twice and stale entries come back as new completions; its basic poller
/// allocates on every call.
pub fn poll(cq: &GenericCompletionQueue, out: &mut Vec<Wc>) -> anyhow::Result<()> {
    let mut wcs = [MaybeUninit::<rdma_mummy_sys::ibv_wc>::uninit(); POLL_BATCH];
    poll_into(cq, &mut wcs, out).map(|_| ())
}

/// `poll` asking for as many completions as `wcs` holds (--cqe_poll and the
/// dynamic batch); returns how many came.
pub fn poll_into(
    cq: &GenericCompletionQueue,
    wcs: &mut [MaybeUninit<rdma_mummy_sys::ibv_wc>],
    out: &mut Vec<Wc>,
) -> anyhow::Result<usize> {
    out.clear();
    // SAFETY: the CQ lives as long as `cq`; ibv_poll_cq writes at most
    // wcs.len() entries and returns how many.
    let n = unsafe {
        rdma_mummy_sys::ibv_poll_cq(cq.cq().as_ptr(), wcs.len() as i32, wcs.as_mut_ptr().cast())
    };
    if n < 0 {
        bail!(
            "polling the completion queue failed: {}",
            std::io::Error::from_raw_os_error(-n)
        );
    }
    // SAFETY: ibv_poll_cq filled the first n entries.
    out.extend(
        wcs[..n as usize]
            .iter()
            .map(|wc| Wc::from(unsafe { wc.assume_init_ref() })),
    );
    Ok(n as usize)
}

/// Empty polls between two looks at the clock.
const POLLS_PER_CHECK: u32 = 4096;

/// Notices a peer that went quiet: counts empty polls and reads the clock only
/// every `POLLS_PER_CHECK` of them, so the timed loops pay nothing per message.
pub struct Stall {
    idle_polls: u32,
    /// The first check without progress since the last progress.
    since: Option<Instant>,
    timeout: Duration,
    /// -e: sleep on the completion channel instead of spinning.
    events: Option<Arc<Events>>,
    /// What a timeout most likely means, for the error.
    cause: &'static str,
}

/// What a receiver's timeout most likely means on `connection`.
fn quiet_peer_cause(connection: Connection) -> &'static str {
    match connection {
        Connection::Ud => UD_LOSS,
        _ => PEER_GONE,
    }
}

/// A peer that went quiet, as a timeout reads on a reliable connection.
const PEER_GONE: &str =
    "the peer stopped responding (process gone, link down, or GID/MTU mismatch)";
/// The same wait of a UD receiver, whose missing messages were most likely dropped.
const UD_LOSS: &str = "the missing UD messages were most likely dropped (UD does not retransmit: a datagram that finds no posted receive, or is lost on the way, is gone), or the peer stopped sending; rerun, or use -c RC to measure without loss";

impl Stall {
    pub fn new(timeout: Duration) -> Stall {
        Stall {
            idle_polls: 0,
            since: None,
            timeout,
            events: None,
            cause: PEER_GONE,
        }
    }

    /// A receiver's wait on `connection`: the error names the likely cause (on UD,
    /// lost datagrams; else, as by default, a peer gone quiet).
    pub fn receiving(mut self, connection: Connection) -> Stall {
        self.cause = quiet_peer_cause(connection);
        self
    }

    /// -e: idle waits sleep on `events` (None: busy polling).
    pub fn with_events(mut self, events: Option<&Arc<Events>>) -> Stall {
        self.events = events.cloned();
        self
    }

    /// Something arrived.
    #[inline]
    pub fn progress(&mut self) {
        self.idle_polls = 0;
        self.since = None;
    }

    /// Nothing arrived: an error once nothing did for the timeout. `waiting`
    /// says for what ("waited for ...").
    #[inline]
    pub fn idle(&mut self, waiting: impl FnOnce() -> String) -> anyhow::Result<()> {
        if self.events.is_none() {
            self.idle_polls += 1;
            if self.idle_polls < POLLS_PER_CHECK {
                return Ok(());
            }
        }
        self.idle_checked(waiting)
    }

    /// `idle` past its fast path: -e's sleep, or every `POLLS_PER_CHECK` empty polls.
    #[cold]
    fn idle_checked(&mut self, waiting: impl FnOnce() -> String) -> anyhow::Result<()> {
        if let Some(events) = &self.events {
            let now = Instant::now();
            let left = self
                .timeout
                .saturating_sub(now - *self.since.get_or_insert(now));
            if !left.is_zero() && events.wait(left)? {
                return Ok(());
            }
            return Err(self.stalled(waiting()));
        }
        self.idle_polls = 0;
        let now = Instant::now();
        if now - *self.since.get_or_insert(now) < self.timeout {
            return Ok(());
        }
        Err(self.stalled(waiting()))
    }

    fn stalled(&self, waiting: String) -> anyhow::Error {
        anyhow!(
            "{waiting} for {} s: {}; raise --timeout if the fabric is this slow",
            self.timeout.as_secs(),
            self.cause
        )
    }
}

/// The next completion waiting on `cq`, if any: `ibv_poll_cq` for one entry,
/// as perftest's latency loops poll.
#[inline]
pub fn poll_one(cq: &GenericCompletionQueue) -> anyhow::Result<Option<Wc>> {
    let mut wc = MaybeUninit::<rdma_mummy_sys::ibv_wc>::uninit();
    // SAFETY: as in `poll`, for one entry.
    match unsafe { rdma_mummy_sys::ibv_poll_cq(cq.cq().as_ptr(), 1, wc.as_mut_ptr()) } {
        0 => Ok(None),
        // SAFETY: ibv_poll_cq filled the entry.
        1 => Ok(Some(unsafe { wc.assume_init_ref() }.into())),
        n => Err(anyhow!(
            "polling the completion queue failed: {}",
            std::io::Error::from_raw_os_error(-n)
        )),
    }
}

impl From<&rdma_mummy_sys::ibv_wc> for Wc {
    fn from(wc: &rdma_mummy_sys::ibv_wc) -> Wc {
        Wc {
            wr_id: wc.wr_id,
            status: wc.status,
            vendor_err: wc.vendor_err,
            byte_len: wc.byte_len,
        }
    }
}

pub const SUCCESS: u32 = S::Success as u32;

/// libibverbs' name of a completion status and what usually causes it.
pub fn status_name_and_cause(status: u32) -> (&'static str, &'static str) {
    const TABLE: &[(S, &str, &str)] = &[
        (S::Success, "IBV_WC_SUCCESS", "no error"),
        (S::LocalLengthError, "IBV_WC_LOC_LEN_ERR",
         "a received message was longer than the posted receive buffer, or a send exceeded the port's max message size"),
        (S::LocalQueuePairOperationError, "IBV_WC_LOC_QP_OP_ERR",
         "the local QP rejected the work request (e.g. inline data beyond what the QP was created with)"),
        (S::LocalProtectionError, "IBV_WC_LOC_PROT_ERR",
         "a local buffer is outside its memory region or the region lacks the access needed"),
        (S::WorkRequestFlushedError, "IBV_WC_WR_FLUSH_ERR",
         "the QP had already failed and flushed this request: the first error names the cause"),
        (S::BadResponseError, "IBV_WC_BAD_RESP_ERR", "the peer answered with an unexpected transport opcode"),
        (S::LocalAccessError, "IBV_WC_LOC_ACCESS_ERR", "a protection error on a local buffer during an RDMA read"),
        (S::RemoteInvalidRequestError, "IBV_WC_REM_INV_REQ_ERR",
         "the peer rejected the request: message larger than its receive buffer or max message size, or an operation its QP does not allow"),
        (S::RemoteAccessError, "IBV_WC_REM_ACCESS_ERR",
         "the peer refused the remote key or address: its process exited (its memory is unregistered), an rkey/address mismatch, or a region without remote access"),
        (S::RemoteOperationError, "IBV_WC_REM_OP_ERR", "the peer could not complete the operation (its QP failed)"),
        (S::RetryCounterExceededError, "IBV_WC_RETRY_EXC_ERR",
         "the peer never acknowledged: peer process gone, link down, GID or MTU mismatch between the nodes \
          (RoCE: PFC/ECN/MTU settings differ), or -u too short for this fabric (Soft-RoCE VMs need -u 18)"),
        (S::ResponderNotReadyRetryCounterExceededError, "IBV_WC_RNR_RETRY_EXC_ERR",
         "the peer had no receive posted for too long"),
        (S::RemoteAbortedError, "IBV_WC_REM_ABORT_ERR", "the peer aborted the operation"),
        (S::FatalError, "IBV_WC_FATAL_ERR", "the device reported a fatal error (check dmesg)"),
        (S::ResponseTimeoutError, "IBV_WC_RESP_TIMEOUT_ERR", "the peer's response timed out"),
        (S::GeneralError, "IBV_WC_GENERAL_ERR", "the device reported a general error (check dmesg)"),
    ];
    TABLE
        .iter()
        .find(|(s, _, _)| *s as u32 == status)
        .map(|&(_, name, cause)| (name, cause))
        .unwrap_or((
            "IBV_WC_UNKNOWN",
            "a status this build does not know (see ibv_wc_status_str)",
        ))
}

/// One line for a failed completion: its name, where it happened, the likely cause.
pub fn describe_failure(wc: &Wc, what: &str) -> String {
    let (name, cause) = status_name_and_cause(wc.status);
    format!(
        "completion error {name} (status {}, vendor error 0x{:x}) {what}: likely cause: {cause}",
        wc.status, wc.vendor_err
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_noticed_at_a_check_and_progress_resets_it() {
        // Timeout 0: the first look at the clock without progress is a stall.
        let mut stall = Stall::new(Duration::ZERO);
        for _ in 1..POLLS_PER_CHECK {
            stall.idle(|| unreachable!()).unwrap();
        }
        stall.progress();
        for _ in 1..POLLS_PER_CHECK {
            stall.idle(|| unreachable!()).unwrap();
        }
        let e = stall
            .idle(|| "waited for message 3".into())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("waited for message 3 for 0 s: the peer stopped responding"),
            "{e}"
        );
    }

    #[test]
    fn a_ud_receiver_short_of_messages_is_told_they_were_lost() {
        let mut stall = Stall::new(Duration::ZERO).receiving(Connection::Ud);
        let e = (0..POLLS_PER_CHECK)
            .find_map(|_| stall.idle(|| "received 702 of 2000".into()).err())
            .unwrap()
            .to_string();
        assert!(e.contains("UD messages were most likely dropped"), "{e}");
        assert!(!e.contains("stopped responding (process gone"), "{e}");
        assert_eq!(quiet_peer_cause(Connection::Rc), PEER_GONE);
        assert_eq!(quiet_peer_cause(Connection::Uc), PEER_GONE);
    }

    #[test]
    fn names_match_libibverbs() {
        assert_eq!(status_name_and_cause(0).0, "IBV_WC_SUCCESS");
        assert_eq!(status_name_and_cause(5).0, "IBV_WC_WR_FLUSH_ERR");
        assert_eq!(status_name_and_cause(10).0, "IBV_WC_REM_ACCESS_ERR");
        assert_eq!(status_name_and_cause(12).0, "IBV_WC_RETRY_EXC_ERR");
        assert_eq!(status_name_and_cause(13).0, "IBV_WC_RNR_RETRY_EXC_ERR");
        assert_eq!(status_name_and_cause(999).0, "IBV_WC_UNKNOWN");
    }

    #[test]
    fn failure_line_names_the_cause() {
        let wc = Wc {
            wr_id: 7,
            status: 12,
            vendor_err: 0x81,
            byte_len: 0,
        };
        let line = describe_failure(&wc, "on QP 0x11 at 65536 B after 3 of 5000 completions");
        assert!(
            line.starts_with(
                "completion error IBV_WC_RETRY_EXC_ERR (status 12, vendor error 0x81) on QP 0x11"
            ),
            "{line}"
        );
        assert!(
            line.contains("GID or MTU mismatch") && line.contains("peer process gone"),
            "{line}"
        );
    }
}
