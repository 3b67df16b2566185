//! `attest` — the auditor's statement for a period ([`crate::pipeline::attest`]): every app in
//! scope through the driver, each app's period proven in its log (inclusion and consistency proofs); printed
//! as canonical JSON or CSV when every app's period is whole, refused (exit 1, each app's
//! finding named in the summary) when any is not. A statement that names batches whose latest
//! check found them other than recorded is printed, and exits 1 naming them.

use std::collections::BTreeSet;

use crate::model::command::CommandName;
use crate::model::timespec;
use crate::pipeline::apps::{self, Apps, Driver, Gate, Population};
use crate::pipeline::attest::{self, Attest, Period};
use crate::pipeline::report::statement::Statement;
use crate::pipeline::report::{Document, Summary};
use crate::pipeline::RunContext;

pub use crate::output::statement::canonical;

#[derive(Debug, Clone)]
pub struct AttestOptions {
    pub apps: Apps,
    /// The first and last UTC day, `YYYY-MM-DD`.
    pub from: String,
    pub to: String,
    /// The previous statement, whose checkpoints each log must have grown from.
    pub previous: Option<std::path::PathBuf>,
}

impl AttestOptions {
    /// The period the days span; an error names a bad day, a reversed range, or a last day
    /// that has not ended by `now_ms` (a statement of a day still being archived would change).
    pub(crate) fn period(&self, now_ms: i64) -> Result<Period, String> {
        let from_ms = timespec::parse_day_ms(&self.from).map_err(|e| format!("--from: {e}"))?;
        let to_ms = timespec::parse_day_ms(&self.to).map_err(|e| format!("--to: {e}"))?;
        if to_ms < from_ms {
            return Err(format!(
                "--to {} is before --from {}: the period runs from its first day to its last, both included",
                self.to, self.from
            ));
        }
        let until_ms = to_ms + 86_400_000;
        if until_ms > now_ms {
            return Err(format!(
                "--to {} has not ended yet (now is {}): a statement covers whole UTC days that are over",
                self.to,
                timespec::rfc3339(now_ms)
            ));
        }
        Ok(Period { from_ms, until_ms })
    }
}

pub async fn run(ctx: &RunContext, opts: &AttestOptions) -> Summary {
    let mut summary = Summary::new(CommandName::Attest);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    let period = match opts.period(ctx.now()) {
        Ok(period) => period,
        Err(e) => return summary.could_not_start(e),
    };
    let population = Population::Receipts(Default::default());
    let mut apps = match apps::resolve(ctx, &opts.apps, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    if matches!(opts.apps, Apps::All) {
        if let Err(e) = apps::add_logged(ctx, &mut apps).await {
            return summary.without_apps(e);
        }
    }
    let previous = match &opts.previous {
        None => Default::default(),
        Some(path) => match attest::previous_heads(path, ctx.spec.name) {
            Ok(heads) => heads,
            Err(e) => return summary.could_not_start(e),
        },
    };
    let work = Attest::new(ctx, period, previous);
    let driver = Driver::new(ctx, CommandName::Attest, Gate::Open).noting_runs();
    summary.apps = driver.run(apps, &work).await;
    let (parts, refusals) = work.into_parts();
    let failed = summary.apps.iter().any(|a| a.error.is_some());
    if refusals.is_empty() && !failed {
        let statement = attest::statement(
            ctx.spec,
            &ctx.store.location().to_string(),
            &opts.from,
            &opts.to,
            ctx.now(),
            parts,
        );
        summary.error = unresolved_error(&statement);
        summary.document = Some(Document::Statement(Box::new(statement)));
    }
    summary.settle()
}

/// A statement that names batches whose latest check found them other than recorded is
/// printed, and the run fails (exit 1) saying which and what to do: it must not pass unnoticed.
fn unresolved_error(statement: &Statement) -> Option<String> {
    let named = &statement.batches_with_unresolved_findings;
    if named.is_empty() {
        return None;
    }
    let ids: BTreeSet<&str> = named.iter().map(|b| b.batch_id.as_str()).collect();
    let listed: Vec<String> = named
        .iter()
        .map(|b| {
            format!(
                "{} batch {} (checked {}: {})",
                b.app_code,
                b.batch_id,
                b.found_at,
                b.kinds.join(", ")
            )
        })
        .collect();
    Some(format!(
        "the statement names {} batch(es) whose latest check found them other than recorded, \
         and does not vouch for them: {}; repair the objects (README, \"Recovering from a \
         finding\") and run `outbox-archiver verify --batch-id {}`: a statement made after a \
         full verify that finds a batch whole vouches for it again",
        named.len(),
        listed.join("; "),
        ids.into_iter().collect::<Vec<_>>().join(",")
    ))
}
