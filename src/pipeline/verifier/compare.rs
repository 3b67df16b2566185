//! The comparisons, pure functions of what a batch must be and what the store reported or
//! returned: a HEAD against the expected digest ([`compare_head`]) and protection
//! ([`compare_guard`]) and identity, a document's bytes ([`compare_document`]), a data object's
//! bytes, lines and members ([`compare_data`]), the member rows against the receipt's proof.
//! Each returns the findings; none fetches.

use std::collections::HashMap;

use super::{Encryption, Expected, Finding, FindingKind, Guard};
use crate::model::batch::{DataRead, KeptLines, Member};
use crate::model::digest::{crc64nvme, ObjectDigest};
use crate::model::format::{self, MembersDigest};
use crate::model::protection::{header_time, ObjectLock};
use crate::store::{Identity, ObjectMeta};

/// What a HEAD says against the expected digest: present, the size, and the store's own
/// checksums where it reports them (`nvme`: the CRC-64/NVME the bytes must have, where known).
pub(crate) fn compare_head(
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
    if let Some(stored) = meta.sha256.as_ref().filter(|&s| *s != expected.sha256) {
        out.push(
            Finding::new(FindingKind::StoreChecksumMismatch, batch_id, Some(key))
                .values(&expected.sha256, stored),
        );
    }
    out
}

/// What a HEAD reports of an object's protection against what it must be: a retention at least
/// as long and as strict (`retention_mismatch`), and the same encryption (`encryption_mismatch`).
pub(crate) fn compare_guard(
    batch_id: &str,
    key: &str,
    meta: &ObjectMeta,
    guard: &Guard,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(wanted) = &guard.lock {
        if !meta.lock.is_some_and(|lock| lock.covers(wanted)) {
            let show =
                |l: &ObjectLock| format!("{} until {}", l.mode, header_time(l.retain_until_ms));
            out.push(
                Finding::new(FindingKind::RetentionMismatch, batch_id, Some(key)).values(
                    show(wanted),
                    meta.lock.as_ref().map_or_else(
                        || "no retention reported (HEAD shows it only to roles with s3:GetObjectRetention)".to_string(),
                        show,
                    ),
                ),
            );
        }
    }
    let (algorithm, kms_key) = (
        meta.sse_algorithm.as_deref(),
        meta.sse_kms_key_id.as_deref(),
    );
    let ok = match &guard.encryption {
        None => true,
        Some(Encryption::Asked(sse)) => sse.reported_matches(algorithm, kms_key),
        Some(Encryption::Recorded {
            algorithm: want,
            kms_key_id,
        }) => {
            algorithm == Some(want.as_str())
                && (kms_key_id.is_none() || kms_key == kms_key_id.as_deref())
        }
    };
    if !ok {
        let show = |a: Option<&str>, k: Option<&str>| match (a, k) {
            (None, _) => "not encrypted (none reported)".to_string(),
            (Some(a), None) => a.to_string(),
            (Some(a), Some(k)) => format!("{a} with key {k}"),
        };
        let want = match &guard.encryption {
            Some(Encryption::Asked(sse)) => {
                show(Some(sse.algorithm.as_str()), sse.kms_key_id.as_deref())
            }
            Some(Encryption::Recorded {
                algorithm,
                kms_key_id,
            }) => show(Some(algorithm), kms_key_id.as_deref()),
            None => String::new(),
        };
        out.push(
            Finding::new(FindingKind::EncryptionMismatch, batch_id, Some(key))
                .values(want, show(algorithm, kms_key)),
        );
    }
    out
}

