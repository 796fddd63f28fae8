//! --data_validation for the send tests: the sender fills each message with a
//! pattern of its iteration number, from a slot of its own (so a message in
//! flight is never overwritten by the next), and the receiver checks every
//! message it receives against the pattern of the iteration it expects. The
//! fault hook `FABRICBENCH_FAULT_VERBS_CORRUPT=N` (read in `crate::faults`)
//! makes the sender flip one byte of message N (0-based, of every size) after
//! filling it, which the receiver must catch.

use serde::{Deserialize, Serialize};

/// What one side's receiver checked of one size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checked {
    pub messages: u64,
    pub wrong: u64,
}

impl Checked {
    #[inline]
    pub fn record(&mut self, ok: bool) {
        self.messages += 1;
        self.wrong += u64::from(!ok);
    }

    pub fn add(self, other: Checked) -> Checked {
        Checked {
            messages: self.messages + other.messages,
            wrong: self.wrong + other.wrong,
        }
    }
}

/// Byte `i` of iteration `seq`'s message: differs between neighbouring
/// iterations and along the message.
#[inline]
pub fn pattern_byte(seq: u64, i: usize) -> u8 {
    (seq.wrapping_mul(0x9e37_79b9)
        .wrapping_add((i as u64).wrapping_mul(131))
        >> 3) as u8
        ^ (seq as u8)
}

/// Fills `buf` with iteration `seq`'s pattern.
pub fn fill(buf: &mut [u8], seq: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(seq, i);
    }
}

/// Whether `buf` holds iteration `seq`'s pattern.
pub fn matches(buf: &[u8], seq: u64) -> bool {
    buf.iter()
        .enumerate()
        .all(|(i, &b)| b == pattern_byte(seq, i))
}

/// One wrong message in a line: what the run's end says.
pub fn wrong_summary(program: &str, wrong: u64, checked: u64) -> String {
    format!(
        "--data_validation: {program}: {wrong} of {checked} received messages did not hold the pattern their sender wrote; \
         something between the two buffers corrupts payloads (NIC, firmware, memory: check dmesg and the NIC's counters)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_differ_per_iteration_and_catch_one_flipped_byte() {
        let mut a = vec![0u8; 4096];
        fill(&mut a, 7);
        assert!(matches(&a, 7));
        assert!(!matches(&a, 8));
        assert!(!matches(&a, 6));
        let mut b = a.clone();
        b[1234] ^= 1;
        assert!(!matches(&b, 7));
        // Neighbouring iterations differ in most bytes, not just one.
        let mut c = vec![0u8; 4096];
        fill(&mut c, 8);
        assert!(a.iter().zip(&c).filter(|(x, y)| x != y).count() > 3000);
        assert!(matches(&[], 3));
    }

    #[test]
    fn checked_counts_add_up() {
        let mut c = Checked::default();
        c.record(true);
        c.record(false);
        assert_eq!(
            c.add(c),
            Checked {
                messages: 4,
                wrong: 2
            }
        );
        assert!(wrong_summary("ib_send_bw", 1, 2000)
            .starts_with("--data_validation: ib_send_bw: 1 of 2000 received messages"));
    }
}
