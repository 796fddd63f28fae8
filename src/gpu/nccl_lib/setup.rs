//! What nccl-tests 2.19 sets up around the calls: communicators from
//! ncclCommInitRankConfig with its config, ncclMemAlloc buffers, and their
//! registration (-R 1: ncclCommRegister; -R 2: ncclCommWindowRegister).
//! Every entry point here is optional in the library: its absence is told by
//! version before any call (see `backend::nccl::options`).

use super::{Comm, Nccl, NcclError, Res};
use cudarc::nccl::sys::ncclUniqueId;
use std::ffi::{c_char, c_int, c_uint, c_void};

/// NCCL_CONFIG_UNDEF_INT: a field NCCL (and its NCCL_* variables) decides.
const UNDEF: c_int = c_int::MIN;
/// NCCL_API_MAGIC.
const MAGIC: c_uint = 0xcafe_beef;
/// NCCL_WIN_COLL_SYMMETRIC.
pub(super) const WIN_COLL_SYMMETRIC: c_int = 0x01;
/// ncclInProgress: a non-blocking communicator (NCCL_COMM_BLOCKING=0) still working.
pub const IN_PROGRESS: Res = 7;
/// ncclInvalidUsage: what a call this library lacks is reported as.
pub(super) const INVALID_USAGE: Res = 5;

/// ncclConfig_t up to NCCL 2.28's fields (nccl.h), a prefix of newer ones. NCCL
/// starts from NCCL_CONFIG_INITIALIZER, copies `size` bytes of ours at most and
/// resets the fields newer than `version`, so one layout serves every library
/// from 2.14 on: older ones read their prefix, newer ones default the rest.
#[repr(C)]
#[derive(Debug)]
pub(super) struct Config {
    size: usize,
    magic: c_uint,
    version: c_uint,
    blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
    split_share: c_int,
    traffic_class: c_int,
    comm_name: *const c_char,
    collnet_enable: c_int,
    cta_policy: c_int,
    shrink_share: c_int,
    nvls_ctas: c_int,
    n_channels_per_net_peer: c_int,
    nvlink_centric_sched: c_int,
}

/// One field of `Config` as nccl.h names it: where it is and what it starts as.
#[derive(Clone, Copy, Debug)]
pub(super) struct ConfigField {
    pub c_name: &'static str,
    pub offset: usize,
    pub size: usize,
    pub initial: i64,
}

/// `ConfigField`s of `$init`'s fields, each paired with its nccl.h name.
macro_rules! config_fields {
    ($init:expr, $($field:ident = $c_name:literal),* $(,)?) => {
        vec![$(ConfigField {
            c_name: $c_name,
            offset: std::mem::offset_of!(Config, $field),
            size: std::mem::size_of_val(&$init.$field),
            initial: $init.$field as i64,
        }),*]
    };
}

impl Config {
    /// NCCL_CONFIG_INITIALIZER for the fields of NCCL 2.28 (`size` is ours).
    fn initializer() -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: MAGIC,
            version: 2_28_00,
            blocking: UNDEF,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
            split_share: UNDEF,
            traffic_class: UNDEF,
            comm_name: std::ptr::null(),
            collnet_enable: UNDEF,
            cta_policy: UNDEF,
            shrink_share: UNDEF,
            nvls_ctas: UNDEF,
            n_channels_per_net_peer: UNDEF,
            nvlink_centric_sched: UNDEF,
        }
    }

    /// NCCL_CONFIG_INITIALIZER, then what nccl-tests' initComms sets: CTAPolicy
    /// (-x) and nvlinkCentricSched = 1 (read by NCCL 2.28+).
    pub(super) fn nccl_tests(cta_policy: Option<u8>) -> Config {
        Config {
            cta_policy: cta_policy.map_or(UNDEF, c_int::from),
            nvlink_centric_sched: 1,
            ..Config::initializer()
        }
    }

    /// Each field by its nccl.h name, with its offset, size and initial value
    /// (NCCL_CONFIG_INITIALIZER's, but `size` and `version`, which are ours).
    pub(super) fn fields() -> Vec<ConfigField> {
        let init = Config::initializer();
        config_fields!(
            init,
            size = "size",
            magic = "magic",
            version = "version",
            blocking = "blocking",
            cga_cluster_size = "cgaClusterSize",
            min_ctas = "minCTAs",
            max_ctas = "maxCTAs",
            net_name = "netName",
            split_share = "splitShare",
            traffic_class = "trafficClass",
            comm_name = "commName",
            collnet_enable = "collnetEnable",
            cta_policy = "CTAPolicy",
            shrink_share = "shrinkShare",
            nvls_ctas = "nvlsCTAs",
            n_channels_per_net_peer = "nChannelsPerNetPeer",
            nvlink_centric_sched = "nvlinkCentricSched",
        )
    }
}

