//! `migrate` — makes the archiver's own tables for `--table` (wallet_outbox: applies
//! `migrations/`; another table: creates them from its spec, `db::owned`); with
//! `--with-source-table` also creates the reference source table, for demos and tests.

use crate::db::{self, Db};
use crate::model::command::CommandName;
use crate::model::table::{OwnedBy, TableSpec};
use crate::pipeline::report::details::MigrateRun;
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
    let tables_before = db.existing_tables().await.unwrap_or_default();
    let applied_before = db.applied_migrations().await.unwrap_or_default();
    let result = async {
        match spec.owned_by {
            OwnedBy::Migrations => db::migrate(&db.pool).await?,
            OwnedBy::Spec => db::owned::create_owned_tables(&db.pool, spec).await?,
        }
        if opts.with_source_table {
            db::create_source_table(&db.pool, spec).await?;
        }
        // The genesis: receipts recorded before the chain get their links, in record order.
        db::chain::ChainTable::new(spec).backfill(&db.pool).await
    }
    .await;
    let chain_linked = match result {
        Ok(linked) => linked,
        Err(e) => {
            summary.error = Some(e.to_string());
            0
        }
    };
    if chain_linked > 0 {
        tracing::info!(
            receipts = chain_linked,
            "linked the receipts recorded before the chain into their apps' chains, from the genesis in the order they were recorded"
        );
    }
    // What this run changed, said, so a first run and a no-op rerun do not look alike.
    let applied: Vec<String> = db
        .applied_migrations()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|m| !applied_before.contains(m))
        .collect();
    let created: Vec<String> = db
        .existing_tables()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !tables_before.contains(t))
        .collect();
    for migration in &applied {
        tracing::info!(migration, "applied");
    }
    if !created.is_empty() {
        tracing::info!(tables = created.join(", "), "created");
    }
    if applied.is_empty() && created.is_empty() && chain_linked == 0 && summary.error.is_none() {
        tracing::info!("nothing to do: every migration was applied already");
    }
    summary.details = Some(RunDetails::Migrate(MigrateRun {
        applied,
        created,
        chain_linked,
    }));
    summary.settle()
}
