//! perftest's post and completion flags: `-l/--post_list`, `--recv_post_list`,
//! `-e/--events`, `--cqe_poll`, `--disable_dynamic_polling` and
//! `--use_old_post_send`, as a flattened group of the verbs command line, and
//! their checks against the rest of the plan (perftest_parameters.c's
//! force_dependencies).

use crate::cli::whole;
use crate::job::usage;
use crate::job::UsageError;
use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};

/// perftest's polling batch (CTX_POLL_BATCH), the batch with many QPs of large
/// messages (CTX_POLL_BATCH_INTENSE) and when that applies.
pub const POLL_BATCH: u16 = 16;
const POLL_BATCH_INTENSE: u16 = 64;
const INTENSE_QPS: u32 = 2048;
const INTENSE_SIZE: u64 = 8192;
/// Below this many iterations perftest does not adapt its batch.
const DYNAMIC_MIN_ITERS: u64 = 3000;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct PostArgs {
    /// Bandwidth tests: post this many work requests chained in one post call (CQ moderation becomes the list size unless -Q is given; -n must be a multiple)
    #[arg(short = 'l', long = "post_list", value_parser = whole::<u32>(1), allow_hyphen_values = true)]
    pub post_list: Option<u32>,
    /// ib_send_bw: post this many receives chained in one post call (-n must be a multiple)
    #[arg(long = "recv_post_list", value_parser = whole::<u32>(1), allow_hyphen_values = true)]
    pub recv_post_list: Option<u32>,
    /// Sleep on a completion channel (ibv_get_cq_event) instead of busy polling (read, send and atomic tests)
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Bandwidth tests: completions asked for by one ibv_poll_cq (default: perftest's dynamic batch)
    #[arg(long = "cqe_poll", value_parser = whole::<u16>(1), allow_hyphen_values = true)]
    pub cqe_poll: Option<u16>,
    /// Bandwidth tests: poll a fixed batch of 16 (64 with more than 2048 QPs of messages above 8 KiB) instead of adapting it
    #[arg(long = "disable_dynamic_polling")]
    pub disable_dynamic_polling: bool,
    /// Post with ibv_post_send instead of the ibv_wr_* API (ibv_wr_start ... ibv_wr_complete)
    #[arg(long = "use_old_post_send")]
    pub use_old_post_send: bool,
}

/// How many completions one ibv_poll_cq asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqeBatch {
    /// perftest's adaptive batch: from 1024 towards what polls return, fixed
    /// once stable or after the first quarter of the run.
    Dynamic,
    Fixed(u16),
}

/// The validated flags of this group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostPlan {
    /// Work requests per post call (1: one at a time).
    pub post_list: u32,
    /// Receives per post call.
    pub recv_post_list: u32,
    pub events: bool,
    pub cqe_batch: CqeBatch,
    /// Post through ibv_wr_* on extended QPs (else ibv_post_send).
    pub wr_api: bool,
}

impl Default for PostPlan {
    fn default() -> Self {
        PostPlan {
            post_list: 1,
            recv_post_list: 1,
            events: false,
            cqe_batch: CqeBatch::Fixed(POLL_BATCH),
            wr_api: true,
        }
    }
}

/// What the checks need from the rest of the plan.
pub struct Context {
    pub bench: Benchmark,
    /// -n (None: -D).
    pub iters: Option<u64>,
    /// Already capped at the message count.
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub cq_mod: u32,
    /// -Q was given.
    pub cq_mod_given: bool,
    pub qps: u32,
    pub bidirectional: bool,
    /// The size perftest judges by (the largest with -a).
    pub size: u64,
    /// --data_validation.
    pub validate: bool,
    /// --run_infinitely.
    pub infinite: bool,
}

