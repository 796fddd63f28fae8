//! -e/--events: both CQs report to one completion channel and an idle loop
//! sleeps on it instead of spinning, as perftest's ctx_notify_events: wait for
//! the event, acknowledge it, re-arm that CQ (ibv_req_notify_cq), then poll.
//! The channel's descriptor is non-blocking and waited on with poll(2), so a
//! peer that died still ends in --timeout's error, not a hang.

use crate::verbs::device::{source_text, Port};
use anyhow::{anyhow, bail};
use rdma_mummy_sys::{ibv_ack_cq_events, ibv_get_cq_event, ibv_req_notify_cq};
use sideway::ibverbs::completion::{
    CompletionChannel, CompletionQueue, CompletionQueueBuilder, GenericCompletionQueue,
};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// The completion channel of one side.
pub struct Events {
    channel: Arc<CompletionChannel>,
    /// perftest's "Using rxe0_comp0": the device and the completion vector.
    pub name: String,
}

impl Events {
    pub fn open(port: &Port) -> anyhow::Result<Arc<Events>> {
        let channel = CompletionChannel::new(&port.ctx).map_err(|e| {
            anyhow!(
                "-e/--events: creating a completion channel on {} failed: {}",
                port.device,
                source_text(&e)
            )
        })?;
        channel.set_nonblocking(true).map_err(|e| {
            anyhow!("-e/--events: making the completion channel non-blocking failed: {e}")
        })?;
        Ok(Arc::new(Events {
            channel,
            name: format!("{}_comp0", port.device),
        }))
    }

    /// A CQ built with `builder` reports to this channel (vector 0).
    pub fn attach(&self, builder: &mut CompletionQueueBuilder) {
        builder.setup_comp_channel(&self.channel, 0);
    }

    /// Asks for an event at each CQ's next completion.
    pub fn arm(&self, cqs: &[&GenericCompletionQueue]) -> anyhow::Result<()> {
        for cq in cqs {
            // SAFETY: the CQ lives as long as `cq`.
            match unsafe { ibv_req_notify_cq(cq.cq().as_ptr(), 0) } {
                0 => {}
                e => bail!(
                    "-e/--events: ibv_req_notify_cq failed: {}",
                    std::io::Error::from_raw_os_error(e)
                ),
            }
        }
        Ok(())
    }

    /// Sleeps until a CQ reports an event or `limit` passes (false); takes the
    /// event, acknowledges it and re-arms its CQ.
    pub fn wait(&self, limit: Duration) -> anyhow::Result<bool> {
        let fd = self.channel.as_raw_fd();
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = limit.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(true);
            }
            bail!("-e/--events: waiting on the completion channel failed: {e}");
        }
        if ready == 0 {
            return Ok(false);
        }
        let mut cq = std::ptr::null_mut();
        let mut context = std::ptr::null_mut();
        // SAFETY: the channel lives as long as `self`; non-blocking, so at
        // worst EAGAIN when another reader took the event.
        if unsafe { ibv_get_cq_event(self.channel.comp_channel().as_ptr(), &mut cq, &mut context) }
            != 0
        {
            return Ok(true);
        }
        // SAFETY: ibv_get_cq_event named a live CQ of this channel.
        unsafe {
            ibv_ack_cq_events(cq, 1);
            match ibv_req_notify_cq(cq, 0) {
                0 => Ok(true),
                e => bail!(
                    "-e/--events: re-arming the completion queue failed: {}",
                    std::io::Error::from_raw_os_error(e)
                ),
            }
        }
    }
}
