//! Hangs and the -T watchdog under mpirun: whichever rank is stopped, killed or
//! stalled, the job ends within -T and a bounded grace, the verdict names the
//! rank really at fault (and the others as waiting), every finished row loads,
//! and no process is left behind. A host outside the job cannot end it, nor
//! flood or hold the watchdog off a real verdict.

mod common;

use common::{assert_rows_load, mpirun_command, scratch};
use fabricbench::driver::faults::FAULT_SETUP_ENV;
use fabricbench::watchdog::{ADDRESS_FILE_ENV, FANOUT_ENV, FAULT_SIGNAL_ENV};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const ALL_GATHER: &str = env!("CARGO_BIN_EXE_all_gather_perf");
const SENDRECV: &str = env!("CARGO_BIN_EXE_sendrecv_perf");
const STALL_ENV: &str = "FABRICBENCH_FAULT_STALL_RANK";

/// -T in these tests, and how long after it a job may take to end on a loaded
/// machine (rank 0's question, a peer's wait for a silent rank 0, the exit).
const TIMEOUT_S: u64 = 3;
const GRACE: Duration = Duration::from_secs(15);
/// Sizes 8 B to 32 KiB by 4: the faults ("RANK:8192...") hit 8 KiB, after 5 sizes
/// of 2 rows each (not the last size: a late signal never lands in MPI_Finalize).
const SWEEP: [&str; 6] = ["-b", "8", "-e", "32K", "-f", "4"];
const FINISHED_ROWS: usize = 10;
/// Calls per loop: the signal hook (10 calls in) lands well inside the timed
/// calls; few enough that the sizes before the fault take seconds, not minutes,
/// where busy loops share the cores with the ranks (tens of ms a call).
const ITERS: &str = "200";

/// A job started in the background, its output going to files.
struct Job {
    child: Child,
    dir: PathBuf,
}

/// How a job ended.
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// From when the CSV held every finished row (or the run started) to the end.
    after_rows: Duration,
}

/// `mpirun -np N1 B1 ARGS : -np N2 B2 ARGS ...`, its output in `dir`.
fn launch(dir: &Path, parts: &[(usize, &str)], args: &[&str], env: &[(&str, &str)]) -> Job {
    let mut cmd: Command = mpirun_command();
    for (k, v) in env {
        cmd.args(["-x", k]).env(k, v);
    }
    for (i, (np, binary)) in parts.iter().enumerate() {
        if i > 0 {
            cmd.arg(":");
        }
        cmd.args(["-np", &np.to_string(), binary]).args(args);
    }
    let file = |n: &str| std::fs::File::create(dir.join(n)).unwrap();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(file("stdout"))
        .stderr(file("stderr"))
        .spawn()
        .expect("mpirun runs (install openmpi-bin)");
    Job {
        child,
        dir: dir.to_path_buf(),
    }
}

fn data_rows(csv: &Path) -> usize {
    std::fs::read_to_string(csv).map_or(0, |t| t.lines().count().saturating_sub(1))
}

