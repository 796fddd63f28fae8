//! fabricbench-docs: the reference, man pages and completions, from the code.
fn main() -> std::process::ExitCode {
    fabricbench::docgen::cli::main()
}
