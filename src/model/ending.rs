//! How a run ended, as types: each app's [`Outcome`], and why ([`Ending`]) — the summary's and
//! each app's `stop_reason`, the runs table's columns, and everything the screen, the exit
//! status and `history` decide. The words are these types' and nothing else's, so that
//! rewording one can never change a decision; a reason another build recorded is read back as
//! the words it wrote ([`Ending::Said`]) where they are none of this build's.

use std::fmt;
use std::path::PathBuf;

use serde::{Serialize, Serializer};

/// How one app's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Archived,
    /// `archive --dry-run`: batches were planned, nothing written.
    Planned,
    UpToDate,
    Done,
    SkippedLocked,
    Refused,
    Failed,
    Stopped,
}

impl Outcome {
    pub(crate) fn is_failure(self) -> bool {
        matches!(self, Outcome::Refused | Outcome::Failed)
    }

    /// An outcome as [`Outcome::as_str`] writes it.
    pub fn parse(name: &str) -> Option<Outcome> {
        const ALL: [Outcome; 8] = [
            Outcome::Archived,
            Outcome::Planned,
            Outcome::UpToDate,
            Outcome::Done,
            Outcome::SkippedLocked,
            Outcome::Refused,
            Outcome::Failed,
            Outcome::Stopped,
        ];
        ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// As the summary (and the runs table) writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Archived => "archived",
            Outcome::Planned => "planned",
            Outcome::UpToDate => "up_to_date",
            Outcome::Done => "done",
            Outcome::SkippedLocked => "skipped_locked",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
            Outcome::Stopped => "stopped",
        }
    }
}

/// How a run, or an app's run, ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The work asked for was done.
    Done,
    /// archive: every row old enough is in a batch.
    CaughtUp,
    /// `archive --dry-run`: batches were planned, nothing written.
    Planned,
    /// Another process holds the app's lock.
    SkippedLocked,
    /// The app code is unsafe to work.
    Refused,
    /// An error ended it (the report's `error` says which).
    Error,
    /// No app to work.
    NothingToDo,
    /// migrate: every migration was already applied.
    SchemaUpToDate,
    /// find: every id asked for was found.
    Found,
    /// find: some id was not.
    NotFound,
    /// find: the archive could not be looked at.
    CouldNotLook,
    /// doctor: a check found a problem.
    ProblemsFound,
    /// doctor: the database or the store could not be reached.
    Unreachable,
    /// The configuration or a connection kept the command from starting.
    CouldNotStart,
    /// The command could not tell which apps to work on.
    CouldNotListApps,
    /// relocate: the archive's home moved.
    Moved(Moved),
    /// The work stopped short of what it was asked, or was stopped.
    Stopped(Stop),
    /// The work stopped, and nothing said why.
    StoppedShort,
    /// What another build recorded, in its words (`history` reads it back).
    Said(String),
}

/// relocate's move, as history shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub from: String,
    pub checked_batches: u64,
    pub recorded_versions: u64,
    pub reason: String,
}

/// Why work stopped before it was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM (a CronJob being stopped) or Ctrl-C.
    Signal(Signal),
    /// `--sentinel`: the file exists.
    Sentinel(PathBuf),
    MaxRuntime,
    MaxBatches,
    /// Another process took the app's lock while it was being worked.
    LostLock,
    /// A replica lagged, or could not be read, for longer than `--replica-wait-timeout`.
    ReplicaLag {
        replica: String,
    },
    /// purge: rows another transaction held were left for the next run.
    LeftLocked {
        rows: u64,
    },
    /// purge: batches wait for the next archive run to append them to the log.
    WaitingForLog {
        batches: usize,
        first: String,
    },
    /// restore: batches are being restored from cold storage.
    RestoreThawing {
        batches: usize,
    },
    /// compact: objects are being restored from cold storage.
    CompactThawing {
        objects: usize,
    },
    /// compact: objects are in a cold storage class and `--thaw` was not given.
    Cold {
        objects: usize,
    },
}

/// The signal that asked a run to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: a clean stop (exit status 0).
    Terminate,
    /// Ctrl-C: a clean stop whose exit status (130) stops `archive && purge`.
    Interrupt,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Terminate => "SIGTERM",
            Signal::Interrupt => "SIGINT",
        }
    }
}

/// The words of each ending this build says without data: parsed back from the runs table.
const WORDS: [(Ending, &str); 16] = [
    (Ending::Done, "done"),
    (Ending::CaughtUp, "caught up"),
    (Ending::Planned, "planned (a dry run: nothing written)"),
    (
        Ending::SkippedLocked,
        "skipped: another process holds the app's lock",
    ),
    (Ending::Refused, "refused: unsafe app code"),
    (Ending::Error, "error"),
    (Ending::NothingToDo, "nothing to do"),
    (
        Ending::SchemaUpToDate,
        "nothing to do: the schema is up to date",
    ),
    (Ending::Found, "found"),
    (Ending::NotFound, "not found"),
    (Ending::CouldNotLook, "could not look (see error)"),
    (Ending::ProblemsFound, "problems found"),
    (
        Ending::Unreachable,
        "could not reach the database or the store",
    ),
    (Ending::CouldNotStart, "could not start (see error)"),
    (
        Ending::CouldNotListApps,
        "could not list the apps (see error)",
    ),
    (Ending::StoppedShort, "stopped"),
];

