//! What a verification finds: a [`Finding`] is one problem, of a [`FindingKind`], with what was
//! expected and what was found. Findings are data (a report's JSON carries them as they are),
//! not errors; their kinds' names are part of the contract (SPEC §6 `verify`).

use serde::Serialize;

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// An object the receipt references is not in the store.
    MissingObject,
    SizeMismatch,
    Sha256Mismatch,
    Crc64Mismatch,
    /// The store's own checksum (CRC-64/NVME or COS CRC-64) disagrees with the bytes or receipt.
    StoreChecksumMismatch,
    /// The data object is not a complete gzip of well-formed NDJSON records of this app.
    UnreadableData,
    /// The decompressed lines disagree with the receipt (hash, count, totals, cursors, bytes).
    ContentMismatch,
    /// manifest.json disagrees with its receipt (one finding per differing field).
    ManifestMismatch,
    /// `_SUCCESS` does not bind this batch's manifest.
    SuccessMismatch,
    /// The receipt disagrees with itself (its fields do not hash to its manifest_sha256).
    ReceiptInconsistent,
    /// A row in the data object has no member row in the database.
    MemberMissing,
    /// A member row in the database is not in the data object.
    MemberExtra,
    /// A member's updated_at_ms differs from the archived row's.
    MemberMismatch,
    /// A delivered row below the app's cursor and the cutoff whose version no receipt holds.
    Straggler,
    /// An object's Object Lock retention is missing, shorter or weaker than its receipt says.
    RetentionMismatch,
    /// An object is encrypted otherwise than its receipt says (another key, or not at all).
    EncryptionMismatch,
    /// An object that cannot be read back at once, for which the store reports no checksum of
    /// its own: nothing could vouch for the stored bytes.
    StoreChecksumMissing,
    /// `purge --reverify` was asked to re-read an object that cannot be read at once.
    NotReadable,
    /// A compacted receipt's digest of its members disagrees with the data object's pairs.
    MembersDigestMismatch,
    /// The member and superseded rows of a batch do not hash to the receipt's members proof: a
    /// member row was changed, added or removed since the batch was recorded.
    MembersProofMismatch,
    /// A member row's fingerprint differs from its archived line's.
    MemberFingerprintMismatch,
    /// An object's ETag or version id differs from what the store reported when it was read
    /// back: it was written again since.
    ObjectReplaced,
    /// The receipt a purge deletes under is no longer VERIFIED (changed or deleted meanwhile).
    ReceiptWithdrawn,
    /// A receipt in a state this tool never writes (set by hand): the app's archive stops at
    /// its rows, and purge leaves them.
    ReceiptNotVerified,
    /// A leaf of the app's log without its receipt (a batch deleted with its receipt, a
    /// database restored from an older backup), or a receipt logged beyond the store's tree
    /// (its checkpoint written back).
    LogGap,
    /// A receipt or its manifest changed since it was logged (its entry is not the leaf at its
    /// index), or a tile or entry bundle of the log rewritten.
    LogMismatch,
    /// The store's tree head is not the tree of its tiles, or not signed by the log key: the
    /// log was rewritten.
    LogFork,
    /// The store's tree head is smaller than a head the log was published at (kept write-once
    /// in the store, recorded in the database, or seen by the previous statement), or is not a
    /// tree grown from it: its checkpoint was written back.
    LogRollback,
    /// A batch not appended to the log yet: purge waits for the next archive run to append it.
    LogPending,
}

impl FindingKind {
    /// The name a build before 2026-12-05 gave the kind (the log's kinds were `chain_…`),
    /// which reports still carry beside the name for one release (README, "Upgrading").
    pub(crate) fn formerly(self) -> Option<&'static str> {
        Some(match self {
            FindingKind::LogGap => "chain_gap",
            FindingKind::LogMismatch => "chain_mismatch",
            FindingKind::LogFork => "chain_fork",
            FindingKind::LogRollback => "chain_rollback",
            FindingKind::LogPending => "chain_unanchored",
            _ => return None,
        })
    }

    /// Its name as a line of text shows it: with its former name, where it had one.
    pub(crate) fn label(self) -> String {
        match self.formerly() {
            Some(old) => format!("{} (formerly {old})", self.name()),
            None => self.name(),
        }
    }

    /// Its name, as the reports spell it (`missing_object`).
    pub(crate) fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "finding".into())
    }
}