/// An object's ETag and version id against what the store reported at read-back: another one
/// means the object was written again since (whatever its size). Nothing recorded (a receipt
/// from before migration 8, a store that reports none): nothing to hold it to.
pub(super) fn compare_identity(
    batch_id: &str,
    key: &str,
    meta: &ObjectMeta,
    recorded: &Identity,
) -> Option<Finding> {
    let differs = |want: &Option<String>, got: &Option<String>| want.is_some() && want != got;
    if differs(&recorded.etag, &meta.etag) || differs(&recorded.version_id, &meta.version_id) {
        let show = |i: &Identity| {
            format!(
                "ETag {}, version {}",
                i.etag.as_deref().unwrap_or("none"),
                i.version_id.as_deref().unwrap_or("none")
            )
        };
        return Some(
            Finding::new(FindingKind::ObjectReplaced, batch_id, Some(key))
                .values(show(recorded), show(&meta.identity())),
        );
    }
    None
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
pub(crate) fn compare_document(
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

/// A data object read in full (`None`: not there) against what it must be: the bytes' digest,
/// the store's checksums, and the facts and members recomputed from its lines. Also hands back
/// the rows the read kept.
pub(crate) fn compare_data(
    expected: &Expected,
    head: Option<&ObjectMeta>,
    read: Option<DataRead>,
) -> (
    Vec<Finding>,
    Option<KeptLines>,
    Option<MembersDigest>,
    Option<Vec<Member>>,
) {
    let (batch_id, key) = (
        expected.receipt.batch_id.as_str(),
        expected.receipt.keys.data.as_str(),
    );
    let Some(read) = read else {
        return (
            vec![Finding::new(
                FindingKind::MissingObject,
                batch_id,
                Some(key),
            )],
            None,
            None,
            None,
        );
    };
    let mut out = compare_head(
        batch_id,
        key,
        head,
        &expected.receipt.objects.data,
        Some(read.crc64nvme),
    );
    if head.is_none() {
        return (out, None, None, None);
    }
    if read.digest.size != expected.receipt.objects.data.size {
        out.push(
            Finding::new(FindingKind::SizeMismatch, batch_id, Some(key))
                .values(expected.receipt.objects.data.size, read.digest.size),
        );
    }
    out.extend(compare_hashes(
        batch_id,
        key,
        &expected.receipt.objects.data,
        &read.digest,
    ));
    let (digest, data_members) = match read.content {
        Err(e) => {
            out.push(
                Finding::new(FindingKind::UnreadableData, batch_id, Some(key))
                    .values("a complete gzip of this app's NDJSON records", e),
            );
            (None, None)
        }
        Ok((content, members)) => {
            for (field, want, got) in expected.receipt.content.differences(&content) {
                let mut f = Finding::new(FindingKind::ContentMismatch, batch_id, Some(key))
                    .values(want, got);
                f.key = Some(format!("{key}#{field}"));
                out.push(f);
            }
            let (mut found, digest) = compare_members(expected, &members);
            out.append(&mut found);
            (digest, Some(members))
        }
    };
    (out, read.lines, digest, data_members)
}

/// The data object's rows against the member rows, and, where the receipt is compacted or the
/// caller asks for it, the digest of their `(event_id, updated_at_ms)` pairs (handed back).
fn compare_members(
    expected: &Expected,
    members: &[Member],
) -> (Vec<Finding>, Option<MembersDigest>) {
    let (batch_id, key) = (
        expected.receipt.batch_id.as_str(),
        expected.receipt.keys.data.as_str(),
    );
    let digest = (expected.digest_data_members || expected.members_digest().is_some()).then(|| {
        format::members_digest(
            members
                .iter()
                .map(|m| (m.event_id.as_str(), m.updated_at_ms)),
        )
    });
    let mut out = Vec::new();
    match (expected.members_digest(), &digest) {
        // Compacted: the pairs against the receipt's digest, the member rows left (rows
        // still in the source table) against the pairs.
        (Some(want), Some(got)) => {
            if want != got {
                out.push(
                    Finding::new(FindingKind::MembersDigestMismatch, batch_id, Some(key)).values(
                        format!("{} pairs, sha256 {}", want.rows, want.sha256),
                        format!("{} pairs, sha256 {}", got.rows, got.sha256),
                    ),
                );
            }
            out.extend(
                member_differences(batch_id, members, &expected.members)
                    .into_iter()
                    .filter(|f| f.kind != FindingKind::MemberMissing),
            );
        }
        _ => out.extend(member_differences(batch_id, members, &expected.members)),
    }
    (out, digest)
}

/// Members in the data object but not in the database, and the other way round.
fn member_differences(batch_id: &str, in_data: &[Member], in_db: &[Member]) -> Vec<Finding> {
    // The common case first: the member rows come in the order of the batch's lines (both are
    // the database's order of the rows' keys), each the line's key, version and fingerprint. The
    // database holds an event id once, so nothing is missing, extra or different.
    let agree = |line: &Member, row: &Member| {
        line.event_id == row.event_id
            && line.updated_at_ms == row.updated_at_ms
            && (row.fingerprint.is_none() || row.fingerprint == line.fingerprint)
    };
    if in_data.len() == in_db.len() && in_data.iter().zip(in_db).all(|(l, r)| agree(l, r)) {
        return Vec::new();
    }
    let mut db: HashMap<&str, &Member> = in_db.iter().map(|m| (m.event_id.as_str(), m)).collect();
    let mut out = Vec::new();
    for m in in_data {
        match db.remove(m.event_id.as_str()) {
            None => out.push(
                Finding::new(FindingKind::MemberMissing, batch_id, None)
                    .event(&m.event_id)
                    .values("a member row", "none"),
            ),
            Some(row) if row.updated_at_ms != m.updated_at_ms => out.push(
                Finding::new(FindingKind::MemberMismatch, batch_id, None)
                    .event(&m.event_id)
                    .values(m.updated_at_ms, row.updated_at_ms),
            ),
            // A member row without a fingerprint (recorded before migration 8) has nothing to
            // disagree with.
            Some(row) if row.fingerprint.is_some() && row.fingerprint != m.fingerprint => out.push(
                Finding::new(FindingKind::MemberFingerprintMismatch, batch_id, None)
                    .event(&m.event_id)
                    .values(
                        m.fingerprint.map(|f| f.to_string()).unwrap_or_default(),
                        row.fingerprint.map(|f| f.to_string()).unwrap_or_default(),
                    ),
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

/// Whether the data object holds as many rows as the database has members for it (what a HEAD
/// check can say of the members; a compacted receipt's digest counts them).
pub(super) fn member_count(expected: &Expected) -> Option<Finding> {
    let members = match expected.members_digest() {
        Some(digest) => digest.rows,
        None => expected.members.len() as u64,
    };
    (members != expected.receipt.content.row_count).then(|| {
        Finding::new(
            FindingKind::MemberMismatch,
            &expected.receipt.batch_id,
            None,
        )
        .values(
            format!("{} members", expected.receipt.content.row_count),
            format!("{members} members"),
        )
    })
}

/// The member and superseded rows against the receipt's proof of them (receipts recorded since
/// migration 8, not compacted: compaction deletes member rows on purpose). `None`: nothing to
/// compare, or they agree.
pub(crate) fn members_proof_finding(expected: &Expected) -> Option<Finding> {
    let want = expected.receipt.members_proof.as_deref()?;
    if expected.members_digest().is_some() {
        return None;
    }
    let got = crate::model::receipt::members_proof_of(&expected.members);
    (got.as_deref() != Some(want)).then(|| {
        Finding::new(
            FindingKind::MembersProofMismatch,
            &expected.receipt.batch_id,
            None,
        )
        .values(
            format!("member rows that hash to the receipt's members proof {want}"),
            match got {
                Some(got) => format!("{} member rows hashing to {got}", expected.members.len()),
                None => format!(
                    "{} member rows, some without a fingerprint",
                    expected.members.len()
                ),
            },
        )
    })
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
            sha256: Some("b".repeat(64)),
            ..ObjectMeta::default()
        };
        assert_eq!(
            kinds(compare_head("b", "k", Some(&meta), &digest(3), Some(2))),
            vec![
                FindingKind::SizeMismatch,
                FindingKind::StoreChecksumMismatch,
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
    fn a_head_is_held_to_the_receipts_retention_and_encryption() {
        use crate::model::protection::{LockMode, Sse, SseAlgorithm};
        let kinds = |f: Vec<Finding>| f.into_iter().map(|f| f.kind).collect::<Vec<_>>();
        let lock = |mode, until| ObjectLock {
            mode,
            retain_until_ms: until,
        };
        let key = "arn:aws:kms:eu-west-1:1:key/k1";
        let recorded = Guard {
            lock: Some(lock(LockMode::Compliance, 2_000_000)),
            encryption: Some(Encryption::Recorded {
                algorithm: "aws:kms".into(),
                kms_key_id: Some(key.into()),
            }),
        };
        let meta = |l: Option<ObjectLock>, sse: Option<&str>, k: Option<&str>| ObjectMeta {
            lock: l,
            sse_algorithm: sse.map(str::to_string),
            sse_kms_key_id: k.map(str::to_string),
            ..ObjectMeta::default()
        };
        let good = meta(
            Some(lock(LockMode::Compliance, 2_000_000)),
            Some("aws:kms"),
            Some(key),
        );
        assert!(compare_guard("b", "k", &good, &recorded).is_empty());
        assert!(compare_guard("b", "k", &good, &Guard::default()).is_empty());
        let shorter = meta(
            Some(lock(LockMode::Compliance, 1_999_000)),
            Some("aws:kms"),
            Some(key),
        );
        let governance = meta(
            Some(lock(LockMode::Governance, 9_000_000)),
            Some("aws:kms"),
            Some(key),
        );
        let none = meta(None, Some("aws:kms"), Some(key));
        for m in [shorter, governance, none] {
            assert_eq!(
                kinds(compare_guard("b", "k", &m, &recorded)),
                vec![FindingKind::RetentionMismatch]
            );
        }
        let other_key = meta(
            Some(lock(LockMode::Compliance, 2_000_000)),
            Some("aws:kms"),
            Some("arn:aws:kms:eu-west-1:1:key/k2"),
        );
        let plain = meta(Some(lock(LockMode::Compliance, 2_000_000)), None, None);
        for m in [other_key, plain] {
            assert_eq!(
                kinds(compare_guard("b", "k", &m, &recorded)),
                vec![FindingKind::EncryptionMismatch]
            );
        }
        let asked = Guard {
            lock: None,
            encryption: Some(Encryption::Asked(Sse {
                algorithm: SseAlgorithm::Kms,
                kms_key_id: Some("k1".into()),
                bucket_key: None,
            })),
        };
        assert!(compare_guard("b", "k", &good, &asked).is_empty());
    }

    #[test]
    fn members_are_compared_both_ways() {
        let m = |id: &str, ms: i64| Member::new(id, ms);
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
