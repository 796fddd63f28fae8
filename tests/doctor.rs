//! doctor on the fixture trees of tests/fixtures/doctor (written by
//! src/sysfs/fixture.rs): alone on one root, and under mpirun with one rank per
//! fixture node.

mod common;

use common::{fixture, mpirun_command, scratch};
use fabricbench::doctor::output::{read_csv, Report};
use fabricbench::doctor::{Finding, Severity};
use std::path::Path;
use std::process::{Command, Output};

const DOCTOR: &str = env!("CARGO_BIN_EXE_doctor");

fn root(name: &str) -> String {
    fixture(&format!("doctor/{name}")).display().to_string()
}

/// Runs doctor alone (a job of one rank) with a CSV of its findings.
fn doctor(name: &str, args: &[&str]) -> (i32, Vec<Finding>, Output) {
    let dir = scratch(&format!("doctor-{name}").replace('/', "-"));
    let csv = dir.join("findings.csv");
    let out = Command::new(DOCTOR)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--sysfs-root", &root(name), "--csv"])
        .arg(&csv)
        .args(args)
        .output()
        .expect("run doctor");
    let findings = if csv.exists() {
        read_csv(&csv).unwrap()
    } else {
        Vec::new()
    };
    (out.status.code().unwrap_or(-1), findings, out)
}

/// (severity, check, component) of every finding, sorted.
fn keys(findings: &[Finding]) -> Vec<(Severity, String, String)> {
    let mut k: Vec<_> = findings
        .iter()
        .map(|f| (f.severity, f.check.clone(), f.component.clone()))
        .collect();
    k.sort();
    k
}

fn expect(findings: &[Finding], want: &[(Severity, &str, &str)]) {
    let mut want: Vec<(Severity, String, String)> = want
        .iter()
        .map(|(s, c, p)| (*s, c.to_string(), p.to_string()))
        .collect();
    want.sort();
    assert_eq!(keys(findings), want, "findings: {findings:#?}");
}

use Severity::{Error, Warning};

