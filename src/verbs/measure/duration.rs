//! -D as perftest times it, and --run_infinitely.
//!
//! perftest's DURATION states: START (the first -f seconds, not measured),
//! SAMPLE (the measured window, -D - 2 x -f long), STOP_SAMPLE (the last -f
//! seconds, not measured), END. `Window` is the SAMPLE state of one run: only
//! completions (bandwidth) and round trips (latency) inside it count, over
//! its length. `Periods` is the list of runs: every size once, or with
//! --run_infinitely one -D period after another until SIGINT or SIGTERM,
//! which every endpoint hears of after the period it is in, so each period's
//! line and CSV row is out before the next starts and a stop loses none.

use crate::verbs::exchange::wire::Message;
use crate::verbs::exchange::{Link, Patience};
use crate::verbs::flags::{Length, Plan};
use anyhow::anyhow;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::sync::atomic::{AtomicI32, Ordering};

/// The measured part of a -D run, in the run clock's nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    from_ns: u64,
    to_ns: u64,
}

impl Window {
    /// The window of a run that starts at `start_ns`; None for -n runs,
    /// which measure every message.
    pub fn of(plan: &Plan, start_ns: u64) -> Option<Window> {
        let Length::Duration(d) = plan.length else {
            return None;
        };
        let margin = plan.timing.margin.as_nanos() as u64;
        Some(Window {
            from_ns: start_ns + margin,
            to_ns: start_ns + (d.as_nanos() as u64).saturating_sub(margin),
        })
    }

    pub fn contains(&self, t_ns: u64) -> bool {
        (self.from_ns..self.to_ns).contains(&t_ns)
    }

    pub fn len_ns(&self) -> u64 {
        self.to_ns - self.from_ns
    }
}

/// The signal that asked --run_infinitely to stop (0: none yet).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(signal: libc::c_int) {
    STOP_SIGNAL.store(signal, Ordering::Relaxed);
}

fn caught() -> Option<Signal> {
    Signal::try_from(STOP_SIGNAL.load(Ordering::Relaxed)).ok()
}

/// The runs of a session, one size each.
pub struct Periods<'a> {
    sizes: &'a [u64],
    done: usize,
    infinite: bool,
    /// Set once every endpoint agreed to stop: the signal's name.
    pub stopped_by: Option<String>,
}

impl<'a> Periods<'a> {
    /// With --run_infinitely, SIGINT and SIGTERM only note that a stop is
    /// wanted (the period in progress finishes, and its row is written).
    pub fn new(plan: &Plan, sizes: &'a [u64]) -> anyhow::Result<Periods<'a>> {
        let infinite = plan.timing.infinite;
        if infinite {
            let action = SigAction::new(
                SigHandler::Handler(note_signal),
                SaFlags::SA_RESTART,
                SigSet::empty(),
            );
            for signal in [Signal::SIGINT, Signal::SIGTERM] {
                // SAFETY: the handler only stores to an atomic.
                unsafe { sigaction(signal, &action) }
                    .map_err(|e| anyhow!("--run_infinitely: catching {signal} failed: {e}"))?;
            }
        }
        Ok(Periods {
            sizes,
            done: 0,
            infinite,
            stopped_by: None,
        })
    }

    /// The next size to run; under --run_infinitely, after asking every
    /// endpoint whether one of them was signalled (then None everywhere).
    pub fn next(&mut self, link: &mut dyn Link) -> anyhow::Result<Option<u64>> {
        if !self.infinite {
            self.done += 1;
            return Ok(self.sizes.get(self.done - 1).copied());
        }
        let size = self.sizes[0];
        if self.done > 0 {
            let mine = match caught() {
                Some(signal) => Message::Stop {
                    signal: signal.as_str().to_string(),
                },
                None => Message::Ready { size },
            };
            for theirs in link.gather(&mine, Patience::WhileMeasuring)? {
                match theirs {
                    Message::Stop { signal } => {
                        self.stopped_by.get_or_insert(signal);
                    }
                    Message::Ready { size: s } if s == size => {}
                    other => {
                        return Err(anyhow!(
                            "--run_infinitely: the peer sent {} where this side expected whether to run another period",
                            other.kind()
                        ))
                    }
                }
            }
            if self.stopped_by.is_some() {
                return Ok(None);
            }
        }
        self.done += 1;
        Ok(Some(size))
    }

    /// The periods run so far.
    pub fn count(&self) -> usize {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
    use crate::verbs::flags::parse;

    #[test]
    fn the_window_leaves_out_both_margins() {
        let bw = Benchmark::new(Verb::Write, Test::Bw);
        let plan = parse(bw, ["ib_write_bw", "-D", "10", "-f", "3"]).unwrap();
        let w = Window::of(&plan, 1_000).unwrap();
        assert_eq!(w.len_ns(), 4_000_000_000);
        assert!(!w.contains(1_000 + 2_999_999_999));
        assert!(w.contains(1_000 + 3_000_000_000));
        assert!(w.contains(1_000 + 6_999_999_999));
        assert!(!w.contains(1_000 + 7_000_000_000));
        // perftest's default margin: a quarter of -D.
        let plan = parse(bw, ["ib_write_bw", "-D", "8"]).unwrap();
        assert_eq!(Window::of(&plan, 0).unwrap().len_ns(), 4_000_000_000);
        let plan = parse(bw, ["ib_write_bw", "-n", "8"]).unwrap();
        assert_eq!(Window::of(&plan, 0), None);
    }

    #[test]
    fn receivers_of_sends_and_immediates_count_receives() {
        use crate::verbs::flags::takes_receives;
        let plan = |b, args: &[&str]| parse(b, args.iter().copied()).unwrap();
        let write_bw = Benchmark::new(Verb::Write, Test::Bw);
        assert!(!takes_receives(&plan(write_bw, &["ib_write_bw"])));
        assert!(takes_receives(&plan(
            write_bw,
            &["ib_write_bw", "--write_with_imm"]
        )));
        let send_lat = Benchmark::new(Verb::Send, Test::Lat);
        assert!(takes_receives(&plan(send_lat, &["ib_send_lat"])));
    }
}
