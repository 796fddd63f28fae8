//! fabricbench against real NCCL libraries, on a host without a GPU: the wheels of
//! scripts/nccl-wheels.txt, which scripts/nccl-wheels.sh fetches into a cache
//! (scripts/test.sh runs it first; a test that needs a missing wheel fails and
//! says how to fetch it).
//!
//! - The ABI check: each library opens, ncclGetVersion equals its nccl.h's
//!   NCCL_VERSION_CODE, every entry point fabricbench resolves for that version is
//!   in the library and declared in nccl.h, and every layout, initial value and
//!   code fabricbench assumes (`backend::nccl::abi_facts`) is what a C program
//!   compiled against that nccl.h prints.
//! - The binaries with a wheel: the nccl backend names NCCL before the driver
//!   error, `--nccl-lib` mistakes are usage errors, doctor names the NCCL the node
//!   would use, and scripts/gpu-check.sh's first step says what it saw.

mod common;

use common::{one_error, scratch, text};
use fabricbench::gpu::nccl_lib::abi::AbiFact;
use fabricbench::gpu::nccl_lib::symbols::{FEATURES, REQUIRED};
use fabricbench::gpu::nccl_lib::{version_string, Nccl};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const DOCTOR: &str = env!("CARGO_BIN_EXE_doctor");

/// One wheel of scripts/nccl-wheels.txt, as scripts/nccl-wheels.sh caches it.
struct Wheel {
    package: String,
    version: String,
    dir: PathBuf,
}

impl Wheel {
    fn lib(&self) -> PathBuf {
        self.dir.join("lib/libnccl.so.2")
    }
    fn header(&self) -> PathBuf {
        self.dir.join("include/nccl.h")
    }
    fn name(&self) -> String {
        format!("{} {}", self.package, self.version)
    }
}

/// The cache scripts/nccl-wheels.sh fills (the same variables decide).
fn cache_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("FABRICBENCH_NCCL_CACHE").unwrap_or_else(|| {
        var("XDG_CACHE_HOME")
            .unwrap_or_else(|| var("HOME").unwrap_or_default().join(".cache"))
            .join("fabricbench/nccl")
    })
}

/// Every wheel of scripts/nccl-wheels.txt; panics, saying how to fetch them, when
/// one is not in the cache: the check must not pass for want of a library.
fn wheels() -> Vec<Wheel> {
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/nccl-wheels.txt");
    let text = std::fs::read_to_string(&list).unwrap();
    let wheels: Vec<Wheel> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (package, version) = l.split_once(' ').expect("PACKAGE VERSION");
            let dir = cache_dir().join(format!("{package}-{}", version.trim()));
            Wheel {
                package: package.into(),
                version: version.trim().into(),
                dir,
            }
        })
        .collect();
    assert!(!wheels.is_empty(), "{} lists no wheel", list.display());
    for w in &wheels {
        assert!(
            w.lib().is_file() && w.header().is_file(),
            "the NCCL wheel {} is not in the cache ({}): run scripts/nccl-wheels.sh \
             (scripts/test.sh runs it before the tests)",
            w.name(),
            w.dir.display()
        );
    }
    wheels
}

/// Stand-ins for the CUDA headers nccl.h includes: it needs only the stream and
/// event types, as opaque pointers (and CUDART_VERSION for bfloat16).
const CUDA_STUBS: &[(&str, &str)] = &[
    (
        "cuda_runtime.h",
        "typedef struct CUstream_st *cudaStream_t;\n\
         typedef struct CUevent_st *cudaEvent_t;\n\
         #define CUDART_VERSION 12080\n",
    ),
    ("cuda_fp16.h", ""),
    ("cuda_bf16.h", ""),
];

