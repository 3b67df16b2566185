//! `status` — per app, where it stands ([`crate::pipeline::status`]): as JSON, or as a table on
//! a terminal, drawn from the typed report.

use crate::model::command::CommandName;
use crate::pipeline::apps::{self, Apps, Driver, Gate, Population};
use crate::pipeline::report::details::StatusApp;
use crate::pipeline::report::{AppDetails, AppReport, Summary};
use crate::pipeline::status::Status;
use crate::pipeline::DbContext;

/// How `status` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Clone)]
pub struct StatusOptions {
    pub apps: Apps,
    pub cutoff_ms: i64,
    /// Purge's `--grace`, to tell rows purge takes next from rows that still wait.
    pub grace_ms: i64,
    pub delivered_status: String,
    pub format: Format,
}

pub async fn run(ctx: &DbContext, opts: &StatusOptions) -> Summary {
    let mut summary = Summary::new(CommandName::Status);
    summary.table = Some(ctx.spec.name.to_string());
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let apps = match apps::resolve(ctx, &opts.apps, &Population::SourceAndReceipts).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    let status = Status::new(ctx, opts.cutoff_ms, opts.grace_ms, &opts.delivered_status);
    let driver = Driver::new(ctx, CommandName::Status, Gate::Open);
    summary.apps = driver.run(apps, &status).await;
    if opts.format == Format::Table {
        summary.text = Some(table(&summary.apps, (ctx.now_ms)()));
    }
    summary.settle()
}

fn age(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    let s = ms / 1000;
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if s < 7200 => format!("{}m", s / 60),
        _ if s < 172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

const COLUMNS: [&str; 9] = [
    "APP",
    "CURSOR AGE",
    "ARCHIVED",
    "AWAITING PURGE",
    "BACKLOG",
    "OLDEST BACKLOG",
    "LAST ARCHIVE",
    "LAST PURGE",
    "LAST DRILL",
];

/// A run as a table cell: its outcome and how long ago, and the start of its error.
fn run_cell(run: Option<&crate::db::runs::Run>, now: i64) -> String {
    let Some(r) = run else { return "-".into() };
    let mut cell = format!("{} {} ago", r.outcome, age(Some(now - r.finished_at_ms)));
    if let Some(error) = &r.error {
        let short: String = error.chars().take(60).collect();
        let more = if error.chars().count() > 60 {
            "…"
        } else {
            ""
        };
        cell.push_str(&format!(": {short}{more}"));
    }
    cell
}

/// One app's line of the table. Every age is in one format (`59s`, `60m`, `24h`, `8d`).
fn line(app: &AppReport, now: i64) -> Vec<String> {
    let error = app.error.as_deref().map(|e| format!("error: {e}"));
    let Some(AppDetails::Status(s)) = &app.details else {
        let mut cells = vec![app.app_code.clone()];
        cells.extend((1..COLUMNS.len() - 1).map(|_| "-".to_string()));
        cells.push(error.unwrap_or_default());
        return cells;
    };
    let s: &StatusApp = s;
    let drill = s.last_good_drill.as_ref().map_or("-".to_string(), |d| {
        format!("ok {} ago", age(Some(now - d.drilled_at_ms)))
    });
    let awaiting = match (s.awaiting_purge_in_grace_rows, s.purge_eligible_from_ms) {
        (0, _) => s.awaiting_purge_eligible_rows.to_string(),
        (wait, Some(at)) => format!(
            "{} (+{wait} in grace, from {})",
            s.awaiting_purge_eligible_rows,
            match at - now {
                left if left > 0 => format!("in {}", age(Some(left))),
                _ => "now".into(),
            }
        ),
        (wait, None) => format!("{} (+{wait} in grace)", s.awaiting_purge_eligible_rows),
    };
    vec![
        app.app_code.clone(),
        age(s.cursor_age_ms),
        s.archived_rows.to_string(),
        awaiting,
        s.backlog_rows.to_string(),
        age(s.oldest_backlog_age_ms),
        error.unwrap_or_else(|| run_cell(s.last_run.as_ref(), now)),
        run_cell(s.last_purge.as_ref(), now),
        drill,
    ]
}

/// The human view: one line per app.
fn table(apps: &[AppReport], now: i64) -> String {
    let mut lines = vec![COLUMNS.map(str::to_string).to_vec()];
    lines.extend(apps.iter().map(|app| line(app, now)));
    let widths: Vec<usize> = (0..COLUMNS.len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::age;

    #[test]
    fn ages() {
        assert_eq!(age(None), "-");
        assert_eq!(age(Some(59_000)), "59s");
        assert_eq!(age(Some(3_600_000)), "60m");
        assert_eq!(age(Some(86_400_000)), "24h");
        assert_eq!(age(Some(8 * 86_400_000)), "8d");
    }
}
