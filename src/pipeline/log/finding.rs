//! What the log's checks find: a [`LogFinding`] is one [`Problem`] at one place of an app's log
//! (a leaf, a receipt, the tree head), which `verify`, `purge` and `attest` report as a
//! [`crate::pipeline::verifier::Finding`] of the problem's kind.

use crate::pipeline::verifier::FindingKind;

/// What is wrong with an app's log at one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Problem {
    /// A leaf without its receipt, or a receipt beyond the store's tree or not in it yet.
    Gap,
    /// A receipt, a manifest, a tile or an entry changed since the batch was logged.
    Mismatch,
    /// The store's tree head is not the tree of its tiles, not the log's, or not signed.
    Fork,
    /// The store's tree head is smaller than one the log was published at before, or is not a
    /// tree grown from it.
    Rollback,
}

impl Problem {
    /// The finding kind `verify` reports it as.
    pub(crate) fn kind(self) -> FindingKind {
        match self {
            Problem::Gap => FindingKind::LogGap,
            Problem::Mismatch => FindingKind::LogMismatch,
            Problem::Fork => FindingKind::LogFork,
            Problem::Rollback => FindingKind::LogRollback,
        }
    }
}

/// One problem of a log, with the leaf (none: a receipt not in the log) and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogFinding {
    pub problem: Problem,
    pub seq: Option<u64>,
    pub batch_id: Option<String>,
    pub expected: String,
    pub actual: String,
}
