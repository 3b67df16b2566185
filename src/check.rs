//! Re-reading a recorded batch and comparing everything about it with its receipt and its
//! members (SPEC §6 `verify`). A problem found is a [`Finding`] — data, not an error; an `Err`
//! means the store could not be asked.

use std::collections::HashMap;

use serde::Serialize;

use crate::batch::Member;
use crate::db::receipts::StoredReceipt;
use crate::digest::{crc64nvme, ObjectDigest};
use crate::format::{Manifest, SuccessMarker};
use crate::publish::read_data;
use crate::store::{self, ObjectMeta, ObjectStore, StoreError};
use crate::table::TableSpec;

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
    /// A delivered row below the app's cursor and the cutoff that belongs to no receipt.
    Straggler,
}

/// One problem, with what was expected and what was found (absent parts are null).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub batch_id: Option<String>,
    pub key: Option<String>,
    pub event_id: Option<String>,
    pub expected: Option<String>,
    pub actual: Option<String>,
}

impl Finding {
    fn new(kind: FindingKind, receipt: &StoredReceipt, key: Option<&str>) -> Finding {
        Finding {
            kind,
            batch_id: Some(receipt.batch_id.clone()),
            key: key.map(str::to_string),
            event_id: None,
            expected: None,
            actual: None,
        }
    }

    fn values(mut self, expected: impl ToString, actual: impl ToString) -> Finding {
        self.expected = Some(expected.to_string());
        self.actual = Some(actual.to_string());
        self
    }

    fn event(mut self, event_id: &str) -> Finding {
        self.event_id = Some(event_id.to_string());
        self
    }
}

/// The manifest and `_SUCCESS` bytes a receipt implies.
pub fn expected_documents(spec: &TableSpec, receipt: &StoredReceipt) -> (Vec<u8>, Vec<u8>) {
    let manifest = Manifest {
        table: spec.name.to_string(),
        app_code: receipt.app_code.clone(),
        batch_id: receipt.batch_id.clone(),
        data_object_key: receipt.keys.data.clone(),
        content: receipt.content.clone(),
        data: receipt.data.clone(),
    }
    .to_bytes();
    let success = SuccessMarker {
        batch_id: receipt.batch_id.clone(),
        manifest_sha256: receipt.manifest_sha256.clone(),
        row_count: receipt.content.row_count,
    }
    .to_bytes();
    (manifest, success)
}

/// Checks one receipt's three objects and its members.
pub struct Checker<'a> {
    pub store: &'a dyn ObjectStore,
    pub spec: &'static TableSpec,
    /// HEAD only: existence, sizes and the store's checksums; no download.
    pub metadata_only: bool,
}

