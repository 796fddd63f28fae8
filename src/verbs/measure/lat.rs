//! The latency tests, as perftest runs them: write and send are ping-pongs (the
//! client starts; each side answers the other's message), read is the client
//! reading again and again. The client stamps each post; consecutive stamps are
//! one round trip, reported halved for write and send (one way) and whole for
//! read, with perftest's statistics.

use crate::report::verbs::LatStats;
use crate::stats::empty_histogram;
use crate::verbs::device::completion::{describe_failure, poll_one, Stall, Wc, SUCCESS};
use crate::verbs::device::qp::{Endpoint, QpEnd};
use crate::verbs::exchange::wire::QpInfo;
use crate::verbs::flags::benchmark::Verb;
use crate::verbs::flags::{Length, Plan};
use crate::verbs::measure::clock::Clock;
use crate::verbs::measure::duration::Window;
use crate::verbs::measure::validate::Checked;
use hdrhistogram::Histogram;
use std::time::Instant;

/// perftest drops the two slowest samples before its statistics (LAT_MEASURE_TAIL).
const DROPPED_TAIL: usize = 2;

/// Divides round trips by 2 for write and send (one-way latency), not for read.
pub fn rtt_factor(verb: Verb) -> u32 {
    match verb {
        Verb::Read | Verb::Atomic => 1,
        Verb::Write | Verb::Send => 2,
    }
}

/// The samples: differences of consecutive post stamps (ns), divided by `factor`.
pub fn samples(stamps_ns: &[u64], factor: u32) -> Vec<f64> {
    stamps_ns
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / factor as f64)
        .collect()
}

/// perftest's print_report_lat on `samples` (ns): sort, drop the two largest,
/// then min, the max of the rest, the median (t_typical), mean, standard
/// deviation (in floating point, unlike perftest's integer one) and the
/// samples at ceil(0.99 m) and ceil(0.999 m). None below 3 samples.
pub fn perftest_stats(samples: &[f64]) -> Option<LatStats> {
    if samples.len() <= DROPPED_TAIL {
        return None;
    }
    let mut d = samples.to_vec();
    d.sort_by(f64::total_cmp);
    let m = d.len() - DROPPED_TAIL;
    let median = if (m - 1) % 2 == 1 {
        (d[m / 2] + d[m / 2 - 1]) / 2.0
    } else {
        d[m / 2]
    };
    let kept = &d[..m];
    let avg = kept.iter().sum::<f64>() / m as f64;
    let var = kept.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / m as f64;
    let at = |q: f64| d[((m as f64 * q).ceil() as usize).min(m)];
    let us = |ns: f64| ns / 1e3;
    Some(LatStats {
        t_min_us: us(d[0]),
        t_max_us: us(d[m]),
        t_typical_us: us(median),
        t_avg_us: us(avg),
        t_stdev_us: us(var.sqrt()),
        p99_us: us(at(0.99)),
        p999_us: us(at(0.999)),
    })
}

/// Histogram (ns) of every sample.
pub fn histogram_of(samples: &[f64]) -> Histogram<u64> {
    let mut h = empty_histogram();
    for &s in samples {
        h.saturating_record((s.round() as u64).max(1));
    }
    h
}

#[inline(always)]
fn check(wc: &Wc, qp: &QpEnd, what: &str, size: u32, iteration: u64) -> anyhow::Result<()> {
    if wc.status == SUCCESS {
        return Ok(());
    }
    Err(failed(wc, qp, what, size, iteration))
}

#[cold]
fn failed(wc: &Wc, qp: &QpEnd, what: &str, size: u32, iteration: u64) -> anyhow::Error {
    anyhow::Error::msg(describe_failure(
        wc,
        &format!(
            "on {what} of QP 0x{:x} at {size} B, iteration {iteration}",
            qp.qpn()
        ),
    ))
}

