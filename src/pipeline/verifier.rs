//! The one verifier (SPEC §5.1, §6 `verify`): a batch's expected facts, what the store says
//! about its three objects (HEAD) and their bytes (GET) → the findings. `publish` treats any
//! finding as an error; `verify`, `purge` and `restore` report them.
//!
//! The comparisons are pure functions; [`Verifier::verify`] only fetches. A problem found is a
//! [`Finding`] — data, not an error; an `Err` means the store could not be asked.

use std::collections::HashMap;

use futures_util::TryStreamExt;
use serde::Serialize;

use crate::batch::{DataRead, DataReader, EncodedBatch, KeptLines, Member};
use crate::db::receipts::StoredReceipt;
use crate::digest::{crc64nvme, ObjectDigest};
use crate::format::{self, ContentFacts, Manifest, ObjectKeys, SuccessMarker};
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
    /// A delivered row below the app's cursor and the cutoff whose version no receipt holds.
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
    fn new(kind: FindingKind, batch_id: &str, key: Option<&str>) -> Finding {
        Finding {
            kind,
            batch_id: Some(batch_id.to_string()),
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

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = serde_json::to_value(self.kind).unwrap_or_default();
        write!(f, "{}", kind.as_str().unwrap_or("finding"))?;
        if let Some(key) = &self.key {
            write!(f, " at {key}")?;
        }
        if let Some(event) = &self.event_id {
            write!(f, " (event {event})")?;
        }
        if let (Some(e), Some(a)) = (&self.expected, &self.actual) {
            write!(f, ": expected {e}, found {a}")?;
        }
        Ok(())
    }
}

/// Everything a batch's three objects must be: from its receipt (verify, purge, restore) or
/// from the batch just written (publish). Built once per batch.
#[derive(Debug, Clone)]
pub struct Expected {
    pub app_code: String,
    pub batch_id: String,
    pub keys: ObjectKeys,
    pub content: ContentFacts,
    pub data: ObjectDigest,
    /// The data object's CRC-64/NVME, where it is known.
    pub data_crc64nvme: Option<u64>,
    /// manifest.json and `_SUCCESS` as they must be, byte for byte, and their digests.
    pub manifest: Vec<u8>,
    pub manifest_digest: ObjectDigest,
    pub success: Vec<u8>,
    pub success_digest: ObjectDigest,
    /// What the receipt says the manifest hashes to, where it differs from the bytes it implies.
    pub inconsistent_manifest_sha256: Option<String>,
    /// The `(event_id, updated_at_ms)` the data object must hold.
    pub members: Vec<Member>,
}

impl Expected {
    /// What a receipt vouches for; `members` are every version the database holds for the batch
    /// (members and superseded rows).
    pub fn of_receipt(spec: &TableSpec, receipt: &StoredReceipt, members: Vec<Member>) -> Expected {
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
        let implied = ObjectDigest::of(&manifest);
        let success_sha256 = ObjectDigest::of(&success).sha256;
        Expected {
            app_code: receipt.app_code.clone(),
            batch_id: receipt.batch_id.clone(),
            keys: receipt.keys.clone(),
            content: receipt.content.clone(),
            data: receipt.data.clone(),
            data_crc64nvme: receipt.data_crc64nvme,
            manifest_digest: ObjectDigest {
                sha256: receipt.manifest_sha256.clone(),
                crc64: receipt.manifest_crc64,
                size: manifest.len() as u64,
            },
            success_digest: ObjectDigest {
                sha256: success_sha256,
                crc64: receipt.success_crc64,
                size: success.len() as u64,
            },
            inconsistent_manifest_sha256: (implied.sha256 != receipt.manifest_sha256)
                .then_some(implied.sha256),
            manifest,
            success,
            members,
        }
    }

