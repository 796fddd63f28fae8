//! ib_send_bw: perftest's ib_send_bw on fabricbench's verbs benchmarks.
fn main() -> std::process::ExitCode {
    fabricbench::verbs::main(fabricbench::verbs::Benchmark {
        verb: fabricbench::verbs::Verb::Send,
        test: fabricbench::verbs::Test::Bw,
    })
}