#[test]
fn healthy_node_has_nothing_to_report() {
    let (code, findings, out) = doctor("healthy", &[]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(findings.is_empty(), "{findings:#?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "gpu-a: kernel 6.8.0-45-generic, 2 RDMA device(s) checked (2 port(s)), 1 GPU(s)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("doctor: 0 errors, 0 warnings, 0 notes on 1 node (gpu-a)"),
        "{stdout}"
    );
}

#[test]
fn downgraded_port() {
    let (code, findings, _) = doctor("downgraded-port", &[]);
    assert_eq!(code, 1);
    expect(&findings, &[(Error, "link-downgrade", "mlx5_1:1")]);
    assert_eq!(findings[0].seen, "rate 200 Gb/sec (4X HDR)");
    assert!(findings[0]
        .expected
        .starts_with("400 Gb/sec (4X NDR), as on gpu-a mlx5_0:1"));
}

#[test]
fn port_rate_flag_sets_the_expected_rate() {
    let (code, findings, _) = doctor("healthy", &["--port-rate", "800"]);
    assert_eq!(code, 1);
    expect(
        &findings,
        &[
            (Error, "link-downgrade", "mlx5_0:1"),
            (Error, "link-downgrade", "mlx5_1:1"),
        ],
    );
    assert_eq!(findings[0].expected, "800 Gb/sec (--port-rate)");
}

#[test]
fn port_down() {
    let (code, findings, _) = doctor("port-down", &[]);
    assert_eq!(code, 1);
    expect(&findings, &[(Error, "port-state", "mlx5_1:1")]);
    assert_eq!(findings[0].seen, "state DOWN, physical state Polling");
    assert!(findings[0].fix.contains("cable"));
}

#[test]
fn pcie_links_below_their_maximum() {
    let (code, findings, _) = doctor("pcie-downgrade", &[]);
    assert_eq!(code, 1);
    expect(
        &findings,
        &[
            (Error, "pcie-width", "nic mlx5_0:1 0000:17:00.0"),
            (Warning, "pcie-speed", "gpu 0000:18:00.0"),
        ],
    );
}

#[test]
fn no_roce_v2_gid() {
    let (code, findings, _) = doctor("no-roce-v2", &[]);
    assert_eq!(code, 1);
    expect(&findings, &[(Error, "roce-v2-gid", "mlx5_0:1")]);
    assert_eq!(findings[0].seen, "only 0 (IB/RoCE v1), 2 (IB/RoCE v1)");
}

#[test]
fn memlock_low() {
    let (code, findings, _) = doctor("memlock-low", &[]);
    assert_eq!(code, 1);
    expect(&findings, &[(Error, "memlock", "memlock")]);
    let f = &findings[0];
    assert_eq!(f.seen, "RLIMIT_MEMLOCK soft 8 MiB hard 8 MiB");
    assert!(
        f.fix.contains("ulimit -l unlimited") && f.fix.contains("IPC_LOCK"),
        "{}",
        f.fix
    );
}

#[test]
fn leftover_nccl_variables_and_missing_names() {
    let (code, findings, _) = doctor("nccl-env", &[]);
    assert_eq!(code, 1);
    expect(
        &findings,
        &[
            (Error, "gid-index", "mlx5_0:1"),
            (Error, "gid-index", "mlx5_1:1"),
            (Error, "nccl-env", "NCCL_SOCKET_IFNAME"),
            (Warning, "nccl-env", "NCCL_IB_HCA"),
            (Warning, "nccl-env", "NCCL_DEBUG"),
            (Warning, "nccl-env", "NCCL_DEBUG_SUBSYS"),
            (Warning, "nccl-env", "NCCL_ALGO"),
            (Warning, "nccl-env", "NCCL_PROTO"),
            (Warning, "nccl-env", "NCCL_IB_GID_INDEX"),
        ],
    );
    let hca = findings
        .iter()
        .find(|f| f.component == "NCCL_IB_HCA")
        .unwrap();
    assert!(
        hca.seen
            .contains("mlx5_7 matches no RDMA device here (have: mlx5_0, mlx5_1)"),
        "{}",
        hca.seen
    );
}

#[test]
fn no_gpudirect_path() {
    let (code, findings, _) = doctor("no-gpudirect", &[]);
    assert_eq!(code, 1);
    expect(&findings, &[(Error, "gpudirect-rdma", "gpudirect")]);
}

#[test]
fn hca_flag_selects_devices_and_ports() {
    // Only the healthy port of the downgraded fixture: nothing to compare against, nothing wrong.
    let (code, findings, out) = doctor("downgraded-port", &["--hca", "mlx5_1:1"]);
    assert_eq!(code, 0, "{findings:#?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 RDMA device(s) checked (1 port(s))"));
    let (code, findings, _) = doctor("healthy", &["--hca", "mlx5_9"]);
    assert_eq!(code, 1);
    expect(&findings, &[(Error, "hca-missing", "rdma")]);
}

