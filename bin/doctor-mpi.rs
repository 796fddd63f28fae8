//! doctor-mpi: doctor across nodes, gathering every node's facts over MPI (`doctor` runs it under a launcher).
fn main() -> std::process::ExitCode {
    fabricbench::doctor::cli::main_mpi()
}
