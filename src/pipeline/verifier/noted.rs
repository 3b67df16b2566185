//! What a check found of a batch, noted on its receipt for `attest` (migration 17): `verify`,
//! `purge` and `compact` each hold the batch to its receipt before they act, and whatever they
//! find other than recorded is kept with the receipt — when, and the first findings with their
//! count — so that a statement made later names the batch rather than vouch for it. Only a full
//! `verify` that reads the batch whole after that clears it (`Receipt::unresolved_findings`).
//!
//! The note is a courtesy to the auditor, never a condition of the check: a user without
//! `UPDATE` on the receipts still checks, and is told once that the note was skipped.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{Finding, FindingKind};
use crate::model::receipt::Receipt;
use crate::pipeline::DbContext;

/// The findings a receipt keeps of a check, as a run's findings are kept (`{"count": n,
/// "first": […]}`): all of them but `not_readable`, which says only that a check was asked to
/// read an object in cold storage, nothing about the batch.
pub(crate) fn kept(findings: &[Finding]) -> Option<String> {
    let about_the_batch: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.kind != FindingKind::NotReadable)
        .collect();
    crate::db::runs::findings_json(&about_the_batch)
}

/// Notes on `receipt` what `command`'s check of it found, when it found something.
pub(crate) async fn note_findings(
    ctx: &DbContext,
    receipt: &Receipt,
    findings: &[Finding],
    command: &str,
) {
    static SAID: AtomicBool = AtomicBool::new(false);
    let Some(found) = kept(findings) else {
        return;
    };
    let noted = ctx
        .tables
        .receipts
        .record_findings(&receipt.app_code, &receipt.batch_id, ctx.now(), &found)
        .await;
    if let Err(e) = noted {
        if !SAID.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %e, command, "could not note on the receipts what this check found of their batches (an attest statement then shows no finding for them until a verify notes it); grant UPDATE on the receipts table to this command's user");
        }
    }
}
