//! What purge deletes by, proven before the first delete: the batch's objects looked at (or read
//! in full where a look cannot vouch for them), its member rows held to the receipt's members
//! proof, and the table as the batch's lines hold it.

use std::collections::HashMap;

use super::{AppError, Purger};
use crate::model::batch::Member;
use crate::model::digest::RowFingerprint;
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;
use crate::pipeline::report::details::ObjectCheck;
use crate::pipeline::verifier::{
    ColdObjects, Depth, Expected, Finding, FindingKind, Verified, Verifier,
};

impl Purger<'_> {
    /// What purge deletes by: the batch's members, each with the fingerprint of its archived
    /// line, proven against the batch — and the findings that forbid deleting any of them.
    ///
    /// The objects are looked at as `--reverify` / `--trust-receipts` say (HEAD by default), and
    /// the member and superseded rows are held to the receipt's members proof. The data object is
    /// read in full instead of trusted by HEAD where HEAD can vouch for nothing but a size (no
    /// checksum of the store's own, no ETag to hold to the one recorded), and where the member
    /// rows cannot be proven without it: a receipt recorded before migration 8 (no proof, member
    /// rows without fingerprints — the fingerprints are then taken from the data object) or a
    /// compacted one (some member rows deleted on purpose) — and where the batch may have been
    /// written before a column was added to the table: its lines then say which columns it
    /// holds, and the rows are compared through them (SPEC §5.14).
    ///
    /// Also returns the table as the batch's lines hold it.
    pub(super) async fn proven(
        &self,
        receipt: &Receipt,
        members: Vec<Member>,
    ) -> Result<(Vec<Finding>, Vec<Member>, &'static TableSpec), AppError> {
        let (app, batch) = (&receipt.app_code, &receipt.batch_id);
        // What the batch's data object must hold: its members and any older versions of rows
        // a later batch superseded.
        let mut proven = members.clone();
        proven.extend(self.members.superseded_of(app, batch).await?);
        let expected = Expected::of_receipt(self.ctx.spec, receipt, proven);
        let provable_by_rows = expected.receipt.members_proof.is_some()
            && receipt.life.compaction.is_none()
            && members.iter().all(|m| m.fingerprint.is_some());
        let spec = self.ctx.spec;
        let predates = self.predates_a_column(receipt).await?;
        // A batch that may hold a column dropped from the table since is read in full, whatever
        // the flags: its rows are held to the table by the columns still there.
        let dropped = may_hold_dropped(spec, receipt);
        let depth = match self.opts.objects {
            _ if dropped => Depth::ReadKeepingLines,
            ObjectCheck::Trusted => {
                return Ok((trusted(&expected, batch, provable_by_rows), members, spec))
            }
            ObjectCheck::Head if provable_by_rows && !predates => Depth::Head,
            ObjectCheck::Head | ObjectCheck::Read => Depth::Read,
        };
        let (mut verified, depth) = self.verified(receipt, &expected, depth).await?;
        let read_as = verified.data_spec.unwrap_or(spec);
        if !verified.findings.is_empty() || depth == Depth::Head {
            return Ok((verified.findings, members, read_as));
        }
        if let Some(lines) = verified.lines.take().filter(|_| holds_more(read_as, spec)) {
            return Ok(onto_table(&lines, members, read_as, spec, receipt));
        }
        let (findings, members) = with_archived_fingerprints(verified, members);
        Ok((findings, members, read_as))
    }

    /// Whether a batch may have been written before a column of its (profile's) table was first
    /// archived: recorded before the column's first archive run started, or the column not
    /// archived yet at all (added since the last archive run). A built-in table's own columns
    /// are archived always.
    async fn predates_a_column(&self, receipt: &Receipt) -> Result<bool, AppError> {
        let spec = self.ctx.spec;
        let added: Vec<&str> = spec
            .columns
            .iter()
            .map(|c| c.name)
            .filter(|name| !spec.is_fixed(name))
            .collect();
        if added.is_empty() {
            return Ok(false); // a built-in table's own columns are archived always
        }
        let first = self
            .first_archived
            .get_or_try_init(|| self.ctx.db.first_archived_columns(spec))
            .await?;
        Ok(added.iter().any(|c| {
            first
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(c))
                .is_none_or(|(_, at)| *at > receipt.life.verified_at_ms)
        }))
    }

    /// The batch's objects verified to `depth` — or read in full after all, where HEAD could
    /// vouch only for their size or found them written again — and the depth they were.
    ///
    /// An object written again since its receipt recorded it (another ETag or version id) is
    /// `object_replaced` here as in verify, whatever its bytes: its batch is not purged until
    /// the new identity is recorded — by `verify --batch-id`, which reads it in full, or by
    /// `relocate` — so that verify and purge never disagree about the same bytes, and a batch's
    /// rows never go on objects nobody has looked at since they changed (SPEC §5.17). The read
    /// says which it is: the archived bytes (the finding names the command that records them),
    /// or other ones (their own findings).
    async fn verified(
        &self,
        receipt: &Receipt,
        expected: &Expected,
        mut depth: Depth,
    ) -> Result<(Verified, Depth), AppError> {
        let mut verified = self.verify(expected, depth).await?;
        let replaced_only = !verified.findings.is_empty()
            && verified
                .findings
                .iter()
                .all(|f| f.kind == FindingKind::ObjectReplaced);
        let vouched = verified
            .data_head
            .as_ref()
            .is_some_and(|h| h.vouches_for_bytes(&receipt.objects.stored.data));
        if depth == Depth::Head && (replaced_only || (verified.findings.is_empty() && !vouched)) {
            // HEAD said only that an object of the right size is there, or that it was
            // written again since: its bytes decide.
            depth = Depth::Read;
            verified = self.verify(expected, depth).await?;
        }
        verified.explain_replaced(&receipt.batch_id, depth == Depth::Head);
        Ok((verified, depth))
    }

    /// The batch's objects verified to `depth`.
    async fn verify(&self, expected: &Expected, depth: Depth) -> Result<Verified, AppError> {
        let verifier = Verifier {
            store: self.ctx.store.as_ref(),
            spec: self.ctx.spec,
            depth,
            cold: ColdObjects::Metadata,
        };
        verifier
            .verify(expected)
            .await
            .map_err(|e| AppError::Store(expected.receipt.batch_id.clone(), e))
    }
}

