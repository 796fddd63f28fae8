//! ib_write_bw: perftest's ib_write_bw on fabricbench's verbs benchmarks.
fn main() -> std::process::ExitCode {
    fabricbench::verbs::main(fabricbench::verbs::Benchmark {
        verb: fabricbench::verbs::Verb::Write,
        test: fabricbench::verbs::Test::Bw,
    })
}