/// The values of `exprs` as a C program compiled against `wheel`'s nccl.h prints
/// them; Err: the compiler's error lines (they name a field or macro nccl.h lacks).
fn c_values(wheel: &Wheel, exprs: &[String]) -> Result<Vec<i64>, String> {
    let dir = scratch(&format!("nccl-abi-{}", wheel.package));
    for (name, body) in CUDA_STUBS {
        std::fs::write(dir.join(name), body).unwrap();
    }
    let prints: String = exprs
        .iter()
        .map(|e| format!("    printf(\"%lld\\n\", (long long)({e}));\n"))
        .collect();
    let program = format!(
        "#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <nccl.h>\n\
         int main(void) {{\n    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;\n    (void)init;\n\
         {prints}    return 0;\n}}\n"
    );
    std::fs::write(dir.join("facts.c"), program).unwrap();
    let include = wheel.header().parent().unwrap().to_path_buf();
    let built = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(dir.join("facts"))
        .arg(dir.join("facts.c"))
        .arg("-I")
        .arg(&dir)
        .arg("-I")
        .arg(&include)
        .output()
        .expect("cc runs (gcc or clang)");
    if !built.status.success() {
        let (_, stderr) = text(&built);
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        return Err(errors.join("\n"));
    }
    let ran = Command::new(dir.join("facts")).output().unwrap();
    assert!(ran.status.success(), "{ran:?}");
    Ok(text(&ran)
        .0
        .lines()
        .map(|l| l.parse().expect("one integer a line"))
        .collect())
}

/// What of `wheel` differs from what fabricbench assumes, one line each.
fn abi_mismatches(wheel: &Wheel) -> Vec<String> {
    let name = wheel.name();
    let mut facts = vec![
        AbiFact {
            what: "NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)".into(),
            c_expr: "NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)".into(),
            ours: 0, // compared with NCCL_VERSION_CODE below
        },
        AbiFact::constant("NCCL_VERSION_CODE", 0),
    ];
    let ours = fabricbench::backend::nccl::abi_facts();
    facts.extend(ours.iter().cloned());
    let exprs: Vec<String> = facts.iter().map(|f| f.c_expr.clone()).collect();
    let values = match c_values(wheel, &exprs) {
        Ok(v) => v,
        Err(errors) => {
            let mut problems = vec![format!(
                "{name}: nccl.h does not compile with fabricbench's facts:\n{errors}"
            )];
            problems.extend(library_mismatches(wheel, None));
            return problems;
        }
    };
    let (macros, header_code) = (values[0], values[1]);
    let mut problems = Vec::new();
    if macros != header_code
        || version_string(header_code as i32) != format!("NCCL {}", wheel.version)
    {
        problems.push(format!(
            "{name}: nccl.h says NCCL_VERSION_CODE {header_code} and NCCL_MAJOR/MINOR/PATCH {macros}"
        ));
    }
    for (fact, c) in ours.iter().zip(&values[2..]) {
        if fact.ours != *c {
            problems.push(format!(
                "{name}: {}: fabricbench has {}, nccl.h has {c} ({})",
                fact.what, fact.ours, fact.c_expr
            ));
        }
    }
    problems.extend(library_mismatches(wheel, Some(header_code as i32)));
    problems
}

