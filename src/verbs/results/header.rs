//! What perftest's header says for this benchmark and this side, decided from
//! the plan, both sides' details and the connection: the facts that
//! `report::perftest` renders.

use crate::report::perftest::{
    Columns, Connection, PerftestHeader, PostLines, QpAddress, ReadsOrInline,
};
use crate::sysfs::Root;
use crate::verbs::device::show_gid;
use crate::verbs::exchange::wire::Hello;
use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
use crate::verbs::flags::parity::AtomicOp;
use crate::verbs::flags::Plan;
use crate::verbs::{device::numa, device::path};

/// perftest's title: "RDMA_Write BW Test", "Send Bidirectional BW Test",
/// "Atomic FETCH_AND_ADD Latency Test", "RDMA_Write Post List BW Test" (-l), ...
pub fn title(bench: Benchmark, bidirectional: bool, atomic: AtomicOp, post_list: bool) -> String {
    let verb = match bench.verb {
        Verb::Write => "RDMA_Write".to_string(),
        Verb::Read => "RDMA_Read".to_string(),
        Verb::Send => "Send".to_string(),
        Verb::Atomic => format!("Atomic {}", atomic.name()),
    };
    let list = if post_list { "Post List " } else { "" };
    match bench.test {
        Test::Bw if bidirectional => format!("{verb} Bidirectional {list}BW Test"),
        Test::Bw => format!("{verb} {list}BW Test"),
        Test::Lat => format!("{verb} Latency Test"),
    }
}

/// What the header is made from.
pub struct VerbsHeader<'a> {
    pub plan: &'a Plan,
    pub mine: &'a Hello,
    pub peer: &'a Hello,
    pub transport: &'a str,
    /// The GID line's value (None: LID routing).
    pub gid: Option<String>,
    pub mtu: u32,
    pub out_reads: u8,
    /// Shows TX depth (perftest shows it on the sending side).
    pub sending: bool,
    /// "Ethernet" (TCP, as perftest says) or "MPI (4 ranks, 2 pairs)".
    pub exchange: String,
    /// Pairs of the run: several get a #pair column.
    pub pair_count: usize,
    /// One line per pair under mpirun.
    pub pairs: Vec<String>,
    pub warnings: Vec<String>,
    /// The post API, -e, -l, the CQE batch.
    pub post: PostLines,
}

impl VerbsHeader<'_> {
    /// The header's facts: which of perftest's lines this side shows, and their values.
    pub fn facts(self) -> PerftestHeader {
        let p = self.plan;
        let (verb, test) = (p.bench.verb, p.bench.test);
        let routed = self.gid.is_some();
        PerftestHeader {
            title: title(
                p.bench,
                p.bidirectional,
                p.options.atomic,
                p.post.post_list > 1,
            ),
            device: self.mine.device.clone(),
            qps: p.qps,
            transport: self.transport.to_string(),
            connection: p.options.connection.name().to_string(),
            tx_depth: (self.sending || p.bidirectional).then_some(p.tx_depth),
            rx_depth: (verb == Verb::Send
                && (!self.sending || p.bidirectional || test == Test::Lat))
                .then_some(p.rx_depth),
            cq_mod: (test == Test::Bw).then_some(p.cq_mod),
            mtu: self.mtu,
            link_type: self.mine.link.name().to_string(),
            gid: self.gid,
            reads_or_inline: if verb.fetches() {
                ReadsOrInline::OutstandReads(self.out_reads)
            } else {
                ReadsOrInline::MaxInline(p.inline_size)
            },
            exchange: self.exchange,
            rdma_cm_qps: p.cm.connect_qps,
            qp_timeout: p.qp_timeout,
            port_rate: self.mine.rate.as_ref().map(|r| r.text.clone()),
            timing: format!(
                "{}; {}",
                crate::backend::TickSource::host().name(),
                match test {
                    // -D: perftest's SAMPLE window (-f margins left out).
                    Test::Bw if matches!(p.length, crate::verbs::flags::Length::Duration(_)) => {
                        "BW of the completions inside the -D window (-f margins left out), peak over any window"
                    }
                    Test::Bw => "BW from first post to last completion, peak over any window",
                    Test::Lat if verb == Verb::Read => "latency = round trip of one read",
                    Test::Lat if verb == Verb::Atomic => "latency = round trip of one atomic",
                    Test::Lat => "latency = half the round trip",
                }
            ),
            pairs: self.pairs,
            warnings: self.warnings,
            local: connection(self.mine),
            remote: connection(self.peer),
            columns: match test {
                Test::Bw => Columns::Bandwidth {
                    gbits: p.report_gbits,
                },
                Test::Lat => Columns::Latency,
            },
            labelled: self.pair_count > 1,
            validation: p.options.validate,
            numa_node: p
                .path
                .placement
                .as_ref()
                .map(|placed| numa::header_value(placed, numa::current_node(&Root::new("/")))),
            path: path::describe(&p.path, routed, p.path.pkey),
            post: self.post,
        }
    }
}