    /// What a batch just written must read back as: its documents, built for the data object
    /// as placed (`data`: its own digest where an existing object was adopted).
    pub fn of_batch(
        prefix: &str,
        spec: &TableSpec,
        app_code: &str,
        batch: &EncodedBatch,
        data: &ObjectDigest,
    ) -> Expected {
        let docs = format::documents(prefix, spec.name, app_code, &batch.content, data);
        Expected {
            app_code: app_code.to_string(),
            batch_id: docs.batch_id,
            keys: docs.keys,
            content: batch.content.clone(),
            data: data.clone(),
            data_crc64nvme: None,
            manifest_digest: ObjectDigest::of(&docs.manifest),
            success_digest: ObjectDigest::of(&docs.success),
            inconsistent_manifest_sha256: None,
            manifest: docs.manifest,
            success: docs.success,
            members: batch.members.clone(),
        }
    }
}

/// How far a verification goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// HEAD only: existence, sizes and the store's checksums (and the member count); no download.
    Head,
    /// HEAD and a full read of every object.
    Read,
    /// As `Read`, and keep the data object's lines (restore loads exactly those).
    ReadKeepingLines,
}

/// What verifying a batch found, and what it read.
#[derive(Debug, Default)]
pub struct Verified {
    pub findings: Vec<Finding>,
    /// The data object's CRC-64/NVME, when it was read.
    pub data_crc64nvme: Option<u64>,
    /// [`Depth::ReadKeepingLines`]: the lines of the bytes just verified.
    pub lines: Option<KeptLines>,
}

/// Fetches a batch's objects and compares them with what they must be.
pub struct Verifier<'a> {
    pub store: &'a dyn ObjectStore,
    pub spec: &'static TableSpec,
    pub depth: Depth,
}

impl Verifier<'_> {
    pub async fn verify(&self, expected: &Expected) -> Result<Verified, StoreError> {
        let mut verified = Verified::default();
        let findings = &mut verified.findings;
        if let Some(sha256) = &expected.inconsistent_manifest_sha256 {
            findings.push(
                Finding::new(FindingKind::ReceiptInconsistent, &expected.batch_id, None)
                    .values(&expected.manifest_digest.sha256, sha256),
            );
        }
        let documents = [
            (
                &expected.keys.manifest,
                &expected.manifest,
                &expected.manifest_digest,
                FindingKind::ManifestMismatch,
            ),
            (
                &expected.keys.success,
                &expected.success,
                &expected.success_digest,
                FindingKind::SuccessMismatch,
            ),
        ];
        for (key, bytes, digest, kind) in documents {
            let head = self.store.head(key).await?;
            let got = match (&head, self.depth) {
                (None, _) | (_, Depth::Head) => None,
                _ => store::get_all(self.store, key).await?,
            };
            findings.extend(compare_document(
                &expected.batch_id,
                key,
                bytes,
                digest,
                kind,
                head.as_ref(),
                got.as_deref(),
                self.depth == Depth::Head,
            ));
        }
        let key = &expected.keys.data;
        let head = self.store.head(key).await?;
        if self.depth == Depth::Head {
            findings.extend(compare_head(
                &expected.batch_id,
                key,
                head.as_ref(),
                &expected.data,
                expected.data_crc64nvme,
            ));
            if expected.members.len() as u64 != expected.content.row_count {
                findings.push(
                    Finding::new(FindingKind::MemberMismatch, &expected.batch_id, None).values(
                        format!("{} members", expected.content.row_count),
                        format!("{} members", expected.members.len()),
                    ),
                );
            }
            return Ok(verified);
        }
        let keep_lines = self.depth == Depth::ReadKeepingLines;
        let keep = keep_lines.then_some(&expected.content);
        let read = read_data(self.store, self.spec, &expected.app_code, key, keep).await?;
        verified.data_crc64nvme = read.as_ref().map(|r| r.crc64nvme);
        let (mut data_findings, lines) = compare_data(expected, head.as_ref(), read);
        verified.findings.append(&mut data_findings);
        if verified.findings.is_empty() && keep_lines {
            verified.lines = lines;
        }
        Ok(verified)
    }
}

