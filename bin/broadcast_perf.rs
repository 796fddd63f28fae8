//! broadcast_perf: nccl-tests' broadcast_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::Broadcast)
}
