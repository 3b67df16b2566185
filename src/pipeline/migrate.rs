//! `migrate`'s work: the archiver's own tables for a table — wallet_outbox's through the
//! `migrations/` history, a profile's from its spec (`db::owned`) — the reference source table
//! where asked, and the genesis of the receipts' chain; then what the run changed, said, so a
//! first run and a no-op rerun do not look alike.

use crate::db::{self, Db, DbError};
use crate::model::table::{OwnedBy, TableSpec};
use crate::pipeline::report::details::MigrateRun;

/// Makes `spec`'s owned tables (and, `with_source_table`, its reference source table); returns
/// what changed, and the error that stopped it, if one did.
pub(crate) async fn migrate(
    db: &Db,
    spec: &'static TableSpec,
    with_source_table: bool,
) -> (MigrateRun, Option<DbError>) {
    let tables_before = db.existing_tables().await.unwrap_or_default();
    let applied_before = db.applied_migrations().await.unwrap_or_default();
    let result = async {
        // A layout a newer build migrated to is refused before anything changes (SPEC §20):
        // this build's migrations would not know the newer ones.
        if let Some(layout) = db.layout(spec).await? {
            layout.held(spec)?;
        }
        match spec.owned_by {
            OwnedBy::Migrations => db::migrate(&db.pool).await?,
            OwnedBy::Spec => db::owned::create_owned_tables(&db.pool, spec).await?,
        }
        db.sign_layout(spec, crate::pipeline::system_clock()())
            .await?;
        if with_source_table {
            db::create_source_table(&db.pool, spec).await?;
        }
        // The genesis: receipts recorded before the chain get their links, in record order.
        db::receipts::Receipts::new(&db.pool, spec).backfill().await
    }
    .await;
    let (numbered, error) = match result {
        Ok(linked) => (linked, None),
        Err(e) => (0, Some(e)),
    };
    if numbered > 0 {
        tracing::info!(
            receipts = numbered,
            "numbered the receipts an older build recorded in their apps' record order (their links from the genesis)"
        );
    }
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
    if applied.is_empty() && created.is_empty() && numbered == 0 && error.is_none() {
        tracing::info!("nothing to do: every migration was applied already");
    }
    let run = MigrateRun {
        applied,
        created,
        numbered: crate::pipeline::report::log_fields::Numbered(numbered),
        ..MigrateRun::default()
    };
    (run, error)
}
