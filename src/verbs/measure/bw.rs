//! The bandwidth tests: post `tx_depth` work requests per QP and keep them
//! coming, asking for a completion every `cq_mod` of them, as perftest's
//! run_iter_bw does; the receiving side of send tests reposts receives as
//! they complete. One loop serves the sender, the receiver and both at once (-b).
//!
//! perftest's definitions: BW average = bytes / (last completion - first post);
//! MsgRate = messages / that time; BW peak = the best rate over any window from
//! a post to a later completion. Every completion also records its own latency
//! (post to completion) in a histogram.

use crate::stats::empty_histogram;
use crate::verbs::device::completion::{describe_failure, poll, Stall, Wc, SUCCESS};
use crate::verbs::device::cqe::CqePoller;
use crate::verbs::device::post::Chain;
use crate::verbs::device::qp::{Endpoint, SEQ_BITS, SEQ_MASK};
use crate::verbs::exchange::wire::QpInfo;
use crate::verbs::flags::benchmark::Verb;
use crate::verbs::flags::takes_receives;
use crate::verbs::flags::{Length, Plan};
use crate::verbs::measure::clock::Clock;
use crate::verbs::measure::duration::Window;
use crate::verbs::measure::rdma_check::{check_reads, may_write};
use crate::verbs::measure::validate::Checked;
use hdrhistogram::Histogram;
use std::time::Instant;

/// Work request ids: QP index above this shift, sequence number below.
const QP_SHIFT: u32 = SEQ_BITS;
/// Marks warm-up requests.
const WARM_UP: u64 = 1 << 63;

fn wr_id(qp: usize, seq: u64) -> u64 {
    ((qp as u64) << QP_SHIFT) | seq
}

fn split_wr_id(id: u64) -> (usize, u64) {
    (((id & !WARM_UP) >> QP_SHIFT) as usize, id & SEQ_MASK)
}

/// The best message rate over any window [post i, completion j] (messages
/// j - i + 1 over tc[j] - tp[i]) in O(log n) per completion instead of
/// perftest's O(n^2): the best window ending at a completion starts at the
/// tangent point of the lower convex hull of the posts (time, index).
#[derive(Debug, Default)]
pub struct PeakTracker {
    hull: Vec<(i128, i128)>,
    best: f64,
}

fn cross(o: (i128, i128), a: (i128, i128), b: (i128, i128)) -> i128 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

impl PeakTracker {
    /// Post number `index` (0-based, all QPs) at `t_ns`; times never decrease.
    pub fn posted(&mut self, t_ns: u64, index: u64) {
        let p = (t_ns as i128, index as i128);
        if let Some(last) = self.hull.last() {
            // Same instant, later index: never a better window start.
            if last.0 == p.0 {
                return;
            }
        }
        while self.hull.len() >= 2
            && cross(
                self.hull[self.hull.len() - 2],
                self.hull[self.hull.len() - 1],
                p,
            ) <= 0
        {
            self.hull.pop();
        }
        self.hull.push(p);
    }