impl Checker<'_> {
    pub async fn check(
        &self,
        receipt: &StoredReceipt,
        members: &[Member],
    ) -> Result<Vec<Finding>, StoreError> {
        let mut findings = Vec::new();
        let (manifest, success) = expected_documents(self.spec, receipt);
        let implied = ObjectDigest::of(&manifest);
        if implied.sha256 != receipt.manifest_sha256 {
            findings.push(
                Finding::new(FindingKind::ReceiptInconsistent, receipt, None)
                    .values(&receipt.manifest_sha256, &implied.sha256),
            );
        }
        let success_digest = ObjectDigest::of(&success);
        let expected_manifest = ObjectDigest {
            sha256: receipt.manifest_sha256.clone(),
            crc64: receipt.manifest_crc64,
            size: manifest.len() as u64,
        };
        let expected_success = ObjectDigest {
            sha256: success_digest.sha256,
            crc64: receipt.success_crc64,
            size: success.len() as u64,
        };
        self.check_document(
            receipt,
            &receipt.keys.manifest,
            &manifest,
            &expected_manifest,
            FindingKind::ManifestMismatch,
            &mut findings,
        )
        .await?;
        self.check_document(
            receipt,
            &receipt.keys.success,
            &success,
            &expected_success,
            FindingKind::SuccessMismatch,
            &mut findings,
        )
        .await?;
        self.check_data(receipt, members, &mut findings).await?;
        if self.metadata_only && members.len() as u64 != receipt.content.row_count {
            findings.push(
                Finding::new(FindingKind::MemberMismatch, receipt, None).values(
                    format!("{} members", receipt.content.row_count),
                    format!("{} members", members.len()),
                ),
            );
        }
        Ok(findings)
    }

    /// HEAD checks shared by every object; false if the object is missing.
    fn check_head(
        &self,
        receipt: &StoredReceipt,
        key: &str,
        meta: Option<ObjectMeta>,
        expected: &ObjectDigest,
        nvme: Option<u64>,
        findings: &mut Vec<Finding>,
    ) -> bool {
        let Some(meta) = meta else {
            findings.push(Finding::new(FindingKind::MissingObject, receipt, Some(key)));
            return false;
        };
        if meta.size != expected.size {
            findings.push(
                Finding::new(FindingKind::SizeMismatch, receipt, Some(key))
                    .values(expected.size, meta.size),
            );
        }
        if let Some(stored) = meta.crc64ecma.filter(|&c| c != expected.crc64) {
            findings.push(
                Finding::new(FindingKind::StoreChecksumMismatch, receipt, Some(key))
                    .values(expected.crc64, stored),
            );
        }
        if let (Some(stored), Some(nvme)) = (meta.crc64nvme, nvme) {
            if stored != nvme {
                findings.push(
                    Finding::new(FindingKind::StoreChecksumMismatch, receipt, Some(key))
                        .values(nvme, stored),
                );
            }
        }
        true
    }

    fn check_digest(
        receipt: &StoredReceipt,
        key: &str,
        expected: &ObjectDigest,
        actual: &ObjectDigest,
        findings: &mut Vec<Finding>,
    ) {
        if actual.sha256 != expected.sha256 {
            findings.push(
                Finding::new(FindingKind::Sha256Mismatch, receipt, Some(key))
                    .values(&expected.sha256, &actual.sha256),
            );
        }
        if actual.crc64 != expected.crc64 {
            findings.push(
                Finding::new(FindingKind::Crc64Mismatch, receipt, Some(key))
                    .values(expected.crc64, actual.crc64),
            );
        }
    }

    async fn check_document(
        &self,
        receipt: &StoredReceipt,
        key: &str,
        implied: &[u8],
        expected: &ObjectDigest,
        kind: FindingKind,
        findings: &mut Vec<Finding>,
    ) -> Result<(), StoreError> {
        let meta = self.store.head(key).await?;
        if !self.check_head(
            receipt,
            key,
            meta,
            expected,
            Some(crc64nvme(implied)),
            findings,
        ) || self.metadata_only
        {
            return Ok(());
        }
        let Some(bytes) = store::get_all(self.store, key).await? else {
            findings.push(Finding::new(FindingKind::MissingObject, receipt, Some(key)));
            return Ok(());
        };
        Self::check_digest(receipt, key, expected, &ObjectDigest::of(&bytes), findings);
        if bytes != implied {
            findings.extend(field_differences(implied, &bytes).into_iter().map(
                |(field, want, got)| {
                    let mut f = Finding::new(kind, receipt, Some(key)).values(want, got);
                    f.key = Some(format!("{key}#{field}"));
                    f
                },
            ));
        }
        Ok(())
    }

    async fn check_data(
        &self,
        receipt: &StoredReceipt,
        members: &[Member],
        findings: &mut Vec<Finding>,
    ) -> Result<(), StoreError> {
        let key = receipt.keys.data.as_str();
        let meta = self.store.head(key).await?;
        if self.metadata_only {
            self.check_head(
                receipt,
                key,
                meta,
                &receipt.data,
                receipt.data_crc64nvme,
                findings,
            );
            return Ok(());
        }
        let Some(read) = read_data(self.store, self.spec, &receipt.app_code, key).await? else {
            findings.push(Finding::new(FindingKind::MissingObject, receipt, Some(key)));
            return Ok(());
        };
        if !self.check_head(
            receipt,
            key,
            meta,
            &receipt.data,
            Some(read.crc64nvme),
            findings,
        ) {
            return Ok(());
        }
        if read.digest.size != receipt.data.size {
            findings.push(
                Finding::new(FindingKind::SizeMismatch, receipt, Some(key))
                    .values(receipt.data.size, read.digest.size),
            );
        }
        Self::check_digest(receipt, key, &receipt.data, &read.digest, findings);
        match read.content {
            Err(e) => findings.push(
                Finding::new(FindingKind::UnreadableData, receipt, Some(key))
                    .values("a complete gzip of this app's NDJSON records", e),
            ),
            Ok((content, data_members)) => {
                for (field, want, got) in receipt.content.differences(&content) {
                    let mut f = Finding::new(FindingKind::ContentMismatch, receipt, Some(key))
                        .values(want, got);
                    f.key = Some(format!("{key}#{field}"));
                    findings.push(f);
                }
                findings.extend(member_differences(receipt, &data_members, members));
            }
        }
        Ok(())
    }
}

