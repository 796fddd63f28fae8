//! Finding and opening libnccl.
//!
//! cudarc's loader tries libnccl.so and libnccl.so.{12,11,10,9,1}, never
//! libnccl.so.2 (the only name the libnccl2 package and pip's nvidia-nccl-cu12/13
//! wheels install), cannot be pointed at a file, and panics when a symbol is
//! missing (ncclAlltoAll and friends exist only from NCCL 2.28). So NCCL's entry
//! points are resolved here, with libloading, from the file found; the C types
//! come from `cudarc::nccl::sys`.
//!
//! Search order: `--nccl-lib PATH` (or `FABRICBENCH_NCCL_LIB`), alone when given;
//! else libnccl.so.2 and libnccl.so on the loader's path (LD_LIBRARY_PATH,
//! ldconfig); else pip wheels (`site-packages/nvidia/nccl/lib/libnccl.so.2`) under
//! every Python prefix in sight (VIRTUAL_ENV, CONDA_PREFIX, PYTHONPATH, the
//! python3 on PATH, ~/.local, /usr/local, /usr, /opt/conda), conda's own lib/, and
//! CUDA_HOME, /usr/local/cuda.
//!
//! - `symbols`: the entry points resolved, from which version each optional one
//!   exists, and what a loaded library has;
//! - `abi`: fabricbench's assumptions about nccl.h (layouts, initial values,
//!   codes), for the check against real wheels (tests/nccl_library.rs);
//! - `calls`: the collective calls; `setup`: ncclConfig_t, ncclMemAlloc, registration.

use anyhow::{anyhow, ensure, Context};
use cudarc::driver::sys::CUstream;
use cudarc::nccl::sys::{ncclDataType_t, ncclRedOp_t, ncclUniqueId};
use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::sync::OnceLock;

use super::nccl_search::{explicit_file, installed_copies, SearchEnv, SONAME};

pub mod abi;
mod calls;
mod setup;
pub mod symbols;

pub use calls::Call;
pub use setup::Registration;
use setup::SetupFns;
use symbols::{resolve, Resolver};
pub use symbols::{Lookup, MIN_VERSION, NATIVE_ALLTOALL_VERSION};

/// Environment variable with the same meaning as `--nccl-lib`.
pub const NCCL_LIB_ENV: &str = "FABRICBENCH_NCCL_LIB";

/// An NCCL communicator handle (ncclComm_t).
pub type Comm = *mut c_void;

/// A failed NCCL call, with NCCL's own words for it.
#[derive(Debug, thiserror::Error)]
#[error("{call} failed: {text} (ncclResult {code}){detail}")]
pub struct NcclError {
    pub call: &'static str,
    pub code: i32,
    pub text: String,
    /// ncclGetLastError's message, when it has one: ": <message>".
    pub detail: String,
}

/// Why no NCCL library can be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NcclAbsent {
    /// What `--nccl-lib` or FABRICBENCH_NCCL_LIB names is not a usable NCCL: the
    /// user's mistake, whatever else the host has.
    #[error(
        "{given}: {reason}; give the file libnccl.so.2 or the directory holding it (pip's \
         nvidia-nccl-cu12 installs .../site-packages/nvidia/nccl/lib/libnccl.so.2)"
    )]
    Given { given: String, reason: String },
    /// The search found no usable copy.
    #[error(
        "NCCL not found: no {SONAME} on the loader's path (LD_LIBRARY_PATH, ldconfig) nor in a pip \
         nvidia-nccl wheel, conda or CUDA directory{unusable}; install libnccl2 or `pip install \
         nvidia-nccl-cu12` (nvidia-nccl-cu13 for CUDA 13), or give --nccl-lib PATH ({NCCL_LIB_ENV})"
    )]
    NotFound {
        /// " (found but unusable: FILE: WHY; ...)", or empty.
        unusable: String,
    },
}

