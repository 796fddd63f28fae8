//! ib_write_bw: perftest's ib_write_bw on fabricbench's verbs benchmarks.
use fabricbench::verbs::{self, Benchmark, Test, Verb};

fn main() -> std::process::ExitCode {
    verbs::main(Benchmark::new(Verb::Write, Test::Bw))
}
