//! What an archive run settles once, before its apps: the columns archived so far recorded, the
//! store probed for write-once, the table held to the run's description of it (every stored
//! column archived) — and what stops the run from starting its apps.

use super::ArchiveOptions;
use crate::model::batch_columns::SharedColumns;
use crate::pipeline::publish::probe_write_once;
use crate::pipeline::RunContext;
use crate::store::ConditionalPut;

/// What an archive run settles once, before its apps: the store's answer to create-only puts,
/// and the source table's definition when its columns were found to be the run's.
pub(crate) struct Prepared {
    pub conditional_put: Option<ConditionalPut>,
    pub definition: String,
    /// The batches' columns as the table holds them: what each manifest names.
    pub columns: SharedColumns,
}

/// Why an archive run did not start its apps.
pub(crate) enum Unprepared {
    /// A setting the store refuses (the conditional-put header): exit 2.
    Unusable(String),
    /// The run could not record or probe what it must (exit 1).
    Failed(String),
    /// The table's columns could not be read: the apps could not be worked (the store's answer
    /// to create-only puts, where it was probed, is still said).
    WithoutApps(String, Option<ConditionalPut>),
}

/// Prepares an archive run of `apps` (none: nothing to prepare but the columns): records the
/// columns archived so far, probes the store for write-once, and holds the table to the run's
/// description of it — every stored column is archived (SPEC §4): a table described without one
/// (a column added since the run started) archives nothing.
pub(crate) async fn prepare(
    ctx: &RunContext,
    opts: &ArchiveOptions,
    apps: &[String],
) -> Result<Prepared, Unprepared> {
    let mut conditional_put = None;
    if !opts.dry_run && !apps.is_empty() {
        ctx.db
            .record_archived_columns(ctx.spec, ctx.now())
            .await
            .map_err(|e| Unprepared::Failed(e.to_string()))?;
        let dropped = ctx
            .db
            .record_dropped_columns(ctx.spec, ctx.now())
            .await
            .map_err(|e| Unprepared::Failed(e.to_string()))?;
        for column in dropped {
            tracing::warn!(
                table = ctx.spec.name,
                column,
                "column {column} was dropped from {}: the batches that hold it keep its values and are read by their own columns; a restore into a table without it names it (--without-column {column})",
                ctx.spec.name
            );
        }
        conditional_put = probe_write_once(ctx).await.map_err(|e| {
            let error = format!(
                "probing whether the store refuses create-only puts (If-None-Match): {e} \
                 (a store that rejects the header: set --s3-conditional-put false)"
            );
            match e.is_configuration() {
                true => Unprepared::Unusable(error),
                false => Unprepared::Failed(error),
            }
        })?;
    }
    let without_apps =
        |e: crate::db::DbError| Unprepared::WithoutApps(e.to_string(), conditional_put);
    // The definition first: a column added after it is found by the check before any receipt.
    let definition = crate::db::definition(&ctx.db.pool, ctx.spec.name)
        .await
        .map_err(without_apps)?;
    ctx.db
        .check_columns_unchanged(ctx.spec)
        .await
        .map_err(without_apps)?;
    let columns = ctx.db.batch_columns(ctx.spec).await.map_err(without_apps)?;
    Ok(Prepared {
        conditional_put,
        definition,
        columns,
    })
}
