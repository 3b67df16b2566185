//! `relocate` — the explicit step that moves an archive's home (SPEC §5.13): after an operator
//! copied the archive whole to another bucket (or folder) under the same prefix, the new home is
//! checked there ([`crate::pipeline::home::relocate`]) and recorded with the reason. From then
//! on every command holds `--store` to the new home.

use crate::model::command::CommandName;
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::RunContext;

/// Moves the home to the store `ctx` opened (`--to`).
pub(crate) async fn run(ctx: &RunContext, reason: &str) -> Summary {
    let mut summary = Summary::new(CommandName::Relocate);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    if reason.trim().is_empty() {
        return Summary::unusable(
            CommandName::Relocate,
            "--reason: say why the archive moves (it is kept with the move)".into(),
        );
    }
    match crate::pipeline::home::relocate(ctx, reason.trim()).await {
        Ok(moved) => {
            tracing::info!(
                from = moved.from,
                to = moved.to,
                "the archive's home moved: every command now holds --store to the new one; run `outbox-archiver verify --store {}` to re-read every batch there",
                moved.to
            );
            // What history shows of the move: where from, and why.
            summary.stop_reason = Some(format!("moved from {}: {}", moved.from, moved.reason));
            summary.details = Some(RunDetails::Relocate(moved));
            summary.settle()
        }
        // Nothing moved: a setting or a copy to fix first.
        Err(e) => Summary::unusable(CommandName::Relocate, e.to_string()),
    }
}