type Res = c_int;
type DevIn = *const c_void;
type DevOut = *mut c_void;
/// ncclAllReduce and ncclReduceScatter: a reduction op, no root.
type ReducingFn =
    unsafe extern "C" fn(DevIn, DevOut, usize, ncclDataType_t, ncclRedOp_t, Comm, CUstream) -> Res;
/// ncclBroadcast, ncclGather and ncclScatter: a root, no op.
type RootedFn =
    unsafe extern "C" fn(DevIn, DevOut, usize, ncclDataType_t, c_int, Comm, CUstream) -> Res;
/// ncclAllGather and ncclAlltoAll: every rank to every rank, no op, no root.
type SymmetricFn =
    unsafe extern "C" fn(DevIn, DevOut, usize, ncclDataType_t, Comm, CUstream) -> Res;
type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> Res;

/// NCCL's entry points; valid while `Nccl::_lib` is loaded (for ever: see `load`).
struct Fns {
    get_version: GetVersionFn,
    get_unique_id: unsafe extern "C" fn(*mut ncclUniqueId) -> Res,
    comm_init_rank: unsafe extern "C" fn(*mut Comm, c_int, ncclUniqueId, c_int) -> Res,
    comm_destroy: unsafe extern "C" fn(Comm) -> Res,
    comm_abort: unsafe extern "C" fn(Comm) -> Res,
    comm_get_async_error: unsafe extern "C" fn(Comm, *mut Res) -> Res,
    get_error_string: unsafe extern "C" fn(Res) -> *const c_char,
    get_last_error: Option<unsafe extern "C" fn(Comm) -> *const c_char>,
    group_start: unsafe extern "C" fn() -> Res,
    group_end: unsafe extern "C" fn() -> Res,
    all_reduce: ReducingFn,
    broadcast: RootedFn,
    reduce: unsafe extern "C" fn(
        DevIn,
        DevOut,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        c_int,
        Comm,
        CUstream,
    ) -> Res,
    all_gather: SymmetricFn,
    reduce_scatter: ReducingFn,
    send: unsafe extern "C" fn(DevIn, usize, ncclDataType_t, c_int, Comm, CUstream) -> Res,
    recv: unsafe extern "C" fn(DevOut, usize, ncclDataType_t, c_int, Comm, CUstream) -> Res,
    alltoall: Option<SymmetricFn>,
    gather: Option<RootedFn>,
    scatter: Option<RootedFn>,
    /// ncclCommInitRankConfig, ncclMemAlloc, registration: see `setup`.
    setup: SetupFns,
    /// ncclRedOpCreatePreMulSum (2.11+); the op comes back as a raw handle.
    premulsum:
        Option<unsafe extern "C" fn(*mut u32, *mut c_void, ncclDataType_t, c_int, Comm) -> Res>,
    red_op_destroy: Option<unsafe extern "C" fn(ncclRedOp_t, Comm) -> Res>,
}

/// A loaded NCCL library.
pub struct Nccl {
    fns: Fns,
    path: String,
    version: i32,
    /// Every entry point looked up, found or not.
    lookups: Vec<Lookup>,
    _lib: Library,
}

static LOADED: OnceLock<Result<Nccl, NcclAbsent>> = OnceLock::new();

