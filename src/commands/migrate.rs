//! `migrate` — makes the archiver's own tables for `--table` ([`crate::pipeline::migrate`]:
//! wallet_outbox's by applying `migrations/`, another table's from its spec); with
//! `--with-source-table` also the reference source table, for demos and tests, and with
//! `--seed-rows` a trial's rows in it.

use crate::db::Db;
use crate::model::command::CommandName;
use crate::model::table::TableSpec;
use crate::pipeline::migrate::migrate;
use crate::pipeline::report::{RunDetails, Summary};
use crate::testkit::seed::{seed, SeedPlan};

#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    pub with_source_table: bool,
    /// Synthetic rows to put into the source table, which must be empty.
    pub seed_rows: Option<u64>,
}

pub async fn run(db: &Db, spec: &'static TableSpec, opts: &MigrateOptions) -> Summary {
    let mut summary = Summary::new(CommandName::Migrate);
    summary.table = Some(spec.name.to_string());
    if opts.with_source_table && !spec.is_builtin() {
        summary.error = Some("--with-source-table creates a built-in table's reference source table; a profile describes a table the service already has (create it first, then migrate --table-profile)".into());
        return summary.settle();
    }
    if opts.seed_rows.is_some() && !spec.is_builtin() {
        summary.error = Some("--seed-rows makes rows of a built-in table (wallet_outbox, room_outbox); a profile's table is the service's own".into());
        return summary.settle();
    }
    // A table that holds rows is refused before anything is done (exit 2).
    if opts.seed_rows.is_some() {
        if let Err(e) = only_empty(db, spec).await {
            return Summary::unusable(CommandName::Migrate, e);
        }
    }
    let (mut run, error) = migrate(db, spec, opts.with_source_table).await;
    if let Some(e @ crate::db::DbError::NewerLayout { .. }) = &error {
        return Summary::unusable(CommandName::Migrate, e.to_string());
    }
    let mut error = error.map(|e| e.to_string());
    if let (None, Some(rows)) = (&error, opts.seed_rows) {
        match seed_trial(db, spec, rows).await {
            Ok(apps) => {
                run.seeded_rows = rows;
                run.seeded_apps = apps;
            }
            Err(e) => error = Some(e),
        }
    }
    summary.error = error;
    summary.details = Some(RunDetails::Migrate(run));
    summary.settle()
}

/// Refuses a source table that holds a row: a real outbox must never get an invented one. A
/// table not made yet (`--with-source-table` makes it) is empty.
async fn only_empty(db: &Db, spec: &TableSpec) -> Result<(), String> {
    let tables = db.existing_tables().await.map_err(|e| e.to_string())?;
    if !tables.iter().any(|t| t == spec.name) {
        return Ok(());
    }
    if db
        .source_holds_rows(spec)
        .await
        .map_err(|e| e.to_string())?
    {
        return Err(format!(
            "--seed-rows fills only an empty table, and {} holds rows already: nothing was done (seed a trial database, or run `outbox-archiver demo`, which makes its own)",
            spec.name
        ));
    }
    Ok(())
}

/// Fills the source table, found empty by [`only_empty`] before the migration, with a trial's
/// rows. Returns the apps seeded.
async fn seed_trial(db: &Db, spec: &TableSpec, rows: u64) -> Result<Vec<String>, String> {
    let plan = SeedPlan::trial(rows, chrono::Utc::now().timestamp_millis());
    seed(&db.pool, spec, &plan)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(rows, table = spec.name, apps = ?plan.apps, "seeded synthetic rows");
    Ok(plan.apps)
}