/// Streams a data object through a [`DataReader`] (keeping its lines, sized for the expected
/// content, if given); `None` if it does not exist.
pub async fn read_data(
    store: &dyn ObjectStore,
    spec: &'static TableSpec,
    app_code: &str,
    key: &str,
    keep_lines: Option<&ContentFacts>,
) -> Result<Option<DataRead>, StoreError> {
    let Some(mut body) = store.get(key).await? else {
        return Ok(None);
    };
    let mut reader = if let Some(expected) = keep_lines {
        DataReader::keeping_lines(spec, app_code, expected)
    } else {
        DataReader::new(spec, app_code)
    };
    while let Some(chunk) = body.try_next().await? {
        reader.update(&chunk);
    }
    Ok(Some(reader.finish()))
}

/// What a HEAD says against the expected digest: present, the size, and the store's own
/// checksums where it reports them (`nvme`: the CRC-64/NVME the bytes must have, where known).
pub fn compare_head(
    batch_id: &str,
    key: &str,
    meta: Option<&ObjectMeta>,
    expected: &ObjectDigest,
    nvme: Option<u64>,
) -> Vec<Finding> {
    let Some(meta) = meta else {
        return vec![Finding::new(
            FindingKind::MissingObject,
            batch_id,
            Some(key),
        )];
    };
    let mut out = Vec::new();
    if meta.size != expected.size {
        out.push(
            Finding::new(FindingKind::SizeMismatch, batch_id, Some(key))
                .values(expected.size, meta.size),
        );
    }
    if let Some(stored) = meta.crc64ecma.filter(|&c| c != expected.crc64) {
        out.push(
            Finding::new(FindingKind::StoreChecksumMismatch, batch_id, Some(key))
                .values(expected.crc64, stored),
        );
    }
    if let (Some(stored), Some(nvme)) = (meta.crc64nvme, nvme) {
        if stored != nvme {
            out.push(
                Finding::new(FindingKind::StoreChecksumMismatch, batch_id, Some(key))
                    .values(nvme, stored),
            );
        }
    }
    out
}

/// The hashes of the bytes read against the expected ones (the size is the HEAD's to compare).
fn compare_hashes(
    batch_id: &str,
    key: &str,
    expected: &ObjectDigest,
    actual: &ObjectDigest,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if actual.sha256 != expected.sha256 {
        out.push(
            Finding::new(FindingKind::Sha256Mismatch, batch_id, Some(key))
                .values(&expected.sha256, &actual.sha256),
        );
    }
    if actual.crc64 != expected.crc64 {
        out.push(
            Finding::new(FindingKind::Crc64Mismatch, batch_id, Some(key))
                .values(expected.crc64, actual.crc64),
        );
    }
    out
}

/// A small object (manifest, `_SUCCESS`) that must equal `implied` byte for byte: its HEAD, and
/// its bytes when read (`head_only`: not read).
#[allow(clippy::too_many_arguments)]
pub fn compare_document(
    batch_id: &str,
    key: &str,
    implied: &[u8],
    expected: &ObjectDigest,
    kind: FindingKind,
    head: Option<&ObjectMeta>,
    got: Option<&[u8]>,
    head_only: bool,
) -> Vec<Finding> {
    let mut out = compare_head(batch_id, key, head, expected, Some(crc64nvme(implied)));
    if head.is_none() || head_only {
        return out;
    }
    let Some(bytes) = got else {
        out.push(Finding::new(
            FindingKind::MissingObject,
            batch_id,
            Some(key),
        ));
        return out;
    };
    out.extend(compare_hashes(
        batch_id,
        key,
        expected,
        &ObjectDigest::of(bytes),
    ));
    if bytes != implied {
        out.extend(
            field_differences(implied, bytes)
                .into_iter()
                .map(|(field, want, got)| {
                    let mut f = Finding::new(kind, batch_id, Some(key)).values(want, got);
                    f.key = Some(format!("{key}#{field}"));
                    f
                }),
        );
    }
    out
}

