//! --data_validation's view of a QP's buffer for writes and reads (see
//! `rdma_check`): the target half as a ring of one-message slots, and the
//! credit words in the control area.

use crate::verbs::exchange::wire::QpInfo;
use crate::verbs::measure::validate::{matches, pattern_byte};
use std::sync::atomic::{fence, Ordering};

/// Where in the control word the credit lands (the writer's) and where the
/// responder keeps the count it writes (latency's stop bytes come first).
pub const CREDIT_IN: usize = 8;
pub const CREDIT_OUT: usize = 16;

/// One QP's buffer as validation sees it: [local half | target half | control].
pub struct Ring {
    pub buf: *mut u8,
    half: usize,
    pub stride: usize,
    /// Slots of the local half (messages in flight).
    pub send: u64,
}

impl Ring {
    /// The ring of a host buffer at `buf` (`2 * half` bytes and the control word).
    pub fn new(buf: *mut u8, half: usize, stride: usize, send: u64) -> Ring {
        Ring {
            buf,
            half,
            stride,
            send,
        }
    }

    pub fn slots(&self) -> u64 {
        (self.half / self.stride) as u64
    }

    pub fn target(&self, seq: u64) -> *mut u8 {
        let at = self.half + (seq % self.slots()) as usize * self.stride;
        // SAFETY: slots lie in the target half of the buffer.
        unsafe { self.buf.add(at) }
    }

    pub fn control(&self, offset: usize) -> *mut u64 {
        // SAFETY: the control word (64 bytes) follows the target half.
        unsafe { self.buf.add(2 * self.half + offset).cast() }
    }

    pub fn last_byte(&self, seq: u64, size: u32) -> u8 {
        // SAFETY: within the slot; volatile because the NIC writes it.
        unsafe { self.target(seq).add(size as usize - 1).read_volatile() }
    }

    pub fn set_last_byte(&self, seq: u64, size: u32, value: u8) {
        // SAFETY: as in `last_byte`; no write of the peer targets this slot
        // until it is granted.
        unsafe {
            self.target(seq)
                .add(size as usize - 1)
                .write_volatile(value)
        }
    }

    pub fn slot_holds(&self, seq: u64, size: u32, pattern: u64) -> bool {
        fence(Ordering::Acquire);
        // SAFETY: within the slot; the writer does not touch it before the
        // credit that follows this check.
        let bytes = unsafe { std::slice::from_raw_parts(self.target(seq), size as usize) };
        matches(bytes, pattern)
    }

    /// The writer's credit: messages the responder checked.
    pub fn credit(&self) -> u64 {
        // SAFETY: aligned (the buffer is page-aligned, the half a multiple of 64).
        unsafe { self.control(CREDIT_IN).read_volatile() }
    }
}

/// Message `seq`'s last byte.
pub fn tag(seq: u64, size: u32) -> u8 {
    pattern_byte(seq, size as usize - 1)
}

/// The offset in the peer's target half of message `seq` (`remote` holds
/// `remote.len / stride` slots).
pub fn remote_offset(seq: u64, stride: usize, remote: &QpInfo) -> u64 {
    let slots = (remote.len / stride as u64).max(1);
    (seq % slots) * stride as u64
}

/// The byte the fault hook flips: the middle, never the last byte of a
/// message of two or more (the responder of writes waits on that one).
pub fn corrupt_at(size: u32) -> usize {
    (size as usize / 2).min((size as usize).saturating_sub(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::measure::validate::fill;

    #[test]
    fn the_fault_never_hits_the_byte_the_responder_waits_on() {
        assert_eq!(corrupt_at(4096), 2048);
        assert_eq!(corrupt_at(3), 1);
        assert_eq!(corrupt_at(2), 0);
        assert_eq!(corrupt_at(1), 0);
    }

    #[test]
    fn a_ring_over_host_memory() {
        let stride = 64;
        let half = 4 * stride;
        let mut mem = vec![0u64; (2 * half + 64) / 8];
        let ring = Ring::new(mem.as_mut_ptr().cast(), half, stride, 4);
        assert_eq!(ring.slots(), 4);
        for k in 0..4 {
            ring.set_last_byte(k, 16, !tag(k, 16));
            assert_ne!(ring.last_byte(k, 16), tag(k, 16));
        }
        // The writer's message 5 lands in slot 1.
        // SAFETY: slot 1 of the ring lies in `mem`.
        let slot = unsafe { std::slice::from_raw_parts_mut(ring.target(5), 16) };
        fill(slot, 5);
        assert_eq!(ring.last_byte(5, 16), tag(5, 16));
        assert!(ring.slot_holds(5, 16, 5));
        slot[3] ^= 1;
        assert!(!ring.slot_holds(5, 16, 5));
        let remote = QpInfo {
            qpn: 1,
            psn: 0,
            rkey: 0,
            addr: 0,
            len: half as u64,
        };
        assert_eq!(remote_offset(5, stride, &remote), 64);
        assert_eq!(ring.credit(), 0);
    }
}
