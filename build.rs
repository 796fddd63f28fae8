// MPI_IN_PLACE is a C macro with a different value in every MPI (Open MPI: (void*)1,
// MPICH: (void*)-1) and rsmpi does not export it, so a two-line C shim reads it.
// The same headers name the MPI this build is made against (`--version`), and git
// names the commit.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/backend/mpi_shim.c");
    println!("cargo:rerun-if-changed=src/backend/mpi_version.h");
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let lib = build_probe_mpi::probe().unwrap_or_else(|errs| {
        panic!("cannot find MPI (install openmpi-bin libopenmpi-dev): {errs:?}")
    });
    let mut build = cc::Build::new();
    for dir in &lib.include_paths {
        build.include(dir);
    }
    let mpi = built_against(build.clone());
    build.file("src/backend/mpi_shim.c");
    build.compile("fabricbench_mpi_shim");
    println!("cargo:rustc-env=FABRICBENCH_MPI_BUILT={mpi}");
    println!("cargo:rustc-env=FABRICBENCH_COMMIT={}", commit());
    println!("cargo:rustc-env=FABRICBENCH_BUILD_DATE={}", build_date());
}

/// "Open MPI 4.1.4", "MPICH 4.0.2": mpi.h's version macros, through the preprocessor.
fn built_against(mut probe: cc::Build) -> String {
    probe.file("src/backend/mpi_version.h");
    let text = String::from_utf8_lossy(&probe.expand()).into_owned();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("fabricbench_mpi "))
        .and_then(|l| {
            let (name, version) = l.trim_start_matches('"').split_once('"')?;
            let version: String = version.chars().filter(|c| !"\" \t".contains(*c)).collect();
            Some(format!("{name} {version}"))
        })
        .unwrap_or_else(|| "unknown MPI".into())
}

/// `git describe` of the source tree; "unknown" outside git. Rebuilt when HEAD
/// moves (a new commit or a checkout), not on every edit.
fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    for path in ["HEAD", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    git(&["describe", "--always", "--tags"]).unwrap_or_else(|| "unknown".into())
}

/// The build's UTC date ("2026-12-04"), or SOURCE_DATE_EPOCH's for a reproducible build.
fn build_date() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
