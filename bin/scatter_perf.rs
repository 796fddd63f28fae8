//! scatter_perf: nccl-tests' scatter_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::Scatter)
}
