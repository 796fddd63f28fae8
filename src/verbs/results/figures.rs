//! The arithmetic of results, apart from any device: one side's bandwidth
//! figures, their sums over directions and pairs, the merged latency of every
//! pair, the lines of one size, and the port-rate limit they are compared with.

use crate::limits::Limit;
use crate::report::perftest_extra::Direction;
use crate::report::verbs::{Figures, LatStats, Line};
use crate::stats::empty_histogram;
use crate::verbs::exchange::wire::{histogram_from, Hello, Report};
use crate::verbs::flags::benchmark::Test;
use crate::verbs::flags::Plan;
use anyhow::anyhow;
use hdrhistogram::Histogram;

/// One side's bandwidth figures, from its measurement.
pub fn bw_figures(
    size: u64,
    messages: u64,
    elapsed_ns: u64,
    peak_msgs: Option<f64>,
    histogram: Histogram<u64>,
) -> Figures {
    let seconds = elapsed_ns as f64 / 1e9;
    let msgs_per_s = messages as f64 / seconds;
    Figures::Bw {
        iterations: messages,
        peak: peak_msgs.map(|p| p * size as f64),
        average: msgs_per_s * size as f64,
        msgs_per_s,
        histogram,
    }
}

/// Bandwidth figures of several measurements at once (both directions of a
/// pair with -b, or every pair): rates and peaks add, as perftest adds them.
pub fn sum_bw(parts: &[Figures]) -> Figures {
    let mut iterations = 0;
    let mut peak = Some(0.0);
    let (mut average, mut msgs_per_s) = (0.0, 0.0);
    let mut histogram = empty_histogram();
    for part in parts {
        if let Figures::Bw {
            iterations: i,
            peak: p,
            average: a,
            msgs_per_s: m,
            histogram: h,
        } = part
        {
            iterations += i;
            peak = peak.zip(*p).map(|(x, y)| x + y);
            average += a;
            msgs_per_s += m;
            histogram.add(h).expect("histograms of equal bounds");
        }
    }
    Figures::Bw {
        iterations,
        peak,
        average,
        msgs_per_s,
        histogram,
    }
}

/// Latency figures of every pair together, from the merged samples (the
/// per-pair lines use perftest's exact statistics; this line the histogram's).
pub fn all_lat(parts: &[Figures]) -> Figures {
    let mut histogram = empty_histogram();
    let mut iterations = 0;
    for part in parts {
        if let Figures::Lat {
            iterations: i,
            histogram: h,
            ..
        } = part
        {
            iterations += i;
            histogram.add(h).expect("histograms of equal bounds");
        }
    }
    let us = |ns: u64| ns as f64 / 1e3;
    let stats = LatStats {
        t_min_us: us(histogram.min()),
        t_max_us: us(histogram.max()),
        t_typical_us: us(histogram.value_at_quantile(0.5)),
        t_avg_us: histogram.mean() / 1e3,
        t_stdev_us: histogram.stdev() / 1e3,
        p99_us: us(histogram.value_at_quantile(0.99)),
        p999_us: us(histogram.value_at_quantile(0.999)),
    };
    Figures::Lat {
        iterations,
        stats,
        histogram,
    }
}

