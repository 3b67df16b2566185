//! Fail points: named places in the archive workflow where a test (or an operator rehearsing a
//! crash with `OUTBOX_ARCHIVER_FAILPOINT`) can make the run stop as if the process had died there.
//!
//! They are passed in with a command's options rather than kept in a global registry, so tests
//! that run in parallel in one process never trip each other's.

use std::fmt;
use std::sync::Arc;

/// The archive's fail points, in the order a batch passes them.
pub const ARCHIVE: &[&str] = &[
    "after-data-put",
    "after-manifest-put",
    "after-success-put",
    "after-members",
    "before-commit",
];

/// `archive --stragglers`: between a page's key scan and the re-read of its rows.
const STRAGGLERS: &[&str] = &["after-straggler-scan"];

/// Purge's fail points: a delete chunk done but not committed; a chunk's one-statement delete
/// on MariaDB refused as if it had met a row lock (it never waits: the chunk is then done again
/// one row a statement).
const PURGE: &[&str] = &["before-purge-commit", "purge-joined-delete-would-wait"];

/// Compaction's fail points: members deleted, the digest not yet written; both, not committed.
const COMPACT: &[&str] = &["compact-after-delete", "compact-before-commit"];

/// `recover`'s: a lost batch's receipt recorded, its leaf not yet given; both, the rows gone not
/// yet looked for.
pub const RECOVER: &[&str] = &["recover-after-record", "recover-after-leaf"];

/// `relocate`'s: every batch re-read at the new home and the move written, not committed.
const RELOCATE: &[&str] = &["relocate-before-commit"];

type Hook = Arc<dyn Fn(&'static str) -> bool + Send + Sync>;

/// Decides, at each named point, whether to fail there.
#[derive(Clone, Default)]
pub struct FailPoints(Option<Hook>);

impl fmt::Debug for FailPoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "FailPoints(armed)"
        } else {
            "FailPoints(off)"
        })
    }
}

/// The error a tripped fail point returns.
#[derive(Debug, thiserror::Error)]
#[error("fail point {0} triggered")]
pub struct Tripped(pub &'static str);

impl FailPoints {
    /// Fails whenever `hook(name)` says so.
    pub fn new(hook: impl Fn(&'static str) -> bool + Send + Sync + 'static) -> FailPoints {
        FailPoints(Some(Arc::new(hook)))
    }

    /// Fails at the named point, every time.
    pub fn at(point: &'static str) -> FailPoints {
        assert!(
            ARCHIVE.contains(&point)
                || STRAGGLERS.contains(&point)
                || PURGE.contains(&point)
                || COMPACT.contains(&point)
                || RECOVER.contains(&point)
                || RELOCATE.contains(&point),
            "unknown fail point {point}"
        );
        FailPoints::new(move |name| name == point)
    }

    /// Aborts the process at the named point: a real crash, for rehearsals from the shell.
    pub(crate) fn abort_at(point: String) -> FailPoints {
        FailPoints::new(move |name| {
            if name == point {
                eprintln!("outbox-archiver: fail point {name}: aborting the process");
                std::process::abort();
            }
            false
        })
    }

    pub(crate) fn pass(&self, name: &'static str) -> Result<(), Tripped> {
        match &self.0 {
            Some(hook) if hook(name) => Err(Tripped(name)),
            _ => Ok(()),
        }
    }
}
