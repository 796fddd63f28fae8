//! alltoallv_perf: nccl-tests' alltoallv_perf (NCCL_TESTS_ALLTOALLV_*) on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::ALLTOALLV)
}
