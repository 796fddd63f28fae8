//! gather_perf: nccl-tests' gather_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::Gather)
}
