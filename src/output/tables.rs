//! The tables a person reads on a terminal, drawn from the typed reports: `status` (one line
//! per app), `history` (one line per run, what it said under it) and `doctor` (one line per
//! check, its fix under it). Every age is in one format (`59s`, `60m`, `24h`, `8d`).

use std::fmt::Write as _;

use crate::db::runs::{Run, FINDINGS_KEPT};
use crate::model::timespec;
use crate::pipeline::doctor::{DoctorRun, Status};
use crate::pipeline::report::details::StatusApp;
use crate::pipeline::report::{AppDetails, AppReport};

/// An age in whole seconds, minutes, hours or days: `59s`, `60m`, `24h`, `8d`.
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

/// Rows of cells as columns: each as wide as its widest cell, two spaces apart, no trailing
/// blanks.
fn columns(lines: &[Vec<String>]) -> String {
    let n = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..n)
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

const STATUS_COLUMNS: [&str; 9] = [
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

/// `status`: one line per app, at `now`.
pub(crate) fn status(apps: &[AppReport], now: i64) -> String {
    let mut lines = vec![STATUS_COLUMNS.map(str::to_string).to_vec()];
    lines.extend(apps.iter().map(|app| status_line(app, now)));
    columns(&lines)
}

/// A run as a table cell: its outcome and how long ago, and the start of its error.
fn run_cell(run: Option<&Run>, now: i64) -> String {
    let Some(r) = run else { return "-".into() };
    let mut cell = format!("{} {} ago", r.outcome, age(Some(now - r.finished_at_ms)));
    if let Some(error) = &r.error {
        let short: String = error.chars().take(60).collect();
        let more = if error.chars().count() > 60 {
            "…"
        } else {
            ""
        };
        let _ = write!(cell, ": {short}{more}");
    }
    cell
}

/// One app's line of the status table.
fn status_line(app: &AppReport, now: i64) -> Vec<String> {
    let error = app.error.as_deref().map(|e| format!("error: {e}"));
    let Some(AppDetails::Status(s)) = &app.details else {
        let mut cells = vec![app.app_code.clone()];
        cells.extend((1..STATUS_COLUMNS.len() - 1).map(|_| "-".to_string()));
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
            "{} (+{wait} in grace, {})",
            s.awaiting_purge_eligible_rows,
            match at - now {
                left if left > 0 => format!("purgeable in {}", age(Some(left))),
                _ => "purgeable now".into(),
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

/// `history`: one line per run — when it ended, what, which app, how, how much, how long —
/// then its store, why it ended where that is news, its error and what it found.
pub(crate) fn history(runs: &[Run], now: i64) -> String {
    if runs.is_empty() {
        return "no run recorded yet\n".into();
    }
    let mut out = String::new();
    for r in runs {
        let took = (r.finished_at_ms - r.started_at_ms).max(0) as f64 / 1000.0;
        let _ = writeln!(
            out,
            "{}  {:<8} {:<14} {:<20} {:>9} rows {:>5} batches {:>7.1}s ({} ago){}",
            timespec::rfc3339(r.finished_at_ms),
            r.command,
            if r.app_code.is_empty() {
                "(run)"
            } else {
                r.app_code.as_str()
            },
            if r.dry_run {
                format!("{} (dry run)", r.outcome)
            } else {
                r.outcome.to_string()
            },
            r.row_count,
            r.batches,
            took,
            age(Some((now - r.finished_at_ms).max(0))),
            r.run_id
                .as_deref()
                .map(|id| format!("  run {id}"))
                .unwrap_or_default(),
        );
        if let Some(store) = &r.store {
            let _ = writeln!(out, "    store: {store}");
        }
        if let Some(reason) = r.stop_reason.0.as_ref().filter(|r| !r.is_plain()) {
            let _ = writeln!(out, "    ended: {reason}");
        }
        if let Some(error) = &r.error {
            let _ = writeln!(out, "    error: {error}");
        }
        out.push_str(&findings(r));
        out.push_str(&recorded_versions(r));
    }
    out
}

/// The object versions a run recorded anew: how many, and the first few with their old and
/// new identity and the hash their bytes were held to.
fn recorded_versions(run: &Run) -> String {
    let Some(recorded) = &run.recorded_versions else {
        return String::new();
    };
    let mut out = format!(
        "    recorded the object versions of {} batches, each read in full and proven to hold the archived bytes:\n",
        recorded.count
    );
    let none = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
    for v in recorded.first.iter().take(5) {
        let _ = writeln!(
            out,
            "      {} batch {} ({}): data version {} -> {}, ETag {} -> {}; gzip sha256 {}",
            v.app_code,
            v.batch_id,
            v.cause,
            none(&v.old_data_version_id),
            none(&v.new_data_version_id),
            none(&v.old_data_etag),
            none(&v.new_data_etag),
            v.gzip_sha256,
        );
    }
    if recorded.count > 5 {
        let _ = writeln!(
            out,
            "      … and {} more (history --format json lists the first {FINDINGS_KEPT})",
            recorded.count - 5,
        );
    }
    out
}

/// The findings a run recorded: how many, and the first few, one a line.
fn findings(run: &Run) -> String {
    let Some(recorded) = run.recorded_findings() else {
        return String::new();
    };
    let mut out = format!("    {} findings:\n", recorded.count);
    for f in recorded.first.iter().take(5) {
        let what = [
            f.kind.as_deref(),
            f.batch_id.as_deref(),
            f.event_id.as_deref(),
        ];
        let words: Vec<&str> = what.into_iter().flatten().collect();
        let _ = writeln!(out, "      {}", words.join(" "));
    }
    if recorded.count > 5 {
        let _ = writeln!(
            out,
            "      … and {} more (history --format json lists the first {FINDINGS_KEPT})",
            recorded.count - 5,
        );
    }
    out
}

/// `doctor`: one line per check, the fix under it, then the tally.
pub(crate) fn doctor(run: &DoctorRun) -> String {
    let width = run.checks.iter().map(|c| c.check.len()).max().unwrap_or(5);
    let mut out = String::new();
    for check in &run.checks {
        let status = match check.status {
            Status::Ok => "ok",
            Status::Warning => "WARNING",
            Status::Problem => "PROBLEM",
        };
        let _ = writeln!(out, "{status:<8} {:<width$}  {}", check.check, check.detail);
        if let Some(fix) = &check.fix {
            let _ = writeln!(out, "{:<8} {:<width$}  fix: {fix}", "", "");
        }
    }
    let count = |s: Status| run.checks.iter().filter(|c| c.status == s).count();
    let _ = write!(
        out,
        "\n{} ok, {} warnings, {} problems\n",
        count(Status::Ok),
        count(Status::Warning),
        count(Status::Problem)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        assert_eq!(age(None), "-");
        assert_eq!(age(Some(59_000)), "59s");
        assert_eq!(age(Some(3_600_000)), "60m");
        assert_eq!(age(Some(86_400_000)), "24h");
        assert_eq!(age(Some(8 * 86_400_000)), "8d");
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let lines = vec![
            vec!["APP".to_string(), "ROWS".into(), "".into()],
            vec!["pay-sg".to_string(), "1".into(), "".into()],
        ];
        assert_eq!(columns(&lines), "APP     ROWS\npay-sg  1\n");
    }
}
