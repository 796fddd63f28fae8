//! The columns the verbs table adds after perftest's with its reporting flags:
//! `--cpu_util` (perftest's `CPU_Util[%]`, its REPORT_EXT_CPU_UTIL format) and
//! `--report-both` (which direction of a `-b` pair a line is), and the
//! direction itself, as the table, the CSV and the JSON document name it.

/// With `--report-both`: which traffic of a bidirectional pair a line counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Data from the client to the server.
    ClientToServer,
    /// Data from the server to the client.
    ServerToClient,
    /// Both directions added, as perftest's `-b` line.
    Both,
}

impl Direction {
    /// The table's, CSV's and JSON's name.
    pub fn name(self) -> &'static str {
        match self {
            Direction::ClientToServer => "client->server",
            Direction::ServerToClient => "server->client",
            Direction::Both => "both",
        }
    }
}

/// Which of the added columns the table has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtraColumns {
    pub cpu_util: bool,
    pub directions: bool,
    /// --rounds R > 1: the 95% interval's half-width of each line's median.
    pub spread: bool,
}

impl ExtraColumns {
    /// Appended to perftest's column titles (RESULT_EXT_CPU_UTIL's text).
    pub fn titles(self) -> String {
        let mut out = String::new();
        if self.cpu_util {
            out.push_str("    CPU_Util[%]");
        }
        if self.directions {
            out.push_str("   direction");
        }
        if self.spread {
            out.push_str("   spread[+-%]");
        }
        out
    }

    /// Appended to a line's row: perftest's "\t    %-3.2f", then the direction,
    /// then the spread (`spread_pct`: None under 3 rounds).
    pub fn cells(
        self,
        direction: Option<Direction>,
        cpu_util: Option<f64>,
        spread_pct: Option<f64>,
    ) -> String {
        let mut out = String::new();
        if self.cpu_util {
            match cpu_util {
                Some(pct) => out.push_str(&format!("\t    {pct:<3.2}")),
                None => out.push_str("\t    N/A"),
            }
        }
        if self.directions {
            let name = direction.map_or("", Direction::name);
            out.push_str(&format!("\t{name}"));
        }
        if self.spread {
            match spread_pct {
                Some(pct) => out.push_str(&format!("\t   {pct:.2}")),
                None => out.push_str("\t   n/a"),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::perftest::tests::header;
    use crate::report::perftest::{PerftestTable, RESULT_LINE};
    use crate::report::verbs::tests::bw_line;
    use crate::report::verbs::{Line, VerbsResult};
    use crate::report::{Exporter, RunInfo, Summary};

    #[test]
    fn the_table_of_a_report_both_run_with_cpu_util() {
        let extra = ExtraColumns {
            cpu_util: true,
            directions: true,
            spread: false,
        };
        let mut table = PerftestTable::new(Vec::new(), header()).with_extra(extra);
        let run = RunInfo::default();
        table.start(&run).unwrap();
        let line = |d| Line {
            direction: Some(d),
            ..bw_line(None, None)
        };
        let result = VerbsResult {
            collective: "ib_write".into(),
            bidirectional: true,
            timestamp: String::new(),
            lines: vec![
                line(Direction::Both),
                line(Direction::ClientToServer),
                line(Direction::ServerToClient),
            ],
            counters: None,
            cpu_util: Some(42.5),
            round: 1,
            spread: None,
        };
        table.record(&run, &result).unwrap();
        table.finish(&run, &Summary::default()).unwrap();
        let text = String::from_utf8(table.into_inner()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[lines.len() - 5..],
            [
                " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]    CPU_Util[%]   direction",
                " 65536      5000             3750.00            3125.00\t\t     0.050000\t    42.50\tboth",
                " 65536      5000             3750.00            3125.00\t\t     0.050000\t    42.50\tclient->server",
                " 65536      5000             3750.00            3125.00\t\t     0.050000\t    42.50\tserver->client",
                RESULT_LINE,
            ]
        );
    }

    #[test]
    fn cpu_and_direction_cells_in_perftest_format() {
        let both = ExtraColumns {
            cpu_util: true,
            directions: true,
            spread: false,
        };
        assert_eq!(both.titles(), "    CPU_Util[%]   direction");
        let line = Line {
            direction: Some(Direction::ServerToClient),
            ..bw_line(None, None)
        };
        assert_eq!(
            both.cells(line.direction, Some(3.456), None),
            "\t    3.46\tserver->client"
        );
        assert_eq!(
            both.cells(line.direction, None, None),
            "\t    N/A\tserver->client"
        );
        let cpu = ExtraColumns {
            cpu_util: true,
            directions: false,
            spread: false,
        };
        // perftest's %-3.2f: at least 3 wide, left-aligned.
        assert_eq!(cpu.cells(line.direction, Some(100.0), None), "\t    100.00");
        assert_eq!(ExtraColumns::default().titles(), "");
        let spread = ExtraColumns {
            spread: true,
            ..ExtraColumns::default()
        };
        assert_eq!(spread.titles(), "   spread[+-%]");
        assert_eq!(spread.cells(None, None, Some(1.234)), "\t   1.23");
        assert_eq!(spread.cells(None, None, None), "\t   n/a");
        assert_eq!(
            ExtraColumns::default().cells(line.direction, Some(1.0), Some(2.0)),
            ""
        );
    }
}
