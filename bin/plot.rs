//! plot: the charts of one or more fabricbench CSVs (see `fabricbench::plot`).
fn main() -> std::process::ExitCode {
    fabricbench::plot::cli::main()
}
