//! ib_read_lat: perftest's ib_read_lat on fabricbench's verbs benchmarks.
fn main() -> std::process::ExitCode {
    fabricbench::verbs::main(fabricbench::verbs::Benchmark {
        verb: fabricbench::verbs::Verb::Read,
        test: fabricbench::verbs::Test::Lat,
    })
}
