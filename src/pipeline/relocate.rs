//! `relocate` — the explicit step that moves an archive's home (SPEC §5.13, §5.17): after an
//! operator copied the archive whole to another bucket (or folder) under the same prefix, every
//! batch is re-read there ([`super::home::relocate`]) and the move recorded with the reason and
//! the copy's object versions. From then on every command holds `--store` to the new home. The
//! command line opens the new home (`--to`) as the run's store, not `--store`: the old home
//! need not be reachable, and the new one is checked by the move itself.

use super::report::{Ending, Moved, RunDetails, Summary};
use super::{Observer, RunContext};
use crate::model::command::CommandName;

#[derive(Debug, Clone)]
pub(crate) struct RelocateOptions {
    /// Why the archive moves (kept with the move).
    pub reason: String,
    /// Batches re-read at the new home at once.
    pub parallel: usize,
    pub failpoints: crate::failpoint::FailPoints,
}

/// Moves the home to the store `ctx` opened (`--to`).
pub(crate) async fn run(
    ctx: &RunContext,
    opts: &RelocateOptions,
    observer: &dyn Observer,
) -> Summary {
    let mut summary = Summary::new(CommandName::Relocate);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    let reason = opts.reason.trim();
    if reason.is_empty() {
        return Summary::unusable(
            CommandName::Relocate,
            "--reason: say why the archive moves (it is kept with the move)".into(),
        );
    }
    match super::home::relocate(ctx, reason, opts.parallel, &opts.failpoints, observer).await {
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
