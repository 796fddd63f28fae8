//! `--report-both`: a `-b` pair's two directions on lines of their own, each
//! from the measurement of the end that posted it, next to perftest's line of
//! both added. A line's direction is where its data goes: the poster's to the
//! peer for write and send, the peer's to the poster for read and atomics.

use super::args::Plan;
use super::figures::{bw_figures, port_limit};
use super::wire::{histogram_from, Hello, Report};
use crate::report::perftest_extra::Direction;
use crate::report::verbs::Line;
use anyhow::anyhow;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::verbs::Figures;
    use crate::verbs::args::parse;
    use crate::verbs::bench::{Benchmark, Test, Verb};
    use crate::verbs::figures::lines_of;
    use crate::verbs::validate::Checked;
    use crate::verbs::wire::tests::hello;
    use crate::verbs::wire::{histogram_bytes, BwReport};

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