/// Polls `cq` until one completion arrives.
#[inline(always)]
fn one_completion(
    ep: &Endpoint,
    recv: bool,
    stall: &mut Stall,
    waiting: &dyn Fn() -> String,
) -> anyhow::Result<Wc> {
    let cq = if recv { &ep.recv_cq } else { &ep.send_cq };
    loop {
        if let Some(wc) = poll_one(cq)? {
            stall.progress();
            return Ok(wc);
        }
        stall.idle(waiting)?;
    }
}

/// Posts this size's receives (send test), before the start signal.
pub fn post_receives(ep: &mut Endpoint, size: u32, plan: &Plan) -> anyhow::Result<()> {
    ep.qps[0].post_recvs(0..plan.rx_depth as u64, size)
}

/// Prepares the ping-pong flags of this size (write test), before the start signal.
pub fn clear_flags(ep: &mut Endpoint, size: u32) {
    ep.qps[0].clear_target_byte(size as usize - 1);
    ep.qps[0].clear_control();
}

/// One side's run of one size. `client` starts the ping-pong and keeps the
/// stamps; the server answers (and, for read, does nothing). Returns the
/// client's post stamps (ns) and what this side's receiver checked.
pub fn run(
    ep: &mut Endpoint,
    remote: &QpInfo,
    verb: Verb,
    size: u32,
    plan: &Plan,
    client: bool,
    clock: &Clock,
) -> anyhow::Result<(Option<Vec<u64>>, Checked)> {
    let mut checked = Checked::default();
    if verb.fetches() && !client {
        return Ok((None, checked));
    }
    let (iters, deadline) = match plan.length {
        Length::Iters(n) => (n, None),
        Length::Duration(d) => (u64::MAX, Some(Instant::now() + d)),
    };
    let inline = !verb.fetches() && size <= plan.inline_size;
    // --write_with_imm: the peer's writes arrive as receive completions, as sends do.
    let polls_byte = verb == Verb::Write && !plan.timing.write_imm;
    let window = Window::of(plan, clock.now_ns());
    let last = size as usize - 1;
    let mut stamps = Vec::with_capacity(iters.min(1 << 20) as usize);
    let (mut sent, mut received) = (0u64, 0u64);
    let mut recv_posted = plan.rx_depth as u64;
    let mut stall = Stall::new(plan.timeout)
        .with_events(ep.post.events.as_ref())
        .receiving(plan.options.connection);
    loop {
        // The peer's message first, except where the client opens the exchange.
        let answers_due = !verb.fetches() && received < iters && !(client && sent == 0);
        if answers_due {
            let expect = received + 1;
            let waiting = || format!("waited for the peer's message {expect} at {size} B");
            match verb {
                Verb::Write if polls_byte => {
                    let flag = expect as u8;
                    while ep.qps[0].target_byte(last) != flag {
                        if ep.qps[0].control() != 0 {
                            return Ok((None, checked));
                        }
                        stall.idle(waiting)?;
                    }
                    stall.progress();
                }
                _ => {
                    let wc = one_completion(ep, true, &mut stall, &waiting)?;
                    check(&wc, &ep.qps[0], "a receive", size, expect)?;
                    if deadline.is_some() && ep.qps[0].payload_len(&wc) == 0 {
                        return Ok((None, checked));
                    }
                    checked.record(ep.qps[0].received_ok(&wc, expect - 1, size));
                    if deadline.is_some() || recv_posted < iters {
                        ep.qps[0].post_recv(recv_posted, size)?;
                        recv_posted += 1;
                    }
                }
            }
            received = expect;
        }
        // -D: the client ends after a whole round trip and tells the server.
        if client && deadline.is_some_and(|d| Instant::now() >= d) {
            match verb {
                Verb::Write if polls_byte => ep.qps[0].post_stop(remote)?,
                Verb::Write | Verb::Send => {
                    ep.qps[0].post(verb, u64::MAX, 0, true, false, remote)?
                }
                Verb::Read | Verb::Atomic => break,
            }
            let wc = one_completion(ep, false, &mut stall, &|| {
                "waited for the completion of the run's end".into()
            })?;
            check(&wc, &ep.qps[0], "the end of the run", size, sent)?;
            break;
        }
        if sent < iters {
            if client {
                stamps.push(clock.now_ns());
            }
            if polls_byte {
                ep.qps[0].set_local_byte(last, (sent + 1) as u8);
            }
            ep.qps[0].post(verb, sent, size, true, inline, remote)?;
            sent += 1;
            let waiting = || format!("waited for the completion of message {sent} at {size} B");
            let wc = one_completion(ep, false, &mut stall, &waiting)?;
            check(&wc, &ep.qps[0], "a request", size, sent)?;
        }
        let reads_done = verb.fetches() && sent == iters;
        if reads_done || (sent == iters && received == iters) {
            break;
        }
    }
    // -D: the round trips inside the window (stamps are in time order).
    if let Some(w) = window {
        stamps.retain(|&t| w.contains(t));
    }
    Ok((client.then_some(stamps), checked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_statistics_by_hand() {
        // Stamps 0,10,30,60,100,150,210,280 ns: deltas 10,20,30,40,50,60,70.
        let stamps = [0u64, 10, 30, 60, 100, 150, 210, 280];
        let d = samples(&stamps, 1);
        assert_eq!(d, vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]);
        let s = perftest_stats(&d).unwrap();
        // m = 7 - 2 = 5 kept: 10..50. (m-1) % 2 == 0: median d[2] = 30.
        assert_eq!(s.t_min_us, 0.010);
        assert_eq!(s.t_max_us, 0.060); // d[m]: the largest after dropping two
        assert_eq!(s.t_typical_us, 0.030);
        assert_eq!(s.t_avg_us, 0.030);
        // Population stdev of 10..50: sqrt(200) ns.
        assert!((s.t_stdev_us - 200f64.sqrt() / 1e3).abs() < 1e-12);
        // ceil(5 * 0.99) = 5 -> d[5] = 60.
        assert_eq!(s.p99_us, 0.060);
        assert_eq!(s.p999_us, 0.060);
    }

    #[test]
    fn even_count_median_and_halving() {
        // Deltas 2,4,6,8,100,200 ns halved: 1,2,3,4,50,100. m = 4: median (2+3)/2.
        let stamps = [0u64, 2, 6, 12, 20, 120, 320];
        let s = perftest_stats(&samples(&stamps, 2)).unwrap();
        assert_eq!(s.t_typical_us, 0.0025);
        assert_eq!(s.t_min_us, 0.001);
        assert_eq!(s.t_max_us, 0.050);
        assert_eq!(s.t_avg_us, 0.0025);
        // Float stdev of 1,2,3,4 = sqrt(1.25); perftest's integer one would say 1.
        assert!((s.t_stdev_us - 1.25f64.sqrt() / 1e3).abs() < 1e-12);
    }

    #[test]
    fn percentiles_of_a_thousand_samples() {
        // 1..=1002 ns: the two largest dropped, m = 1000.
        let d: Vec<f64> = (1..=1002).map(|x| x as f64).collect();
        let s = perftest_stats(&d).unwrap();
        assert_eq!(s.p99_us, 0.991); // d[990]
        assert_eq!(s.p999_us, 1.0); // d[999]
        assert_eq!(s.t_max_us, 1.001); // d[1000]
        assert_eq!(s.t_typical_us, 0.5005); // (d[500] + d[499]) / 2
        let h = histogram_of(&d);
        assert_eq!(h.len(), 1002);
        assert_eq!(h.max(), 1002);
    }

    #[test]
    fn too_few_samples() {
        assert_eq!(perftest_stats(&[1.0, 2.0]), None);
        assert!(perftest_stats(&[1.0, 2.0, 3.0]).is_some());
    }

    #[test]
    fn halved_for_write_and_send_only() {
        assert_eq!(rtt_factor(Verb::Write), 2);
        assert_eq!(rtt_factor(Verb::Send), 2);
        assert_eq!(rtt_factor(Verb::Read), 1);
        assert_eq!(rtt_factor(Verb::Atomic), 1);
    }
}