    /// `count` messages (all QPs) had completed at `t_ns`.
    pub fn completed(&mut self, t_ns: u64, count: u64) {
        let q = (t_ns as i128, count as i128);
        // Only posts strictly before the completion form windows.
        let n = self.hull.partition_point(|p| p.0 < q.0);
        if n == 0 {
            return;
        }
        // Slope to q rises along the hull, then falls: find the top.
        let better = |k: usize| {
            let (a, b) = (self.hull[k], self.hull[k + 1]);
            (q.1 - b.1) * (q.0 - a.0) > (q.1 - a.1) * (q.0 - b.0)
        };
        let (mut lo, mut hi) = (0, n - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if better(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let p = self.hull[lo];
        let rate = (q.1 - p.1) as f64 / (q.0 - p.0) as f64;
        if rate > self.best {
            self.best = rate;
        }
    }

    /// Messages per second of the best window, None before any completion.
    pub fn peak_per_second(&self) -> Option<f64> {
        (self.best > 0.0).then_some(self.best * 1e9)
    }
}

/// One side's bandwidth measurement of one size.
pub struct BwMeasure {
    pub messages: u64,
    pub elapsed_ns: u64,
    pub peak_msgs_per_s: Option<f64>,
    /// Post-to-completion latency of every signalled request, ns.
    pub histogram: Histogram<u64>,
}

fn check(
    wc: &Wc,
    ep: &Endpoint,
    what: &str,
    size: u32,
    done: u64,
    total: Option<u64>,
) -> anyhow::Result<()> {
    if wc.status == SUCCESS {
        return Ok(());
    }
    let (q, _) = split_wr_id(wc.wr_id);
    let qpn = ep.qps.get(q).map_or(0, |e| e.qpn());
    let of = total.map_or(String::new(), |t| format!(" of {t}"));
    Err(anyhow::Error::msg(describe_failure(
        wc,
        &format!("on {what} of QP 0x{qpn:x} at {size} B after {done}{of} completions"),
    )))
}

/// perftest's warm-up before write and read tests: `tx_depth` signalled
/// requests per QP, all completed before the timed run.
pub fn warm_up(
    ep: &mut Endpoint,
    remote: &[QpInfo],
    op: Verb,
    size: u32,
    plan: &Plan,
) -> anyhow::Result<()> {
    let inline = !op.fetches() && size <= plan.inline_size;
    let mut wcs = Vec::new();
    let mut stall = Stall::new(plan.timeout).with_events(ep.post.events.as_ref());
    for (q, r) in remote.iter().enumerate() {
        for s in 0..plan.tx_depth as u64 {
            ep.qps[q].post(op, WARM_UP | wr_id(q, s), size, true, inline, r)?;
        }
        let mut left = plan.tx_depth as u64;
        while left > 0 {
            poll(&ep.send_cq, &mut wcs)?;
            for wc in &wcs {
                check(
                    wc,
                    ep,
                    "a warm-up request",
                    size,
                    plan.tx_depth as u64 - left,
                    None,
                )?;
                left -= 1;
            }
            if wcs.is_empty() {
                stall.idle(|| {
                    format!("waited for the warm-up at {size} B ({left} requests outstanding)")
                })?;
            } else {
                stall.progress();
            }
        }
    }
    Ok(())
}

/// Posts this size's first receives (send tests), before the start signal.
pub fn post_receives(ep: &mut Endpoint, size: u32, plan: &Plan) -> anyhow::Result<()> {
    let (first, list) = first_receives(plan);
    for (q, end) in ep.qps.iter_mut().enumerate() {
        end.post_recv_lists((0..first).map(|n| wr_id(q, n)), size, list as usize)?;
    }
    Ok(())
}

/// --recv_post_list: the receives posted before the start (whole lists, as
/// perftest) and the list size.
fn first_receives(plan: &Plan) -> (u64, u64) {
    let list = plan.post.recv_post_list as u64;
    (plan.rx_depth as u64 / list * list, list)
}

/// What one side does in a bandwidth run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Roles {
    /// Posts writes, reads or sends.
    pub sending: bool,
    /// Receives sends (expects `post_receives` to have run).
    pub receiving: bool,
}

/// The timed run of one size. Returns the measurement of the sending side
/// and what the receiving side checked (--data_validation).
pub fn run(
    ep: &mut Endpoint,
    remote: &[QpInfo],
    op: Verb,
    size: u32,
    plan: &Plan,
    roles: Roles,
    clock: &Clock,
) -> anyhow::Result<(Option<BwMeasure>, Checked)> {
    let mut run = Run::new(ep.qps.len(), op, size, plan, roles, clock);
    // A UD receiver short of messages has most likely lost them: UD does not
    // retransmit (perftest's server, 120 s without one, exits with its count
    // and no report; ours says how many arrived, after --timeout).
    let mut stall = Stall::new(plan.timeout).with_events(ep.post.events.as_ref());
    if roles.receiving {
        stall = stall.receiving(plan.options.connection);
    }
    let mut wcs = Vec::with_capacity(64);
    let mut send_batch = CqePoller::new(plan, ep.post.dynamic_cqe);
    let mut recv_batch = CqePoller::new(plan, ep.post.dynamic_cqe);
    loop {
        if roles.sending {
            run.post_sends(ep, remote)?;
        }
        let mut idle = true;
        if roles.sending && run.qps.iter().any(|q| q.posted > q.completed) {
            idle &= run.take_send_completions(ep, remote, &mut wcs, &mut send_batch)?;
        }
        if run.qps.iter().any(|q| !q.recv_ended) {
            idle &= run.take_receives(ep, &mut wcs, &mut recv_batch)?;
        }
        if run.done(roles) {
            break;
        }
        if idle {
            stall.idle(|| run.waiting_for())?;
        } else {
            stall.progress();
        }
    }
    let checked = std::mem::take(&mut run.checked);
    let measure = roles.sending.then(|| run.measure());
    Ok((measure, checked))
}

/// One QP's progress through a bandwidth run.
struct QpRun {
    posted: u64,
    completed: u64,
    /// -D: the request that ends this QP's run (index), once posted.
    final_wr: Option<u64>,
    last_signaled: bool,
    /// When each request in flight was posted, by sequence number modulo tx_depth.
    post_times: Vec<u64>,
    recv_posted: u64,
    recv_unused: u64,
    received: u64,
    recv_ended: bool,
}

/// A bandwidth run of one size: its settings, each QP's progress and what it measures.
struct Run<'a> {
    plan: &'a Plan,
    clock: &'a Clock,
    op: Verb,
    size: u32,
    inline: bool,
    per_qp: u64,
    deadline: Option<Instant>,
    tx: u64,
    cq_mod: u64,
    total: Option<u64>,
    /// -l, --recv_post_list (1: one request per post call).
    list: u64,
    recv_list: u64,
    /// -D: what counts (-f margins left out); sends and writes with immediate
    /// end with a zero-length message the receiver counts as the end.
    window: Option<Window>,
    marks_end: bool,
    stopping: bool,
    qps: Vec<QpRun>,
    posted_total: u64,
    completed_total: u64,
    first_post: Option<u64>,
    last_completion: u64,
    in_window: u64,
    tracker: PeakTracker,
    histogram: Histogram<u64>,
    checked: Checked,
}

