//! A batch's last stage: its receipt and members recorded in one transaction — after the replicas
//! caught up and the table's columns are found unchanged — or, for stragglers that form exactly a
//! batch already recorded, that batch's member rows recorded again after its objects are read
//! back against its receipt.

use std::time::Duration;

use super::{AppError, Archiver};
use crate::db::lock::AppLock;
use crate::db::record::Cut;
use crate::model::batch::{EncodedBatch, Superseded};
use crate::model::receipt::members_proof_of;
use crate::pipeline::publish::{PublishError, Published, Publisher};
use crate::pipeline::report::BatchReport;
use crate::pipeline::verifier::{ColdObjects, Depth, Expected, Verifier};

impl Archiver<'_> {
    pub(super) fn publisher<'p>(
        &'p self,
        app: &'p str,
        lock: Option<&'p AppLock>,
    ) -> Publisher<'p> {
        Publisher {
            store: self.ctx.store.as_ref(),
            spec: self.ctx.spec,
            app_code: app,
            policy: &self.opts.policy,
            failpoints: &self.opts.failpoints,
            lock,
            columns: self.columns.as_ref(),
        }
    }

    /// Records a batch whose objects were written and verified: its receipt and members.
    pub(super) async fn record(
        &self,
        app: &str,
        lock: &AppLock,
        batch: &EncodedBatch,
        published: Published,
        cut: Cut,
    ) -> Result<Recorded, AppError> {
        let ctx = self.ctx;
        let receipt = published.receipt.recorded(&batch.members, ctx.now());
        // Every page of this batch has been read: a column added to the table since the run
        // started is missing from the batch's lines. The batch is not recorded (its objects are
        // replaced by the next run, which archives the column): a batch holds whole rows.
        ctx.db
            .check_columns_unchanged_since(ctx.spec, &self.definition, self.columns.as_deref())
            .await?;
        // The receipt transaction writes (and is replicated): not while a replica lags.
        let replica_wait = match &ctx.stops.replicas {
            Some(gate) => gate.wait(app, Some(lock), &ctx.shutdown).await?,
            None => Duration::ZERO,
        };
        let failpoints = &self.opts.failpoints;
        let superseded = self
            .recorder
            .record(&receipt, &batch.members, cut, lock, failpoints)
            .await?;
        warn_superseded(app, &receipt.batch_id, &superseded);
        Ok(Recorded {
            batch_report: BatchReport::of(
                receipt.batch_id,
                receipt.keys.data.to_string(),
                batch,
                receipt.objects.data.size,
            ),
            superseded,
            replaced: published.replaced.iter().map(|k| k.to_string()).collect(),
            adopted: published.adopted.iter().map(|k| k.to_string()).collect(),
            replica_wait,
        })
    }

    /// Records the member rows of stragglers that form exactly the recorded batch `batch_id`
    /// again, after reading its objects back in full against its receipt and holding the
    /// stragglers to its members proof; its objects are never written again (SPEC §5.3).
    pub(super) async fn remember(
        &self,
        app: &str,
        lock: &AppLock,
        batch: &EncodedBatch,
        batch_id: &str,
    ) -> Result<Recorded, AppError> {
        let ctx = self.ctx;
        let receipt = self
            .receipts
            .get(app, batch_id)
            .await?
            .ok_or_else(|| AppError::AlreadyRecorded(batch_id.to_string()))?;
        let expected = Expected::of_receipt(ctx.spec, &receipt, batch.members.clone());
        let verifier = Verifier {
            store: ctx.store.as_ref(),
            spec: ctx.spec,
            depth: Depth::Read,
            cold: ColdObjects::Metadata,
        };
        let verified = verifier
            .verify(&expected)
            .await
            .map_err(PublishError::from)?;
        let proof = members_proof_of(&batch.members);
        if let Some(first) = verified.findings.first() {
            return Err(PublishError::Mismatch {
                first: Box::new(first.clone()),
                count: verified.findings.len(),
            }
            .into());
        }
        if receipt.members_proof.is_some() && receipt.members_proof != proof {
            return Err(AppError::AlreadyRecorded(batch_id.to_string()));
        }
        let failpoints = &self.opts.failpoints;
        let superseded = self
            .recorder
            .record(&receipt, &batch.members, Cut::Stragglers, lock, failpoints)
            .await?;
        tracing::warn!(
            app,
            batch_id,
            rows = batch.members.len(),
            "stragglers formed a batch already recorded: its member rows were recorded again"
        );
        Ok(Recorded {
            batch_report: BatchReport::of(
                receipt.batch_id.clone(),
                receipt.keys.data.to_string(),
                batch,
                receipt.objects.data.size,
            ),
            superseded,
            ..Recorded::default()
        })
    }
}

/// Says, once per batch, that rows archived before came back and this batch supersedes them.
fn warn_superseded(app: &str, batch_id: &str, superseded: &[Superseded]) {
    if let Some(first) = superseded.first() {
        tracing::warn!(
            app,
            batch_id,
            rows = superseded.len(),
            first_event_id = first.event_id,
            "rows archived before came back delivered with a new updated_at_ms; \
             this batch's versions supersede the older ones (purge deletes the new \
             version; verify and restore keep the old one as its batch's)"
        );
    }
}

/// What one batch came to.
#[derive(Default)]
pub(super) struct Recorded {
    pub(super) batch_report: BatchReport,
    pub(super) superseded: Vec<Superseded>,
    pub(super) replaced: Vec<String>,
    pub(super) adopted: Vec<String>,
    pub(super) replica_wait: Duration,
}
