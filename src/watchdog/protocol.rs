//! The side channel's messages. One line each, tab-separated:
//! `fabricbench-watchdog/2 TOKEN KIND [FIELDS]`, where TOKEN is the job's secret
//! (16 bytes from /dev/urandom on rank 0, as 32 hex digits, shared over MPI at
//! start). The channel only tells rank 0 which rank is stuck, so a secret both
//! sides show on every line is enough: a host outside the job cannot make a line
//! that is accepted. No line is longer than `MAX_LINE`.

use super::state::Where;
use std::io::Read;

const MAGIC: &str = "fabricbench-watchdog/2";
/// Longest line either side sends (labels are under 200 bytes); longer is not ours.
pub const MAX_LINE: usize = 512;
/// Bytes read and not yet taken as lines.
const MAX_PENDING: usize = 8 * MAX_LINE;
/// Labels are cut to this many bytes, so that every line fits in `MAX_LINE`.
const MAX_LABEL: usize = 300;

/// The job's secret: 32 lowercase hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// 16 bytes from /dev/urandom.
    pub fn generate() -> std::io::Result<Token> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn parse(text: &str) -> Option<Token> {
        let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        (text.len() == 32 && text.bytes().all(hex)).then(|| Token(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `shown` is this token, in a time that does not depend on where
    /// they differ (a stranger learns nothing from how fast it is refused).
    fn matches(&self, shown: &[u8]) -> bool {
        let mine = self.0.as_bytes();
        mine.len() == shown.len()
            && mine.iter().zip(shown).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("Token(..)") // never the secret itself
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A rank's first line to its parent: "I am rank N of this job".
    Hello { rank: usize },
    /// The parent's answer to a valid Hello: the rank is heard.
    Welcome,
    /// Rank `rank`'s call has lasted -T; where it is. Relayed up to rank 0.
    Stuck { rank: usize, at: Where },
    /// Rank 0 asks every rank where it is (relayed down).
    Query,
    /// Rank `rank`'s answer to Query, relayed up.
    State { rank: usize, at: Where },
    /// A relay's word for its child `rank` at a Query: its connection closed.
    Gone { rank: usize },
    /// A relay's word for its child `rank` at a Query: it never said Hello.
    Unreached { rank: usize },
    /// The verdict is printed (by rank 0, or by the peer that told it
    /// `Ended`): end without a word.
    Abort,
    /// A peer printed the verdict itself (rank 0 was silent) and ends the job:
    /// rank 0, if it wakes, must not judge again.
    Ended,
}

/// Why a line was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not this protocol, or not this job's token.
    Foreign,
    /// This job's token, but not a message.
    Malformed,
    /// A line longer than `MAX_LINE`, or more bytes at once than a peer sends.
    TooLong,
}

impl Message {
    pub fn encode(&self, token: &Token) -> String {
        let body = match self {
            Message::Hello { rank } => format!("HELLO\t{rank}"),
            Message::Welcome => "WELCOME".into(),
            Message::Stuck { rank, at } => format!("STUCK\t{rank}\t{}", encode_where(at)),
            Message::Query => "QUERY".into(),
            Message::State { rank, at } => format!("STATE\t{rank}\t{}", encode_where(at)),
            Message::Gone { rank } => format!("GONE\t{rank}"),
            Message::Unreached { rank } => format!("UNREACHED\t{rank}"),
            Message::Abort => "ABORT".into(),
            Message::Ended => "ENDED".into(),
        };
        format!("{MAGIC}\t{}\t{body}\n", token.as_str())
    }

    /// One line (without its newline) from the other side.
    pub fn decode(line: &[u8], token: &Token) -> Result<Message, Refused> {
        if line.len() > MAX_LINE {
            return Err(Refused::TooLong);
        }
        let mut fields = line.split(|&b| b == b'\t');
        if fields.next() != Some(MAGIC.as_bytes()) || !token.matches(fields.next().unwrap_or(b"")) {
            return Err(Refused::Foreign);
        }
        let rest: Vec<&str> = fields
            .map(std::str::from_utf8)
            .collect::<Result<_, _>>()
            .map_err(|_| Refused::Malformed)?;
        decode_body(&rest).ok_or(Refused::Malformed)
    }
}

/// A message's fields after the token.
fn decode_body(fields: &[&str]) -> Option<Message> {
    match fields {
        ["HELLO", rank] => rank.parse().ok().map(|rank| Message::Hello { rank }),
        ["WELCOME"] => Some(Message::Welcome),
        ["STUCK", rank, w @ ..] => {
            let (rank, at) = (rank.parse().ok()?, decode_where(w)?);
            Some(Message::Stuck { rank, at })
        }
        ["QUERY"] => Some(Message::Query),
        ["STATE", rank, w @ ..] => {
            let (rank, at) = (rank.parse().ok()?, decode_where(w)?);
            Some(Message::State { rank, at })
        }
        ["GONE", rank] => rank.parse().ok().map(|rank| Message::Gone { rank }),
        ["UNREACHED", rank] => rank.parse().ok().map(|rank| Message::Unreached { rank }),
        ["ABORT"] => Some(Message::Abort),
        ["ENDED"] => Some(Message::Ended),
        _ => None,
    }
}

/// A label as it travels: no tab or line break, at most `MAX_LABEL` bytes.
pub fn wire_label(label: &str) -> String {
    let mut clean: String = label
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.len() > MAX_LABEL {
        let mut end = MAX_LABEL;
        while !clean.is_char_boundary(end) {
            end -= 1;
        }
        clean.truncate(end);
    }
    clean
}

fn encode_where(w: &Where) -> String {
    format!("{}\t{}\t{}", w.calls, w.in_call as u8, wire_label(&w.label))
}

fn decode_where(fields: &[&str]) -> Option<Where> {
    let [calls, in_call, label] = fields else {
        return None;
    };
    Some(Where {
        calls: calls.parse().ok()?,
        in_call: match *in_call {
            "0" => false,
            "1" => true,
            _ => return None,
        },
        // Strict: only what `encode` sends, so that an accepted line re-encodes alike.
        label: (wire_label(label) == *label).then(|| label.to_string())?,
    })
}

/// The bytes read from one connection, cut into lines; never holds more than
/// `MAX_PENDING` bytes, nor a line longer than `MAX_LINE`.
#[derive(Default)]
pub struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    /// Adds what was read; refused once a line passes `MAX_LINE`.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), Refused> {
        // Lines are taken after every read (a relay sends many at once), so
        // more than this pending is a flood.
        if self.pending.len() + bytes.len() > MAX_PENDING {
            return Err(Refused::TooLong);
        }
        self.pending.extend_from_slice(bytes);
        let last = self.pending.split(|&b| b == b'\n').map(<[u8]>::len);
        match last.max() {
            Some(longest) if longest > MAX_LINE => Err(Refused::TooLong),
            _ => Ok(()),
        }
    }

    /// The next complete line, without its newline.
    pub fn next_line(&mut self) -> Option<Vec<u8>> {
        let end = self.pending.iter().position(|&b| b == b'\n')?;
        let line = self.pending[..end].to_vec();
        self.pending.drain(..=end);
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn token() -> Token {
        Token::parse("00112233445566778899aabbccddeeff").unwrap()
    }

    fn at(calls: u64, in_call: bool, label: &str) -> Where {
        Where {
            calls,
            in_call,
            label: label.into(),
        }
    }

    /// The line a message is sent as, without its newline.
    fn line(m: &Message, t: &Token) -> Vec<u8> {
        let text = m.encode(t);
        assert!(text.ends_with('\n') && text.len() <= MAX_LINE + 1, "{text}");
        text.trim_end_matches('\n').as_bytes().to_vec()
    }

    #[test]
    fn every_message_round_trips() {
        let t = token();
        for m in [
            Message::Hello { rank: 7 },
            Message::Welcome,
            Message::Stuck {
                rank: 3,
                at: at(9, true, "AllReduce float sum 8 B (timed loop)"),
            },
            Message::Query,
            Message::State {
                rank: 0,
                at: at(0, false, ""),
            },
            Message::Gone { rank: 12 },
            Message::Unreached { rank: 16_383 },
            Message::Abort,
            Message::Ended,
        ] {
            assert_eq!(Message::decode(&line(&m, &t), &t), Ok(m));
        }
    }

    #[test]
    fn the_old_protocol_and_other_tokens_are_foreign() {
        let t = token();
        let v1 = "fabricbench-watchdog/1\t00112233445566778899aabbccddeeff\tABORT";
        for old in ["STUCK", "ABORT", "QUERY", "STATE\t1\tvm\t5\t1\tx", "", v1] {
            assert_eq!(Message::decode(old.as_bytes(), &t), Err(Refused::Foreign));
        }
        let other = Token::parse("ffeeddccbbaa99887766554433221100").unwrap();
        let forged = line(&Message::Abort, &other);
        assert_eq!(Message::decode(&forged, &t), Err(Refused::Foreign));
        let short = format!("{MAGIC}\t0011\tABORT");
        assert_eq!(Message::decode(short.as_bytes(), &t), Err(Refused::Foreign));
        let bad = format!("{MAGIC}\t{}\tHELLO\tx", t.as_str());
        assert_eq!(Message::decode(bad.as_bytes(), &t), Err(Refused::Malformed));
    }

    #[test]
    fn tokens_are_32_hex_digits_and_never_printed() {
        let a = Token::generate().unwrap();
        assert_eq!(Token::parse(a.as_str()), Some(a.clone()));
        assert_ne!(Token::generate().unwrap(), a);
        assert_eq!(Token::parse("0011"), None);
        assert_eq!(Token::parse(&"G".repeat(32)), None);
        assert_eq!(format!("{a:?}"), "Token(..)");
    }

    #[test]
    fn lines_are_cut_and_bounded() {
        let mut l = LineBuffer::default();
        l.push(b"one\ntw").unwrap();
        assert_eq!(l.next_line(), Some(b"one".to_vec()));
        assert_eq!(l.next_line(), None);
        l.push(b"o\n").unwrap();
        assert_eq!(l.next_line(), Some(b"two".to_vec()));
        assert_eq!(l.push(&[b'x'; MAX_LINE + 1]), Err(Refused::TooLong));
    }

    fn any_where() -> impl Strategy<Value = Where> {
        (any::<u64>(), any::<bool>(), ".{0,400}").prop_map(|(calls, in_call, label)| Where {
            calls,
            in_call,
            label,
        })
    }

    fn any_message() -> impl Strategy<Value = Message> {
        prop_oneof![
            any::<usize>().prop_map(|rank| Message::Hello { rank }),
            Just(Message::Welcome),
            (any::<usize>(), any_where()).prop_map(|(rank, at)| Message::Stuck { rank, at }),
            Just(Message::Query),
            (any::<usize>(), any_where()).prop_map(|(rank, at)| Message::State { rank, at }),
            any::<usize>().prop_map(|rank| Message::Gone { rank }),
            any::<usize>().prop_map(|rank| Message::Unreached { rank }),
            Just(Message::Abort),
            Just(Message::Ended),
        ]
    }

    /// What decoding gives back: the label as it travels.
    fn as_sent(m: Message) -> Message {
        let clean = |w: Where| Where {
            label: wire_label(&w.label),
            ..w
        };
        match m {
            Message::Stuck { rank, at } => Message::Stuck {
                rank,
                at: clean(at),
            },
            Message::State { rank, at } => Message::State {
                rank,
                at: clean(at),
            },
            other => other,
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_never_pass_without_the_token(
            bytes in proptest::collection::vec(any::<u8>(), 0..700)
        ) {
            let t = token();
            if let Ok(m) = Message::decode(&bytes, &t) {
                // Accepted only with the token, and as what we would send.
                let prefix = format!("{MAGIC}\t{}\t", t.as_str());
                prop_assert!(bytes.starts_with(prefix.as_bytes()));
                prop_assert_eq!(Message::decode(&line(&m, &t), &t), Ok(m));
            }
            let mut l = LineBuffer::default();
            let _ = l.push(&bytes);
            while let Some(one) = l.next_line() {
                prop_assert!(!one.contains(&b'\n'));
                let _ = Message::decode(&one, &t);
            }
        }

        #[test]
        fn arbitrary_lines_with_the_token_never_panic(
            kind in "(HELLO|WELCOME|STUCK|QUERY|STATE|GONE|UNREACHED|ABORT|ENDED|[A-Z]{0,6})",
            fields in proptest::collection::vec("[^\t\n]{0,40}", 0..5),
        ) {
            let t = token();
            let text = format!("{MAGIC}\t{}\t{kind}\t{}", t.as_str(), fields.join("\t"));
            if let Ok(m) = Message::decode(text.as_bytes(), &t) {
                prop_assert_eq!(Message::decode(&line(&m, &t), &t), Ok(m));
            }
        }

        #[test]
        fn messages_round_trip(m in any_message()) {
            let t = token();
            let sent = line(&m, &t);
            prop_assert_eq!(Message::decode(&sent, &t), Ok(as_sent(m)));
            let other = Token::parse("ffeeddccbbaa99887766554433221100").unwrap();
            prop_assert_eq!(Message::decode(&sent, &other), Err(Refused::Foreign));
        }

        #[test]
        fn lines_split_any_chunking(
            messages in proptest::collection::vec(any_message(), 1..6),
            cut in 1usize..64,
        ) {
            let t = token();
            let stream: Vec<u8> = messages.iter().flat_map(|m| m.encode(&t).into_bytes()).collect();
            let mut l = LineBuffer::default();
            let mut got = Vec::new();
            for chunk in stream.chunks(cut) {
                prop_assert_eq!(l.push(chunk), Ok(()));
                while let Some(one) = l.next_line() {
                    got.push(Message::decode(&one, &t).unwrap());
                }
            }
            prop_assert_eq!(got, messages.into_iter().map(as_sent).collect::<Vec<_>>());
        }
    }
}
