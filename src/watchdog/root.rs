//! Rank 0's side: one thread that watches its own calls, hears its children
//! (its host's first ranks and the first hosts' leaders, `tree`), and once a call
//! has lasted -T anywhere asks every rank where it is, through the relays, and
//! gives the verdict.

use super::hub::{Hub, Link};
use super::protocol::Message;
use super::state::{LocalClock, PauseWatch, State, PAUSE_BOUND};
use super::tree::Tree;
use super::verdict::{own_pause, verdict, Answer};
use super::{end_job, ANSWER_BOUND};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(20);

/// How the watch ended.
#[derive(Debug)]
enum Ending {
    /// Rank 0's verdict, to print.
    Verdict(String),
    /// A rank printed the verdict and ends the job.
    ByPeer,
}

/// What rank 0's watchdog needs to judge.
pub(super) struct Judge {
    pub program: String,
    pub timeout_s: u64,
    pub hosts: Vec<String>,
    pub tree: Arc<Tree>,
}

pub(super) struct Root {
    pub hub: Hub,
}

impl Root {
    /// Watches until the job must end, prints rank 0's verdict when it is this
    /// rank's to give, and ends the job.
    pub fn run(mut self, state: &State, judge: &Judge) -> ! {
        if let Ending::Verdict(line) = self.watch(state, judge) {
            eprintln!("{line}");
        }
        self.hub.send_all(&Message::Abort);
        end_job()
    }

    /// Watches this rank and hears the others until a call lasts -T somewhere,
    /// then asks every rank where it is and gives the verdict. A rank that
    /// already printed one (`Ended`: its parent was silent) ends the job alone:
    /// no second verdict, and it is not blamed as gone.
    fn watch(&mut self, state: &State, judge: &Judge) -> Ending {
        let timeout = Duration::from_secs(judge.timeout_s);
        let mut clock = LocalClock::new();
        let mut pauses = PauseWatch::new(PAUSE_BOUND);
        loop {
            // The newly proved too: what they sent with Hello is read already.
            let mut spoke = self.hub.screen();
            spoke.extend(self.hub.wait(TICK));
            let heard: Vec<Message> = spoke
                .into_iter()
                .flat_map(|slot| self.hub.hear(slot).0)
                .collect();
            if heard.contains(&Message::Ended) {
                return Ending::ByPeer;
            }
            if let Some(pause) = pauses.tick() {
                clock.discount(pause);
            }
            let told = heard.iter().any(|m| matches!(m, Message::Stuck { .. }));
            if told || clock.stuck(state, timeout) {
                break;
            }
        }
        let Some(answers) = self.ask(state, judge.tree.len()) else {
            return Ending::ByPeer;
        };
        // Its own recent pause, when long beside -T, may be the cause of what it saw: say so.
        let note = pauses
            .recent(timeout / 2, timeout + 2 * ANSWER_BOUND)
            .map_or(String::new(), |(length, since)| {
                own_pause(&judge.hosts[0], length, since)
            });
        Ending::Verdict(verdict(
            &judge.program,
            (judge.timeout_s, ANSWER_BOUND.as_secs()),
            &judge.hosts,
            &judge.tree,
            &answers,
            &note,
        ))
    }

    /// Every rank's answer: a Query to each child (relayed on below it), and what
    /// comes back within `ANSWER_BOUND`; None when a rank printed the verdict
    /// meanwhile.
    fn ask(&mut self, state: &State, nranks: usize) -> Option<Vec<Answer>> {
        let mut answers = Answers {
            by_rank: vec![Answer::Silent; nranks],
            silent: nranks,
        };
        answers.set(0, Answer::At(state.snapshot()));
        let deadline = Instant::now() + ANSWER_BOUND;
        let mut asked = vec![false; self.hub.slots().len()];
        loop {
            // A child that proves itself late is asked too.
            self.hub.screen();
            for slot in self.hub.slots() {
                let child = self.hub.rank(slot);
                match self.hub.link(slot) {
                    Link::Open(_) if !asked[slot] => {
                        asked[slot] = true;
                        self.hub.send(slot, &Message::Query);
                    }
                    Link::Closed => answers.set(child, Answer::Gone),
                    _ => {}
                }
                let (heard, _) = self.hub.hear(slot);
                for message in heard {
                    match message {
                        Message::Ended => return None,
                        Message::State { rank, at } | Message::Stuck { rank, at }
                            if asked[slot] =>
                        {
                            answers.set(rank, Answer::At(at))
                        }
                        Message::Gone { rank } => answers.set(rank, Answer::Gone),
                        Message::Unreached { rank } => answers.set(rank, Answer::Unreached),
                        _ => {}
                    }
                }
            }
            if answers.silent == 0 || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(TICK);
        }
        for slot in self.hub.slots() {
            if matches!(self.hub.link(slot), Link::Never) {
                answers.set(self.hub.rank(slot), Answer::Unreached);
            }
        }
        Some(answers.by_rank)
    }
}

/// Every rank's answer so far, and how many are still awaited.
struct Answers {
    by_rank: Vec<Answer>,
    silent: usize,
}

impl Answers {
    fn set(&mut self, rank: usize, answer: Answer) {
        self.silent -= (self.by_rank[rank] == Answer::Silent) as usize;
        self.silent += (answer == Answer::Silent) as usize;
        self.by_rank[rank] = answer;
    }
}

