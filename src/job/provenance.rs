//! What this binary is: the commit and date it was built from, the MPI its
//! mpi.h came from, and the MPI library it runs on (`--version`, the table header).

/// `git describe` of the source at build time; "unknown" outside git.
pub const COMMIT: &str = env!("FABRICBENCH_COMMIT");
/// The build's UTC date (SOURCE_DATE_EPOCH's when set).
pub const BUILD_DATE: &str = env!("FABRICBENCH_BUILD_DATE");
/// The MPI whose headers this build includes: "Open MPI 4.1.4", "MPICH 4.0.2".
pub const MPI_BUILT: &str = env!("FABRICBENCH_MPI_BUILT");

/// The MPI library this process runs on (MPI_Get_library_version, callable
/// before MPI_Init), shortened to its name and version: "Open MPI v4.1.4", "MPICH 4.0.2".
pub fn mpi_running() -> String {
    mpi::environment::library_version()
        .map(|v| short_library_version(&v))
        .unwrap_or_else(|_| "unknown MPI".into())
}

/// "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4";
/// "MPICH Version:\t4.0.2\nMPICH Release date: ..." -> "MPICH 4.0.2".
fn short_library_version(full: &str) -> String {
    let first = full.split([',', '\n']).next().unwrap_or("").trim();
    match first.split_once("Version:") {
        Some((name, version)) => format!("{} {}", name.trim(), version.trim()),
        None => first.to_string(),
    }
}

/// The build, for the table header: "commit 904842a, built 2026-12-04 against Open MPI 4.1.4".
pub fn build_line() -> String {
    format!("commit {COMMIT}, built {BUILD_DATE} against {MPI_BUILT}")
}

/// `--version`'s text after the program's name.
pub fn version() -> String {
    format!(
        "{} ({}; running {})",
        env!("CARGO_PKG_VERSION"),
        build_line(),
        mpi_running()
    )
}

/// `--version` of a tool that never starts MPI (plot, compare): it does not load
/// an MPI library, so it names only the one it was built against.
pub fn version_without_mpi() -> String {
    format!(
        "{} ({}; runs without MPI)",
        env!("CARGO_PKG_VERSION"),
        build_line()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_versions_are_shortened_to_name_and_version() {
        assert_eq!(
            short_library_version("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4"),
            "Open MPI v4.1.4"
        );
        assert_eq!(
            short_library_version("MPICH Version:\t4.0.2\nMPICH Release date:\tThu Mar 3"),
            "MPICH 4.0.2"
        );
        assert_eq!(
            short_library_version("Intel(R) MPI Library 2021.13 for Linux* OS\n"),
            "Intel(R) MPI Library 2021.13 for Linux* OS"
        );
    }

    #[test]
    fn the_build_names_its_commit_date_and_mpi() {
        assert!(!COMMIT.is_empty());
        assert_eq!(BUILD_DATE.len(), 10, "{BUILD_DATE}");
        assert!(
            ["Open MPI ", "MPICH ", "Intel MPI ", "MVAPICH"]
                .iter()
                .any(|m| MPI_BUILT.starts_with(m)),
            "{MPI_BUILT}"
        );
        let v = version();
        assert!(
            v.contains(COMMIT) && v.contains(MPI_BUILT) && v.contains("running "),
            "{v}"
        );
    }
}
