//! compare: a baseline CSV against candidates (see `fabricbench::compare`).
//! Exit status: 0 no regression, 1 a regression beyond the thresholds, 2 bad input.
fn main() -> std::process::ExitCode {
    fabricbench::compare::cli::main()
}