#[cfg(test)]
mod tests {
    use super::super::protocol::Token;
    use super::super::state::Where;
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};

    /// `nranks` ranks on one host, each rank with at most 2 children: 0 has 1
    /// and 2, 1 has 3.
    fn judge(nranks: usize) -> Judge {
        let hosts = vec!["node0".to_string(); nranks];
        Judge {
            program: "all_reduce_perf".into(),
            // Rank 0's own call never lasts this long here: only the others speak.
            timeout_s: 600,
            tree: Arc::new(Tree::new(&hosts, 2)),
            hosts,
        }
    }

    fn root(token: &Token, judge: &Judge) -> (Root, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let hub = Hub::new(vec![l], token.clone(), judge.tree.clone(), 0).unwrap();
        (Root { hub }, addr)
    }

    fn at(calls: u64) -> Where {
        Where {
            calls,
            in_call: true,
            label: "AllReduce float sum 8 B".into(),
        }
    }

    /// A child that proves itself, sends `lines` and, unless it closes, answers
    /// every Query with `at` for itself and for each of `relays` until rank 0
    /// aborts.
    fn peer(
        addr: std::net::SocketAddr,
        token: &Token,
        (rank, relays): (usize, &[usize]),
        lines: Vec<Message>,
        close: bool,
    ) {
        let relays = relays.to_vec();
        let token = token.clone();
        let mut stream = TcpStream::connect(addr).unwrap();
        std::thread::spawn(move || {
            let mut out: String = Message::Hello { rank }.encode(&token);
            out.extend(lines.iter().map(|m| m.encode(&token)));
            stream.write_all(out.as_bytes()).unwrap();
            if close {
                return;
            }
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                match Message::decode(line.trim_end().as_bytes(), &token) {
                    Ok(Message::Query) => {
                        for rank in std::iter::once(rank).chain(relays.iter().copied()) {
                            let state = Message::State { rank, at: at(41) }.encode(&token);
                            let _ = stream.write_all(state.as_bytes());
                        }
                    }
                    Ok(Message::Abort) => return,
                    _ => {}
                }
                line.clear();
            }
        });
    }

    fn stuck(rank: usize) -> Message {
        Message::Stuck { rank, at: at(42) }
    }

    #[test]
    fn a_peer_that_gave_the_verdict_is_neither_judged_again_nor_blamed() {
        let (token, judge) = (Token::generate().unwrap(), judge(3));
        let (mut rank0, addr) = root(&token, &judge);
        peer(addr, &token, (2, &[]), Vec::new(), false);
        // Rank 1 told rank 0 it was stuck, printed the verdict itself and left.
        peer(addr, &token, (1, &[]), vec![stuck(1), Message::Ended], true);
        let ending = rank0.watch(&State::default(), &judge);
        assert!(matches!(ending, Ending::ByPeer), "{ending:?}");
    }

    #[test]
    fn a_peer_that_left_without_a_verdict_is_gone() {
        let (token, judge) = (Token::generate().unwrap(), judge(3));
        let (mut rank0, addr) = root(&token, &judge);
        peer(addr, &token, (2, &[]), Vec::new(), false);
        peer(addr, &token, (1, &[]), vec![stuck(1)], true);
        let Ending::Verdict(v) = rank0.watch(&State::default(), &judge) else {
            panic!("rank 0 judges")
        };
        assert!(v.contains("call 41 (AllReduce float sum 8 B)"), "{v}");
        assert!(v.contains("1 (on node0: gone: its process ended)"), "{v}");
        assert!(
            v.contains("ranks between calls: 0 (on node0, after call 0)"),
            "{v}"
        );
        assert!(!v.contains("note:"), "rank 0 did not pause: {v}");
    }

    #[test]
    fn a_relay_answers_for_the_ranks_behind_it() {
        let (token, judge) = (Token::generate().unwrap(), judge(4));
        let (mut rank0, addr) = root(&token, &judge);
        peer(addr, &token, (2, &[]), Vec::new(), false);
        peer(addr, &token, (1, &[3]), vec![stuck(3)], false);
        let Ending::Verdict(v) = rank0.watch(&State::default(), &judge) else {
            panic!("rank 0 judges")
        };
        assert!(v.contains("ranks waiting in it: 1-3;"), "{v}");
        assert!(!v.contains("did not answer"), "{v}");
    }

    #[test]
    fn a_silent_relay_is_named_and_the_ranks_behind_it_only_counted() {
        let (token, judge) = (Token::generate().unwrap(), judge(4));
        let (mut rank0, addr) = root(&token, &judge);
        peer(addr, &token, (2, &[]), vec![stuck(2)], false);
        // Rank 1 proves itself, then never answers (stopped): 3 is behind it.
        let mut quiet = TcpStream::connect(addr).unwrap();
        quiet
            .write_all(Message::Hello { rank: 1 }.encode(&token).as_bytes())
            .unwrap();
        let Ending::Verdict(v) = rank0.watch(&State::default(), &judge) else {
            panic!("rank 0 judges")
        };
        assert!(
            v.contains("ranks that did not answer: 1 (on node0: no answer within 3 s"),
            "{v}"
        );
        assert!(v.contains("unheard behind them: 3;"), "{v}");
        assert!(!v.contains("3 (on node0"), "{v}");
        drop(quiet);
    }

    #[test]
    fn a_stranger_relaying_for_a_rank_not_behind_it_is_not_heard() {
        let (token, judge) = (Token::generate().unwrap(), judge(4));
        let (mut rank0, addr) = root(&token, &judge);
        // Rank 2 has no one behind it: its word for 3 is dropped.
        peer(addr, &token, (2, &[3]), vec![stuck(2)], false);
        peer(addr, &token, (1, &[]), Vec::new(), false);
        let Ending::Verdict(v) = rank0.watch(&State::default(), &judge) else {
            panic!("rank 0 judges")
        };
        assert!(v.contains("ranks that did not answer: 3 (on node0"), "{v}");
    }
}