/// A list of `list` requests: -n a multiple of it (perftest), and room for
/// it in its `queue` (name, flag, depth), or the loop could never post it.
fn check_list(
    flag: &str,
    list: u32,
    iters: Option<u64>,
    queue: (&str, &str, u32),
) -> Result<(), UsageError> {
    if let Some(n) = iters.filter(|n| n % list as u64 != 0) {
        return Err(usage(format!(
            "{flag} {list}: -n/--iters {n} must be a multiple of the list size, e.g. -n {}",
            n.next_multiple_of(list as u64)
        )));
    }
    let (name, depth_flag, depth) = queue;
    if list > depth {
        return Err(usage(format!(
            "{flag} {list}: a list must fit the {name} queue ({depth_flag} {depth}); raise {} or lower {}",
            depth_flag.split('/').next().unwrap_or(depth_flag),
            flag.split('/').next().unwrap_or(flag)
        )));
    }
    Ok(())
}

impl PostArgs {
    /// The plan of this group and the CQ moderation it implies.
    pub fn plan(&self, c: &Context) -> Result<(PostPlan, u32), UsageError> {
        let program = c.bench.program();
        let bw = c.bench.test == Test::Bw;
        let iters = c.iters;
        for (flag, value) in [
            ("-l/--post_list", self.post_list.map(u64::from)),
            ("--recv_post_list", self.recv_post_list.map(u64::from)),
            ("--cqe_poll", self.cqe_poll.map(u64::from)),
        ] {
            if value == Some(0) {
                return Err(usage(format!(
                    "{flag} 0: use a whole number from 1 (1: one at a time)"
                )));
            }
        }
        let mut cq_mod = c.cq_mod;
        let post_list = self.post_list.unwrap_or(1);
        if post_list > 1 {
            if !bw {
                return Err(usage(format!(
                    "-l/--post_list {post_list}: {program} keeps one message in flight; post lists are for the bandwidth tests"
                )));
            }
            let send_queue = ("send", "-t/--tx-depth", c.tx_depth);
            check_list("-l/--post_list", post_list, iters, send_queue)?;
            if !c.cq_mod_given {
                cq_mod = post_list;
            } else if post_list % c.cq_mod != 0 {
                return Err(usage(format!(
                    "-l/--post_list {post_list}: the list size must be a multiple of -Q/--cq-mod {}",
                    c.cq_mod
                )));
            }
            if c.validate {
                return Err(usage(format!(
                    "-l/--post_list {post_list}: --data_validation checks one message per post; drop one of them"
                )));
            }
        }
        let recv_post_list = self.recv_post_list.unwrap_or(1);
        if recv_post_list > 1 {
            if c.bench != Benchmark::new(Verb::Send, Test::Bw) {
                return Err(usage(format!(
                    "--recv_post_list {recv_post_list}: {program} posts no receive lists; it is for ib_send_bw"
                )));
            }
            let recv_queue = ("receive", "-r/--rx-depth", c.rx_depth);
            check_list("--recv_post_list", recv_post_list, iters, recv_queue)?;
        }
        if self.events {
            // perftest_parameters.c: "run_infinitely does not support events feature yet".
            if c.infinite {
                return Err(usage(
                    "-e/--events: --run_infinitely polls its completions (perftest: run_infinitely does not support events); drop -e or --run_infinitely",
                ));
            }
            if c.bench.verb == Verb::Write {
                return Err(usage(format!(
                    "-e/--events: {program}'s receiver gets no completions to wait for (perftest: events not available on WRITE); use ib_read_*, ib_send_* or ib_atomic_* -e"
                )));
            }
            if iters.is_none() {
                return Err(usage(
                    "-e/--events: -D/--duration runs poll for their end (perftest: duration mode doesn't work with events); use -n with -e",
                ));
            }
        }
        if !bw && (self.cqe_poll.is_some() || self.disable_dynamic_polling) {
            let flag = if self.cqe_poll.is_some() {
                "--cqe_poll"
            } else {
                "--disable_dynamic_polling"
            };
            return Err(usage(format!(
                "{flag}: {program} polls one completion at a time; the batch is for the bandwidth tests"
            )));
        }
        // perftest: no adaptation for short runs, a bidirectional send test or
        // the latency tests; then the intense batch with many QPs of large messages.
        let dynamic = self.cqe_poll.is_none()
            && !self.disable_dynamic_polling
            && bw
            && iters.is_none_or(|n| n >= DYNAMIC_MIN_ITERS)
            && !(c.bidirectional && c.bench.verb == Verb::Send);
        let cqe_batch = match self.cqe_poll {
            Some(n) => CqeBatch::Fixed(n),
            None if dynamic => CqeBatch::Dynamic,
            None if c.qps > INTENSE_QPS && c.size > INTENSE_SIZE => {
                CqeBatch::Fixed(POLL_BATCH_INTENSE)
            }
            None => CqeBatch::Fixed(POLL_BATCH),
        };
        let plan = PostPlan {
            post_list,
            recv_post_list,
            events: self.events,
            cqe_batch,
            wr_api: !self.use_old_post_send,
        };
        Ok((plan, cq_mod))
    }
}