/// One problem, with what was expected and what was found (absent parts are null). Serialized
/// with its kind's former name too (`formerly`), where it had one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub batch_id: Option<String>,
    pub key: Option<String>,
    pub event_id: Option<String>,
    pub expected: Option<String>,
    pub actual: Option<String>,
    /// The leaf in the app's log, from 0 (log findings).
    pub seq: Option<u64>,
}

impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("kind", &self.kind)?;
        if let Some(old) = self.kind.formerly() {
            map.serialize_entry("formerly", old)?;
        }
        map.serialize_entry("batch_id", &self.batch_id)?;
        map.serialize_entry("key", &self.key)?;
        map.serialize_entry("event_id", &self.event_id)?;
        map.serialize_entry("expected", &self.expected)?;
        map.serialize_entry("actual", &self.actual)?;
        if let Some(seq) = self.seq {
            map.serialize_entry("seq", &seq)?;
        }
        map.end()
    }
}

impl Finding {
    pub(super) fn new(kind: FindingKind, batch_id: &str, key: Option<&str>) -> Finding {
        Finding {
            kind,
            batch_id: Some(batch_id.to_string()),
            key: key.map(str::to_string),
            event_id: None,
            expected: None,
            actual: None,
            seq: None,
        }
    }

    pub(super) fn values(mut self, expected: impl ToString, actual: impl ToString) -> Finding {
        self.expected = Some(expected.to_string());
        self.actual = Some(actual.to_string());
        self
    }

    pub(super) fn event(mut self, event_id: &str) -> Finding {
        self.event_id = Some(event_id.to_string());
        self
    }
}

impl Finding {
    /// A batch whose objects were read whole but reported another identity right after: one
    /// was written again while it was read, and the bytes read may not be the ones now there.
    pub(crate) fn written_while_read(batch_id: &str) -> Finding {
        Finding::new(FindingKind::ObjectReplaced, batch_id, None).values(
            "the versions whose bytes were just read",
            "another version, written while they were read: read the batch again",
        )
    }

    /// A finding of `app`'s log.
    pub(crate) fn of_log(app: &str, f: crate::pipeline::log::finding::LogFinding) -> Finding {
        Finding {
            kind: f.problem.kind(),
            batch_id: f.batch_id,
            key: None,
            event_id: None,
            expected: Some(format!("app {app}: {}", f.expected)),
            actual: Some(f.actual),
            seq: f.seq,
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.kind.label())?;
        if let Some(key) = &self.key {
            write!(f, " at {key}")?;
        }
        if let Some(event) = &self.event_id {
            write!(f, " (event {event})")?;
        }
        if let Some(seq) = self.seq {
            write!(f, " at leaf {seq}")?;
        }
        if let (Some(e), Some(a)) = (&self.expected, &self.actual) {
            write!(f, ": expected {e}, found {a}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_finding_carries_its_former_kind_for_one_release() {
        let mut f = Finding::new(FindingKind::LogRollback, "b1", None);
        f.seq = Some(4);
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"kind":"log_rollback","formerly":"chain_rollback","batch_id":"b1","key":null,"event_id":null,"expected":null,"actual":null,"seq":4}"#
        );
        assert_eq!(
            f.to_string(),
            "log_rollback (formerly chain_rollback) at leaf 4"
        );
        let plain = Finding::new(FindingKind::MissingObject, "b1", Some("k"));
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"kind":"missing_object","batch_id":"b1","key":"k","event_id":null,"expected":null,"actual":null}"#
        );
        assert_eq!(
            FindingKind::LogPending.label(),
            "log_pending (formerly chain_unanchored)"
        );
    }
}