impl Ending {
    /// An ending as the runs table holds it: one of this build's words, or another build's
    /// (stops with data are read back as said: history shows them, nothing decides on them).
    pub fn parse(recorded: &str) -> Ending {
        WORDS
            .iter()
            .find(|(_, words)| *words == recorded)
            .map(|(ending, _)| ending.clone())
            .unwrap_or_else(|| match recorded {
                "--max-runtime reached" => Ending::Stopped(Stop::MaxRuntime),
                "--max-batches reached" => Ending::Stopped(Stop::MaxBatches),
                "shutdown requested (SIGTERM)" => Ending::Stopped(Stop::Signal(Signal::Terminate)),
                "shutdown requested (SIGINT)" => Ending::Stopped(Stop::Signal(Signal::Interrupt)),
                LOST_LOCK => Ending::Stopped(Stop::LostLock),
                other => Ending::Said(other.to_string()),
            })
    }

    /// Says no more than the outcome beside it (`history` leaves it out).
    pub fn is_plain(&self) -> bool {
        matches!(self, Ending::Done | Ending::CaughtUp | Ending::Error)
    }

    /// The ending of a command that looks (find, doctor, verify): its verdict in words where
    /// it found something or could not look — said on the screen's first line beside the
    /// exit status.
    pub fn is_verdict(&self) -> bool {
        matches!(
            self,
            Ending::NotFound
                | Ending::ProblemsFound
                | Ending::CouldNotLook
                | Ending::Unreachable
                | Ending::CouldNotStart
                | Ending::CouldNotListApps
        )
    }

    /// The signal that stopped the run, if one did.
    pub fn signal(&self) -> Option<Signal> {
        match self {
            Ending::Stopped(Stop::Signal(signal)) => Some(*signal),
            _ => None,
        }
    }
}

impl From<Stop> for Ending {
    fn from(stop: Stop) -> Ending {
        Ending::Stopped(stop)
    }
}

/// The words of [`Stop::LostLock`].
const LOST_LOCK: &str = "lost the lock to another archiver";

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((_, words)) = WORDS.iter().find(|(ending, _)| ending == self) {
            return f.write_str(words);
        }
        match self {
            Ending::Moved(m) => write!(
                f,
                "moved from {} ({} batches re-read there, {} with new object versions recorded): {}",
                m.from, m.checked_batches, m.recorded_versions, m.reason
            ),
            Ending::Stopped(stop) => stop.fmt(f),
            Ending::Said(words) => f.write_str(words),
            _ => unreachable!("every other ending is in WORDS"),
        }
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Signal(signal) => write!(f, "shutdown requested ({})", signal.name()),
            Stop::Sentinel(path) => write!(f, "sentinel file {} exists", path.display()),
            Stop::MaxRuntime => f.write_str("--max-runtime reached"),
            Stop::MaxBatches => f.write_str("--max-batches reached"),
            Stop::LostLock => f.write_str(LOST_LOCK),
            Stop::ReplicaLag { replica } => write!(
                f,
                "replica lag: {replica} behind --max-replica-lag, or unreadable, for longer than --replica-wait-timeout"
            ),
            Stop::LeftLocked { rows } => write!(
                f,
                "left {rows} row(s) another transaction held (locked by the relay claiming them or an open transaction, or put back since their delete): their batches stay unfinished, and the next purge takes them"
            ),
            Stop::WaitingForLog { batches, first } => write!(
                f,
                "{batches} batch(es) wait for the next `outbox-archiver archive` of the app to append them to its log (from batch {first}): recorded by an older build — the first archive run of this build carries its chain into the log — or by a run that ended before appending, or held back by a disagreement the last archive run reported (log_disagreement); their rows stay until the purge after they are appended"
            ),
            Stop::RestoreThawing { batches } => write!(
                f,
                "{batches} batches are being restored from cold storage (--thaw); run restore again once they are readable"
            ),
            Stop::CompactThawing { objects } => write!(
                f,
                "{objects} objects in cold storage are being restored (--thaw); compact again once they are readable"
            ),
            Stop::Cold { objects } => write!(
                f,
                "{objects} objects are in a cold storage class and were not compacted: run compact with --thaw DAYS"
            ),
        }
    }
}

impl Serialize for Ending {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ending this build records reads back as itself; another build's words as said.
    #[test]
    fn recorded_endings_read_back_as_themselves() {
        let mut endings: Vec<Ending> = WORDS.iter().map(|(e, _)| e.clone()).collect();
        endings.extend([
            Stop::MaxRuntime.into(),
            Stop::MaxBatches.into(),
            Stop::LostLock.into(),
            Stop::Signal(Signal::Terminate).into(),
            Stop::Signal(Signal::Interrupt).into(),
        ]);
        for ending in endings {
            assert_eq!(Ending::parse(&ending.to_string()), ending, "{ending}");
        }
        assert_eq!(
            Ending::parse("stopped by an older build's words"),
            Ending::Said("stopped by an older build's words".into())
        );
        let words: std::collections::HashSet<String> =
            WORDS.iter().map(|(e, _)| e.to_string()).collect();
        assert_eq!(words.len(), WORDS.len(), "no two endings say the same");
    }

    /// The words the summary's JSON, the runs table and older builds' rows share.
    #[test]
    fn endings_say_what_the_summary_always_said() {
        let said = |e: Ending| serde_json::to_value(e).unwrap();
        assert_eq!(said(Ending::Done), "done");
        assert_eq!(
            said(Stop::Signal(Signal::Interrupt).into()),
            "shutdown requested (SIGINT)"
        );
        assert_eq!(
            said(Stop::Sentinel("/tmp/stop".into()).into()),
            "sentinel file /tmp/stop exists"
        );
        assert_eq!(
            said(Stop::LeftLocked { rows: 3 }.into())
                .as_str()
                .unwrap()
                .split(" another")
                .next(),
            Some("left 3 row(s)")
        );
    }
}