/// The printed lines of one size: one per pair, and with several pairs their
/// sum (bandwidth) or their merged samples (latency).
pub fn lines_of(
    plan: &Plan,
    size: u64,
    reports: &[Option<Report>],
    hellos: &[Hello],
    pairs: usize,
) -> anyhow::Result<Vec<Line>> {
    let mut lines = Vec::with_capacity(pairs + 1);
    // --report-both: each pair's directions, listed after the lines perftest prints.
    let mut directed = Vec::new();
    for p in 0..pairs {
        let ends = [p, p + pairs];
        let figures = pair_figures(plan, size, p, &ends.map(|e| reports[e].as_ref()))?;
        lines.push(Line {
            size,
            label: (pairs > 1).then(|| p.to_string()),
            figures,
            limit: port_limit(&[&hellos[p]], &[&hellos[p + pairs]], plan.bidirectional),
            devices: ends
                .iter()
                .map(|&e| format!("{}:{}", hellos[e].device, hellos[e].port))
                .collect::<Vec<_>>()
                .join(","),
            hosts: ends.iter().map(|&e| hellos[e].host.clone()).collect(),
            wrong: wrong_of(ends.iter().map(|&e| reports[e].as_ref())),
            direction: None,
        });
        if plan.report.both {
            let both = lines.last_mut().expect("the pair's line");
            both.direction = Some(Direction::Both);
            let ends_reports = ends.map(|e| reports[e].as_ref());
            let ends_hellos = ends.map(|e| &hellos[e]);
            directed.extend(pair_directions(plan, both, p, ends_reports, ends_hellos)?);
        }
    }
    if pairs > 1 {
        let parts: Vec<Figures> = lines.iter().map(|l| l.figures.clone()).collect();
        let (label, figures) = match plan.bench.test {
            Test::Bw => ("sum", sum_bw(&parts)),
            Test::Lat => ("all", all_lat(&parts)),
        };
        let clients: Vec<&Hello> = hellos[..pairs].iter().collect();
        let servers: Vec<&Hello> = hellos[pairs..].iter().collect();
        lines.push(Line {
            size,
            label: Some(label.into()),
            figures,
            limit: port_limit(&clients, &servers, plan.bidirectional),
            devices: lines
                .iter()
                .map(|l| l.devices.clone())
                .collect::<Vec<_>>()
                .join(","),
            hosts: lines.iter().flat_map(|l| l.hosts.clone()).collect(),
            wrong: lines.iter().filter_map(|l| l.wrong).reduce(|a, b| a + b),
            direction: plan.report.both.then_some(Direction::Both),
        });
    }
    lines.extend(directed);
    Ok(lines)
}

/// --data_validation: the wrong messages both ends' receivers counted
/// (None when neither checked).
pub fn wrong_of<'a>(ends: impl Iterator<Item = Option<&'a Report>>) -> Option<u64> {
    ends.flatten()
        .filter_map(|r| r.validation)
        .map(|c| c.wrong)
        .reduce(|a, b| a + b)
}