/// A side's QPs as its "address" lines show them.
fn connection(hello: &Hello) -> Connection {
    Connection {
        lid: hello.lid,
        gid: hello.gid_index.map(|_| show_gid(&hello.gid)),
        qps: hello
            .qps
            .iter()
            .map(|q| QpAddress {
                qpn: q.qpn,
                psn: q.psn,
                rkey: q.rkey,
                vaddr: q.addr,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::perftest::{connection_lines, header_block, RESULT_LINE};
    use crate::verbs::device::{LinkLayer, PortRate};
    use crate::verbs::exchange::wire::{QpInfo, PROTOCOL};
    use crate::verbs::flags::parse;

    const WRITE_BW: Benchmark = Benchmark::new(Verb::Write, Test::Bw);

    #[test]
    fn header_block_has_perftests_lines() {
        let plan = parse(WRITE_BW, ["ib_write_bw", "-u", "18"]).unwrap();
        let hello = Hello {
            protocol: PROTOCOL.into(),
            program: "ib_write_bw".into(),
            settings: vec![],
            host: "h".into(),
            device: "rxe0".into(),
            port: 1,
            link: LinkLayer::Ethernet,
            lid: 0,
            gid: "::ffff:127.0.0.1".parse().unwrap(),
            gid_index: Some(1),
            active_mtu: 4096,
            max_rd_atomic: 128,
            rate: Some(PortRate {
                gbit_per_s: 10.0,
                text: "10 Gb/sec (1X QDR)".into(),
            }),
            qps: vec![QpInfo {
                qpn: 0x12,
                psn: 0x286f0b,
                rkey: 0x328,
                addr: 0x5636d2394000,
                len: 65536,
            }],
        };
        let facts = VerbsHeader {
            plan: &plan,
            mine: &hello,
            peer: &hello,
            transport: "IB",
            gid: Some(
                "1 (RoCE v2 ::ffff:127.0.0.1 on lo, chosen automatically; -x overrides)".into(),
            ),
            mtu: 4096,
            out_reads: 1,
            sending: true,
            exchange: "Ethernet".into(),
            pair_count: 1,
            pairs: vec![],
            warnings: vec!["w".into()],
            post: PostLines::default(),
        }
        .facts();
        let lines = header_block(&facts, env!("CARGO_PKG_VERSION"));
        for want in [
            "                    RDMA_Write BW Test",
            " Dual-port       : OFF\t\tDevice         : rxe0",
            " Number of qps   : 1\t\tTransport type : IB",
            " TX depth        : 128",
            " CQ Moderation   : 1",
            " Mtu             : 4096[B]",
            " Link type       : Ethernet",
            " Max inline data : 0[B]",
            " QP timeout      : 18 (ACK timeout 4.096 us * 2^18 = 1.07 s)",
            " Port rate       : 10 Gb/sec (1X QDR)",
            " WARNING: w",
        ] {
            assert!(
                lines.iter().any(|l| l == want),
                "missing {want:?} in {lines:#?}"
            );
        }
        assert_eq!(lines[0], RESULT_LINE);
        assert_eq!(
            connection_lines("local", &facts.local),
            vec![
                " local address: LID 0x0000 QPN 0x0012 PSN 0x286f0b RKey 0x000328 VAddr 0x005636d2394000",
                " GID: ::ffff:127.0.0.1"
            ]
        );
        assert!(!facts.labelled);
        assert_eq!(facts.columns, Columns::Bandwidth { gbits: false });
    }

    #[test]
    fn which_lines_each_side_shows() {
        let hello = crate::verbs::exchange::wire::tests::hello();
        let facts = |bench: Benchmark, args: &[&str], sending: bool| {
            let plan = parse(
                bench,
                std::iter::once(bench.program()).chain(args.iter().copied()),
            )
            .unwrap();
            VerbsHeader {
                plan: &plan,
                mine: &hello,
                peer: &hello,
                transport: "IB",
                gid: None,
                mtu: 1024,
                out_reads: 7,
                sending,
                exchange: "Ethernet".into(),
                pair_count: 2,
                pairs: vec![],
                warnings: vec![],
                post: PostLines::default(),
            }
            .facts()
        };
        // The server of a send test receives: RX depth, no TX depth.
        let send_server = facts(Benchmark::new(Verb::Send, Test::Bw), &[], false);
        assert_eq!(
            (send_server.tx_depth, send_server.rx_depth),
            (None, Some(512))
        );
        assert_eq!(send_server.title, "Send BW Test");
        assert!(send_server.labelled);
        let both = facts(
            Benchmark::new(Verb::Send, Test::Bw),
            &["-b", "--report_gbits"],
            false,
        );
        assert_eq!((both.tx_depth, both.rx_depth), (Some(128), Some(512)));
        assert_eq!(both.title, "Send Bidirectional BW Test");
        assert_eq!(both.columns, Columns::Bandwidth { gbits: true });
        let read_lat = facts(Benchmark::new(Verb::Read, Test::Lat), &[], true);
        assert_eq!(read_lat.reads_or_inline, ReadsOrInline::OutstandReads(7));
        assert_eq!((read_lat.cq_mod, read_lat.rx_depth), (None, None));
        let clock = crate::backend::TickSource::host().name();
        assert_eq!(
            read_lat.timing,
            format!("{clock}; latency = round trip of one read")
        );
        assert_eq!(read_lat.columns, Columns::Latency);
        let write_lat = facts(Benchmark::new(Verb::Write, Test::Lat), &[], true);
        assert_eq!(write_lat.reads_or_inline, ReadsOrInline::MaxInline(220));
        assert_eq!(write_lat.title, "RDMA_Write Latency Test");
    }
}