impl<'a> Run<'a> {
    fn new(
        qps: usize,
        op: Verb,
        size: u32,
        plan: &'a Plan,
        roles: Roles,
        clock: &'a Clock,
    ) -> Self {
        let (per_qp, deadline) = match plan.length {
            Length::Iters(n) => (n, None),
            Length::Duration(d) => (u64::MAX, Some(Instant::now() + d)),
        };
        let tx = plan.tx_depth as u64;
        let (first, recv_list) = first_receives(plan);
        let qp = QpRun {
            posted: 0,
            completed: 0,
            final_wr: None,
            last_signaled: true,
            post_times: vec![0u64; tx as usize],
            recv_posted: first,
            recv_unused: 0,
            received: 0,
            recv_ended: !roles.receiving,
        };
        Run {
            plan,
            clock,
            op,
            size,
            inline: !op.fetches() && size <= plan.inline_size,
            per_qp,
            deadline,
            tx,
            cq_mod: plan.cq_mod as u64,
            total: (deadline.is_none()).then(|| per_qp * qps as u64),
            list: plan.post.post_list as u64,
            recv_list,
            window: Window::of(plan, clock.now_ns()),
            marks_end: takes_receives(plan),
            stopping: false,
            qps: (0..qps)
                .map(|_| QpRun {
                    post_times: qp.post_times.clone(),
                    ..qp
                })
                .collect(),
            posted_total: 0,
            completed_total: 0,
            first_post: None,
            last_completion: 0,
            in_window: 0,
            tracker: PeakTracker::default(),
            histogram: empty_histogram(),
            checked: Checked::default(),
        }
    }

    /// Keeps every QP's send queue full, and under -D ends each QP's run.
    fn post_sends(&mut self, ep: &mut Endpoint, remote: &[QpInfo]) -> anyhow::Result<()> {
        if let Some(d) = self.deadline {
            self.stopping = self.stopping || Instant::now() >= d;
        }
        let (list, per_qp, cq_mod) = (self.list, self.per_qp, self.cq_mod);
        let signaled = |id: u64| {
            let n = (id & SEQ_MASK) + 1;
            n % cq_mod == 0 || n == per_qp
        };
        for q in 0..self.qps.len() {
            while !self.stopping
                && self.qps[q].posted + list <= per_qp
                && self.qps[q].posted + list <= self.qps[q].completed + self.tx
                && may_write(self.plan, &ep.qps[q], &remote[q], self.qps[q].posted)
            {
                let s = self.qps[q].posted;
                let t = self.clock.now_ns();
                self.first_post.get_or_insert(t);
                for k in 0..list {
                    self.tracker.posted(t, self.posted_total + k);
                    self.qps[q].post_times[((s + k) % self.tx) as usize] = t;
                }
                let chain = Chain {
                    count: list as u32,
                    signaled: &signaled,
                };
                let (op, size, inline) = (self.op, self.size, self.inline);
                ep.qps[q].post_list(op, wr_id(q, s), size, chain, inline, &remote[q])?;
                self.qps[q].posted += list;
                self.posted_total += list;
                self.qps[q].last_signaled = signaled(s + list - 1);
            }
            if self.stopping && self.qps[q].final_wr.is_none() {
                self.end_qp(q, ep, remote)?;
            }
        }
        Ok(())
    }