/// The library against nccl.h (its NCCL_VERSION_CODE when the facts compiled) and
/// fabricbench's lists of entry points.
fn library_mismatches(wheel: &Wheel, header_code: Option<i32>) -> Vec<String> {
    let name = wheel.name();
    let nccl = match Nccl::open(&wheel.lib()) {
        // Kept loaded: NCCL's initialisers ran; unloading it buys nothing here.
        Ok(nccl) => Box::leak(Box::new(nccl)),
        Err(e) => {
            return vec![format!(
                "{name}: {} does not open: {e}",
                wheel.lib().display()
            )]
        }
    };
    let mut problems = Vec::new();
    if let Some(code) = header_code.filter(|&c| c != nccl.version()) {
        problems.push(format!(
            "{name}: ncclGetVersion says {}, nccl.h NCCL_VERSION_CODE {code}",
            nccl.version()
        ));
    }
    let header = std::fs::read_to_string(wheel.header()).unwrap();
    let declared = |symbol: &str| {
        header.match_indices(symbol).any(|(i, _)| {
            let before = header[..i].chars().next_back().unwrap_or(' ');
            let after = header[i + symbol.len()..].trim_start();
            !(before.is_alphanumeric() || before == '_') && after.starts_with('(')
        })
    };
    let wanted: BTreeSet<&str> = REQUIRED
        .iter()
        .copied()
        .chain(FEATURES.iter().flat_map(|f| f.symbols.iter().copied()))
        .collect();
    let looked_up: BTreeSet<&str> = nccl.lookups().iter().map(|l| l.name).collect();
    if looked_up != wanted {
        problems.push(format!(
            "{name}: resolved but in neither symbols::REQUIRED nor FEATURES: {:?}; listed there \
             but never resolved: {:?}",
            looked_up.difference(&wanted).collect::<Vec<_>>(),
            wanted.difference(&looked_up).collect::<Vec<_>>()
        ));
    }
    for lookup in nccl.lookups() {
        if !declared(lookup.name) {
            problems.push(format!("{name}: {} is not declared in nccl.h", lookup.name));
        }
        // From which version fabricbench counts on it: required ones always.
        let since = FEATURES
            .iter()
            .find(|f| f.symbols.contains(&lookup.name))
            .map(|f| f.since)
            .or(REQUIRED.contains(&lookup.name).then_some(0));
        if !lookup.found && since.is_none_or(|v| v <= nccl.version()) {
            let expected = since.map_or(String::new(), |v| match v {
                0 => " although fabricbench requires it of every NCCL".into(),
                v => format!(
                    " although fabricbench expects it from {} on",
                    version_string(v)
                ),
            });
            problems.push(format!(
                "{name}: {} is not in {}{expected}",
                lookup.name,
                wheel.lib().display()
            ));
        }
    }
    problems
}

#[test]
fn every_wheel_matches_what_fabricbench_assumes_of_nccl() {
    let problems: Vec<String> = wheels().iter().flat_map(abi_mismatches).collect();
    assert!(
        problems.is_empty(),
        "fabricbench and NCCL disagree:\n{}",
        problems.join("\n")
    );
}

