//! A batch's objects under a new identity with the archived bytes (SPEC §5.17): written again
//! since its receipt recorded their ETags and version ids at read-back — copied to a new home,
//! restored from the bucket's versioning — and read in full since, nothing found but that. Such a
//! batch becomes clean by one recorded step, never silently: `relocate` re-reads every batch at
//! the new home and records them all in the transaction that moves the home ([`reread`]);
//! `verify --batch-id` records the one it was asked for ([`record_one`]). Each record keeps the
//! old and the new identity, the hashes the bytes were held to, the run and when
//! (`db::object_versions`). Until then verify reports `object_replaced` (saying that the bytes
//! are the archived ones and the command that records them) and purge leaves the batch: verify
//! and purge never disagree about the same bytes.

use futures_util::StreamExt;

use super::verifier::{ColdObject, ColdObjects, Depth, Expected, Finding, Verified, Verifier};
use super::{Observer, RunContext};
use crate::db::members::Members;
use crate::db::object_versions::{NewVersions, CAUSE_RELOCATE, CAUSE_VERIFY};
use crate::db::receipts::{ReceiptScope, Receipts};
use crate::db::DbError;
use crate::model::receipt::{Receipt, StoredAs};
use crate::store::{ObjectStore, StoreError};

/// The record of a batch's objects read in full at `store` under the identities `seen`, their
/// bytes the ones its receipt vouches for.
fn evidence(
    receipt: &Receipt,
    seen: &StoredAs,
    cause: &str,
    store: &str,
    at_ms: i64,
) -> NewVersions {
    let old = &receipt.objects.stored;
    let o = &receipt.objects;
    NewVersions {
        app_code: receipt.recorded_app_code.clone(),
        batch_id: receipt.batch_id.clone(),
        recorded_at_ms: at_ms,
        run_id: super::report::run_id().to_string(),
        cause: cause.to_string(),
        store: store.to_string(),
        old_data_etag: old.data.etag.clone(),
        old_data_version_id: old.data.version_id.clone(),
        old_manifest_etag: old.manifest.etag.clone(),
        old_success_etag: old.success.etag.clone(),
        new_data_etag: seen.data.etag.clone(),
        new_data_version_id: seen.data.version_id.clone(),
        new_manifest_etag: seen.manifest.etag.clone(),
        new_success_etag: seen.success.etag.clone(),
        gzip_sha256: o.data.sha256.clone(),
        ndjson_sha256: receipt.content.ndjson_sha256.clone(),
        manifest_sha256: o.manifest_sha256.clone(),
        success_crc64: o.success_crc64.to_string(),
        row_count: receipt.content.row_count as i64,
    }
}

/// Whether the store still reports the identities `seen` for the batch's three objects (a HEAD
/// each, after their bytes were read): the bytes read are those of the versions recorded, not
/// of one written in between.
async fn still_seen(
    store: &dyn ObjectStore,
    receipt: &Receipt,
    seen: &StoredAs,
) -> Result<bool, StoreError> {
    let keys = &receipt.keys;
    for (key, identity) in [
        (&keys.manifest, &seen.manifest),
        (&keys.success, &seen.success),
        (&keys.data, &seen.data),
    ] {
        match store.head(key).await? {
            Some(meta) if meta.identity() == *identity => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// How `verify --batch-id` ended with a batch whose objects hold the archived bytes under a new
/// identity.
pub(crate) enum Recording {
    /// Recorded: the receipt holds the new identity, and the row is its evidence.
    Recorded(Box<NewVersions>),
    /// Not recorded, and why (the finding stays).
    NotRecorded(String),
}

/// Records the new identity of a batch `verify --batch-id` read in full and found to hold the
/// archived bytes ([`Verified::archived_bytes_under_new_identity`]): after a HEAD of each object
/// again, in one transaction with the receipt's identity columns (which must still hold the old
/// identity).
pub(crate) async fn record_one(
    ctx: &RunContext,
    receipt: &Receipt,
    verified: &Verified,
) -> Result<Recording, StoreError> {
    if !still_seen(ctx.store.as_ref(), receipt, &verified.stored).await? {
        return Ok(Recording::NotRecorded(
            "an object was written again while it was read: run `verify --batch-id` again".into(),
        ));
    }
    let record = evidence(
        receipt,
        &verified.stored,
        CAUSE_VERIFY,
        &ctx.store.location().to_string(),
        ctx.now(),
    );
    match ctx.tables.versions
        .record_one(&record)
        .await
    {
        Ok(true) => Ok(Recording::Recorded(Box::new(record))),
        Ok(false) => Ok(Recording::NotRecorded(
            "the receipt's recorded identity changed meanwhile (another run recorded it): run `verify --batch-id` again".into(),
        )),
        Err(e) => Ok(Recording::NotRecorded(format!(
            "could not record it ({e}): verify's user needs INSERT on {} and UPDATE on the receipts table",
            ctx.spec.object_versions_table()
        ))),
    }
}

/// What re-reading every batch at a relocation's new home found.
#[derive(Debug, Default)]
pub(crate) struct Reread {
    /// Every batch, with the identity its objects have there (the move records them all).
    pub versions: Vec<NewVersions>,
    /// Bytes read.
    pub bytes: u64,
    /// Batches the copy does not hold as their receipts say: the first [`UNPROVEN_LISTED`].
    pub unproven: Vec<Unproven>,
    pub unproven_count: u64,
}

impl Reread {
    /// Batches whose objects have another identity there than their receipts held.
    pub(crate) fn changed(&self) -> u64 {
        self.versions.iter().filter(|v| v.changed()).count() as u64
    }
}

/// A batch the copy does not hold as its receipt says: what verify would find there.
#[derive(Debug)]
pub(crate) struct Unproven {
    pub app_code: String,
    pub batch_id: String,
    pub findings: Vec<Finding>,
    pub cold: Vec<ColdObject>,
}

impl std::fmt::Display for Unproven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "batch {} of app {}: ", self.batch_id, self.app_code)?;
        let mut said: Vec<String> = self
            .findings
            .iter()
            .take(3)
            .map(|x| x.to_string())
            .collect();
        said.extend(self.cold.iter().map(|c| {
            format!(
                "{} is in {}, which cannot be read at once (the copy must be readable to be checked)",
                c.key, c.storage_class
            )
        }));
        if self.findings.len() > 3 {
            said.push(format!("{} more", self.findings.len() - 3));
        }
        f.write_str(&said.join("; "))
    }
}