#[test]
fn bad_flags_are_one_line_and_exit_2() {
    let (code, _, out) = doctor("healthy", &["--hca", "mlx5_0:x"]);
    assert_eq!(code, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--hca") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (code, _, out) = doctor("no-such-fixture", &[]);
    assert_eq!(code, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sysfs-root"));
}

#[test]
fn results_are_never_overwritten() {
    let dir = scratch("doctor-overwrite");
    let csv = dir.join("f.csv");
    std::fs::write(&csv, "keep me").unwrap();
    let out = Command::new(DOCTOR)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--sysfs-root", &root("healthy"), "--csv"])
        .arg(&csv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "keep me");
}

/// Started by a launcher, doctor becomes doctor-mpi from its own folder; where
/// that is missing it says so in one line and fails, before reading anything.
#[test]
fn a_launched_doctor_without_its_mpi_twin_is_one_line() {
    let dir = scratch("doctor-no-twin");
    let lone = dir.join("doctor");
    std::fs::copy(DOCTOR, &lone).unwrap();
    let out = Command::new(&lone)
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .args(["--sysfs-root", &root("healthy")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let missing = dir.join("doctor-mpi");
    assert!(
        err.contains(&format!("{} cannot start", missing.display())),
        "{err}"
    );
}

/// Two fixture nodes as two ranks of one job (mpirun's MPMD form).
fn two_nodes(a: &str, b: &str, json: &Path) -> (i32, Report, String) {
    let out = mpirun_command()
        .args(["-np", "1", DOCTOR, "--sysfs-root", &root(a), "--json"])
        .arg(json)
        .args([":", "-np", "1", DOCTOR, "--sysfs-root", &root(b)])
        .output()
        .expect("run mpirun");
    let report: Report =
        serde_json::from_slice(&std::fs::read(json).expect("doctor wrote its JSON")).unwrap();
    (
        out.status.code().unwrap_or(-1),
        report,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn mtu_mismatch_across_two_nodes_under_mpirun() {
    let json = scratch("doctor-mtu").join("doctor.json");
    let (code, report, stdout) = two_nodes("mtu-mismatch/node-a", "mtu-mismatch/node-b", &json);
    assert_ne!(code, 0, "{stdout}");
    let nodes: Vec<&str> = report.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(nodes, vec!["node-a", "node-b"]);
    let mismatch: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.check == "mtu-mismatch")
        .collect();
    // Two nodes, two ports each, no majority: every port is named.
    assert_eq!(mismatch.len(), 4, "{stdout}");
    assert!(mismatch.iter().all(|f| f.severity == Error));
    let b = mismatch.iter().find(|f| f.node == "node-b").unwrap();
    assert_eq!(b.seen, "active MTU 1024 (netdev eth2 MTU 1500)");
    assert!(
        b.expected
            .contains("1024 on node-b mlx5_0:1, node-b mlx5_1:1; 4096 on node-a"),
        "{}",
        b.expected
    );
    assert!(
        stdout.contains("doctor: 4 errors, 2 warnings, 0 notes on 2 nodes (node-a, node-b)"),
        "{stdout}"
    );
}

#[test]
fn nodes_that_differ_under_mpirun() {
    let json = scratch("doctor-skew").join("doctor.json");
    let (code, report, stdout) = two_nodes("healthy", "skew", &json);
    assert_ne!(code, 0, "{stdout}");
    expect(
        &report.findings,
        &[
            (Error, "hca-count", "node"),
            (Error, "hca-count", "node"),
            (Error, "nccl-version", "node"),
            (Error, "nccl-version", "node"),
            (Warning, "kernel", "node"),
            (Warning, "kernel", "node"),
            (Warning, "firmware", "mlx5_0"),
        ],
    );
    let fw = report
        .findings
        .iter()
        .find(|f| f.check == "firmware")
        .unwrap();
    assert_eq!(
        (fw.node.as_str(), fw.seen.as_str()),
        ("gpu-b", "firmware 28.39.1002")
    );
}

#[test]
fn alike_nodes_under_mpirun_pass() {
    let json = scratch("doctor-alike").join("doctor.json");
    let out = mpirun_command()
        .args([
            "-np",
            "1",
            DOCTOR,
            "--sysfs-root",
            &root("healthy"),
            "--node-name",
            "n1",
            "--json",
        ])
        .arg(&json)
        .args([
            ":",
            "-np",
            "1",
            DOCTOR,
            "--sysfs-root",
            &root("healthy"),
            "--node-name",
            "n2",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report: Report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report.nodes.len(), 2);
    assert!(report.findings.is_empty());
}

/// Copies the fixture tree `from` to `to` (files and folders, readable by all).
fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
    let status = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn files_another_user_may_not_read_are_said_so() {
    let dir = scratch("doctor-denied");
    let root = dir.join("root");
    copy_tree(&fixture("doctor/healthy"), &root);
    let denied = [
        "proc/self/limits",
        "sys/class/infiniband/mlx5_0/ports",
        "sys/class/infiniband/mlx5_1/ports/1/rate",
    ];
    for rel in denied {
        std::fs::set_permissions(
            root.join(rel),
            std::os::unix::fs::PermissionsExt::from_mode(0o0),
        )
        .unwrap();
    }
    // The findings go where the other user may write.
    let out_dir = dir.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(
        &out_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let csv = out_dir.join("findings.csv");
    // Root reads whatever the permissions say: the run drops to nobody.
    // SAFETY: geteuid has no preconditions and cannot fail.
    let mut cmd = match unsafe { libc::geteuid() } == 0 {
        true => {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                DOCTOR,
            ]);
            c
        }
        false => Command::new(DOCTOR),
    };
    let out = cmd
        .arg("--sysfs-root")
        .arg(&root)
        .arg("--csv")
        .arg(&csv)
        .output()
        .expect("run doctor as another user");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(common::pandas_rows(&csv), 3, "every finding loads");
    let findings = read_csv(&csv).unwrap();
    expect(
        &findings,
        &[
            (Error, "unreadable", "mlx5_0"),
            (Error, "unreadable", "mlx5_1:1"),
            (Severity::Info, "memlock", "memlock"),
        ],
    );
    let seen = |component: &str| {
        let f = findings.iter().find(|f| f.component == component).unwrap();
        (f.seen.clone(), f.fix.clone())
    };
    let fix = fabricbench::doctor::DENIED_FIX;
    let at = |rel: &str| root.join(rel).display().to_string();
    // Not "not a text file of at most 1024 KiB", not "seen: unlimited", not --hca's fault.
    assert_eq!(
        seen("mlx5_1:1"),
        (
            format!("could not read {}: permission denied", at(denied[2])),
            fix.into()
        )
    );
    assert_eq!(
        seen("memlock"),
        (
            format!(
                "RLIMIT_MEMLOCK unknown: could not read {}: permission denied",
                at(denied[0])
            ),
            fix.into()
        )
    );
    assert_eq!(
        seen("mlx5_0"),
        (
            format!("could not read {}: permission denied", at(denied[1])),
            fix.into()
        )
    );
}

/// doctor on a tree of tests/fixtures/topology: its exit status and stdout.
fn topology(name: &str) -> (i32, String) {
    let root = fixture(&format!("topology/{name}")).display().to_string();
    let out = Command::new(DOCTOR)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--sysfs-root", &root])
        .output()
        .expect("run doctor");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), stdout)
}

#[test]
fn the_topology_matrix_and_its_findings() {
    let (code, out) = topology("hgx8");
    assert_eq!(code, 0, "{out}");
    let row = |out: &str, label: &str| -> Vec<String> {
        let line = out
            .lines()
            .filter(|l| !l.contains("Affinity"))
            .find(|l| l.trim_start().starts_with(&format!("{label} ")));
        line.unwrap_or_else(|| panic!("no row {label} in {out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let gpu0 = "GPU0 X PIX NODE NODE SYS SYS SYS SYS PIX PIX NODE NODE SYS SYS SYS SYS NODE 0-55,112-167 0";
    assert_eq!(row(&out, "GPU0").join(" "), gpu0);
    assert!(
        out.contains("doctor: 0 errors, 0 warnings, 0 notes"),
        "{out}"
    );
    // Warnings: doctor still exits 0.
    let (code, out) = topology("nic-other-socket");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("doctor: 0 errors, 2 warnings"), "{out}");
    let nic7 = "NIC7 PHB PHB NODE NODE SYS SYS SYS SYS PHB PHB NODE NODE SYS SYS SYS X NODE 0-55,112-167 0";
    assert_eq!(row(&out, "NIC7").join(" "), nic7);
    for check in ["topology-nic-shared", "topology-nic-numa"] {
        assert!(out.contains(check), "{check} in {out}");
    }
    let (_, out) = topology("acs");
    assert!(out.contains("topology-acs"), "{out}");
    let (_, out) = topology("shared-nic");
    assert!(
        out.contains("topology-nic-shared") && !out.contains("topology-nic-numa"),
        "{out}"
    );
}
