//! rack_check: runs doctor and a spec's benchmarks, checks thresholds, writes a report.
fn main() -> std::process::ExitCode {
    fabricbench::rack::cli::main()
}
