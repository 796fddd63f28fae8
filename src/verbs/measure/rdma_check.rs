//! --data_validation for the write and read bandwidth tests, where the CPU of
//! one side takes no part in the transfer.
//!
//! Each QP's target half is a ring of slots (one message each, `stride`
//! apart), as the send tests' receive slots are; message `seq` lands in slot
//! `seq % slots`.
//! - Writes: the writer fills message `seq` with `seq`'s pattern
//!   (`validate::fill`, the fault hook included). The responder's CPU waits
//!   for the slot's last byte to become `seq`'s (RDMA writes of one QP are
//!   placed in order, the last byte last, as perftest's write latency test
//!   relies on), checks the whole message, then marks the slot as not yet
//!   holding its next message, and grants the writer credit by an RDMA write
//!   of its count of checked messages into the writer's control word: the
//!   writer never overwrites a slot before it was checked, so every message
//!   is checked and a verdict never comes from a message caught half-written.
//! - Reads: the responder fills slot `k` with the pattern of `k` once per
//!   size (the fault hook corrupts slot `N % slots`, so every read of it is
//!   wrong); the reader checks each read where it landed as it completes,
//!   before its local slot is reused.

use crate::verbs::device::completion::{describe_failure, poll, Stall, SUCCESS};
use crate::verbs::device::post::Chain;
use crate::verbs::device::qp::{Endpoint, QpEnd};
use crate::verbs::exchange::wire::QpInfo;
use crate::verbs::flags::benchmark::Verb;
use crate::verbs::flags::{Length, Plan};
use crate::verbs::measure::ring::{corrupt_at, tag, CREDIT_IN, CREDIT_OUT};
use crate::verbs::measure::validate::{fill, matches, Checked};
use anyhow::bail;
use rdma_mummy_sys::{ibv_send_flags, ibv_wr_opcode, rdma_t, wr_t};
use std::sync::atomic::{fence, Ordering};

/// Work request id of a credit write (minus the QP's index).
const CREDIT_WR: u64 = u64::MAX - 1;

fn validates(plan: &Plan, verb: Verb) -> bool {
    plan.options.validate && plan.bench.verb == verb
}

/// This side is the responder of a validated write run: it checks instead of running.
pub fn watches(plan: &Plan, sending: bool) -> bool {
    validates(plan, Verb::Write) && !sending
}

/// Before the start signal of a size: the responder of writes marks every
/// slot as empty, the writer clears its credit; the responder of reads fills
/// its slots.
pub fn prepare(ep: &mut Endpoint, size: u32, plan: &Plan, client: bool) {
    let corrupt = plan.options.corrupt;
    for end in &ep.qps {
        let Some(ring) = end.ring() else { return };
        if validates(plan, Verb::Write) {
            if client {
                // SAFETY: as in `Ring::credit`; the peer writes it only after the start.
                unsafe { ring.control(CREDIT_IN).write_volatile(0) };
            } else {
                for k in 0..ring.slots() {
                    ring.set_last_byte(k, size, !tag(k, size));
                }
            }
        }
        if validates(plan, Verb::Read) && !client {
            for k in 0..ring.slots() {
                // SAFETY: the slot is in the target half; no read is in flight between sizes.
                let slot = unsafe { std::slice::from_raw_parts_mut(ring.target(k), size as usize) };
                fill(slot, k);
                if corrupt.is_some_and(|n| n % ring.slots() == k) {
                    slot[corrupt_at(size)] ^= 0x5a;
                }
            }
        }
    }
}

/// The writer may post message `seq` on `end`: its slot was checked (always
/// true without write validation).
pub fn may_write(plan: &Plan, end: &QpEnd, remote: &QpInfo, seq: u64) -> bool {
    if !validates(plan, Verb::Write) {
        return true;
    }
    let Some(ring) = end.ring() else { return true };
    let slots = remote.len / ring.stride as u64;
    seq < ring.credit() + slots
}

