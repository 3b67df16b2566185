//! `migrate` — makes the archiver's own tables for `--table` ([`crate::pipeline::migrate`]:
//! wallet_outbox's by applying `migrations/`, another table's from its spec); with
//! `--with-source-table` also the reference source table, for demos and tests.

use crate::db::Db;
use crate::model::command::CommandName;
use crate::model::table::TableSpec;
use crate::pipeline::migrate::migrate;
use crate::pipeline::report::{RunDetails, Summary};

#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    pub with_source_table: bool,
}

pub async fn run(db: &Db, spec: &'static TableSpec, opts: &MigrateOptions) -> Summary {
    let mut summary = Summary::new(CommandName::Migrate);
    summary.table = Some(spec.name.to_string());
    if opts.with_source_table && !spec.is_builtin() {
        summary.error = Some("--with-source-table creates a built-in table's reference source table; a profile describes a table the service already has (create it first, then migrate --table-profile)".into());
        return summary.settle();
    }
    let (run, error) = migrate(db, spec, opts.with_source_table).await;
    summary.error = error.map(|e| e.to_string());
    summary.details = Some(RunDetails::Migrate(run));
    summary.settle()
}
