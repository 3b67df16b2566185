//! What an archive run settles once, before its apps: the columns archived so far recorded (a
//! profile's table), the store probed for write-once, the built-in table's columns its format has
//! no key for read — and what stops the run from starting its apps.

use super::ArchiveOptions;
use crate::model::unarchived::Unarchived;
use crate::pipeline::publish::probe_write_once;
use crate::pipeline::RunContext;
use crate::store::ConditionalPut;

/// What an archive run settles once, before its apps: the store's answer to create-only puts,
/// and the built-in table's columns its format has no key for.
pub(crate) struct Prepared {
    pub conditional_put: Option<ConditionalPut>,
    pub unarchived: Unarchived,
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
/// columns archived so far (a profile's table), probes the store for write-once, reads the
/// columns a built-in table's format has no key for — rows are archived only while each holds
/// its default — and warns of them.
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
    let unarchived = ctx
        .db
        .unarchived(ctx.spec)
        .await
        .map_err(|e| Unprepared::WithoutApps(e.to_string(), conditional_put))?;
    if !unarchived.is_empty() {
        tracing::warn!(
            table = ctx.spec.name,
            columns = unarchived
                .columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            "the table has columns its built-in format has no key for: rows are archived only while each holds its default (describe the table with --table-profile to archive them)"
        );
    }
    Ok(Prepared {
        conditional_put,
        unarchived,
    })
}
