//! One rank of the nccl backend: its GPU, stream, communicator, buffers, -R's
//! registrations and timing events.

use super::super::{BufRef, Slot};
use crate::gpu::nccl_lib::{Comm, Registration};
use crate::gpu::{DeviceBuffer, GpuInfo};
use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaGraph, CudaStream};
use std::sync::Arc;

/// One rank: its GPU, stream, communicator, buffers and timing events.
pub(super) struct RankGpu {
    pub(super) rank: usize,
    pub(super) info: GpuInfo,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) comm: Comm,
    pub(super) send: Option<DeviceBuffer>,
    pub(super) recv: Option<DeviceBuffer>,
    /// -R: the buffers' registrations, undone before the communicator goes.
    pub(super) registrations: Vec<Registration>,
    /// Timing events, recorded as `Backend::timer_start`'s `Marks` says.
    pub(super) marks: Vec<CudaEvent>,
    /// Events around `replay`'s launches.
    pub(super) replay: Option<(CudaEvent, CudaEvent)>,
    pub(super) graph: Option<CudaGraph>,
    /// The datatype of the PreMulSum op alive on `comm` (mulsum), if any.
    pub(super) premul: std::cell::Cell<Option<crate::datatype::DataType>>,
}

impl RankGpu {
    pub(super) fn buffer(&self, slot: Slot) -> anyhow::Result<&DeviceBuffer> {
        match slot {
            Slot::Send => self.send.as_ref(),
            Slot::Recv => self.recv.as_ref(),
        }
        .ok_or_else(|| anyhow::anyhow!("GPU buffers used before alloc"))
    }

    pub(super) fn addr(&self, at: BufRef) -> anyhow::Result<u64> {
        Ok(self.buffer(at.slot)?.at(at.offset))
    }

    pub(super) fn timing_event(&self) -> anyhow::Result<CudaEvent> {
        Ok(self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?)
    }

    /// Records `event` on the stream; while capturing, as a graph node that records
    /// each time the graph runs.
    pub(super) fn record(&self, event: &CudaEvent, capturing: bool) -> anyhow::Result<()> {
        let flags = if capturing {
            sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32
        } else {
            sys::CUevent_record_flags::CU_EVENT_RECORD_DEFAULT as u32
        };
        self.ctx.bind_to_thread()?;
        // SAFETY: event and stream belong to this rank's context and are alive.
        unsafe { sys::cuEventRecordWithFlags(event.cu_event(), self.stream.cu_stream(), flags) }
            .result()?;
        Ok(())
    }
}