/// The findings of a receipt trusted without a look at its objects (`--trust-receipts`): its
/// member rows held to its members proof — or, where they cannot be (no proof, no fingerprints,
/// compacted), the finding that only reading its data object could prove them.
fn trusted(expected: &Expected, batch: &str, provable_by_rows: bool) -> Vec<Finding> {
    if provable_by_rows {
        return crate::pipeline::verifier::members_proof_finding(expected)
            .into_iter()
            .collect();
    }
    vec![Finding {
        kind: FindingKind::MembersProofMismatch,
        batch_id: Some(batch.to_string()),
        key: None,
        event_id: None,
        expected: Some("member rows with fingerprints and a members proof (receipts recorded since migration 8)".into()),
        actual: Some("a receipt recorded before them, or compacted: its rows can be proven only by reading its data object; purge it without --trust-receipts".into()),
        seq: None,
    }]
}

/// Whether a batch may hold a column dropped from the table since ([`TableSpec::dropped`]): one
/// whose manifest names such a column, or one that does not name its columns (layout 1) while
/// any column was dropped.
fn may_hold_dropped(table: &TableSpec, receipt: &Receipt) -> bool {
    match &receipt.columns {
        Some(columns) => columns.columns.iter().any(|c| {
            !table
                .columns
                .iter()
                .any(|t| t.name.eq_ignore_ascii_case(&c.name))
        }),
        None => !table.dropped.is_empty(),
    }
}

/// Whether the batch (`batch`: the table as its lines hold it) holds a column the table no
/// longer has.
fn holds_more(batch: &TableSpec, table: &TableSpec) -> bool {
    batch.columns.iter().any(|c| {
        !table
            .columns
            .iter()
            .any(|t| t.name.eq_ignore_ascii_case(c.name))
    })
}