    /// -D: ends QP `q`'s run with a signalled request (a zero-length send tells
    /// the receiver the run is over), once its queue has room.
    fn end_qp(&mut self, q: usize, ep: &mut Endpoint, remote: &[QpInfo]) -> anyhow::Result<()> {
        let (op, size, inline) = (self.op, self.size, self.inline);
        let qp = &mut self.qps[q];
        if qp.posted >= qp.completed + self.tx {
            return Ok(());
        }
        let s = qp.posted;
        if self.marks_end {
            ep.qps[q].post(op, wr_id(q, s), 0, true, false, &remote[q])?;
            qp.final_wr = Some(s);
        } else if qp.last_signaled {
            qp.final_wr = Some(s.saturating_sub(1));
            return Ok(());
        } else {
            let t = self.clock.now_ns();
            self.tracker.posted(t, self.posted_total);
            qp.post_times[(s % self.tx) as usize] = t;
            ep.qps[q].post(op, wr_id(q, s), size, true, inline, &remote[q])?;
            self.posted_total += 1;
            qp.final_wr = Some(s);
        }
        qp.posted += 1;
        Ok(())
    }

    /// Takes in the send completions; true when there were none.
    fn take_send_completions(
        &mut self,
        ep: &mut Endpoint,
        remote: &[QpInfo],
        wcs: &mut Vec<Wc>,
        batch: &mut CqePoller,
    ) -> anyhow::Result<bool> {
        batch.poll(
            &ep.send_cq,
            wcs,
            self.completed_total,
            &mut ep.post.dynamic_cqe,
        )?;
        for wc in wcs.iter() {
            check(
                wc,
                ep,
                "a request",
                self.size,
                self.completed_total,
                self.total,
            )?;
            let (q, s) = split_wr_id(wc.wr_id);
            let t = self.clock.now_ns();
            let qp = &mut self.qps[q];
            // A completion covers every earlier request of its QP; the
            // zero-length end marker of a -D send run is not a message.
            let marker = self.marks_end && qp.final_wr == Some(s);
            let newly = s + 1 - qp.completed - marker as u64;
            check_reads(
                self.plan,
                &ep.qps[q],
                &remote[q],
                (qp.completed, qp.completed + newly),
                self.size,
                &mut self.checked,
            );
            qp.completed = s + 1;
            let counts = self.window.is_none_or(|w| w.contains(t));
            if newly > 0 {
                self.completed_total += newly;
                self.last_completion = t;
                if counts {
                    self.in_window += newly;
                    self.tracker.completed(t, self.completed_total);
                }
            }
            if !marker && counts {
                let posted_at = qp.post_times[(s % self.tx) as usize];
                self.histogram.saturating_record((t - posted_at).max(1));
            }
        }
        Ok(wcs.is_empty())
    }

    /// Takes in the receive completions and reposts receives; true when there were none.
    fn take_receives(
        &mut self,
        ep: &mut Endpoint,
        wcs: &mut Vec<Wc>,
        batch: &mut CqePoller,
    ) -> anyhow::Result<bool> {
        let done = self.received();
        batch.poll(&ep.recv_cq, wcs, done, &mut ep.post.dynamic_cqe)?;
        for wc in wcs.iter() {
            check(wc, ep, "a receive", self.size, self.received(), self.total)?;
            let (q, _) = split_wr_id(wc.wr_id);
            let (size, recv_list) = (self.size, self.recv_list);
            let qp = &mut self.qps[q];
            if self.deadline.is_some() && ep.qps[q].payload_len(wc) == 0 {
                qp.recv_ended = true;
                continue;
            }
            self.checked
                .record(ep.qps[q].received_ok(wc, qp.received, size));
            qp.received += 1;
            qp.recv_unused += 1;
            if qp.recv_unused >= recv_list
                && (self.deadline.is_some() || qp.recv_posted + recv_list <= self.per_qp)
            {
                let ids = (qp.recv_posted..qp.recv_posted + recv_list).map(|n| wr_id(q, n));
                ep.qps[q].post_recv_lists(ids, size, recv_list as usize)?;
                qp.recv_posted += recv_list;
                qp.recv_unused -= recv_list;
            }
            if self.deadline.is_none() && qp.received == self.per_qp {
                qp.recv_ended = true;
            }
        }
        Ok(wcs.is_empty())
    }

    fn received(&self) -> u64 {
        self.qps.iter().map(|q| q.received).sum()
    }

    /// Every request posted and completed, every receive taken in.
    fn done(&self, roles: Roles) -> bool {
        let sends_done = !roles.sending
            || self.qps.iter().all(|q| {
                let all_posted = match self.deadline {
                    None => q.posted == self.per_qp,
                    Some(_) => q.final_wr.is_some(),
                };
                all_posted && q.completed == q.posted
            });
        sends_done && self.qps.iter().all(|q| q.recv_ended)
    }

