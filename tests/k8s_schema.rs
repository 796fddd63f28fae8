//! Every document of scripts/k8s/*.yaml checked against a schema of the fields
//! the manifests use, written here from the API definitions (field names and
//! types are facts of the APIs; no CRD file is copied): Kubeflow's MPIJob
//! (`kubeflow.org/v2beta1`, MPI Operator v2), the NVIDIA Network Operator's
//! MacvlanNetwork (`mellanox.com/v1alpha1`), and the core Pod template fields.
//!
//! The schema is a typed serde model: every object denies fields it does not
//! know (JSON Schema's `additionalProperties: false`), enums hold the allowed
//! values, and the types are checked on the way in. A field the model lacks but
//! the API has fails too: add it here, from the API's definition, when a manifest
//! starts to use it. (A JSON Schema validator crate is not in shared/notes/stack.md
//! and would add a dependency tree to a 2-core build for what serde does already.)

// The model's fields exist to be checked on the way in; the tests read a few.
#![allow(dead_code)]

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

/// One manifest document, by its `kind`.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind")]
enum Document {
    #[serde(rename = "MPIJob")]
    MpiJob(Box<MpiJob>),
    MacvlanNetwork(Box<MacvlanNetwork>),
}

// ---- kubeflow.org/v2beta1 MPIJob (MPI Operator v2) ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MpiJob {
    api_version: MpiJobApi,
    metadata: ObjectMeta,
    spec: MpiJobSpec,
}

