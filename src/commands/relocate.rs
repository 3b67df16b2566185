//! `relocate` — the explicit step that moves an archive's home (SPEC §5.13, §5.17): after an
//! operator copied the archive whole to another bucket (or folder) under the same prefix, every
//! batch is re-read there ([`crate::pipeline::home::relocate`]) and the move recorded with the
//! reason and the copy's object versions. From then on every command holds `--store` to the new
//! home.

use crate::model::command::CommandName;
use crate::output::progress::Progress;
use crate::pipeline::report::{Ending, Moved, RunDetails, Summary};
use crate::pipeline::RunContext;

/// Moves the home to the store `ctx` opened (`--to`), re-reading `parallel` batches at a time.
pub(crate) async fn run(ctx: &RunContext, reason: &str, parallel: usize) -> Summary {
    let mut summary = Summary::new(CommandName::Relocate);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    if reason.trim().is_empty() {
        return Summary::unusable(
            CommandName::Relocate,
            "--reason: say why the archive moves (it is kept with the move)".into(),
        );
    }
    // A progress line (a terminal) or log lines (`--progress-every`) while every batch is
    // re-read at the new home: a large archive's move takes a while.
    let progress = Progress::new(CommandName::Relocate);
    match crate::pipeline::home::relocate(ctx, reason.trim(), parallel, &progress).await {
        Ok(moved) => {
            tracing::info!(
                from = moved.from,
                to = moved.to,
                batches = moved.checked_batches,
                recorded_versions = moved.recorded_versions,
                "the archive's home moved, every batch re-read there: every command now holds --store to the new one"
            );
            // What history shows of the move: where from, what it checked, and why.
            summary.stop_reason = Some(Ending::Moved(Moved {
                from: moved.from.clone(),
                checked_batches: moved.checked_batches,
                recorded_versions: moved.recorded_versions,
                reason: moved.reason.clone(),
            }));
            summary.details = Some(RunDetails::Relocate(moved));
            summary.settle()
        }
        // Nothing moved: a setting or a copy to fix first.
        Err(e) => Summary::unusable(CommandName::Relocate, e.to_string()),
    }
}
