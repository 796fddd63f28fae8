//! ib_atomic_lat: perftest's ib_atomic_lat on fabricbench's verbs benchmarks.
use fabricbench::verbs::{self, Benchmark, Test, Verb};

fn main() -> std::process::ExitCode {
    verbs::main(Benchmark::new(Verb::Atomic, Test::Lat))
}
