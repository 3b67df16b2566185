//! What a command's help says of it beyond its options' doc comments ([`Help`]: each command
//! gives its own, in its file under `command/`), and the options several commands list alike.

use crate::model::command::CommandName;

/// What a command's help says of it beside its options' doc comments.
pub(crate) struct Help {
    /// Its name.
    pub name: CommandName,
    /// What it does, in one line (`-h`).
    pub about: &'static str,
    /// The options `-h` shows, most used first, each with its one-line summary.
    pub shown: &'static [(&'static str, &'static str)],
    /// The "Exit status" paragraph of `--help`.
    pub exit_status: &'static str,
    /// What `--all-apps` means for it, where it takes one.
    pub all_apps: Option<&'static str>,
    /// The common options it never reads (hidden from both helps).
    pub unused_common: &'static [&'static str],
}

pub(super) const APP: (&str, &str) = ("app", "An app code (repeatable)");
pub(super) const BATCH: (&str, &str) = ("batch-id", "Only this batch (repeatable)");
pub(super) const FROM: (&str, &str) = (
    "from",
    "Only batches with rows at or after this instant (2026-11-01)",
);
pub(super) const TO: (&str, &str) = (
    "to",
    "Only batches with rows before this instant (not included)",
);
pub(super) const VERIFIER: (&str, &str) = (
    "log-verifier",
    "The log's verifier key (repeatable while a key rotates)",
);
pub(super) const ENDPOINT: (&str, &str) = (
    "s3-endpoint",
    "S3 endpoint of a store other than AWS (MinIO, Ceph, COS)",
);
