//! Which of the eight binaries runs: the verb and the test.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Write,
    Read,
    Send,
    /// 8-byte RDMA atomics (-A: fetch-and-add or compare-and-swap).
    Atomic,
}

impl Verb {
    /// The client fetches from the peer's memory (read, atomic): the peer's CPU
    /// takes no part, a latency sample is a whole round trip, no inline data.
    pub fn fetches(self) -> bool {
        matches!(self, Verb::Read | Verb::Atomic)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Bw,
    Lat,
}

/// One of the eight binaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Benchmark {
    pub verb: Verb,
    pub test: Test,
}

impl Benchmark {
    pub const fn new(verb: Verb, test: Test) -> Benchmark {
        Benchmark { verb, test }
    }

    /// The eight binaries: the bandwidth tests, then the latency tests.
    pub const ALL: [Benchmark; 8] = [
        Benchmark::new(Verb::Write, Test::Bw),
        Benchmark::new(Verb::Read, Test::Bw),
        Benchmark::new(Verb::Send, Test::Bw),
        Benchmark::new(Verb::Atomic, Test::Bw),
        Benchmark::new(Verb::Write, Test::Lat),
        Benchmark::new(Verb::Read, Test::Lat),
        Benchmark::new(Verb::Send, Test::Lat),
        Benchmark::new(Verb::Atomic, Test::Lat),
    ];

    pub fn program(self) -> &'static str {
        match (self.verb, self.test) {
            (Verb::Write, Test::Bw) => "ib_write_bw",
            (Verb::Read, Test::Bw) => "ib_read_bw",
            (Verb::Send, Test::Bw) => "ib_send_bw",
            (Verb::Write, Test::Lat) => "ib_write_lat",
            (Verb::Read, Test::Lat) => "ib_read_lat",
            (Verb::Send, Test::Lat) => "ib_send_lat",
            (Verb::Atomic, Test::Bw) => "ib_atomic_bw",
            (Verb::Atomic, Test::Lat) => "ib_atomic_lat",
        }
    }

    /// The CSV `collective` column.
    pub fn collective(self) -> &'static str {
        match self.verb {
            Verb::Write => "ib_write",
            Verb::Read => "ib_read",
            Verb::Send => "ib_send",
            Verb::Atomic => "ib_atomic",
        }
    }
}