/// The unproven batches a refusal names.
pub(crate) const UNPROVEN_LISTED: usize = 10;

/// Why the re-read could not finish (nothing moves).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RereadError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("re-reading batch {0} at the new home: {1}")]
    Store(String, StoreError),
    #[error("stopped before every batch was re-read ({0}): nothing moved")]
    Stopped(crate::pipeline::report::Stop),
}

/// Re-reads every VERIFIED batch of every app at the store `ctx` opened (a relocation's new
/// home), `parallel` at a time, through the one verifier — all three objects in full, against
/// their receipts and member rows, as `verify` does — and gathers for each the identity its
/// objects have there. A batch with any finding but `object_replaced`, or whose objects cannot
/// be read at once, is unproven. Memory: a record per batch (the move writes them in one
/// transaction), and `parallel` batches in flight.
///
/// Progress goes to `observer` (one piece of work, `PROGRESS_KEY`, in batches; its total counted
/// first where a display would show it), with the bytes read and the batches unproven so far.
pub(crate) async fn reread(
    ctx: &RunContext,
    parallel: usize,
    observer: &dyn Observer,
) -> Result<Reread, RereadError> {
    let receipts = &ctx.tables.receipts;
    let members = &ctx.tables.members;
    let store = ctx.store.location().to_string();
    let total = match observer.wants_totals() {
        true => Some(receipts.count(&ReceiptScope::default()).await?),
        false => None,
    };
    observer.start(PROGRESS_KEY, "batches", total);
    let out = reread_all(ctx, parallel, observer, receipts, members, &store).await;
    observer.finish(PROGRESS_KEY);
    out
}

/// What relocate's progress calls its one piece of work.
const PROGRESS_KEY: &str = "re-read at the new home";

async fn reread_all(
    ctx: &RunContext,
    parallel: usize,
    observer: &dyn Observer,
    receipts: &Receipts,
    members: &Members,
    store: &str,
) -> Result<Reread, RereadError> {
    let checked = receipts
        .stream(ReceiptScope::default())
        .map(|receipt| async move {
            if let Some(reason) = ctx.stop_reason(None) {
                return Err(RereadError::Stopped(reason));
            }
            let receipt = receipt?;
            let checked = reread_batch(ctx, members, &receipt, store).await;
            Ok((receipt, checked?))
        })
        .buffer_unordered(parallel.max(1));
    futures_util::pin_mut!(checked);
    let mut out = Reread::default();
    while let Some(next) = checked.next().await {
        let (receipt, batch) = next?;
        match batch {
            Ok(record) => {
                out.bytes += receipt.objects.data.size;
                out.versions.push(record);
            }
            Err(unproven) => {
                out.unproven_count += 1;
                if out.unproven.len() < UNPROVEN_LISTED {
                    out.unproven.push(unproven);
                }
            }
        }
        observer.advance(
            PROGRESS_KEY,
            1,
            &format!(
                ", {} MB of data objects read, {} unproven",
                out.bytes / 1_000_000,
                out.unproven_count
            ),
        );
    }
    out.versions
        .sort_by(|a, b| (&a.app_code, &a.batch_id).cmp(&(&b.app_code, &b.batch_id)));
    Ok(out)
}

/// One batch re-read at the new home: its record, or why it is unproven.
async fn reread_batch(
    ctx: &RunContext,
    members: &Members,
    receipt: &Receipt,
    store: &str,
) -> Result<Result<NewVersions, Unproven>, RereadError> {
    let (app, batch) = (&receipt.app_code, &receipt.batch_id);
    let rows = members.proven_members_of(app, batch).await?;
    let expected = Expected::of_receipt(ctx.spec, receipt, rows);
    let verifier = Verifier {
        store: ctx.store.as_ref(),
        spec: ctx.spec,
        depth: Depth::Read,
        cold: ColdObjects::Metadata,
    };
    let failed = |e| RereadError::Store(batch.clone(), e);
    let verified = verifier.verify(&expected).await.map_err(failed)?;
    let whole = verified.findings.is_empty() && verified.cold.is_empty();
    let proven = whole || verified.archived_bytes_under_new_identity();
    if proven
        && still_seen(ctx.store.as_ref(), receipt, &verified.stored)
            .await
            .map_err(failed)?
    {
        let at = ctx.now();
        return Ok(Ok(evidence(
            receipt,
            &verified.stored,
            CAUSE_RELOCATE,
            store,
            at,
        )));
    }
    let mut findings = verified.findings;
    if proven {
        findings.push(Finding::written_while_read(batch));
    }
    Ok(Err(Unproven {
        app_code: app.clone(),
        batch_id: batch.clone(),
        findings,
        cold: verified.cold,
    }))
}
