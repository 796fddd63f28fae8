//! sendrecv_perf: nccl-tests' sendrecv_perf on fabricbench's driver.
fn main() -> std::process::ExitCode {
    fabricbench::driver::collective_main(&fabricbench::collective::SendRecv)
}
