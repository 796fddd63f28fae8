//! fabricbench-stats: the ratio of medians of two lists of figures, its 95% interval and a verdict.
fn main() -> std::process::ExitCode {
    fabricbench::compare::figures::main()
}