#[cfg(test)]
mod tests {
    use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
    use crate::verbs::flags::post::{CqeBatch, PostPlan};
    use crate::verbs::flags::{parse, Plan};

    /// The command line `program args...` of the binary of that name.
    fn parsed(program: &str, args: &[&str]) -> Result<Plan, String> {
        let bench = [Verb::Write, Verb::Read, Verb::Send, Verb::Atomic]
            .into_iter()
            .flat_map(|v| [Test::Bw, Test::Lat].map(|t| Benchmark::new(v, t)))
            .find(|b| b.program() == program)
            .unwrap();
        let argv = std::iter::once(program).chain(args.iter().copied());
        parse(bench, argv).map_err(|e| e.0)
    }

    fn plan(program: &str, args: &[&str]) -> Plan {
        parsed(program, args).unwrap()
    }

    #[test]
    fn perftest_defaults() {
        let p = plan("ib_write_bw", &[]);
        assert_eq!(
            p.post,
            PostPlan {
                cqe_batch: CqeBatch::Dynamic,
                ..PostPlan::default()
            }
        );
        assert!(p.post.wr_api && !p.post.events);
        // Short runs, latency tests and bidirectional send poll a fixed 16.
        for (bench, args) in [
            ("ib_write_bw", vec!["-n", "2999"]),
            ("ib_send_bw", vec!["-b"]),
            ("ib_write_lat", vec![]),
            ("ib_write_bw", vec!["--disable_dynamic_polling"]),
        ] {
            assert_eq!(
                plan(bench, &args).post.cqe_batch,
                CqeBatch::Fixed(16),
                "{args:?}"
            );
        }
        assert_eq!(
            plan("ib_write_bw", &["-n", "3000"]).post.cqe_batch,
            CqeBatch::Dynamic
        );
        assert_eq!(
            plan("ib_write_bw", &["-n", "20", "-q", "2049", "-s", "8193"])
                .post
                .cqe_batch,
            CqeBatch::Fixed(64)
        );
        assert_eq!(
            plan("ib_write_bw", &["-n", "20", "-q", "2048", "-s", "8193"])
                .post
                .cqe_batch,
            CqeBatch::Fixed(16)
        );
        assert_eq!(
            plan("ib_read_bw", &["--cqe_poll", "7"]).post.cqe_batch,
            CqeBatch::Fixed(7)
        );
        assert!(!plan("ib_send_lat", &["--use_old_post_send"]).post.wr_api);
    }

    #[test]
    fn post_list_sets_cq_moderation() {
        // 64 KiB messages would be signalled one by one; a list of 8 asks once per list.
        let p = plan("ib_write_bw", &["-l", "8", "-n", "40"]);
        assert_eq!((p.post.post_list, p.cq_mod), (8, 8));
        // -Q given: kept, the list a multiple of it.
        let p = plan("ib_write_bw", &["-l", "8", "-Q", "4", "-n", "40"]);
        assert_eq!((p.post.post_list, p.cq_mod), (8, 4));
        let p = plan(
            "ib_send_bw",
            &["--recv_post_list", "4", "-n", "40", "-r", "8"],
        );
        assert_eq!((p.post.recv_post_list, p.rx_depth), (4, 8));
    }

