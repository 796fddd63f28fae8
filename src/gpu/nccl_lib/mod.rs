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

use cudarc::driver::sys::CUstream;
use cudarc::nccl::sys::{ncclDataType_t, ncclRedOp_t, ncclUniqueId};
use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::sync::OnceLock;

use super::nccl_search::{explicit_file, installed_copies, SearchEnv, SONAME};

mod calls;
mod setup;

pub use calls::Call;
pub use setup::Registration;
use setup::SetupFns;

/// Environment variable with the same meaning as `--nccl-lib`.
pub const NCCL_LIB_ENV: &str = "FABRICBENCH_NCCL_LIB";

/// Oldest NCCL driven here: bfloat16 and avg arrived in 2.10.
pub const MIN_VERSION: i32 = 2_10_00;

/// NCCL 2.28 added ncclAlltoAll, ncclGather and ncclScatter.
pub const NATIVE_ALLTOALL_VERSION: i32 = 2_28_00;

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

/// NCCL's entry points; valid while `Nccl::_lib` is loaded (for ever: see `load`).
struct Fns {
    get_version: unsafe extern "C" fn(*mut c_int) -> Res,
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
    _lib: Library,
}

static LOADED: OnceLock<Result<Nccl, String>> = OnceLock::new();

/// Finds and opens NCCL once per process (the first call's `explicit` decides; the
/// library stays loaded, since NCCL's threads may outlive its communicators).
pub fn load(explicit: Option<&Path>) -> Result<&'static Nccl, String> {
    LOADED
        .get_or_init(|| match explicit {
            Some(given) => open_given(given),
            None => search(&SearchEnv::from_process()),
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The library `--nccl-lib` names: a regular file, checked before dlopen opens
/// it (opening a FIFO blocks until a writer comes, for ever).
fn open_given(given: &Path) -> Result<Nccl, String> {
    let file = explicit_file(given);
    crate::input::open_regular(&file, u64::MAX)
        .map_err(|e| e.to_string())
        .and_then(|_| Nccl::open(&file.to_string_lossy()))
        .map_err(|e| {
            format!(
                "--nccl-lib {} ({NCCL_LIB_ENV}): cannot use {}: {e}",
                given.display(),
                file.display()
            )
        })
}

fn search(env: &SearchEnv) -> Result<Nccl, String> {
    let mut failures = Vec::new();
    // Bare names: the dynamic loader's own search.
    for name in [SONAME, "libnccl.so"] {
        match Nccl::open(name) {
            Ok(nccl) => return Ok(nccl),
            // "cannot open shared object file" is the ordinary not-here case.
            Err(e) if e.contains("cannot open shared object") => {}
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    for file in installed_copies(env) {
        match Nccl::open(&file.to_string_lossy()) {
            Ok(nccl) => return Ok(nccl),
            Err(e) => failures.push(format!("{}: {e}", file.display())),
        }
    }
    let tried = if failures.is_empty() {
        String::new()
    } else {
        format!(" (found but unusable: {})", failures.join("; "))
    };
    Err(format!(
        "NCCL not found: no {SONAME} on the loader's path (LD_LIBRARY_PATH, ldconfig) nor in a pip \
         nvidia-nccl wheel, conda or CUDA directory{tried}; install libnccl2 or `pip install \
         nvidia-nccl-cu12` (nvidia-nccl-cu13 for CUDA 13), or give --nccl-lib PATH ({NCCL_LIB_ENV})"
    ))
}

/// # Safety
/// `T` must be the C signature of `name` in nccl.h.
unsafe fn symbol<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    lib.get::<T>(name.as_bytes())
        .map(|s| *s)
        .map_err(|_| format!("{name} is missing: not an NCCL library, or older than 2.10"))
}

/// # Safety
/// As `symbol`.
unsafe fn optional<T: Copy>(lib: &Library, name: &str) -> Option<T> {
    lib.get::<T>(name.as_bytes()).ok().map(|s| *s)
}

impl Nccl {
    fn open(file: &str) -> Result<Nccl, String> {
        // SAFETY: loading NCCL runs only its initialisers, which touch nothing of ours.
        // libloading's message is "dlopen failed"; dlerror's text is in its source.
        let lib =
            unsafe { Library::new(file) }.map_err(|e| format!("{:#}", anyhow::Error::from(e)))?;
        // SAFETY: every signature below is nccl.h's (NCCL 2.10 to 2.30).
        let fns = unsafe {
            Fns {
                get_version: symbol(&lib, "ncclGetVersion")?,
                get_unique_id: symbol(&lib, "ncclGetUniqueId")?,
                comm_init_rank: symbol(&lib, "ncclCommInitRank")?,
                comm_destroy: symbol(&lib, "ncclCommDestroy")?,
                comm_abort: symbol(&lib, "ncclCommAbort")?,
                comm_get_async_error: symbol(&lib, "ncclCommGetAsyncError")?,
                get_error_string: symbol(&lib, "ncclGetErrorString")?,
                get_last_error: optional(&lib, "ncclGetLastError"),
                group_start: symbol(&lib, "ncclGroupStart")?,
                group_end: symbol(&lib, "ncclGroupEnd")?,
                all_reduce: symbol(&lib, "ncclAllReduce")?,
                broadcast: symbol(&lib, "ncclBroadcast")?,
                reduce: symbol(&lib, "ncclReduce")?,
                all_gather: symbol(&lib, "ncclAllGather")?,
                reduce_scatter: symbol(&lib, "ncclReduceScatter")?,
                send: symbol(&lib, "ncclSend")?,
                recv: symbol(&lib, "ncclRecv")?,
                alltoall: optional(&lib, "ncclAlltoAll"),
                gather: optional(&lib, "ncclGather"),
                scatter: optional(&lib, "ncclScatter"),
                setup: SetupFns {
                    init_config: optional(&lib, "ncclCommInitRankConfig"),
                    mem_alloc: optional(&lib, "ncclMemAlloc"),
                    mem_free: optional(&lib, "ncclMemFree"),
                    register: optional(&lib, "ncclCommRegister"),
                    deregister: optional(&lib, "ncclCommDeregister"),
                    window_register: optional(&lib, "ncclCommWindowRegister"),
                    window_deregister: optional(&lib, "ncclCommWindowDeregister"),
                },
                premulsum: optional(&lib, "ncclRedOpCreatePreMulSum"),
                red_op_destroy: optional(&lib, "ncclRedOpDestroy"),
            }
        };
        let mut version: c_int = 0;
        // SAFETY: writes one int.
        let code = unsafe { (fns.get_version)(&mut version) };
        if code != 0 {
            return Err(format!("ncclGetVersion failed ({code})"));
        }
        let path =
            resolved_path(fns.get_version as *const c_void).unwrap_or_else(|| file.to_string());
        let nccl = Nccl {
            fns,
            path,
            version,
            _lib: lib,
        };
        if version < MIN_VERSION {
            return Err(format!(
                "{} is {}: fabricbench needs NCCL 2.10 or newer",
                nccl.path,
                nccl.version_string()
            ));
        }
        Ok(nccl)
    }

    /// The file NCCL was loaded from.
    pub fn path(&self) -> &str {
        &self.path
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
        // ncclInProgress (7) is a non-blocking communicator still working, not an error.
        if state == 7 {
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
        let err = Nccl::open(&fake.to_string_lossy()).err().unwrap();
        assert!(err.contains("libnccl.so.2"), "{err}");
        // A directory given to --nccl-lib means the libnccl.so.2 inside it.
        assert_eq!(explicit_file(&root), fake);
        assert_eq!(explicit_file(&fake), fake);
        // A FIFO is refused before dlopen, which would wait for a writer for ever.
        let fifo = root.join("fifo.so");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let err = open_given(&fifo).err().unwrap();
        assert_eq!(
            err,
            format!(
                "--nccl-lib {0} ({NCCL_LIB_ENV}): cannot use {0}: is a FIFO, not a regular file",
                fifo.display()
            )
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn version_codes() {
        assert_eq!(version_string(22803), "NCCL 2.28.3");
        assert_eq!(version_string(21903), "NCCL 2.19.3");
        assert_eq!(version_string(2804), "NCCL 2.8.4");
    }
}
