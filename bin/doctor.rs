//! doctor: checks that every node of a rack is configured alike and as RDMA needs it.
fn main() -> std::process::ExitCode {
    fabricbench::doctor::cli::main()
}