    #[test]
    fn events_keep_cq_moderation_for_large_messages() {
        // perftest: -e does not signal every large message (its events would pile up).
        assert_eq!(plan("ib_read_bw", &["-s", "65536"]).cq_mod, 1);
        let p = plan("ib_read_bw", &["-s", "65536", "-e"]);
        assert_eq!((p.cq_mod, p.post.events), (100, true));
    }

    #[test]
    fn mistakes_name_the_flag() {
        for (bench, args, want) in [
            (
                "ib_write_bw",
                vec!["-l", "0"],
                "-l/--post_list 0: use a whole number from 1",
            ),
            (
                "ib_write_bw",
                vec!["-l", "-2"],
                "-l/--post_list -2: use a whole number from 1",
            ),
            (
                "ib_write_bw",
                vec!["-l", "3", "-n", "20"],
                "-l/--post_list 3: -n/--iters 20 must be a multiple of the list size, e.g. -n 21",
            ),
            (
                "ib_write_bw",
                vec!["-l", "32", "-t", "16", "-n", "64"],
                "-l/--post_list 32: a list must fit the send queue (-t/--tx-depth 16)",
            ),
            (
                "ib_write_bw",
                vec!["-l", "8", "-Q", "3", "-n", "40"],
                "-l/--post_list 8: the list size must be a multiple of -Q/--cq-mod 3",
            ),
            (
                "ib_write_lat",
                vec!["-l", "2"],
                "-l/--post_list 2: ib_write_lat keeps one message in flight",
            ),
            (
                "ib_send_bw",
                vec!["-l", "2", "--data_validation"],
                "-l/--post_list 2: --data_validation",
            ),
            (
                "ib_write_bw",
                vec!["--recv_post_list", "2"],
                "--recv_post_list 2: ib_write_bw posts no receive lists",
            ),
            (
                "ib_send_lat",
                vec!["--recv_post_list", "2"],
                "--recv_post_list 2: ib_send_lat",
            ),
            (
                "ib_send_bw",
                vec!["--recv_post_list", "3", "-n", "20"],
                "--recv_post_list 3: -n/--iters 20 must be a multiple",
            ),
            (
                "ib_send_bw",
                vec!["--recv_post_list", "16", "-r", "8", "-n", "32"],
                "--recv_post_list 16: a list must fit the receive queue (-r/--rx-depth 8)",
            ),
            (
                "ib_write_bw",
                vec!["-e"],
                "-e/--events: ib_write_bw's receiver gets no completions",
            ),
            (
                "ib_write_lat",
                vec!["--events"],
                "-e/--events: ib_write_lat's",
            ),
            (
                "ib_read_bw",
                vec!["-e", "-D", "2"],
                "-e/--events: -D/--duration runs poll",
            ),
            (
                "ib_send_bw",
                vec!["-e", "-D", "2", "--run_infinitely"],
                "-e/--events: --run_infinitely polls its completions (perftest: run_infinitely does not support events); drop -e or --run_infinitely",
            ),
            (
                "ib_read_bw",
                vec!["--events", "--run_infinitely"],
                "-e/--events: --run_infinitely polls its completions",
            ),
            (
                "ib_write_bw",
                vec!["--cqe_poll", "0"],
                "--cqe_poll 0: use a whole number from 1",
            ),
            (
                "ib_send_bw",
                vec!["--recv_post_list", "0"],
                "--recv_post_list 0: use a whole number from 1",
            ),
            (
                "ib_write_bw",
                vec!["--cqe_poll", "65536"],
                "--cqe_poll 65536: too large; use a whole number from 1 to 65535",
            ),
            (
                "ib_read_lat",
                vec!["--cqe_poll", "4"],
                "--cqe_poll: ib_read_lat polls one completion at a time",
            ),
            (
                "ib_send_lat",
                vec!["--disable_dynamic_polling"],
                "--disable_dynamic_polling: ib_send_lat",
            ),
        ] {
            let e = parsed(bench, &args).unwrap_err();
            assert!(
                e.starts_with(want) && e.lines().count() == 1,
                "{args:?}: {e}"
            );
        }
    }
}