/// A data object read in full (`None`: not there) against what it must be: the bytes' digest,
/// the store's checksums, and the facts and members recomputed from its lines. Also hands back
/// the rows the read kept.
pub fn compare_data(
    expected: &Expected,
    head: Option<&ObjectMeta>,
    read: Option<DataRead>,
) -> (Vec<Finding>, Option<KeptLines>) {
    let (batch_id, key) = (expected.batch_id.as_str(), expected.keys.data.as_str());
    let Some(read) = read else {
        return (
            vec![Finding::new(
                FindingKind::MissingObject,
                batch_id,
                Some(key),
            )],
            None,
        );
    };
    let mut out = compare_head(batch_id, key, head, &expected.data, Some(read.crc64nvme));
    if head.is_none() {
        return (out, None);
    }
    if read.digest.size != expected.data.size {
        out.push(
            Finding::new(FindingKind::SizeMismatch, batch_id, Some(key))
                .values(expected.data.size, read.digest.size),
        );
    }
    out.extend(compare_hashes(batch_id, key, &expected.data, &read.digest));
    match read.content {
        Err(e) => out.push(
            Finding::new(FindingKind::UnreadableData, batch_id, Some(key))
                .values("a complete gzip of this app's NDJSON records", e),
        ),
        Ok((content, members)) => {
            for (field, want, got) in expected.content.differences(&content) {
                let mut f = Finding::new(FindingKind::ContentMismatch, batch_id, Some(key))
                    .values(want, got);
                f.key = Some(format!("{key}#{field}"));
                out.push(f);
            }
            out.extend(member_differences(batch_id, &members, &expected.members));
        }
    }
    (out, read.lines)
}

/// Members in the data object but not in the database, and the other way round.
fn member_differences(batch_id: &str, in_data: &[Member], in_db: &[Member]) -> Vec<Finding> {
    let mut db: HashMap<&str, i64> = in_db
        .iter()
        .map(|m| (m.event_id.as_str(), m.updated_at_ms))
        .collect();
    let mut out = Vec::new();
    for m in in_data {
        match db.remove(m.event_id.as_str()) {
            None => out.push(
                Finding::new(FindingKind::MemberMissing, batch_id, None)
                    .event(&m.event_id)
                    .values("a member row", "none"),
            ),
            Some(ms) if ms != m.updated_at_ms => out.push(
                Finding::new(FindingKind::MemberMismatch, batch_id, None)
                    .event(&m.event_id)
                    .values(m.updated_at_ms, ms),
            ),
            Some(_) => {}
        }
    }
    let mut extra: Vec<&str> = db.into_keys().collect();
    extra.sort_unstable();
    out.extend(extra.into_iter().map(|id| {
        Finding::new(FindingKind::MemberExtra, batch_id, None)
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
    use super::*;

    fn digest(size: u64) -> ObjectDigest {
        ObjectDigest {
            sha256: "a".repeat(64),
            crc64: 7,
            size,
        }
    }

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

    #[test]
    fn a_head_is_compared_with_the_size_and_every_checksum_the_store_reports() {
        let kinds = |f: Vec<Finding>| f.into_iter().map(|f| f.kind).collect::<Vec<_>>();
        assert_eq!(
            kinds(compare_head("b", "k", None, &digest(3), None)),
            vec![FindingKind::MissingObject]
        );
        let meta = ObjectMeta {
            size: 4,
            crc64nvme: Some(1),
            crc64ecma: Some(8),
        };
        assert_eq!(
            kinds(compare_head("b", "k", Some(&meta), &digest(3), Some(2))),
            vec![
                FindingKind::SizeMismatch,
                FindingKind::StoreChecksumMismatch,
                FindingKind::StoreChecksumMismatch
            ]
        );
        let quiet = ObjectMeta {
            size: 3,
            ..ObjectMeta::default()
        };
        assert!(compare_head("b", "k", Some(&quiet), &digest(3), Some(2)).is_empty());
    }

    #[test]
    fn members_are_compared_both_ways() {
        let m = |id: &str, ms: i64| Member {
            event_id: id.into(),
            updated_at_ms: ms,
        };
        let found = member_differences("b", &[m("e1", 1), m("e2", 2)], &[m("e2", 3), m("e3", 3)]);
        let kinds: Vec<_> = found.iter().map(|f| (f.kind, f.event_id.clone())).collect();
        assert_eq!(
            kinds,
            vec![
                (FindingKind::MemberMissing, Some("e1".into())),
                (FindingKind::MemberMismatch, Some("e2".into())),
                (FindingKind::MemberExtra, Some("e3".into())),
            ]
        );
    }
}
