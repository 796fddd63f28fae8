//! reduce_scatter_perf: nccl-tests' reduce_scatter_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::ReduceScatter)
}
