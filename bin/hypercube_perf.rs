//! hypercube_perf: nccl-tests' hypercube_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::HyperCube)
}