/// A binary run as one rank without mpirun, with `env` added to this process's.
fn alone(program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("OMPI_MCA_ess_singleton_isolated", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("FABRICBENCH_NCCL_LIB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

/// The canonical path of the wheel's library: what dladdr reports once loaded.
fn loaded_path(wheel: &Wheel) -> String {
    wheel.lib().canonicalize().unwrap().display().to_string()
}

#[test]
fn a_named_library_that_is_not_nccl_is_a_usage_error_driver_or_not() {
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("libc.so.6");
    let fix = "; give the file libnccl.so.2 or the directory holding it";
    // A FIFO where the library should be: refused, not opened (dlopen would wait).
    let fifo = scratch("nccl-fifo").join("libnccl.so.2");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let fifo = fifo.display().to_string();
    for backend in ["nccl", "auto"] {
        for (given, reason) in [
            ("/nonexistent", "no such file or directory"),
            ("/bin/ls", "not a shared library this process can load ("),
            (libc, "not NCCL: the library has no ncclGetVersion"),
            ("/", "/ holds no libnccl.so.2"),
            (fifo.as_str(), "not a regular file"),
        ] {
            let out = alone(
                ALL_REDUCE,
                &["--backend", backend, "--nccl-lib", given],
                &[],
            );
            let line = one_error(
                &out,
                2,
                &format!("all_reduce_perf: error: --nccl-lib {given}: {reason}"),
            );
            assert!(line.contains(fix), "{line}");
        }
    }
    let out = alone(
        ALL_REDUCE,
        &["--backend", "nccl"],
        &[("FABRICBENCH_NCCL_LIB", "/nonexistent")],
    );
    one_error(
        &out,
        2,
        "error: FABRICBENCH_NCCL_LIB=/nonexistent: no such file or directory",
    );
    // Once per job, not once per rank.
    let out = common::mpirun(
        2,
        ALL_REDUCE,
        &["--backend", "nccl", "--nccl-lib", "/bin/ls"],
    );
    one_error(
        &out,
        2,
        "all_reduce_perf: error: --nccl-lib /bin/ls: not a shared library",
    );
}

/// Runs `cmd` as one rank, with none of this host's ways to point at NCCL (a fresh
/// HOME, no library, Python or CUDA paths), then `env`; its exit status and the
/// first line of its stdout that contains `marker`.
fn line_without_host_nccl(
    mut cmd: Command,
    env: &[(&str, &str)],
    marker: &str,
) -> (Option<i32>, String) {
    let home = scratch("nccl-home");
    for k in [
        "FABRICBENCH_NCCL_LIB",
        "LD_LIBRARY_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "PYTHONPATH",
        "PYTHONUSERBASE",
        "CUDA_HOME",
        "CUDA_PATH",
    ] {
        cmd.env_remove(k);
    }
    let out = cmd
        .env("HOME", &home)
        .env("OMPI_MCA_ess_singleton_isolated", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .envs(env.iter().copied())
        .output()
        .expect("the command runs");
    let (stdout, stderr) = text(&out);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no line with {marker:?}:\n{stdout}\n{stderr}"));
    (out.status.code(), line.to_string())
}

/// doctor on this live host (no python3 on PATH either), `env` added: the line of
/// its nccl-library finding.
fn doctor_nccl_line(env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(DOCTOR);
    cmd.args(["--sysfs-root", "/"]).env("PATH", "/usr/bin:/bin");
    line_without_host_nccl(cmd, env, "nccl-library").1
}

#[test]
fn doctor_names_the_nccl_the_node_would_use() {
    let wheel = &wheels()[0];
    let dir = wheel.dir.join("lib").display().to_string();
    let line = doctor_nccl_line(&[("LD_LIBRARY_PATH", &dir)]);
    let seen = format!(
        "NCCL {} at {} (symbols: the 16 required and PreMulSum",
        wheel.version,
        loaded_path(wheel)
    );
    assert!(line.contains(&seen) && line.starts_with("info"), "{line}");
    let lib = wheel.lib().display().to_string();
    assert!(doctor_nccl_line(&[("FABRICBENCH_NCCL_LIB", &lib)]).contains(&seen));
    let line = doctor_nccl_line(&[("FABRICBENCH_NCCL_LIB", "/bin/ls")]);
    assert!(
        line.starts_with("error")
            && line.contains("FABRICBENCH_NCCL_LIB=/bin/ls: not a shared library"),
        "{line}"
    );
    let line = doctor_nccl_line(&[]);
    if line.contains(" at /") {
        eprintln!("skipped \"none found\": this host has NCCL installed: {line}");
        return;
    }
    assert!(line.contains("none found"), "{line}");
}

/// scripts/gpu-check.sh's first step alone, on the debug binaries, `env` added;
/// its "# NCCL" line.
fn gpu_check_discovery(env: &[(&str, &str)]) -> String {
    let out_dir = scratch("gpu-check-discovery");
    let mut cmd = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check.sh"));
    cmd.arg(Path::new(ALL_REDUCE).parent().unwrap())
        .env("OUT", &out_dir)
        .env("GPU_CHECK_STOP_AFTER", "nccl-discovery");
    let (code, line) = line_without_host_nccl(cmd, env, "# NCCL");
    assert_eq!(code, Some(0), "{line}");
    line
}

#[test]
fn gpu_check_says_where_nccl_was_found_and_by_whom() {
    let wheel = &wheels()[0];
    let dir = wheel.dir.join("lib").display().to_string();
    let line = gpu_check_discovery(&[("LD_LIBRARY_PATH", &dir)]);
    assert_eq!(
        line,
        format!(
            "# NCCL found at {} by the binary (NCCL {})",
            loaded_path(wheel),
            wheel.version
        )
    );
    // A wheel only Python sees (a user site the binaries do not search).
    let user_base = scratch("gpu-check-user-base");
    let site = Command::new("python3")
        .args(["-c", "import site; print(site.getusersitepackages())"])
        .env("PYTHONUSERBASE", &user_base)
        .output()
        .unwrap();
    let site = PathBuf::from(text(&site).0.trim());
    let in_site = site.join("nvidia/nccl/lib/libnccl.so.2");
    std::fs::create_dir_all(in_site.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(wheel.lib(), &in_site).unwrap();
    let base = user_base.display().to_string();
    let line = gpu_check_discovery(&[("PYTHONUSERBASE", &base)]);
    if line.starts_with("# NCCL found at") {
        eprintln!("skipped the wheel and no-NCCL cases: the binaries' search finds NCCL on this host: {line}");
        return;
    }
    assert_eq!(
        line,
        format!(
            "# NCCL not found by the binary's search; the remaining steps use the wheel python3 sees at {} (FABRICBENCH_NCCL_LIB)",
            in_site.display()
        )
    );
    let line = gpu_check_discovery(&[]);
    assert_eq!(
        line,
        "# NCCL not found by the binary's search, nor a wheel by python3: the nccl steps will fail"
    );
}

/// Tests of a host without a CUDA driver (the no_gpu tier: scripts/test.sh leaves it out where a driver is).
mod no_gpu {
    use super::*;

    #[test]
    fn the_nccl_backend_names_nccl_before_the_driver_error() {
        common::require_no_gpu();
        let wheel = &wheels()[0];
        let lib = wheel.lib().display().to_string();
        let dir = wheel.dir.join("lib").display().to_string();
        let found = format!(
            "error: --backend nccl: NCCL {} found at {}; libcuda.so.1 not found",
            wheel.version,
            loaded_path(wheel)
        );
        let small = ["--backend", "nccl", "-b", "8", "-e", "8"];
        for (how, args, env) in [
            ("--nccl-lib FILE", vec!["--nccl-lib", lib.as_str()], vec![]),
            ("--nccl-lib DIR", vec!["--nccl-lib", dir.as_str()], vec![]),
            (
                "FABRICBENCH_NCCL_LIB",
                vec![],
                vec![("FABRICBENCH_NCCL_LIB", lib.as_str())],
            ),
            (
                "the search",
                vec![],
                vec![("LD_LIBRARY_PATH", dir.as_str())],
            ),
        ] {
            let args: Vec<&str> = small.iter().copied().chain(args).collect();
            let out = alone(ALL_REDUCE, &args, &env);
            let line = one_error(&out, 1, &found);
            assert!(
                line.ends_with("use --backend mpi for host memory"),
                "{how}: {line}"
            );
        }
        // A relative --nccl-lib is the file in the working directory, not a name for
        // the loader's search.
        let out = Command::new(ALL_REDUCE)
            .args(small)
            .args(["--nccl-lib", "libnccl.so.2"])
            .current_dir(wheel.dir.join("lib"))
            .env("OMPI_MCA_ess_singleton_isolated", "1")
            .env_remove("FABRICBENCH_NCCL_LIB")
            .output()
            .unwrap();
        one_error(&out, 1, &found);
        // --backend auto falls back to MPI and says why, NCCL's version included.
        let out = alone(ALL_REDUCE, &["-b", "8", "-e", "8", "--nccl-lib", &lib], &[]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let backend = stdout
            .lines()
            .find(|l| l.starts_with("# Backend: "))
            .unwrap();
        assert!(
            backend.contains(&format!("NCCL {} found at", wheel.version)),
            "{backend}"
        );
    }
}