/// Finds and opens NCCL once per process (the first call's `explicit` decides; the
/// library stays loaded, since NCCL's threads may outlive its communicators).
/// `explicit`: `--nccl-lib` or FABRICBENCH_NCCL_LIB, the only library tried.
pub fn load(explicit: Option<&Path>) -> Result<&'static Nccl, NcclAbsent> {
    LOADED
        .get_or_init(|| match explicit {
            Some(given) => open_given(given),
            None => search(&SearchEnv::from_process()),
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// How the user named `given`: "--nccl-lib PATH" when the command line has the
/// flag, else "FABRICBENCH_NCCL_LIB=PATH" (clap reads both into one value).
fn given_as(given: &Path) -> String {
    let flag = std::env::args_os().any(|a| {
        let a = a.to_string_lossy();
        a == "--nccl-lib" || a.starts_with("--nccl-lib=")
    });
    match flag || std::env::var_os(NCCL_LIB_ENV).is_none() {
        true => format!("--nccl-lib {}", given.display()),
        false => format!("{NCCL_LIB_ENV}={}", given.display()),
    }
}

fn open_given(given: &Path) -> Result<Nccl, NcclAbsent> {
    let file = explicit_file(given);
    // Checked before dlopen: opening a FIFO would wait for a writer.
    let reason = if !given.exists() {
        Some("no such file or directory".to_string())
    } else if given.is_dir() && !file.is_file() {
        Some(format!("{} holds no {SONAME}", given.display()))
    } else if !file.is_file() {
        Some("not a regular file".to_string())
    } else {
        None
    };
    // An absolute path: dlopen looks a name without a slash up on the loader's
    // path, not in the working directory.
    let opened = match (reason, std::path::absolute(&file)) {
        (Some(reason), _) => Err(anyhow!(reason)),
        (None, Ok(file)) => Nccl::open(&file),
        (None, Err(e)) => Err(e.into()),
    };
    opened.map_err(|reason| NcclAbsent::Given {
        given: given_as(given),
        reason: format!("{reason:#}"),
    })
}

fn search(env: &SearchEnv) -> Result<Nccl, NcclAbsent> {
    let mut failures = Vec::new();
    // Bare names: the dynamic loader's own search.
    for name in [SONAME, "libnccl.so"] {
        match Nccl::open(Path::new(name)) {
            Ok(nccl) => return Ok(nccl),
            // "cannot open shared object file" is the ordinary not-here case.
            Err(e) if format!("{e:#}").contains("cannot open shared object") => {}
            Err(e) => failures.push(format!("{name}: {e:#}")),
        }
    }
    for file in installed_copies(env) {
        match Nccl::open(&file) {
            Ok(nccl) => return Ok(nccl),
            Err(e) => failures.push(format!("{}: {e:#}", file.display())),
        }
    }
    let unusable = match failures.is_empty() {
        true => String::new(),
        false => format!(" (found but unusable: {})", failures.join("; ")),
    };
    Err(NcclAbsent::NotFound { unusable })
}

impl Nccl {
    /// Opens `file` (a path, or a bare name for the loader's search) as NCCL: the
    /// library loads, has ncclGetVersion, is 2.10 or newer and has every required
    /// entry point. On failure, why, in words.
    pub fn open(file: &Path) -> anyhow::Result<Nccl> {
        // SAFETY: loading NCCL runs only its initialisers, which touch nothing of ours.
        // libloading's message is "dlopen failed"; dlerror's text is in its source.
        let lib = unsafe { Library::new(file.as_os_str()) }.map_err(|e| {
            anyhow!(
                "not a shared library this process can load ({:#})",
                anyhow::Error::from(e)
            )
        })?;
        let mut resolver = Resolver::new(&lib);
        // SAFETY: nccl.h's signature of ncclGetVersion.
        let get_version: GetVersionFn = unsafe { resolver.optional("ncclGetVersion") }
            .context("not NCCL: the library has no ncclGetVersion")?;
        let mut version: c_int = 0;
        // SAFETY: writes one int.
        let code = unsafe { get_version(&mut version) };
        ensure!(code == 0, "ncclGetVersion failed ({code})");
        ensure!(
            version >= MIN_VERSION,
            "{}: fabricbench needs NCCL 2.10 or newer",
            version_string(version)
        );
        let fns = resolve(&mut resolver, get_version, version)?;
        let lookups = resolver.lookups;
        let path = resolved_path(fns.get_version as *const c_void)
            .unwrap_or_else(|| file.display().to_string());
        Ok(Nccl {
            fns,
            path,
            version,
            lookups,
            _lib: lib,
        })
    }

    /// The file NCCL was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Every entry point looked up in the library, found or not.
    pub fn lookups(&self) -> &[Lookup] {
        &self.lookups
    }

    /// "NCCL 2.32.3 at PATH (symbols: the 16 required and PreMulSum, ...)".
    pub fn describe(&self) -> String {
        format!(
            "{} at {} (symbols: {})",
            self.version_string(),
            self.path,
            symbols::summary(&self.lookups)
        )
    }

    /// NCCL_VERSION_CODE: 22803 for 2.28.3.
    pub fn version(&self) -> i32 {
        self.version
    }

    /// "NCCL 2.28.3".
    pub fn version_string(&self) -> String {
        version_string(self.version)
    }

    /// Whether AlltoAll, Gather and Scatter are NCCL's own calls (2.28+), not grouped send/recv.
    pub fn has_native_alltoall(&self) -> bool {
        self.fns.alltoall.is_some() && self.fns.gather.is_some() && self.fns.scatter.is_some()
    }

    fn check(&self, call: &'static str, code: Res, comm: Option<Comm>) -> Result<(), NcclError> {
        // ncclInProgress: a non-blocking communicator (NCCL_COMM_BLOCKING=0) working on it.
        if code == 0 || code == setup::IN_PROGRESS {
            return Ok(());
        }
        let text = |p: *const c_char| {
            // SAFETY: NCCL returns static NUL-terminated strings (or null).
            (!p.is_null())
                .then(|| {
                    unsafe { CStr::from_ptr(p) }
                        .to_string_lossy()
                        .trim()
                        .to_string()
                })
                .filter(|s| !s.is_empty())
        };
        // SAFETY: plain lookups of NCCL's error strings.
        let what = text(unsafe { (self.fns.get_error_string)(code) });
        let last = self
            .fns
            .get_last_error
            .and_then(|f| text(unsafe { f(comm.unwrap_or(std::ptr::null_mut())) }));
        Err(NcclError {
            call,
            code,
            text: what.unwrap_or_else(|| "unknown error".into()),
            detail: last.map(|l| format!(": {l}")).unwrap_or_default(),
        })
    }

    pub fn unique_id(&self) -> Result<ncclUniqueId, NcclError> {
        let mut id = ncclUniqueId { internal: [0; 128] };
        // SAFETY: writes the 128-byte id.
        let code = unsafe { (self.fns.get_unique_id)(&mut id) };
        self.check("ncclGetUniqueId", code, None).map(|_| id)
    }

    /// Creates this process's communicator for `rank` of `nranks` on the current
    /// device (inside a group when a process drives several GPUs).
    pub fn comm_init_rank(
        &self,
        nranks: usize,
        id: ncclUniqueId,
        rank: usize,
    ) -> Result<Comm, NcclError> {
        let mut comm: Comm = std::ptr::null_mut();
        // SAFETY: writes the handle.
        let code =
            unsafe { (self.fns.comm_init_rank)(&mut comm, nranks as c_int, id, rank as c_int) };
        self.check("ncclCommInitRank", code, None).map(|_| comm)
    }

    /// # Safety
    /// `comm` came from `comm_init_rank` and is not used afterwards.
    pub unsafe fn comm_destroy(&self, comm: Comm) -> Result<(), NcclError> {
        self.check("ncclCommDestroy", (self.fns.comm_destroy)(comm), None)
    }

    /// # Safety
    /// As `comm_destroy`.
    pub unsafe fn comm_abort(&self, comm: Comm) -> Result<(), NcclError> {
        self.check("ncclCommAbort", (self.fns.comm_abort)(comm), None)
    }

    /// An error NCCL hit in the background (a peer gone, a network failure).
    ///
    /// # Safety
    /// `comm` is a live communicator.
    pub unsafe fn async_error(&self, comm: Comm) -> Result<(), NcclError> {
        let mut state: Res = 0;
        self.check(
            "ncclCommGetAsyncError",
            (self.fns.comm_get_async_error)(comm, &mut state),
            Some(comm),
        )?;
        // ncclInProgress is a non-blocking communicator still working, not an error.
        if state == setup::IN_PROGRESS {
            return Ok(());
        }
        self.check(
            "a previous NCCL call (asynchronous error)",
            state,
            Some(comm),
        )
    }

    pub fn group_start(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments.
        self.check("ncclGroupStart", unsafe { (self.fns.group_start)() }, None)
    }

    pub fn group_end(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments.
        self.check("ncclGroupEnd", unsafe { (self.fns.group_end)() }, None)
    }
}

/// "NCCL 2.28.3" from NCCL_VERSION_CODE (major*10000+minor*100+patch since 2.9,
/// major*1000+minor*100+patch before).
pub fn version_string(code: i32) -> String {
    let (major, minor, patch) = if code >= 10000 {
        (code / 10000, code % 10000 / 100, code % 100)
    } else {
        (code / 1000, code % 1000 / 100, code % 100)
    };
    format!("NCCL {major}.{minor}.{patch}")
}

/// The file a loaded symbol lives in (dladdr), so the header names the real path
/// even when the loader found the library by name.
fn resolved_path(symbol: *const c_void) -> Option<String> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr fills the struct for an address inside a loaded object.
    if unsafe { libc::dladdr(symbol, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so the struct is initialised.
    let info = unsafe { info.assume_init() };
    (!info.dli_fname.is_null()).then(|| {
        // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
        unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::nccl_search::scratch::{scratch, touch};

    #[test]
    fn a_file_that_is_not_nccl_is_refused_with_its_reason() {
        let root = scratch("bad");
        let fake = root.join("libnccl.so.2");
        touch(&fake);
        let err = format!("{:#}", Nccl::open(&fake).err().unwrap());
        assert!(
            err.starts_with("not a shared library this process can load (")
                && err.contains("libnccl.so.2"),
            "{err}"
        );
        // A real library that is not NCCL.
        let err = format!("{:#}", Nccl::open(Path::new("libc.so.6")).err().unwrap());
        assert_eq!(err, "not NCCL: the library has no ncclGetVersion");
        // A directory given to --nccl-lib means the libnccl.so.2 inside it.
        assert_eq!(explicit_file(&root), fake);
        assert_eq!(explicit_file(&fake), fake);
        // A FIFO is refused before dlopen, which would wait for a writer for ever.
        let fifo = root.join("fifo.so");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        match open_given(&fifo) {
            Err(NcclAbsent::Given { reason, .. }) => assert_eq!(reason, "not a regular file"),
            other => panic!("{:?}", other.err()),
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_named_library_that_cannot_be_used_is_the_users_mistake() {
        let given = |p: &str| match open_given(Path::new(p)) {
            Err(NcclAbsent::Given { given, reason }) => (given, reason),
            other => panic!("{p}: {:?}", other.map(|n| n.describe())),
        };
        let (named, reason) = given("/nonexistent");
        assert_eq!(
            (named.as_str(), reason.as_str()),
            ("--nccl-lib /nonexistent", "no such file or directory")
        );
        let (_, reason) = given("/bin/ls");
        assert!(reason.starts_with("not a shared library"), "{reason}");
        let (_, reason) = given("/");
        assert_eq!(reason, "/ holds no libnccl.so.2");
        let (_, reason) = given("/dev/null");
        assert_eq!(reason, "not a regular file");
        let e = open_given(Path::new("/bin/ls")).err().unwrap().to_string();
        assert!(
            e.starts_with("--nccl-lib /bin/ls: not a shared library")
                && e.ends_with("nvidia/nccl/lib/libnccl.so.2)")
                && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn version_codes() {
        assert_eq!(version_string(22803), "NCCL 2.28.3");
        assert_eq!(version_string(21903), "NCCL 2.19.3");
        assert_eq!(version_string(2804), "NCCL 2.8.4");
    }
}