/// The reader: checks the reads `from..to` of QP `q`, completed just now.
pub fn check_reads(
    plan: &Plan,
    end: &QpEnd,
    remote: &QpInfo,
    span: (u64, u64),
    size: u32,
    checked: &mut Checked,
) {
    if !validates(plan, Verb::Read) {
        return;
    }
    let Some(ring) = end.ring() else { return };
    let slots = (remote.len / ring.stride as u64).max(1);
    fence(Ordering::Acquire);
    for seq in span.0..span.1 {
        let at = (seq % ring.send) as usize * ring.stride;
        // SAFETY: the local half holds `send` slots; this one's read completed
        // and the next read into it is posted only after this check.
        let bytes = unsafe { std::slice::from_raw_parts(ring.buf.add(at), size as usize) };
        checked.record(matches(bytes, seq % slots));
    }
}

/// The responder of a write bandwidth run with --data_validation: checks
/// every message as it lands and grants the writer credit.
pub fn watch_writes(
    ep: &mut Endpoint,
    remote: &[QpInfo],
    size: u32,
    plan: &Plan,
) -> anyhow::Result<Checked> {
    let Length::Iters(per_qp) = plan.length else {
        bail!("--data_validation: write validation counts -n messages; drop -D");
    };
    let qps = ep.qps.len();
    let mut next = vec![0u64; qps];
    let mut granted = vec![0u64; qps];
    let mut in_flight = vec![false; qps];
    let mut checked = Checked::default();
    let mut stall = Stall::new(plan.timeout);
    let mut wcs = Vec::new();
    loop {
        let mut progress = false;
        for q in 0..qps {
            let Some(ring) = ep.qps[q].ring() else {
                bail!("--data_validation: QP {q} has no validation slots");
            };
            let slots = ring.slots();
            while next[q] < per_qp && ring.last_byte(next[q], size) == tag(next[q], size) {
                let seq = next[q];
                checked.record(ring.slot_holds(seq, size, seq));
                ring.set_last_byte(seq, size, !tag(seq + slots, size));
                next[q] += 1;
                progress = true;
            }
            if !in_flight[q] && next[q] > granted[q] {
                // SAFETY: as in `Ring::credit`; the previous credit write completed.
                unsafe { ring.control(CREDIT_OUT).write_volatile(next[q]) };
                let target = wr_t {
                    rdma: rdma_t {
                        remote_addr: remote[q].addr + remote[q].len + CREDIT_IN as u64,
                        rkey: remote[q].rkey,
                    },
                };
                let from = ring.control(CREDIT_OUT) as u64;
                ep.qps[q]
                    .post_send(
                        CREDIT_WR - q as u64,
                        Chain::one(&|_| true),
                        ibv_wr_opcode::IBV_WR_RDMA_WRITE,
                        ibv_send_flags::IBV_SEND_SIGNALED.0,
                        (from, 8),
                        target,
                    )
                    .map_err(|e| {
                        anyhow::anyhow!("posting a credit of --data_validation failed: {e}")
                    })?;
                in_flight[q] = true;
                granted[q] = next[q];
            }
        }
        if in_flight.iter().any(|&f| f) {
            poll(&ep.send_cq, &mut wcs)?;
            for wc in &wcs {
                if wc.status != SUCCESS {
                    bail!(describe_failure(
                        wc,
                        &format!("on a --data_validation credit at {size} B")
                    ));
                }
                in_flight[(CREDIT_WR - wc.wr_id) as usize] = false;
                progress = true;
            }
        }
        if next.iter().all(|&n| n == per_qp) && !in_flight.iter().any(|&f| f) && granted == next {
            return Ok(checked);
        }
        if progress {
            stall.progress();
        } else {
            stall.idle(|| {
                format!(
                    "--data_validation: waited for written message {} at {size} B",
                    next.iter().min().copied().unwrap_or(0) + 1
                )
            })?;
        }
    }
}
