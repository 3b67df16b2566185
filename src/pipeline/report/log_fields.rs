//! What an app's report says of its log, named in the log's terms (`log_size`, `log_root`, …)
//! and, for one release, also under the names builds before 2026-12-05 gave them (`chain_head`,
//! `chain_root`, …), so that a dashboard or script reading the old names keeps working while it
//! moves (README, "Upgrading").

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// Writes `value` under `name` and under `old`, the name an older build gave it.
fn both<M: SerializeMap, T: Serialize + ?Sized>(
    map: &mut M,
    (name, old): (&str, &str),
    value: &T,
) -> Result<(), M::Error> {
    map.serialize_entry(name, value)?;
    map.serialize_entry(old, value)
}

/// `archive`'s view of the app's log after the run (flattened into the app's report).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchiveLog {
    /// The size of the app's log after the run (its leaves), if it has one.
    pub size: Option<u64>,
    /// The log's checkpoint, where this run appended to it.
    pub checkpoint: Option<String>,
    /// Leaves of the log the database's receipts do not have (receipts lost, a fork), or
    /// another reason the log could not be appended to: nothing was appended.
    pub disagreement: Option<String>,
    /// The break record this run wrote (`--accept-log-break`).
    pub break_record: Option<String>,
}

impl Serialize for ArchiveLog {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(v) = &self.size {
            both(&mut map, ("log_size", "chain_head"), v)?;
        }
        if let Some(v) = &self.checkpoint {
            both(&mut map, ("log_checkpoint", "chain_checkpoint"), v)?;
        }
        if let Some(v) = &self.disagreement {
            both(&mut map, ("log_disagreement", "chain_disagreement"), v)?;
        }
        if let Some(v) = &self.break_record {
            both(&mut map, ("log_break", "chain_break"), v)?;
        }
        map.end()
    }
}

/// `verify`'s view of the app's log (flattened into the app's report).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyLog {
    /// The size of the app's log in the store (its checkpoint's tree size).
    pub size: Option<u64>,
    /// The root of that tree (base64, as the checkpoint spells it), proven from its tiles.
    pub root: Option<String>,
    /// The leaves the database's receipts are appended up to (the rest: not appended yet).
    pub appended_to: Option<u64>,
    /// Leaves operators accepted as gone (`archive --accept-log-break`), each with its leaves,
    /// reason and time: not findings, but never out of sight.
    pub breaks_accepted: Vec<String>,
}

impl Serialize for VerifyLog {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(v) = &self.size {
            both(&mut map, ("log_size", "chain_head"), v)?;
        }
        if let Some(v) = &self.root {
            both(&mut map, ("log_root", "chain_root"), v)?;
        }
        if let Some(v) = &self.appended_to {
            both(&mut map, ("log_appended_to", "chain_anchored_to"), v)?;
        }
        if !self.breaks_accepted.is_empty() {
            both(
                &mut map,
                ("log_breaks_accepted", "chain_breaks_accepted"),
                &self.breaks_accepted,
            )?;
        }
        map.end()
    }
}

/// `migrate`'s count of receipts it gave their place in their app's record order (the
/// genesis backfill of receipts an older build recorded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Numbered(pub u64);

impl Serialize for Numbered {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        both(&mut map, ("receipts_numbered", "chain_linked"), &self.0)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_field_is_written_under_its_name_and_its_former_name() {
        let archive = ArchiveLog {
            size: Some(3),
            checkpoint: Some("k".into()),
            ..ArchiveLog::default()
        };
        assert_eq!(
            serde_json::to_string(&archive).unwrap(),
            r#"{"log_size":3,"chain_head":3,"log_checkpoint":"k","chain_checkpoint":"k"}"#
        );
        let verify = VerifyLog {
            appended_to: Some(2),
            breaks_accepted: vec!["b".into()],
            ..VerifyLog::default()
        };
        assert_eq!(
            serde_json::to_string(&verify).unwrap(),
            r#"{"log_appended_to":2,"chain_anchored_to":2,"log_breaks_accepted":["b"],"chain_breaks_accepted":["b"]}"#
        );
        assert_eq!(
            serde_json::to_string(&Numbered(4)).unwrap(),
            r#"{"receipts_numbered":4,"chain_linked":4}"#
        );
        assert_eq!(serde_json::to_string(&VerifyLog::default()).unwrap(), "{}");
    }
}