/// A pair's figures: the client's measurement, plus the server's with -b
/// (perftest adds both directions; #iterations stays one side's).
fn pair_figures(
    plan: &Plan,
    size: u64,
    pair: usize,
    ends: &[Option<&Report>; 2],
) -> anyhow::Result<Figures> {
    let missing = || anyhow!("pair {pair} sent no measurement of {size} B");
    match plan.bench.test {
        Test::Bw => {
            let parts = ends
                .iter()
                .flatten()
                .filter_map(|r| r.bw.as_ref())
                .map(|b| {
                    Ok(bw_figures(
                        size,
                        b.messages,
                        b.elapsed_ns,
                        b.peak_msgs_per_s,
                        histogram_from(&b.histogram)?,
                    ))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut figures = match parts.as_slice() {
                [] => return Err(missing()),
                [one] => one.clone(),
                _ => sum_bw(&parts),
            };
            if let (
                Figures::Bw { iterations, .. },
                Figures::Bw {
                    iterations: one, ..
                },
            ) = (&mut figures, &parts[0])
            {
                *iterations = *one;
            }
            Ok(figures)
        }
        Test::Lat => {
            let lat = ends[0].and_then(|r| r.lat.as_ref()).ok_or_else(missing)?;
            Ok(Figures::Lat {
                iterations: lat.iterations,
                stats: lat.stats.clone(),
                histogram: histogram_from(&lat.histogram)?,
            })
        }
    }
}

/// --report-both: a `-b` pair's two directions on lines of their own, each
/// from the measurement of the end that posted it, next to perftest's line of
/// both added. A line's direction is where its data goes: the poster's to the
/// peer for write and send, the peer's to the poster for read and atomics.
/// The direction lines of pair `pair` (`ends`: the client's report and the
/// server's, `hellos` theirs), after `both`, the pair's line of the two added.
pub fn pair_directions(
    plan: &Plan,
    both: &Line,
    pair: usize,
    ends: [Option<&Report>; 2],
    hellos: [&Hello; 2],
) -> anyhow::Result<Vec<Line>> {
    let fetches = plan.bench.verb.fetches();
    let mut out = Vec::with_capacity(2);
    for (poster, report) in ends.into_iter().enumerate() {
        let other = 1 - poster;
        let bw = report.and_then(|r| r.bw.as_ref()).ok_or_else(|| {
            anyhow!(
                "pair {pair}: the {} sent no measurement of {} B for --report-both",
                ["client", "server"][poster],
                both.size
            )
        })?;
        let (from, to) = if fetches {
            (other, poster)
        } else {
            (poster, other)
        };
        out.push(Line {
            figures: bw_figures(
                both.size,
                bw.messages,
                bw.elapsed_ns,
                bw.peak_msgs_per_s,
                histogram_from(&bw.histogram)?,
            ),
            label: both.label.clone(),
            limit: port_limit(&[hellos[0]], &[hellos[1]], false),
            devices: both.devices.clone(),
            hosts: both.hosts.clone(),
            // What the receiving end found wrong in this direction.
            wrong: ends[to].and_then(|r| r.validation).map(|c| c.wrong),
            direction: Some(if from == 0 {
                Direction::ClientToServer
            } else {
                Direction::ServerToClient
            }),
            size: both.size,
        });
    }
    Ok(out)
}

/// The port-rate bound of traffic from `clients` to `servers` (each port
/// counted once, however many pairs share it): the smaller of the two sides'
/// total rates; twice that with -b. None when a rate is unknown.
pub fn port_limit(clients: &[&Hello], servers: &[&Hello], bidirectional: bool) -> Option<Limit> {
    let side = |ends: &[&Hello]| -> Option<(f64, String)> {
        let mut seen: Vec<(String, f64, String)> = Vec::new();
        for h in ends {
            let id = format!("{}/{}:{}", h.host, h.device, h.port);
            let rate = h.rate.as_ref()?;
            if !seen.iter().any(|(s, _, _)| *s == id) {
                seen.push((
                    id,
                    rate.gbit_per_s,
                    format!("{}:{} {}", h.device, h.port, rate.text),
                ));
            }
        }
        let total = seen.iter().map(|(_, r, _)| r).sum();
        let names = seen
            .into_iter()
            .map(|(_, _, n)| n)
            .collect::<Vec<_>>()
            .join(" + ");
        Some((total, names))
    };
    let (c, s) = (side(clients)?, side(servers)?);
    let (gbit, names) = if s.0 < c.0 { s } else { c };
    let factor = if bidirectional { 2.0 } else { 1.0 };
    Some(Limit {
        name: format!(
            "port rate {names}{}",
            if bidirectional {
                ", both directions"
            } else {
                ""
            }
        ),
        gbs: gbit / 8.0 * factor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::device::PortRate;
    use crate::verbs::exchange::wire::tests::hello;
    use crate::verbs::exchange::wire::{histogram_bytes, BwReport, LatReport};
    use crate::verbs::flags::benchmark::{Benchmark, Verb};
    use crate::verbs::flags::parse;

    #[test]
    fn sums_add_rates_and_peaks() {
        let a = bw_figures(8, 100, 1000, Some(2e8), crate::stats::histogram(&[1e-6]));
        let b = bw_figures(8, 100, 2000, Some(1e8), crate::stats::histogram(&[2e-6]));
        let Figures::Bw {
            iterations,
            peak,
            average,
            msgs_per_s,
            histogram,
        } = sum_bw(&[a, b])
        else {
            panic!()
        };
        assert_eq!(iterations, 200);
        assert_eq!(peak, Some(8.0 * 3e8));
        // 100 messages in 1 us plus 100 in 2 us.
        assert_eq!(msgs_per_s, 1e8 + 5e7);
        assert_eq!(average, 8.0 * 1.5e8);
        assert_eq!(histogram.len(), 2);
        let no_peak = bw_figures(8, 100, 1000, None, empty_histogram());
        let Figures::Bw { peak, .. } =
            sum_bw(&[no_peak, bw_figures(8, 1, 1, Some(1.0), empty_histogram())])
        else {
            panic!()
        };
        assert_eq!(peak, None);
    }

    #[test]
    fn merged_latency_of_all_pairs() {
        let part = |v: &[f64]| Figures::Lat {
            iterations: v.len() as u64,
            stats: crate::verbs::measure::lat::perftest_stats(&[1.0, 2.0, 3.0]).unwrap(),
            histogram: crate::verbs::measure::lat::histogram_of(v),
        };
        let Figures::Lat {
            iterations, stats, ..
        } = all_lat(&[part(&[1000.0, 2000.0]), part(&[3000.0, 4000.0])])
        else {
            panic!()
        };
        assert_eq!(iterations, 4);
        // From the histogram: exact to its 3 significant digits.
        assert_eq!(stats.t_min_us, 1.0);
        assert!(
            (stats.t_max_us - 4.0).abs() <= 4.0 * 1e-3,
            "{}",
            stats.t_max_us
        );
        assert!(
            (stats.t_avg_us - 2.5).abs() <= 2.5 * 1e-3,
            "{}",
            stats.t_avg_us
        );
    }

    #[test]
    fn one_sides_bandwidth_figures() {
        // 5000 messages of 64 KiB in 0.1 s, peak 60000 messages/s.
        let Figures::Bw {
            iterations,
            peak,
            average,
            msgs_per_s,
            ..
        } = bw_figures(65536, 5000, 100_000_000, Some(60_000.0), empty_histogram())
        else {
            panic!()
        };
        assert_eq!((iterations, msgs_per_s), (5000, 50_000.0));
        assert_eq!(average, 50_000.0 * 65536.0);
        assert_eq!(peak, Some(60_000.0 * 65536.0));
    }

    /// The Hello of `host`'s `device` port 1 at `gbit` Gb/s (None: no rate).
    fn end(host: &str, device: &str, gbit: Option<f64>) -> Hello {
        Hello {
            host: host.into(),
            device: device.into(),
            rate: gbit.map(|g| PortRate {
                gbit_per_s: g,
                text: format!("{g} Gb/sec (4X)"),
            }),
            ..hello()
        }
    }

    #[test]
    fn the_port_limit_is_the_slower_sides_total_rate() {
        let (a, b) = (
            end("a", "mlx5_0", Some(100.0)),
            end("b", "mlx5_0", Some(200.0)),
        );
        let limit = port_limit(&[&a], &[&b], false).unwrap();
        assert_eq!(limit.name, "port rate mlx5_0:1 100 Gb/sec (4X)");
        assert_eq!(limit.gbs, 12.5);
        let both = port_limit(&[&a], &[&b], true).unwrap();
        assert_eq!(
            both.name,
            "port rate mlx5_0:1 100 Gb/sec (4X), both directions"
        );
        assert_eq!(both.gbs, 25.0);
        // Two clients on one port count it once; two server ports add up.
        let (b1, c) = (
            end("b", "mlx5_1", Some(200.0)),
            end("c", "mlx5_0", Some(50.0)),
        );
        let shared = port_limit(&[&a, &a], &[&b, &b1], false).unwrap();
        assert_eq!(shared.gbs, 12.5);
        let servers =
            port_limit(&[&a, &end("a", "mlx5_1", Some(100.0))], &[&c, &c], false).unwrap();
        assert_eq!(
            (servers.name.as_str(), servers.gbs),
            ("port rate mlx5_0:1 50 Gb/sec (4X)", 6.25)
        );
        let two = port_limit(&[&c, &end("d", "mlx5_0", Some(50.0))], &[&b, &b1], false).unwrap();
        assert_eq!(
            (two.name.as_str(), two.gbs),
            (
                "port rate mlx5_0:1 50 Gb/sec (4X) + mlx5_0:1 50 Gb/sec (4X)",
                12.5
            )
        );
        assert_eq!(port_limit(&[&a], &[&end("b", "x", None)], false), None);
    }

    fn bw_report(size: u64, messages: u64, elapsed_ns: u64) -> Option<Report> {
        Some(Report {
            validation: None,
            size,
            bw: Some(BwReport {
                messages,
                elapsed_ns,
                peak_msgs_per_s: None,
                histogram: histogram_bytes(&crate::stats::histogram(&[1e-6])),
            }),
            lat: None,
        })
    }

    fn plan(bench: Benchmark, args: &[&str]) -> Plan {
        parse(
            bench,
            std::iter::once(bench.program()).chain(args.iter().copied()),
        )
        .unwrap()
    }

    fn iterations_and_rate(f: &Figures) -> (u64, f64) {
        match f {
            Figures::Bw {
                iterations,
                msgs_per_s,
                ..
            } => (*iterations, *msgs_per_s),
            Figures::Lat { .. } => panic!("bandwidth expected"),
        }
    }

    #[test]
    fn one_pair_is_one_unlabelled_line_of_the_client() {
        let p = plan(Benchmark::new(Verb::Write, Test::Bw), &[]);
        let hellos = [end("a", "rxe0", Some(10.0)), end("b", "rxe1", Some(10.0))];
        let lines = lines_of(&p, 8, &[bw_report(8, 1000, 1_000_000), None], &hellos, 1).unwrap();
        assert_eq!(lines.len(), 1);
        let l = &lines[0];
        assert_eq!((l.size, l.label.as_deref()), (8, None));
        assert_eq!(
            (l.devices.as_str(), l.hosts.clone()),
            ("rxe0:1,rxe1:1", vec!["a".to_string(), "b".into()])
        );
        assert_eq!(iterations_and_rate(&l.figures), (1000, 1e6));
        assert_eq!(l.limit.as_ref().map(|l| l.gbs), Some(1.25));
    }

    #[test]
    fn bidirectional_pairs_add_both_directions_but_count_one_sides_iterations() {
        let p = plan(Benchmark::new(Verb::Write, Test::Bw), &["-b"]);
        let hellos = [end("a", "rxe0", Some(10.0)), end("b", "rxe1", Some(10.0))];
        let reports = [bw_report(8, 1000, 1_000_000), bw_report(8, 3000, 1_000_000)];
        let lines = lines_of(&p, 8, &reports, &hellos, 1).unwrap();
        assert_eq!(iterations_and_rate(&lines[0].figures), (1000, 4e6));
        assert_eq!(lines[0].limit.as_ref().map(|l| l.gbs), Some(2.5));
    }

    #[test]
    fn several_pairs_get_a_line_each_and_their_sum() {
        let p = plan(Benchmark::new(Verb::Write, Test::Bw), &[]);
        // Endpoints 0, 1 are the clients of pairs 0, 1; 2, 3 their servers.
        let hellos = [
            end("a", "rxe0", Some(10.0)),
            end("a", "rxe1", Some(10.0)),
            end("b", "rxe0", Some(10.0)),
            end("b", "rxe1", Some(10.0)),
        ];
        let reports = [
            bw_report(8, 1000, 1_000_000),
            bw_report(8, 2000, 1_000_000),
            None,
            None,
        ];
        let lines = lines_of(&p, 8, &reports, &hellos, 2).unwrap();
        let labels: Vec<_> = lines.iter().map(|l| l.label.clone().unwrap()).collect();
        assert_eq!(labels, ["0", "1", "sum"]);
        assert_eq!(iterations_and_rate(&lines[1].figures), (2000, 2e6));
        assert_eq!(iterations_and_rate(&lines[2].figures), (3000, 3e6));
        assert_eq!(lines[1].devices, "rxe1:1,rxe1:1");
        assert_eq!(lines[2].devices, "rxe0:1,rxe0:1,rxe1:1,rxe1:1");
        assert_eq!(lines[2].hosts, ["a", "b", "a", "b"]);
        // Each side's two ports add up.
        assert_eq!(lines[2].limit.as_ref().map(|l| l.gbs), Some(2.5));
        let e = lines_of(&p, 8, &[None, None, None, None], &hellos, 2).unwrap_err();
        assert_eq!(e.to_string(), "pair 0 sent no measurement of 8 B");
    }

    #[test]
    fn latency_lines_are_the_clients_and_all_pairs_merged() {
        let p = plan(Benchmark::new(Verb::Write, Test::Lat), &[]);
        let report = |samples: &[f64]| {
            Some(Report {
                validation: None,
                size: 2,
                bw: None,
                lat: Some(LatReport {
                    iterations: samples.len() as u64,
                    stats: crate::verbs::measure::lat::perftest_stats(samples).unwrap(),
                    histogram: histogram_bytes(&crate::verbs::measure::lat::histogram_of(samples)),
                }),
            })
        };
        let hellos = [
            end("a", "r0", None),
            end("a", "r1", None),
            end("b", "r0", None),
            end("b", "r1", None),
        ];
        let reports = [
            report(&[1000.0, 2000.0, 3000.0]),
            report(&[5000.0; 4]),
            None,
            None,
        ];
        let lines = lines_of(&p, 2, &reports, &hellos, 2).unwrap();
        assert_eq!(lines[2].label.as_deref(), Some("all"));
        let Figures::Lat {
            iterations, stats, ..
        } = &lines[2].figures
        else {
            panic!()
        };
        assert_eq!(*iterations, 7);
        assert_eq!(stats.t_min_us, 1.0);
        assert!(lines.iter().all(|l| l.limit.is_none()), "no rate, no limit");
        // The server's report is not the pair's.
        let e = lines_of(
            &p,
            2,
            &[None, None, report(&[1.0; 3]), report(&[1.0; 3])],
            &hellos,
            2,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "pair 0 sent no measurement of 2 B");
    }

    /// --report-both.
    mod directions {
        use super::*;
        use crate::report::verbs::Figures;
        use crate::verbs::exchange::wire::tests::hello;
        use crate::verbs::exchange::wire::{histogram_bytes, BwReport};
        use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
        use crate::verbs::flags::parse;
        use crate::verbs::measure::validate::Checked;
        use crate::verbs::results::figures::lines_of;

        fn report(messages: u64, wrong: Option<u64>) -> Option<Report> {
            Some(Report {
                validation: wrong.map(|wrong| Checked { messages, wrong }),
                size: 8,
                bw: Some(BwReport {
                    messages,
                    elapsed_ns: 1_000_000,
                    peak_msgs_per_s: Some(2e6),
                    histogram: histogram_bytes(&crate::stats::histogram(&[1e-6])),
                }),
                lat: None,
            })
        }

        fn rate(line: &Line) -> f64 {
            match &line.figures {
                Figures::Bw { msgs_per_s, .. } => *msgs_per_s,
                Figures::Lat { .. } => panic!("bandwidth expected"),
            }
        }

        fn lines(verb: Verb, args: &[&str], pairs: usize) -> Vec<Line> {
            let bench = Benchmark::new(verb, Test::Bw);
            let argv = std::iter::once(bench.program()).chain(args.iter().copied());
            let plan = parse(bench, argv).unwrap();
            let hellos: Vec<Hello> = (0..2 * pairs).map(|_| hello()).collect();
            let mut reports = Vec::new();
            for end in 0..2 * pairs {
                reports.push(report(1000 * (end as u64 + 1), Some(end as u64)));
            }
            lines_of(&plan, 8, &reports, &hellos, pairs).unwrap()
        }

        #[test]
        fn both_then_each_direction_from_the_end_that_posted_it() {
            let l = lines(Verb::Write, &["-b", "--report-both"], 1);
            let directions: Vec<_> = l.iter().map(|l| l.direction.unwrap().name()).collect();
            assert_eq!(directions, ["both", "client->server", "server->client"]);
            // 1000 + 2000 messages per ms; each direction its own.
            assert_eq!([rate(&l[0]), rate(&l[1]), rate(&l[2])], [3e6, 1e6, 2e6]);
            // A write's data is checked by the end that did not post it.
            assert_eq!([l[1].wrong, l[2].wrong], [Some(1), Some(0)]);
            // Reads: the client's posts fetch the server's data.
            let r = lines(Verb::Read, &["-b", "--report-both"], 1);
            assert_eq!(r[1].direction, Some(Direction::ServerToClient));
            assert_eq!((rate(&r[1]), r[1].wrong), (1e6, Some(0)));
            // Without the flag: perftest's one line, no direction.
            let plain = lines(Verb::Write, &["-b"], 1);
            assert_eq!(plain.len(), 1);
            assert_eq!(plain[0].direction, None);
        }

        #[test]
        fn several_pairs_keep_their_sum_and_list_the_directions_after_it() {
            let l = lines(Verb::Send, &["-b", "--report-both"], 2);
            let shown: Vec<_> = l
                .iter()
                .map(|l| (l.label.clone().unwrap(), l.direction.unwrap().name()))
                .collect();
            let expect = [
                ("0", "both"),
                ("1", "both"),
                ("sum", "both"),
                ("0", "client->server"),
                ("0", "server->client"),
                ("1", "client->server"),
                ("1", "server->client"),
            ];
            let expect: Vec<_> = expect.iter().map(|(a, b)| (a.to_string(), *b)).collect();
            assert_eq!(shown, expect);
            // Endpoints 0, 1 are clients (1000, 2000 messages), 2, 3 servers (3000, 4000):
            // the sum adds both pairs' both-direction lines only.
            assert_eq!(rate(&l[2]), 1e7);
        }
    }
}