/// Members in the data object but not in the database, and the other way round.
fn member_differences(
    receipt: &StoredReceipt,
    in_data: &[Member],
    in_db: &[Member],
) -> Vec<Finding> {
    let mut db: HashMap<&str, i64> = in_db
        .iter()
        .map(|m| (m.event_id.as_str(), m.updated_at_ms))
        .collect();
    let mut out = Vec::new();
    for m in in_data {
        match db.remove(m.event_id.as_str()) {
            None => out.push(
                Finding::new(FindingKind::MemberMissing, receipt, None)
                    .event(&m.event_id)
                    .values("a member row", "none"),
            ),
            Some(ms) if ms != m.updated_at_ms => out.push(
                Finding::new(FindingKind::MemberMismatch, receipt, None)
                    .event(&m.event_id)
                    .values(m.updated_at_ms, ms),
            ),
            Some(_) => {}
        }
    }
    let mut extra: Vec<&str> = db.into_keys().collect();
    extra.sort_unstable();
    out.extend(extra.into_iter().map(|id| {
        Finding::new(FindingKind::MemberExtra, receipt, None)
            .event(id)
            .values("not a member", "a member row")
    }));
    out
}

/// The top-level JSON fields in which two documents differ (the whole text if either is not a
/// JSON object).
fn field_differences(want: &[u8], got: &[u8]) -> Vec<(String, String, String)> {
    let parse =
        |b: &[u8]| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(b).ok();
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim_end().to_string();
    match (parse(want), parse(got)) {
        (Some(w), Some(g)) => {
            let mut keys: Vec<&String> = w
                .keys()
                .chain(g.keys().filter(|k| !w.contains_key(*k)))
                .collect();
            keys.dedup();
            let mut out: Vec<(String, String, String)> = keys
                .into_iter()
                .filter(|k| w.get(*k) != g.get(*k))
                .map(|k| {
                    let show = |v: Option<&serde_json::Value>| {
                        v.map_or("absent".to_string(), |v| v.to_string())
                    };
                    (k.clone(), show(w.get(k)), show(g.get(k)))
                })
                .collect();
            if out.is_empty() {
                // Same values, other bytes (order, spacing): still not the contract's bytes.
                out.push(("bytes".into(), text(want), text(got)));
            }
            out
        }
        _ => vec![("bytes".into(), text(want), text(got))],
    }
}

#[cfg(test)]
mod tests {
    use super::field_differences;

    #[test]
    fn differences_name_the_fields() {
        let d = field_differences(br#"{"a":1,"b":"x"}"#, br#"{"a":2,"b":"x","c":3}"#);
        assert_eq!(
            d,
            vec![
                ("a".into(), "1".into(), "2".into()),
                ("c".into(), "absent".into(), "3".into())
            ]
        );
        let d = field_differences(br#"{"a":1,"b":2}"#, br#"{"b":2,"a":1}"#);
        assert_eq!(d[0].0, "bytes");
        assert_eq!(field_differences(b"{}", b"garbage")[0].0, "bytes");
    }
}
