//! A backend of one rank in host memory, for the driver's unit tests: at one rank
//! every collective leaves its send data in its receive buffer, so each call is a
//! copy of `count` elements (within the receive buffer when in place).

use super::{
    Backend, BackendInfo, BackendKind, BufRef, HostClock, Marks, MemoryBudget, OpArgs, RankDevice,
    Slot,
};
use crate::report::facts::Location;

#[derive(Default)]
pub struct Loopback {
    send: Vec<u8>,
    recv: Vec<u8>,
    clock: HostClock,
    /// What `memory_available` says (None: it cannot tell).
    pub budget: Option<MemoryBudget>,
    /// Calls issued, for tests that count them.
    pub calls: u64,
    /// Writes of host data into the buffers (inputs, poison), for the same.
    pub writes: u64,
}

impl Loopback {
    fn buffer(&mut self, slot: Slot) -> &mut Vec<u8> {
        match slot {
            Slot::Send => &mut self.send,
            Slot::Recv => &mut self.recv,
        }
    }

    fn call(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.calls += 1;
        let bytes = args.count * args.dtype.size();
        let (from, to) = (args.send.offset, args.recv.offset);
        match args.send.slot {
            Slot::Recv => self.recv.copy_within(from..from + bytes, to),
            Slot::Send => self.recv[to..to + bytes].copy_from_slice(&self.send[from..from + bytes]),
        }
        Ok(())
    }
}

impl Backend for Loopback {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: BackendKind::Mpi,
            transport: "loopback".into(),
            library_version: "loopback".into(),
            devices: vec![RankDevice {
                ordinal: 0,
                location: Location::Host,
                name: "loopback".into(),
            }],
            notes: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn memory_available(&self) -> Option<MemoryBudget> {
        self.budget.clone()
    }

    fn alloc(&mut self, send_bytes: usize, recv_bytes: usize) -> anyhow::Result<()> {
        self.send = vec![0; send_bytes];
        self.recv = vec![0; recv_bytes];
        Ok(())
    }

    fn write(&mut self, at: BufRef, data: &[u8]) -> anyhow::Result<()> {
        self.writes += 1;
        self.buffer(at.slot)[at.offset..at.offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn read(&mut self, at: BufRef, out: &mut [u8]) -> anyhow::Result<()> {
        out.copy_from_slice(&self.buffer(at.slot)[at.offset..at.offset + out.len()]);
        Ok(())
    }

    fn all_reduce(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }
    fn all_gather(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }
    fn broadcast(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }
    fn reduce(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }
    fn reduce_scatter(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }
    fn alltoall(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }
    fn gather(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }
    fn scatter(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }
    fn sendrecv(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        self.call(args)
    }

    fn alltoallv(
        &mut self,
        args: &OpArgs,
        peer: &dyn Fn(usize, usize) -> usize,
    ) -> anyhow::Result<()> {
        self.call(&OpArgs {
            count: peer(0, 0),
            ..*args
        })
    }
    fn exchange(&mut self, args: &OpArgs, _peer: usize) -> anyhow::Result<()> {
        self.call(args)
    }
    fn copy(&mut self, from: BufRef, to: BufRef, bytes: usize) -> anyhow::Result<()> {
        self.calls += 1;
        let data = self.buffer(from.slot)[from.offset..from.offset + bytes].to_vec();
        self.write(to, &data)
    }
    fn rank_of(&self, _device: usize) -> usize {
        0
    }
    fn nranks(&self) -> usize {
        1
    }

    fn synchronize(&mut self) -> anyhow::Result<()> {
        Ok(())
    }

    fn timer_start(&mut self, iterations: usize, marks: Marks) -> anyhow::Result<()> {
        self.clock.start(iterations, marks);
        Ok(())
    }

    fn mark(&mut self) {
        self.clock.mark();
    }

    fn marks_host_time(&self) -> bool {
        true
    }

    fn timer_read(&mut self, per_iteration: &mut [f64]) -> anyhow::Result<f64> {
        Ok(self.clock.read(per_iteration))
    }
}
