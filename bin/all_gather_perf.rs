//! all_gather_perf: nccl-tests' all_gather_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::AllGather)
}