    /// What an idle loop has been waiting for, for the stall's message.
    fn waiting_for(&self) -> String {
        format!(
            "waited for a {:?} completion at {} B (posted {}, completed {}, received {}{})",
            self.op,
            self.size,
            self.posted_total,
            self.completed_total,
            self.received(),
            self.total.map_or(String::new(), |t| format!(" of {t}"))
        )
    }

    /// The sending side's measurement.
    fn measure(self) -> BwMeasure {
        let first = self.first_post.unwrap_or(self.last_completion);
        BwMeasure {
            messages: self.window.map_or(self.completed_total, |_| self.in_window),
            elapsed_ns: self
                .window
                .map_or(self.last_completion.saturating_sub(first), |w| w.len_ns())
                .max(1),
            peak_msgs_per_s: if self.plan.peak {
                self.tracker.peak_per_second()
            } else {
                None
            },
            histogram: self.histogram,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perftest's definition, directly: max over posts i and completions j >= i
    /// of (j - i + 1) / (tc[j] - tp[i]).
    fn brute_force(posts: &[u64], completions: &[(u64, u64)]) -> f64 {
        let mut best = 0.0f64;
        for &(tc, count) in completions {
            for (i, &tp) in posts.iter().enumerate() {
                if (i as u64) < count && tp < tc {
                    best = best.max((count - i as u64) as f64 / (tc - tp) as f64);
                }
            }
        }
        best * 1e9
    }

    /// A deterministic pseudo-random run: posts with jittered gaps, completions
    /// in batches of `cq_mod` arriving after a jittered delay.
    fn simulated(seed: u64, n: usize, cq_mod: usize) -> (Vec<u64>, Vec<(u64, u64)>) {
        let mut x = seed;
        let mut rnd = move |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut posts = Vec::new();
        let mut t = 1000;
        for _ in 0..n {
            t += 1 + rnd(50);
            posts.push(t);
        }
        let mut completions = Vec::new();
        let mut last = 0;
        for j in (cq_mod - 1..n)
            .step_by(cq_mod)
            .chain(std::iter::once(n - 1))
        {
            let tc = (posts[j] + 100 + rnd(400)).max(last + 1);
            last = tc;
            completions.push((tc, j as u64 + 1));
        }
        (posts, completions)
    }

    fn tracked(posts: &[u64], completions: &[(u64, u64)]) -> f64 {
        // Interleave as the loop does: every post before a completion's time first.
        let mut tracker = PeakTracker::default();
        let mut next = 0;
        for &(tc, count) in completions {
            while next < posts.len() && posts[next] < tc {
                tracker.posted(posts[next], next as u64);
                next += 1;
            }
            tracker.completed(tc, count);
        }
        tracker.peak_per_second().unwrap()
    }

    #[test]
    fn peak_matches_perftests_quadratic_definition() {
        for seed in 1..40 {
            for cq_mod in [1, 3, 100] {
                let (posts, completions) = simulated(seed, 300, cq_mod);
                let want = brute_force(&posts, &completions);
                let got = tracked(&posts, &completions);
                assert!(
                    (got - want).abs() <= want * 1e-12,
                    "seed {seed} cq_mod {cq_mod}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn peak_of_a_hand_computed_run() {
        // Posts at 0, 10, 20, 30 ns; completions: 2 done at 40, 4 done at 50.
        // Windows: (i=0..1, 2 msgs / 40 ns), (i=2, 2 msgs at 50: 2/30),
        // (i=3: 1/20 = 0.05), (i=0: 4/50 = 0.08) -> best 0.08 msg/ns.
        let mut t = PeakTracker::default();
        for (i, p) in [0u64, 10, 20, 30].iter().enumerate() {
            t.posted(*p, i as u64);
        }
        t.completed(40, 2);
        assert!((t.peak_per_second().unwrap() - 0.05e9).abs() < 1.0);
        t.completed(50, 4);
        assert!((t.peak_per_second().unwrap() - 0.08e9).abs() < 1.0);
    }

    #[test]
    fn no_completion_no_peak() {
        let mut t = PeakTracker::default();
        t.posted(5, 0);
        t.completed(5, 1); // same instant: no window
        assert_eq!(t.peak_per_second(), None);
    }

    #[test]
    fn wr_ids_round_trip() {
        assert_eq!(split_wr_id(wr_id(3, 12345)), (3, 12345));
        assert_eq!(split_wr_id(WARM_UP | wr_id(7, 1)), (7, 1));
    }
}
