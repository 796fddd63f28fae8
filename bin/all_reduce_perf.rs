//! all_reduce_perf: nccl-tests' all_reduce_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::AllReduce)
}