/// A batch holding columns dropped from the table since, read in full: its members, each with
/// the fingerprint of its line without those columns — what the row as the table holds it now
/// encodes to when it is what was archived — and the table as those lines would hold it, which
/// the rows are selected and compared by. The dropped columns' values stay in the batch, which is
/// the archive of them: nothing the table still holds is deleted unless the batch holds it.
fn onto_table(
    lines: &crate::model::batch::KeptLines,
    members: Vec<Member>,
    batch: &'static TableSpec,
    table: &TableSpec,
    receipt: &Receipt,
) -> (Vec<Finding>, Vec<Member>, &'static TableSpec) {
    let unreadable = |why: String| {
        vec![Finding {
            kind: FindingKind::UnreadableData,
            batch_id: Some(receipt.batch_id.clone()),
            key: Some(receipt.keys.data.to_string()),
            event_id: None,
            expected: Some("its lines without the columns dropped from the table since".into()),
            actual: Some(why),
            seq: None,
        }]
    };
    let kept: Vec<usize> = (0..batch.columns.len())
        .filter(|&i| {
            table
                .columns
                .iter()
                .any(|t| t.name.eq_ignore_ascii_case(batch.columns[i].name))
        })
        .collect();
    let keys: Vec<&str> = kept.iter().map(|&i| batch.columns[i].json_key).collect();
    let onto = match crate::model::table::projected(batch, &keys) {
        Ok(onto) => onto,
        Err(why) => return (unreadable(why), members, batch),
    };
    let mut archived: HashMap<(String, i64), RowFingerprint> = HashMap::new();
    for range in lines.chunks(1_000, usize::MAX) {
        let rows = match lines.decode(range) {
            Ok(rows) => rows,
            Err(e) => return (unreadable(e.to_string()), members, batch),
        };
        for row in rows {
            let row: crate::model::codec::Row = kept.iter().map(|&i| row[i].clone()).collect();
            match crate::model::batch::EncodedRow::of_row(onto, &receipt.app_code, &row) {
                Ok(encoded) => {
                    let at = encoded.cursor();
                    archived.insert(
                        (at.event_id, at.updated_at_ms),
                        crate::model::digest::row_fingerprint(&encoded.line),
                    );
                }
                Err(e) => return (unreadable(e.to_string()), members, batch),
            }
        }
    }
    let members = members
        .into_iter()
        .map(|m| Member {
            fingerprint: archived
                .get(&(m.event_id.clone(), m.updated_at_ms))
                .copied(),
            ..m
        })
        .collect();
    (Vec::new(), members, onto)
}

/// A batch read in full without findings: its members, each with the fingerprint of its line in
/// the data object (a member row's own, where it has one, was just compared with them) — or, for
/// objects that cannot be read until restored, the findings that say so.
fn with_archived_fingerprints(
    verified: Verified,
    members: Vec<Member>,
) -> (Vec<Finding>, Vec<Member>) {
    let mut findings = verified.findings;
    let Some(data_members) = verified.data_members else {
        findings.extend(verified.cold.into_iter().map(|cold| Finding {
            kind: FindingKind::NotReadable,
            batch_id: Some(cold.batch_id),
            key: Some(cold.key),
            event_id: None,
            expected: Some("an object purge can read in full (its member rows can be proven only by it, or HEAD vouches for nothing but its size)".into()),
            actual: Some(format!(
                "in {}, which cannot be read until restored: run `outbox-archiver verify --thaw DAYS` for the batch",
                cold.storage_class
            )),
            seq: None,
        }));
        return (findings, members);
    };
    let archived: HashMap<(&str, i64), Option<RowFingerprint>> = data_members
        .iter()
        .map(|m| ((m.event_id.as_str(), m.updated_at_ms), m.fingerprint))
        .collect();
    let members = members
        .into_iter()
        .map(|m| Member {
            fingerprint: archived
                .get(&(m.event_id.as_str(), m.updated_at_ms))
                .copied()
                .flatten(),
            ..m
        })
        .collect();
    (findings, members)
}
