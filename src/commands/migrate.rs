//! `migrate` — makes the archiver's own tables for `--table` (wallet_outbox: applies
//! `migrations/`; another table: creates them from its spec, `db::owned`); with
//! `--with-source-table` also creates the reference source table, for demos and tests.

use crate::db::{self, Db};
use crate::summary::Summary;
use crate::table::{OwnedBy, TableSpec};

#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    pub with_source_table: bool,
}

pub async fn run(db: &Db, spec: &'static TableSpec, opts: &MigrateOptions) -> Summary {
    let mut summary = Summary::new("migrate");
    summary.table = Some(spec.name.to_string());
    if opts.with_source_table && !spec.is_builtin() {
        summary.error = Some("--with-source-table creates a built-in table's reference source table; a profile describes a table the service already has (create it first, then migrate --table-profile)".into());
        return summary.settle();
    }
    let result = async {
        match spec.owned_by {
            OwnedBy::Migrations => db::migrate(&db.pool).await?,
            OwnedBy::Spec => db::owned::create_owned_tables(&db.pool, spec).await?,
        }
        if opts.with_source_table {
            db::create_source_table(&db.pool, spec).await?;
        }
        Ok::<_, db::DbError>(())
    }
    .await;
    if let Err(e) = result {
        summary.error = Some(e.to_string());
    }
    summary.settle()
}