pub(super) type InitConfigFn =
    unsafe extern "C" fn(*mut Comm, c_int, ncclUniqueId, c_int, *mut Config) -> Res;
pub(super) type MemAllocFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> Res;
pub(super) type MemFreeFn = unsafe extern "C" fn(*mut c_void) -> Res;
pub(super) type RegisterFn =
    unsafe extern "C" fn(Comm, *mut c_void, usize, *mut *mut c_void) -> Res;
pub(super) type DeregisterFn = unsafe extern "C" fn(Comm, *mut c_void) -> Res;
pub(super) type WindowRegisterFn =
    unsafe extern "C" fn(Comm, *mut c_void, usize, *mut *mut c_void, c_int) -> Res;

/// The optional entry points of `Fns`.
#[derive(Default)]
pub(super) struct SetupFns {
    pub init_config: Option<InitConfigFn>,
    pub mem_alloc: Option<MemAllocFn>,
    pub mem_free: Option<MemFreeFn>,
    pub register: Option<RegisterFn>,
    pub deregister: Option<DeregisterFn>,
    pub window_register: Option<WindowRegisterFn>,
    pub window_deregister: Option<DeregisterFn>,
}

/// A registration handle (ncclCommRegister's or a window), to undo before the
/// communicator is destroyed.
#[derive(Debug)]
pub enum Registration {
    Local(*mut c_void),
    Window(*mut c_void),
}

fn missing(name: &'static str) -> NcclError {
    NcclError {
        call: name,
        code: INVALID_USAGE,
        text: "not in this NCCL library".into(),
        detail: String::new(),
    }
}

impl Nccl {
    /// Creates the communicator for `rank` of `nranks` on the current device with
    /// nccl-tests' config (ncclCommInitRankConfig, NCCL 2.14+), else ncclCommInitRank.
    pub fn comm_init_rank_config(
        &self,
        nranks: usize,
        id: ncclUniqueId,
        rank: usize,
        cta_policy: Option<u8>,
    ) -> Result<Comm, NcclError> {
        let Some(init) = self.fns.setup.init_config else {
            return self.comm_init_rank(nranks, id, rank);
        };
        let mut config = Config::nccl_tests(cta_policy);
        let mut comm: Comm = std::ptr::null_mut();
        // SAFETY: writes the handle; NCCL reads at most config.size bytes of config.
        let code = unsafe { init(&mut comm, nranks as c_int, id, rank as c_int, &mut config) };
        self.check("ncclCommInitRankConfig", code, None)
            .map(|_| comm)
    }

    /// Waits until a communicator made non-blocking by NCCL_COMM_BLOCKING=0 is ready.
    ///
    /// # Safety
    /// `comm` is a live communicator.
    pub unsafe fn wait_ready(&self, comm: Comm) -> Result<(), NcclError> {
        loop {
            let mut state: Res = 0;
            let code = (self.fns.comm_get_async_error)(comm, &mut state);
            self.check("ncclCommGetAsyncError", code, Some(comm))?;
            if state != IN_PROGRESS {
                return self.check("ncclCommInitRankConfig (non-blocking)", state, Some(comm));
            }
            std::thread::yield_now();
        }
    }

