//! Where libnccl may be installed: the places a machine's environment names (pip
//! wheels under every Python prefix, conda, CUDA), as plain data so tests can
//! describe a machine. `nccl_lib` opens what is found here.

use std::path::{Path, PathBuf};

/// Where to look for libnccl: the process environment, as plain data so tests can
/// describe a machine.
#[derive(Clone, Debug, Default)]
pub struct SearchEnv {
    pub virtual_env: Option<PathBuf>,
    pub conda_prefix: Option<PathBuf>,
    pub pythonpath: Vec<PathBuf>,
    /// PATH entries: a directory holding python3 marks a Python prefix one level up.
    pub path: Vec<PathBuf>,
    pub home: Option<PathBuf>,
    pub cuda_home: Option<PathBuf>,
    /// Prefixes searched on every machine: /usr/local, /usr, /opt/conda.
    pub system_prefixes: Vec<PathBuf>,
}

impl SearchEnv {
    pub fn from_process() -> SearchEnv {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let list = |k: &str| {
            std::env::var_os(k).map_or(Vec::new(), |v| std::env::split_paths(&v).collect())
        };
        SearchEnv {
            virtual_env: var("VIRTUAL_ENV"),
            conda_prefix: var("CONDA_PREFIX"),
            pythonpath: list("PYTHONPATH"),
            path: list("PATH"),
            home: var("HOME"),
            cuda_home: var("CUDA_HOME").or_else(|| var("CUDA_PATH")),
            system_prefixes: ["/usr/local", "/usr", "/opt/conda"]
                .iter()
                .map(PathBuf::from)
                .collect(),
        }
    }
}

pub const SONAME: &str = "libnccl.so.2";

fn glob_files(pattern: &Path) -> Vec<PathBuf> {
    let Some(text) = pattern.to_str() else {
        return Vec::new();
    };
    glob::glob(text)
        .map(|paths| paths.flatten().filter(|p| p.is_file()).collect())
        .unwrap_or_default()
}

/// Files named libnccl.so.2 that exist under the places `env` describes, in
/// search order, each once.
pub fn installed_copies(env: &SearchEnv) -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    prefixes.extend(env.virtual_env.clone());
    prefixes.extend(env.conda_prefix.clone());
    for dir in &env.path {
        if dir.join("python3").exists() {
            if let Some(prefix) = dir.parent() {
                prefixes.push(prefix.to_path_buf());
            }
        }
    }
    prefixes.extend(env.home.as_ref().map(|h| h.join(".local")));
    prefixes.extend(env.system_prefixes.iter().cloned());

    let wheel = Path::new("nvidia/nccl/lib").join(SONAME);
    let mut patterns: Vec<PathBuf> = env.pythonpath.iter().map(|d| d.join(&wheel)).collect();
    for prefix in &prefixes {
        for lib in ["lib", "lib64"] {
            for packages in ["site-packages", "dist-packages"] {
                patterns.push(
                    prefix
                        .join(lib)
                        .join("python3*")
                        .join(packages)
                        .join(&wheel),
                );
            }
        }
        // Debian's system Python keeps packages in lib/python3/dist-packages.
        patterns.push(prefix.join("lib/python3/dist-packages").join(&wheel));
    }
    patterns.extend(
        env.conda_prefix
            .as_ref()
            .map(|c| c.join("lib").join(SONAME)),
    );
    patterns.extend(env.cuda_home.as_ref().map(|c| c.join("lib64").join(SONAME)));
    patterns.push(PathBuf::from("/usr/local/cuda/lib64").join(SONAME));

    let mut found: Vec<PathBuf> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for file in patterns.iter().flat_map(|p| glob_files(p)) {
        if seen.insert(file.canonicalize().unwrap_or_else(|_| file.clone())) {
            found.push(file);
        }
    }
    found
}

/// A `--nccl-lib` value: the library file, or a directory holding libnccl.so.2.
pub fn explicit_file(given: &Path) -> PathBuf {
    if given.is_dir() {
        given.join(SONAME)
    } else {
        given.to_path_buf()
    }
}

/// Throwaway directory trees for the search tests here and in `nccl_lib`.
#[cfg(test)]
pub(crate) mod scratch {
    use std::path::{Path, PathBuf};

    pub fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "fabricbench-nccl-search-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    pub fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"not an ELF file").unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::scratch::{scratch, touch};
    use super::*;

    #[test]
    fn finds_pip_wheels_under_python_prefixes() {
        let root = scratch("wheels");
        let venv_lib = root.join("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
        let user_lib =
            root.join("home/.local/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2");
        let conda_lib = root.join("conda/lib/libnccl.so.2");
        let on_path = root.join("py/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2");
        let in_pythonpath = root.join("pp/nvidia/nccl/lib/libnccl.so.2");
        for f in [&venv_lib, &user_lib, &conda_lib, &on_path, &in_pythonpath] {
            touch(f);
        }
        touch(&root.join("py/bin/python3"));
        // A wheel for another package and a stray file are not NCCL.
        touch(&root.join("venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12"));
        let env = SearchEnv {
            virtual_env: Some(root.join("venv")),
            conda_prefix: Some(root.join("conda")),
            pythonpath: vec![root.join("pp")],
            path: vec![root.join("py/bin"), root.join("nowhere")],
            home: Some(root.join("home")),
            cuda_home: None,
            system_prefixes: Vec::new(),
        };
        let found = installed_copies(&env);
        assert_eq!(
            found,
            vec![in_pythonpath, venv_lib, on_path, user_lib, conda_lib],
            "search order: PYTHONPATH, VIRTUAL_ENV, python3 on PATH, ~/.local, conda lib"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn nothing_found_is_empty() {
        let root = scratch("empty");
        let env = SearchEnv {
            virtual_env: Some(root.join("venv")),
            system_prefixes: vec![root.clone()],
            ..SearchEnv::default()
        };
        assert!(installed_copies(&env)
            .iter()
            .all(|p| p.starts_with("/usr/local/cuda")));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