#[derive(Debug, Deserialize)]
enum MpiJobApi {
    #[serde(rename = "kubeflow.org/v2beta1")]
    V2beta1,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MpiJobSpec {
    slots_per_worker: Option<i32>,
    run_launcher_as_worker: Option<bool>,
    run_policy: Option<RunPolicy>,
    mpi_replica_specs: MpiReplicaSpecs,
    ssh_auth_mount_path: Option<String>,
    launcher_creation_policy: Option<LauncherCreationPolicy>,
    mpi_implementation: Option<MpiImplementation>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RunPolicy {
    clean_pod_policy: Option<CleanPodPolicy>,
    ttl_seconds_after_finished: Option<i32>,
    active_deadline_seconds: Option<i64>,
    backoff_limit: Option<i32>,
    suspend: Option<bool>,
    managed_by: Option<String>,
}

#[derive(Debug, Deserialize)]
enum CleanPodPolicy {
    None,
    Running,
    All,
}

#[derive(Debug, Deserialize)]
enum LauncherCreationPolicy {
    AtStartup,
    WaitForWorkersReady,
}

#[derive(Debug, Deserialize)]
enum MpiImplementation {
    #[serde(rename = "OpenMPI")]
    OpenMpi,
    Intel,
    #[serde(rename = "MPICH")]
    Mpich,
}

/// The replica types of an MPIJob: a map in the API whose keys are these two.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MpiReplicaSpecs {
    #[serde(rename = "Launcher")]
    launcher: ReplicaSpec,
    #[serde(rename = "Worker")]
    worker: Option<ReplicaSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReplicaSpec {
    replicas: Option<i32>,
    template: PodTemplateSpec,
    restart_policy: Option<ReplicaRestartPolicy>,
}

#[derive(Debug, Deserialize)]
enum ReplicaRestartPolicy {
    Always,
    OnFailure,
    Never,
    ExitCode,
}

// ---- core/v1: the Pod template fields the manifests use ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ObjectMeta {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PodTemplateSpec {
    metadata: Option<ObjectMeta>,
    spec: PodSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodSpec {
    containers: Vec<Container>,
    init_containers: Option<Vec<Container>>,
    volumes: Option<Vec<Volume>>,
    node_selector: Option<BTreeMap<String, String>>,
    host_network: Option<bool>,
    #[serde(rename = "hostIPC")]
    host_ipc: Option<bool>,
    service_account_name: Option<String>,
    restart_policy: Option<PodRestartPolicy>,
}

#[derive(Debug, Deserialize)]
enum PodRestartPolicy {
    Always,
    OnFailure,
    Never,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Container {
    name: String,
    image: Option<String>,
    image_pull_policy: Option<PullPolicy>,
    command: Option<Vec<String>>,
    args: Option<Vec<String>>,
    working_dir: Option<String>,
    env: Option<Vec<EnvVar>>,
    resources: Option<ResourceRequirements>,
    security_context: Option<SecurityContext>,
    volume_mounts: Option<Vec<VolumeMount>>,
}

#[derive(Debug, Deserialize)]
enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvVar {
    name: String,
    value: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceRequirements {
    limits: Option<BTreeMap<String, Quantity>>,
    requests: Option<BTreeMap<String, Quantity>>,
}

/// A resource quantity: a number, or a string such as "2Gi" or "500m".
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Quantity {
    Number(serde_json::Number),
    Text(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SecurityContext {
    capabilities: Option<Capabilities>,
    privileged: Option<bool>,
    run_as_user: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Capabilities {
    add: Option<Vec<String>>,
    drop: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VolumeMount {
    name: String,
    mount_path: String,
    read_only: Option<bool>,
    sub_path: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Volume {
    name: String,
    empty_dir: Option<EmptyDir>,
    host_path: Option<HostPath>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EmptyDir {
    medium: Option<String>,
    size_limit: Option<Quantity>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct HostPath {
    path: String,
    #[serde(rename = "type")]
    kind: Option<String>,
}

// ---- mellanox.com/v1alpha1 MacvlanNetwork (NVIDIA Network Operator) ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MacvlanNetwork {
    api_version: MellanoxApi,
    metadata: ObjectMeta,
    spec: MacvlanNetworkSpec,
}

#[derive(Debug, Deserialize)]
enum MellanoxApi {
    #[serde(rename = "mellanox.com/v1alpha1")]
    V1alpha1,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MacvlanNetworkSpec {
    network_namespace: Option<String>,
    master: Option<String>,
    mode: Option<MacvlanMode>,
    mtu: Option<u32>,
    /// The CNI IPAM configuration: a JSON document in a string.
    ipam: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum MacvlanMode {
    Bridge,
    Private,
    Vepa,
    Passthru,
}

// ---- YAML to the model ----

/// A YAML node as JSON: the model reads JSON values (serde_json is a dependency
/// already; yaml-rust2, the tests' YAML parser, has no serde support).
fn to_json(y: &Yaml) -> Result<Value, String> {
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("not a number: {r}"))?,
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Hash(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = k
                        .as_str()
                        .ok_or_else(|| format!("a mapping key that is not a string: {k:?}"))?;
                    Ok((key.to_string(), to_json(v)?))
                })
                .collect::<Result<_, String>>()?,
        ),
        Yaml::Alias(_) | Yaml::BadValue => return Err(format!("unsupported YAML node {y:?}")),
    })
}

/// Every document of a manifest's text, checked against the model.
fn validate(text: &str) -> Result<Vec<Document>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    if docs.is_empty() {
        return Err("no YAML document".into());
    }
    docs.iter()
        .enumerate()
        .map(|(i, y)| {
            let doc: Document = serde_json::from_value(to_json(y)?)
                .map_err(|e| format!("document {}: {e}", i + 1))?;
            check_values(&doc).map_err(|e| format!("document {}: {e}", i + 1))?;
            Ok(doc)
        })
        .collect()
}

/// The value formats the types alone do not hold: quantities and the IPAM JSON.
fn check_values(doc: &Document) -> Result<(), String> {
    match doc {
        Document::MpiJob(job) => {
            let specs = &job.spec.mpi_replica_specs;
            for replica in std::iter::once(&specs.launcher).chain(&specs.worker) {
                for c in &replica.template.spec.containers {
                    let Some(res) = &c.resources else { continue };
                    for (name, q) in res.limits.iter().chain(&res.requests).flatten() {
                        check_quantity(q).map_err(|e| format!("{}: {name}: {e}", c.name))?;
                    }
                }
            }
            Ok(())
        }
        Document::MacvlanNetwork(net) => match &net.spec.ipam {
            Some(ipam) => serde_json::from_str::<Value>(ipam)
                .map(drop)
                .map_err(|e| format!("spec.ipam is not JSON: {e}")),
            None => Ok(()),
        },
    }
}

/// Kubernetes' quantity syntax: a decimal number and an optional suffix.
fn check_quantity(q: &Quantity) -> Result<(), String> {
    let Quantity::Text(s) = q else { return Ok(()) };
    const SUFFIXES: [&str; 13] = [
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T",
    ];
    let number = SUFFIXES
        .iter()
        .find_map(|suffix| s.strip_suffix(suffix))
        .unwrap_or(s);
    match number.parse::<f64>() {
        Ok(n) if n >= 0.0 && !number.is_empty() => Ok(()),
        _ => Err(format!(
            "'{s}' is not a quantity (e.g. \"2Gi\", \"500m\", 8)"
        )),
    }
}

fn manifests() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/k8s");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn mpijob_text() -> String {
    read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/k8s/mpijob.yaml"))
}

#[test]
fn every_manifest_matches_the_schema() {
    let files = manifests();
    let names: Vec<_> = files.iter().map(|p| p.file_name().unwrap()).collect();
    assert!(
        names.contains(&"mpijob.yaml".as_ref()) && names.contains(&"rdma-network.yaml".as_ref()),
        "{names:?}"
    );
    for file in &files {
        let docs = validate(&read(file)).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!docs.is_empty());
    }
}

/// The model reads what the manifests hold (not an empty pass).
#[test]
fn the_schema_reads_the_fields() {
    let docs = validate(&mpijob_text()).unwrap();
    let Document::MpiJob(job) = &docs[0] else {
        panic!("mpijob.yaml is not an MPIJob: {docs:?}")
    };
    let worker = job.spec.mpi_replica_specs.worker.as_ref().expect("Worker");
    let container = &worker.template.spec.containers[0];
    assert_eq!(container.name, "worker");
    let limits = container
        .resources
        .as_ref()
        .unwrap()
        .limits
        .as_ref()
        .unwrap();
    assert!(
        limits.contains_key("rdma/hca_shared_devices_a"),
        "{limits:?}"
    );
    assert!(matches!(
        job.spec.mpi_implementation,
        Some(MpiImplementation::OpenMpi)
    ));
}

/// `validate` of the MPIJob with `from` replaced by `to` (once, and it must be there).
fn mutated(from: &str, to: &str) -> Result<Vec<Document>, String> {
    let text = mpijob_text();
    assert!(text.contains(from), "mpijob.yaml has no '{from}'");
    validate(&text.replacen(from, to, 1))
}

#[test]
fn a_misspelt_field_fails_naming_it() {
    for (from, to, name) in [
        ("mpiReplicaSpecs:", "mpiReplicaSpec:", "mpiReplicaSpec"),
        ("containers:", "contianers:", "contianers"),
        ("volumeMounts:", "volumeMount:", "volumeMount"),
        ("slotsPerWorker:", "slotPerWorker:", "slotPerWorker"),
    ] {
        let err = mutated(from, to).expect_err(to);
        assert!(err.contains(&format!("`{name}`")), "{to}: {err}");
        println!("{to} -> {err}");
    }
}

#[test]
fn a_wrong_type_or_value_fails() {
    for (from, to, says) in [
        ("slotsPerWorker: 8", "slotsPerWorker: eight", "invalid type"),
        (
            "cleanPodPolicy: Running",
            "cleanPodPolicy: Sometimes",
            "Sometimes",
        ),
        (
            "mpiImplementation: OpenMPI",
            "mpiImplementation: OpenMP",
            "OpenMP",
        ),
        ("memory: 2Gi", "memory: 2 gigs", "not a quantity"),
        (
            "apiVersion: kubeflow.org/v2beta1",
            "apiVersion: kubeflow.org/v1",
            "kubeflow.org/v1",
        ),
    ] {
        let err = mutated(from, to).expect_err(to);
        assert!(err.contains(says), "{to}: {err}");
        println!("{to} -> {err}");
    }
    let net = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/k8s/rdma-network.yaml"));
    let err = validate(&net.replacen("mode: bridge", "mode: bridged", 1)).expect_err("mode");
    assert!(err.contains("bridged"), "{err}");
    let err =
        validate(&net.replacen("\"type\": \"whereabouts\",", "\"type\": ", 1)).expect_err("ipam");
    assert!(err.contains("spec.ipam is not JSON"), "{err}");
}
