//! ib_read_bw: perftest's ib_read_bw on fabricbench's verbs benchmarks.
fn main() -> std::process::ExitCode {
    fabricbench::verbs::main(fabricbench::verbs::Benchmark {
        verb: fabricbench::verbs::Verb::Read,
        test: fabricbench::verbs::Test::Bw,
    })
}
