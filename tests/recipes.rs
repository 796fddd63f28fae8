//! The launch recipes of scripts/slurm and scripts/k8s, checked without a cluster:
//! the sbatch script's directives and commands, and the Kubernetes manifests'
//! required fields and their consistency (GPUs, slots, ranks, network name).

use std::collections::BTreeMap;
use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Shell commands with backslash continuations joined, comments dropped.
fn commands(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        let line = line.trim();
        if line.starts_with('#') && current.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                if !current.trim().is_empty() {
                    out.push(current.trim().to_string());
                }
                current.clear();
            }
        }
    }
    out
}

/// The commands that start `launcher`, in order.
fn launches(script: &str, launcher: &str) -> Vec<String> {
    commands(script)
        .into_iter()
        .filter(|c| c.split_whitespace().next() == Some(launcher))
        .collect()
}

#[test]
fn sbatch_runs_doctor_first_and_one_task_per_gpu() {
    let script = read("scripts/slurm/rack-acceptance.sbatch");
    let syntax = std::process::Command::new("bash")
        .args(["-n", "scripts/slurm/rack-acceptance.sbatch"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(syntax.success(), "bash -n failed");
    assert!(script.starts_with("#!/bin/bash\n"));
    let directives: BTreeMap<String, String> = script
        .lines()
        .filter_map(|l| l.strip_prefix("#SBATCH --"))
        .map(|d| match d.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (d.to_string(), String::new()),
        })
        .collect();
    for key in [
        "job-name",
        "nodes",
        "ntasks-per-node",
        "gpus-per-node",
        "exclusive",
        "time",
        "output",
    ] {
        assert!(
            directives.contains_key(key),
            "#SBATCH --{key} missing: {directives:?}"
        );
    }
    assert_eq!(
        directives["ntasks-per-node"], directives["gpus-per-node"],
        "one task per GPU"
    );
    assert!(
        script.contains("set -euo pipefail"),
        "a failed step must stop the job"
    );

    let sruns = launches(&script, "srun");
    assert!(sruns.len() >= 3, "{sruns:#?}");
    for s in &sruns {
        assert!(s.contains("--mpi=pmix"), "srun without --mpi=pmix: {s}");
        // Per-task GPU cgroups would stop NCCL's NVLink path between the node's ranks.
        assert!(!s.contains("--gpus-per-task"), "{s}");
    }
    assert!(!directives.contains_key("gpus-per-task"));
    assert!(
        sruns[0].contains("--ntasks-per-node=1") && sruns[0].contains("/doctor"),
        "doctor runs first, one task per node: {}",
        sruns[0]
    );
    let collective = sruns
        .iter()
        .find(|s| s.contains("_perf\" --backend \"$backend\""))
        .unwrap();
    assert!(
        script.contains("backend=${FABRICBENCH_BACKEND-nccl}"),
        "NCCL unless the command line says otherwise"
    );
    // scripts/slurm-ci.sh runs the job for real and reads this line.
    assert!(
        script.contains("trap verdict EXIT")
            && script.contains("fabricbench rack acceptance: PASS: ")
            && script.contains("fabricbench rack acceptance: FAIL at $step"),
        "the job's last line is its verdict"
    );
    assert!(
        collective.contains("--ntasks-per-node=\"$gpus_per_node\""),
        "{collective}"
    );
    assert!(script.contains("gpus_per_node=$SLURM_NTASKS_PER_NODE"));
    let pairs = sruns.iter().find(|s| s.contains("--all-pairs")).unwrap();
    assert!(
        pairs.contains("--ntasks-per-node=1"),
        "all-pairs runs one task per node: {pairs}"
    );
}

fn load(rel: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn string<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str()
        .unwrap_or_else(|| panic!("{what} is missing or not a string: {y:?}"))
}

fn int(y: &Yaml, what: &str) -> i64 {
    y.as_i64()
        .unwrap_or_else(|| panic!("{what} is missing or not an integer: {y:?}"))
}

#[test]
fn mpijob_requests_gpus_rdma_ipc_lock_and_the_network() {
    let docs = load("scripts/k8s/mpijob.yaml");
    assert_eq!(docs.len(), 1);
    let job = &docs[0];
    assert_eq!(
        string(&job["apiVersion"], "apiVersion"),
        "kubeflow.org/v2beta1"
    );
    assert_eq!(string(&job["kind"], "kind"), "MPIJob");
    let spec = &job["spec"];
    let slots = int(&spec["slotsPerWorker"], "spec.slotsPerWorker");
    let replicas = &spec["mpiReplicaSpecs"];
    assert_eq!(
        int(&replicas["Launcher"]["replicas"], "Launcher.replicas"),
        1
    );
    let workers = int(&replicas["Worker"]["replicas"], "Worker.replicas");
    assert!(workers >= 2, "acceptance needs two nodes or more");

    let worker = &replicas["Worker"]["template"];
    let network = string(
        &worker["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"],
        "the Multus annotation",
    );
    let container = &worker["spec"]["containers"][0];
    let limits = &container["resources"]["limits"];
    assert_eq!(
        int(&limits["nvidia.com/gpu"], "nvidia.com/gpu"),
        slots,
        "one slot per GPU"
    );
    assert!(
        int(
            &limits["rdma/hca_shared_devices_a"],
            "rdma/hca_shared_devices_a"
        ) >= 1
    );
    let caps = container["securityContext"]["capabilities"]["add"]
        .as_vec()
        .expect("securityContext.capabilities.add");
    assert!(
        caps.iter().any(|c| c.as_str() == Some("IPC_LOCK")),
        "{caps:?}"
    );
    // The image of scripts/image.sh, at the crate's version (a registry before it is
    // the user's), and the worker starts through its entrypoint: `command`
    // replaces the image's, and sshd needs the host keys and /run/sshd it makes.
    for (role, c) in [
        (
            "Launcher",
            &replicas["Launcher"]["template"]["spec"]["containers"][0],
        ),
        ("Worker", container),
    ] {
        let image = string(&c["image"], "image");
        assert!(
            image.ends_with(&format!("fabricbench:{}", env!("CARGO_PKG_VERSION"))),
            "{role}: {image}: not the fabricbench:{} scripts/image.sh builds",
            env!("CARGO_PKG_VERSION")
        );
    }
    assert_eq!(
        string(&container["command"][0], "worker command"),
        "/usr/local/bin/fabricbench-entrypoint"
    );
    let worker_cmd = string(&container["args"][0], "worker args");
    assert!(
        worker_cmd
            .trim_start()
            .starts_with("ulimit -l unlimited ||"),
        "{worker_cmd}"
    );
    let mounts = container["volumeMounts"].as_vec().expect("volumeMounts");
    let shm = mounts
        .iter()
        .find(|m| m["mountPath"].as_str() == Some("/dev/shm"))
        .expect("/dev/shm mounted");
    let volume = worker["spec"]["volumes"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|v| v["name"] == shm["name"])
        .expect("the /dev/shm volume");
    assert_eq!(volume["emptyDir"]["medium"].as_str(), Some("Memory"));

    // The network the workers attach to is the one rdma-network.yaml defines.
    let nets = load("scripts/k8s/rdma-network.yaml");
    assert_eq!(string(&nets[0]["kind"], "kind"), "MacvlanNetwork");
    assert_eq!(
        string(&nets[0]["metadata"]["name"], "network name"),
        network
    );
    assert!(!string(&nets[0]["spec"]["master"], "master").is_empty());

    // The launcher: doctor first, one rank per worker; collectives one rank per GPU.
    let script = string(
        &replicas["Launcher"]["template"]["spec"]["containers"][0]["args"][0],
        "launcher args",
    );
    assert!(
        script.contains(&format!("workers={workers}; gpus={slots}")),
        "{script}"
    );
    let runs = launches(script, "mpirun");
    assert!(
        runs[0].contains("--map-by ppr:1:node") && runs[0].contains(" doctor "),
        "{}",
        runs[0]
    );
    assert!(runs[0].contains("-np $workers"));
    let collective = runs
        .iter()
        .find(|r| r.contains("_perf --backend nccl"))
        .unwrap();
    assert!(
        collective.contains("-np $((workers * gpus)) --map-by ppr:$gpus:node"),
        "{collective}"
    );
    let pairs = runs.iter().find(|r| r.contains("--all-pairs")).unwrap();
    assert!(
        pairs.contains("-np $workers --map-by ppr:1:node"),
        "{pairs}"
    );
}

/// The two image recipes, scripts/image.sh (no engine) and the Containerfile
/// (Docker, Podman), install one package list and finish alike, so they cannot drift.
#[test]
fn image_sh_and_the_containerfile_share_packages_and_finish() {
    let list = "scripts/image/packages.txt";
    let packages: Vec<String> = read(list)
        .lines()
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    for needed in [
        "openmpi-bin",
        "rdma-core",
        "libibverbs1",
        "ibverbs-providers",
        "openssh-server",
    ] {
        assert!(
            packages.iter().any(|p| p == needed),
            "{list} lacks {needed}"
        );
    }

    let image_sh = read("scripts/image.sh");
    assert!(
        image_sh.contains(r#"sed 's/#.*//' "$here/image/packages.txt""#),
        "image.sh does not read {list}"
    );
    assert!(image_sh.contains(r#"'$here/image/finish.sh' \"\$1\""#));
    assert!(image_sh.contains("--config.entrypoint /usr/local/bin/fabricbench-entrypoint"));

    let containerfile = read("Containerfile");
    let runtime = containerfile
        .rsplit("\nFROM ")
        .next()
        .filter(|_| containerfile.matches("\nFROM ").count() == 2)
        .expect("two stages: the build and the runtime");
    assert!(
        runtime.starts_with("docker.io/library/debian:bookworm-slim\n"),
        "{runtime}"
    );
    assert!(runtime.contains("COPY scripts/image/ /tmp/image/"));
    assert!(
        runtime.contains("sed 's/#.*//' /tmp/image/packages.txt | xargs apt-get install -y --no-install-recommends"),
        "the Containerfile does not install {list}"
    );
    // No package named in the runtime stage itself: only the list's.
    assert_eq!(runtime.matches("apt-get install").count(), 1, "{runtime}");
    assert!(runtime.contains("/tmp/image/finish.sh /"));
    assert!(runtime.contains(r#"ENTRYPOINT ["/usr/local/bin/fabricbench-entrypoint"]"#));

    for (shell, script) in [
        ("bash", "scripts/image.sh"),
        ("bash", "scripts/image-check.sh"),
        ("sh", "scripts/image/entrypoint.sh"),
        ("sh", "scripts/image/finish.sh"),
    ] {
        let ok = std::process::Command::new(shell)
            .args(["-n", script])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap()
            .success();
        assert!(ok, "{shell} -n {script} failed");
    }
    let entrypoint = read("scripts/image/entrypoint.sh");
    assert!(entrypoint.contains("ssh-keygen -A") && entrypoint.contains("exec \"$@\""));
    assert!(read("scripts/image/finish.sh").contains(r#"rm -f "$root"/etc/ssh/ssh_host_*"#));
}
