//! A command as the pipeline runs it: its options are the value, [`Command::run`] the work. Each
//! command's module implements it beside its options (`archive/`, `purge/`, `verify.rs`,
//! `restore.rs`, `compact.rs`, `find.rs`, `attest.rs`, `status.rs`, `history.rs`), so that a
//! command is one module: its options, its work and its report. The command line opens what
//! [`Command::Context`] names, checked as every command's is ([`check_database`], [`start`]), runs
//! it, and records a run that has no app of its own to record it ([`note_run_level`]).

use crate::db::runs::{Record, Runs};
use crate::db::Db;
use crate::model::command::CommandName;
use crate::model::ending::Outcome;
use crate::model::table::TableSpec;

use super::apps::Apps;
use super::report::Summary;
use super::{Observer, RunContext};

/// A command's options, runnable.
#[async_trait::async_trait]
pub trait Command: Sync {
    /// Its name: on the command line, in the summary, the runs table and the metrics.
    const NAME: CommandName;
    /// What it runs with: the database side only ([`super::DbContext`]: `status`, `history`)
    /// or the archive too ([`RunContext`]).
    type Context: Sync;
    /// The apps it lists, each held to the table's collation before the run starts.
    fn apps(&self) -> Option<&Apps> {
        None
    }
    /// Whether it writes to the database the replicas follow (then their lag paces it).
    fn writes(&self) -> bool {
        false
    }
    /// The work, its progress reported to `observer`.
    async fn run(&self, ctx: &Self::Context, observer: &dyn Observer) -> Summary;
}

/// What every command checks of the database before any work starts: the owned tables there,
/// and the listed apps (none equal under the table's collation).
pub(crate) async fn check_database(
    db: &Db,
    spec: &'static TableSpec,
    apps: Option<&Apps>,
) -> Result<(), String> {
    db.require_tables(spec).await.map_err(|e| e.to_string())?;
    if let Some(Apps::Listed(list)) = apps {
        db.check_app_list(spec, list)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The run of a command that touches the archive, started: `--store` held to the archive's
/// home (one archive, one home), which the run then works with. The database is closed when
/// the run cannot start.
pub(crate) async fn start(ctx: RunContext) -> Result<RunContext, String> {
    match super::home::check(&ctx).await {
        Ok(checked) => Ok(RunContext {
            binding: super::home::Binding::found(&checked),
            ..ctx
        }),
        Err(e) => {
            ctx.db.close().await;
            Err(e.to_string())
        }
    }
}

/// Records, as a run of the whole command (app code empty), a run that has no app of its own
/// to record it — it could not start, failed before its first app, found no app to work, or
/// works no app by nature (`find`) — and a run-level error beside its apps: `history` shows
/// every run, and why last night's failed even when it failed before its first app. Only the
/// commands whose runs are recorded ([`CommandName::is_recorded`]): `doctor`, the preflight,
/// writes no row, so that it needs no write grant. `store` is the archive the run was given.
pub(crate) async fn note_run_level(
    db: &Db,
    spec: &'static TableSpec,
    summary: &Summary,
    started_at_ms: i64,
    store: Option<&str>,
) {
    if !needs_run_level_row(summary) || db.require_tables(spec).await.is_err() {
        return;
    }
    let outcome = match summary.exit_code {
        0 => Outcome::Done,
        130 => Outcome::Stopped,
        _ => Outcome::Failed,
    };
    let store = summary.store.as_deref().or(store);
    let record = Record {
        app: "",
        command: summary.command,
        outcome,
        // The apps' own rows count their batches and rows; this one says the error.
        batches: 0,
        rows: 0,
        error: summary.error.as_deref(),
        started_at_ms,
        finished_at_ms: super::system_clock()(),
        run_id: summary.run_id,
        store,
        stop_reason: summary.stop_reason.as_ref(),
        dry_run: summary.dry_run.unwrap_or(false),
        findings: None,
    };
    Runs::new(&db.pool, spec).note(&record).await;
}

/// Whether a run needs the row of the whole command ([`note_run_level`]).
pub(crate) fn needs_run_level_row(summary: &Summary) -> bool {
    summary.command.is_recorded() && (summary.apps.is_empty() || summary.error.is_some())
}
