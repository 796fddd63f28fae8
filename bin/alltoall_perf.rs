//! alltoall_perf: nccl-tests' alltoall_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::AlltoAll)
}