impl Job {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Waits for the end (never more than 3 minutes: a hang fails the test),
    /// timing it from when `csv` holds `rows` rows.
    fn wait(mut self, csv: Option<(&Path, usize)>) -> Ended {
        let started = Instant::now();
        let mut rows_at = csv.is_none().then_some(started);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if rows_at.is_none() && csv.is_some_and(|(p, n)| data_rows(p) >= n) {
                rows_at = Some(Instant::now());
            }
            if started.elapsed() > Duration::from_secs(180) {
                let _ = self.child.kill();
                panic!("the job hung: {}", self.read("stderr"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let ended = Ended {
            code: status.code(),
            stdout: self.read("stdout"),
            stderr: self.read("stderr"),
            after_rows: rows_at.map_or(Duration::ZERO, |t| t.elapsed()),
        };
        ended.assert_no_rank_left();
        ended
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }
}

impl Ended {
    /// The watchdog's verdicts on stderr.
    fn verdicts(&self) -> Vec<&str> {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.contains("-T/--timeout"))
            .collect();
        assert!(!lines.is_empty(), "a verdict:\n{}", self.stderr);
        lines
    }

    /// Rank 0's one verdict.
    fn verdict(&self) -> &str {
        let lines = self.verdicts();
        assert_eq!(lines.len(), 1, "one verdict:\n{}", self.stderr);
        lines[0]
    }

    fn assert_timed_out_in_time(&self) {
        assert_eq!(self.code, Some(3), "exit status 3 (-T):\n{}", self.stderr);
        self.assert_in_time();
    }

    fn assert_in_time(&self) {
        let bound = Duration::from_secs(TIMEOUT_S) + GRACE;
        assert!(
            self.after_rows < bound,
            "ended {:?} after the last finished row, more than -T {TIMEOUT_S} s + {GRACE:?}:\n{}",
            self.after_rows,
            self.stderr
        );
    }

    /// Every rank the header lists has ended, at most a few seconds after mpirun
    /// (which may return while its kill signals are still being delivered).
    fn assert_no_rank_left(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        for pid in header_pids(&self.stdout) {
            while let Some(state) = process_state(pid) {
                if Instant::now() > deadline {
                    let _ = Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status();
                    panic!("rank process {pid} outlived the job (state {state})");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The state letter of a live process of ours ("R", "S", "T"); None once it is
/// gone (or only a zombie).
fn process_state(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (name, rest) = stat.split_once(") ")?;
    // Only a rank of ours: a pid can be reused by another process.
    if !name.ends_with("_perf") {
        return None;
    }
    let state = rest.split_whitespace().next()?;
    (state != "Z" && state != "X").then(|| state.to_string())
}

/// The pids of the header's "Rank N Group G Pid P on HOST" lines.
fn header_pids(stdout: &str) -> Vec<u32> {
    stdout
        .lines()
        .filter(|l| l.starts_with("#  Rank"))
        .filter_map(|l| {
            let mut words = l.split_whitespace().skip_while(|w| *w != "Pid");
            words.nth(1)?.parse().ok()
        })
        .collect()
}

/// The ranks a verdict names as waiting ("0 (in call 7),2" is 0 and 2; "4-6"
/// is 4, 5 and 6).
fn waiting(verdict: &str) -> Vec<usize> {
    let list = verdict.split("ranks waiting in it: ").nth(1).unwrap_or("");
    let ranks = |w: &str| -> Vec<usize> {
        let first = w.split(' ').next().unwrap_or("");
        let (a, b) = first.split_once('-').unwrap_or((first, first));
        match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) => (a..=b).collect(),
            _ => Vec::new(),
        }
    };
    list.split(';')
        .next()
        .unwrap_or("")
        .split(',')
        .flat_map(ranks)
        .collect()
}

fn host() -> String {
    fabricbench::job::hostname()
}

/// The sweep on 3 ranks with -T and a CSV in `dir`; returns the job and the CSV's path.
fn sweep(dir: &Path, env: &[(&str, &str)]) -> (Job, PathBuf) {
    let csv = dir.join("rows.csv");
    let mut args: Vec<&str> = SWEEP.to_vec();
    let timeout = TIMEOUT_S.to_string();
    args.extend(["-n", ITERS, "-T", &timeout, "--csv", csv.to_str().unwrap()]);
    (launch(dir, &[(3, ALL_REDUCE)], &args, env), csv)
}

#[test]
fn a_stopped_rank_is_named_and_the_others_wait() {
    let (job, csv) = sweep(&scratch("stopped"), &[(FAULT_SIGNAL_ENV, "1:8192:stop")]);
    let ended = job.wait(Some((&csv, FINISHED_ROWS)));
    ended.assert_timed_out_in_time();
    let v = ended.verdict();
    assert!(
        v.contains("AllReduce float sum ") && v.contains(" root 0 8192 B"),
        "{v}"
    );
    assert!(
        v.contains(&format!(
            "ranks that did not answer: 1 (on {}: no answer within 3 s: stopped",
            host()
        )),
        "{v}"
    );
    assert_eq!(waiting(v), [0, 2], "{v}");
    assert!(!v.contains("had not arrived") && !v.contains("gone"), "{v}");
    assert_rows_load(&csv, FINISHED_ROWS);
}

#[test]
fn rank_0_stopped_ends_the_job_from_a_peer() {
    let (job, csv) = sweep(
        &scratch("rank0-stopped"),
        &[(FAULT_SIGNAL_ENV, "0:8192:stop")],
    );
    let ended = job.wait(Some((&csv, FINISHED_ROWS)));
    ended.assert_timed_out_in_time();
    // Each peer gives up on its own, rank 1 first; one more may speak on a
    // loaded machine before mpirun ends the job. It blames rank 0 too: as stopped,
    // or as gone when mpirun, ending the job for the first, had killed rank 0 by then.
    let verdicts = ended.verdicts();
    let stopped = format!(
        "at fault: rank 0 (on {}), which did not answer the watchdog within 6 s: rank 0 is stopped",
        host()
    );
    assert!(verdicts[0].contains(&stopped), "{}", verdicts[0]);
    let gone = format!(
        "at fault: rank 0 (on {}), which is gone: its watchdog connection closed",
        host()
    );
    for v in &verdicts {
        assert!(v.contains("8192 B"), "{v}");
        assert!(v.contains(&stopped) || v.contains(&gone), "{v}");
    }
    assert_rows_load(&csv, FINISHED_ROWS);
}

/// The sweep with one child a rank, so that the watchdog's tree is a chain,
/// 0 <- 1 <- 2 (rank 1 relays rank 2), and rank `victim` stopped at 8 KiB:
/// exit 3 in time, every finished row kept, and the one verdict.
fn chain_with_stopped(victim: usize) -> String {
    let fault = format!("{victim}:8192:stop");
    let env = [(FAULT_SIGNAL_ENV, fault.as_str()), (FANOUT_ENV, "1")];
    let (job, csv) = sweep(&scratch(&format!("chain-stopped-{victim}")), &env);
    let ended = job.wait(Some((&csv, FINISHED_ROWS)));
    ended.assert_timed_out_in_time();
    assert_rows_load(&csv, FINISHED_ROWS);
    ended.verdict().to_string()
}

fn did_not_answer(rank: usize) -> String {
    format!(
        "ranks that did not answer: {rank} (on {}: no answer within 3 s: stopped",
        host()
    )
}

/// Relay 1 stopped is named, and rank 2 behind it only counted (it is healthy:
/// its answers could not pass); rank 2 does not blame rank 1 on its own before
/// rank 0's verdict ends the job.
#[test]
fn a_stopped_relay_is_named_not_the_rank_behind_it() {
    let v = chain_with_stopped(1);
    assert!(v.contains(&did_not_answer(1)), "{v}");
    assert!(v.contains("; unheard behind them: 2;"), "{v}");
    assert_eq!(waiting(&v), [0], "{v}");
}

/// Rank 2, behind relay 1, stopped: rank 1 relays the question and the others'
/// answers, and rank 2 alone is named.
#[test]
fn a_stopped_rank_behind_a_relay_is_named_through_it() {
    let v = chain_with_stopped(2);
    assert!(v.contains(&did_not_answer(2)), "{v}");
    assert!(!v.contains("unheard"), "{v}");
    assert_eq!(waiting(&v), [0, 1], "{v}");
}

/// Rank 0 stopped under a chain: rank 1 names it, and rank 2, told by rank 1
/// that the job ends, says nothing of its own.
#[test]
fn rank_0_stopped_is_named_by_its_child_alone() {
    let v = chain_with_stopped(0);
    assert!(
        v.contains(&format!(
            "on rank 1 (on {0}); at fault: rank 0 (on {0}), which did not answer the watchdog within 6 s",
            host()
        )),
        "{v}"
    );
}

/// Rank 0, stopped, is woken the moment a peer has printed the verdict (as
/// mpirun's SIGCONT before its SIGTERM may do): it must neither judge again nor
/// blame the peer that ended the job as gone.
#[test]
fn rank_0_woken_after_a_peers_verdict_stays_silent() {
    let (job, csv) = sweep(
        &scratch("rank0-woken"),
        &[(FAULT_SIGNAL_ENV, "0:8192:stop")],
    );
    let started = Instant::now();
    while !job.read("stderr").contains("-T/--timeout") {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no verdict: {}",
            job.read("stderr")
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let rank0 = header_pids(&job.read("stdout"))[0];
    let _ = Command::new("kill")
        .args(["-CONT", &rank0.to_string()])
        .status();
    let ended = job.wait(None);
    assert_eq!(ended.code, Some(3), "exit status 3 (-T):\n{}", ended.stderr);
    for v in ended.verdicts() {
        assert!(
            v.contains("at fault: rank 0 ("),
            "only the peers judge: {v}"
        );
        assert!(!v.contains("gone"), "{v}");
    }
    assert_rows_load(&csv, FINISHED_ROWS);
}

#[test]
fn a_killed_rank_is_named_by_mpirun() {
    let (job, csv) = sweep(&scratch("killed"), &[(FAULT_SIGNAL_ENV, "1:8192:kill")]);
    let ended = job.wait(Some((&csv, FINISHED_ROWS)));
    // mpirun ends the job itself as soon as a rank dies: its status, 128 + SIGKILL.
    assert_eq!(ended.code, Some(137), "{}", ended.stderr);
    ended.assert_in_time();
    assert!(
        ended.stderr.contains("process rank 1 with PID"),
        "{}",
        ended.stderr
    );
    assert!(
        ended
            .stderr
            .contains(&format!("on node {} exited on signal 9", host())),
        "{}",
        ended.stderr
    );
    // Had the watchdog spoken first, it would name rank 1 and no other.
    for v in ended.stderr.lines().filter(|l| l.contains("-T/--timeout")) {
        assert!(
            v.contains("ranks that did not answer: 1 ") && !v.contains("had not arrived"),
            "{v}"
        );
    }
    assert_rows_load(&csv, FINISHED_ROWS);
}

#[test]
fn the_stall_hook_names_the_rank_outside_any_call() {
    let (job, csv) = sweep(&scratch("stall"), &[(STALL_ENV, "2:8192")]);
    let ended = job.wait(Some((&csv, FINISHED_ROWS)));
    ended.assert_timed_out_in_time();
    let v = ended.verdict();
    assert!(v.contains("8192 B (barrier before timing)"), "{v}");
    assert!(v.contains("ranks waiting in it: 0,1;"), "{v}");
    assert!(
        v.contains(&format!(
            "ranks that had not arrived: 2 (on {}, outside any call",
            host()
        )),
        "{v}"
    );
    assert_rows_load(&csv, FINISHED_ROWS);
}

/// The job whose rank 1 fails in the setup as `how` says ("stop", "sleep"),
/// ended: exit 3, within -T and a grace that allows a loaded machine's start.
fn failed_in_setup(how: &str) -> Ended {
    let dir = scratch(&format!("setup-{how}"));
    let timeout = TIMEOUT_S.to_string();
    let args = ["-b", "8", "-e", "8", "-T", &timeout];
    let fault = format!("1:{how}");
    let job = launch(
        &dir,
        &[(3, ALL_REDUCE)],
        &args,
        &[(FAULT_SETUP_ENV, &fault)],
    );
    let ended = job.wait(None);
    assert_eq!(ended.code, Some(3), "exit status 3 (-T):\n{}", ended.stderr);
    // From mpirun's start: the ranks' own start under load comes on top of -T.
    let bound = Duration::from_secs(TIMEOUT_S + 60);
    assert!(
        ended.after_rows < bound,
        "{:?}:\n{}",
        ended.after_rows,
        ended.stderr
    );
    for v in ended.verdicts() {
        assert!(
            v.contains(&format!("-T/--timeout {TIMEOUT_S}: setup: ")),
            "{v}"
        );
    }
    ended
}

#[test]
fn a_rank_stopped_in_the_setup_ends_the_job_naming_the_phase() {
    let ended = failed_in_setup("stop");
    // Rank 0 waits in the agreement and speaks first; the stopped rank cannot.
    let v = ended.verdict();
    assert!(
        v.contains(&format!(
            "setup: agreeing on the binary and the arguments did not finish: rank 0 ({}) waited",
            host()
        )),
        "{v}"
    );
    assert!(
        !ended.stdout.contains("#  Rank"),
        "no benchmark started:\n{}",
        ended.stdout
    );
}

#[test]
fn a_rank_late_in_the_setup_names_itself() {
    let ended = failed_in_setup("sleep");
    // The late rank and rank 0 both reach their deadline; whichever ends the job
    // first, no line blames another rank or another phase.
    let late = format!("on rank 1 ({}): it is the rank that did not arrive", host());
    for v in ended.verdicts() {
        assert!(
            v.contains(&late) || v.contains("agreeing on the binary and the arguments"),
            "{v}"
        );
    }
}

#[test]
fn ranks_of_different_collectives_are_refused_not_deadlocked() {
    let dir = scratch("mpmd");
    let csv = dir.join("rows.csv");
    let args = [
        "-b",
        "8",
        "-e",
        "8",
        "-T",
        "3",
        "--csv",
        csv.to_str().unwrap(),
    ];
    let job = launch(&dir, &[(2, ALL_REDUCE), (1, ALL_GATHER)], &args, &[]);
    let ended = job.wait(None);
    ended.assert_in_time();
    assert_eq!(ended.code, Some(2), "{}", ended.stderr);
    let errors: Vec<&str> = ended
        .stderr
        .lines()
        .filter(|l| l.contains("error:"))
        .collect();
    assert_eq!(
        errors,
        ["all_reduce_perf: error: the ranks run different collectives (all_reduce_perf on ranks 0-1, \
          all_gather_perf on rank 2): a job measures one; start every rank with the same binary"]
    );
    assert!(!csv.exists(), "nothing measured, no file made");
}

#[test]
fn all_pairs_with_a_rank_stopped_ends_within_the_timeout() {
    let dir = scratch("pairs-stopped");
    let csv = dir.join("matrix.csv");
    let timeout = TIMEOUT_S.to_string();
    let args = [
        "--all-pairs",
        "-b",
        "1K",
        "-e",
        "64K",
        "-f",
        "8",
        "-n",
        ITERS,
        "-T",
        &timeout,
        "--csv",
        csv.to_str().unwrap(),
    ];
    let job = launch(
        &dir,
        &[(4, SENDRECV)],
        &args,
        &[(FAULT_SIGNAL_ENV, "2:8192:stop")],
    );
    let ended = job.wait(None);
    ended.assert_timed_out_in_time();
    let v = ended.verdict();
    assert!(
        v.contains(&format!(
            "ranks that did not answer: 2 (on {}: no answer",
            host()
        )),
        "{v}"
    );
    assert_eq!(waiting(v), [0, 1, 3], "{v}");
    assert!(!v.contains("had not arrived"), "{v}");
}

/// Waits for rank 0's watchdog address (the hook's file).
fn watchdog_address(job: &Job) -> SocketAddr {
    let file = job.path("watchdog");
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(&file) {
            let addresses: Vec<SocketAddr> = text.lines().map(|l| l.parse().unwrap()).collect();
            assert_eq!(addresses.len(), 1, "{text}");
            return addresses[0];
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no watchdog address"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the watchdog closes `stream` within `within`, after what was sent.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 64];
    matches!(stream.read(&mut buf), Ok(0))
        || matches!(stream.read(&mut buf), Err(e) if e.kind() == ErrorKind::ConnectionReset)
}

/// A healthy job (run until stopped, -N 0, so that it outlasts the strangers
/// however loaded the machine) is still running once every stranger was
/// dropped, with no verdict; stopped then, every row it wrote loads.
#[test]
fn a_stranger_cannot_end_a_healthy_job() {
    let dir = scratch("stranger");
    let csv = dir.join("rows.csv");
    let address_file = dir.join("watchdog");
    let args = [
        "-b",
        "8",
        "-e",
        "8K",
        "-f",
        "4",
        "-n",
        ITERS,
        "-N",
        "0",
        "-T",
        "20",
        "--csv",
        csv.to_str().unwrap(),
    ];
    let env = [(ADDRESS_FILE_ENV, address_file.to_str().unwrap())];
    let mut job = launch(&dir, &[(3, ALL_REDUCE)], &args, &env);
    let address = watchdog_address(&job);
    assert!(
        address.ip().is_loopback(),
        "one host: the watchdog listens on loopback only ({address})"
    );
    let forged = "fabricbench-watchdog/2\t00000000000000000000000000000000\tSTUCK\t1\t9\t1\tx\n";
    let lines = [
        "STUCK\n",
        "ABORT\n",
        "QUERY\n",
        "STATE\t1\tvm\t5\t1\tx\n",
        forged,
        "fabricbench-watchdog/2\t00000000000000000000000000000000\tHELLO\t1\n",
        "\u{0}\u{1}garbage without end",
    ];
    for line in lines {
        let mut stranger =
            TcpStream::connect(address).expect("the watchdog listens while the job runs");
        stranger.write_all(line.as_bytes()).unwrap();
        assert!(
            closed_within(&mut stranger, Duration::from_secs(10)),
            "the watchdog drops a stranger that sent {line:?}"
        );
    }
    // One held open, silent: dropped after its bound, and the job goes on.
    let mut idle = TcpStream::connect(address).unwrap();
    assert!(
        closed_within(&mut idle, Duration::from_secs(10)),
        "an idle stranger is dropped"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        job.child.try_wait().unwrap().is_none(),
        "the job still runs after the strangers: {}",
        job.read("stderr")
    );
    let _ = Command::new("kill")
        .args(["-TERM", &job.child.id().to_string()])
        .status();
    let ended = job.wait(None);
    assert!(!ended.stderr.contains("-T/--timeout"), "{}", ended.stderr);
    assert_rows_load(&csv, data_rows(&csv));
}

#[test]
fn a_flood_and_an_idle_stranger_do_not_hold_off_the_verdict() {
    let dir = scratch("flood");
    let csv = dir.join("rows.csv");
    let address_file = dir.join("watchdog");
    let timeout = TIMEOUT_S.to_string();
    let mut args: Vec<&str> = SWEEP.to_vec();
    args.extend(["-n", ITERS, "-T", &timeout, "--csv", csv.to_str().unwrap()]);
    let env = [
        (STALL_ENV, "1:8192"),
        (ADDRESS_FILE_ENV, address_file.to_str().unwrap()),
    ];
    let job = launch(&dir, &[(3, ALL_REDUCE)], &args, &env);
    let address = watchdog_address(&job);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooding = stop.clone();
    // From the start, while the peers prove themselves: connections held silent,
    // others sending garbage, a few hundred open at any time.
    let flood = std::thread::spawn(move || {
        let idle = TcpStream::connect(address).ok();
        let mut open: std::collections::VecDeque<TcpStream> = Default::default();
        let mut made = 0usize;
        while !flooding.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(mut s) = TcpStream::connect_timeout(&address, Duration::from_millis(200)) {
                made += 1;
                if made % 2 == 0 {
                    let _ = s.write_all(&[b'x'; 300]);
                }
                open.push_back(s);
                if open.len() > 300 {
                    open.pop_front();
                }
            }
        }
        drop(idle);
        made
    });
    let ended = job.wait(Some((&csv, FINISHED_ROWS)));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let made = flood.join().unwrap();
    assert!(
        made > 100,
        "the flood reached the watchdog ({made} connections)"
    );
    ended.assert_timed_out_in_time();
    let v = ended.verdict();
    assert!(v.contains("ranks waiting in it: 0,2;"), "{v}");
    assert!(
        v.contains(&format!(
            "ranks that had not arrived: 1 (on {}, outside any call",
            host()
        )),
        "{v}"
    );
    assert_rows_load(&csv, FINISHED_ROWS);
}
