//! ib_atomic_bw: perftest's ib_atomic_bw on fabricbench's verbs benchmarks.
use fabricbench::verbs::{self, Benchmark, Test, Verb};

fn main() -> std::process::ExitCode {
    verbs::main(Benchmark::new(Verb::Atomic, Test::Bw))
}