    /// `bytes` of device memory from ncclMemAlloc (NCCL 2.19+) on the current device.
    pub fn mem_alloc(&self, bytes: usize) -> Result<u64, NcclError> {
        let f = self.fns.setup.mem_alloc.ok_or(missing("ncclMemAlloc"))?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes the pointer.
        let code = unsafe { f(&mut ptr, bytes.max(1)) };
        self.check("ncclMemAlloc", code, None).map(|_| ptr as u64)
    }

    /// # Safety
    /// `ptr` came from `mem_alloc`, is freed once and not used afterwards.
    pub unsafe fn mem_free(&self, ptr: u64) -> Result<(), NcclError> {
        let f = self.fns.setup.mem_free.ok_or(missing("ncclMemFree"))?;
        self.check("ncclMemFree", f(ptr as *mut c_void), None)
    }

    /// Registers `bytes` at `ptr` with `comm`: a symmetric window (-R 2) or a local
    /// registration (-R 1). Windows are collective: every rank registers alike.
    ///
    /// # Safety
    /// `comm` is live and the range lies in one allocation of its GPU.
    pub unsafe fn register(
        &self,
        comm: Comm,
        ptr: u64,
        bytes: usize,
        window: bool,
    ) -> Result<Registration, NcclError> {
        let mut handle: *mut c_void = std::ptr::null_mut();
        let buff = ptr as *mut c_void;
        if window {
            let f = self
                .fns
                .setup
                .window_register
                .ok_or(missing("ncclCommWindowRegister"))?;
            let code = f(comm, buff, bytes, &mut handle, WIN_COLL_SYMMETRIC);
            self.check("ncclCommWindowRegister", code, Some(comm))?;
            Ok(Registration::Window(handle))
        } else {
            let f = self.fns.setup.register.ok_or(missing("ncclCommRegister"))?;
            self.check(
                "ncclCommRegister",
                f(comm, buff, bytes, &mut handle),
                Some(comm),
            )?;
            Ok(Registration::Local(handle))
        }
    }

    /// # Safety
    /// `registration` came from `register` on this live `comm`, undone once.
    pub unsafe fn deregister(
        &self,
        comm: Comm,
        registration: &Registration,
    ) -> Result<(), NcclError> {
        let (name, f, handle) = match *registration {
            Registration::Local(h) => ("ncclCommDeregister", self.fns.setup.deregister, h),
            Registration::Window(h) => (
                "ncclCommWindowDeregister",
                self.fns.setup.window_deregister,
                h,
            ),
        };
        let f = f.ok_or(missing(name))?;
        self.check(name, f(comm, handle), Some(comm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_nccl_h_layout_with_nccl_tests_settings() {
        // nccl.h 2.28: size_t, 2 uint, 4 int, ptr, 2 int, ptr, 6 int on x86-64.
        assert_eq!(std::mem::size_of::<Config>(), 8 + 8 + 16 + 8 + 8 + 8 + 24);
        assert_eq!(std::mem::offset_of!(Config, net_name), 32);
        assert_eq!(std::mem::offset_of!(Config, comm_name), 48);
        assert_eq!(std::mem::offset_of!(Config, cta_policy), 60);
        assert_eq!(std::mem::offset_of!(Config, nvlink_centric_sched), 76);
        let c = Config::nccl_tests(Some(2));
        assert_eq!((c.magic, c.version, c.size), (0xcafebeef, 22800, 80));
        assert_eq!((c.blocking, c.cga_cluster_size), (i32::MIN, i32::MIN));
        assert_eq!((c.cta_policy, c.nvlink_centric_sched), (2, 1));
        assert_eq!(Config::nccl_tests(None).cta_policy, i32::MIN);
    }
}
