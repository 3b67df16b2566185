//! The summary as a person reads it on a terminal: what the command did in a few lines, each
//! app on one, the findings and errors in full. Programs get the JSON (`--format json`, or
//! stdout not a terminal), which has everything; this leaves out the lists a person would not
//! read (batch lists, superseded rows) and says how to get them.

use std::fmt::Write as _;
use std::time::Duration;

use crate::model::human::{seconds, thousands};
use crate::model::timespec;
use crate::pipeline::report::details::{FindRun, PurgeApp, RestoreApp, VerifyRun};
use crate::pipeline::report::{AppDetails, AppReport, Ending, Outcome, RunDetails, Summary};
use crate::pipeline::verifier::Finding;

/// At most this many apps, findings or rows are listed; the rest are counted.
const LIST: usize = 20;

/// `summary` as a few lines of text, `elapsed` being how long the command took.
pub(crate) fn render(summary: &Summary, elapsed: Duration) -> String {
    let mut out = String::new();
    let reason = summary.stop_reason.as_ref();
    let verdict = match (summary.exit_code, reason) {
        (0, _) => "ok".to_string(),
        // A clean stop: what was in flight finished, and the next run resumes.
        (130, _) => "stopped by Ctrl-C (exit 130; the next run resumes)".to_string(),
        // What a command that looks found, or that it could not look.
        (code @ (1 | 2), Some(said)) if said.is_verdict() => format!("{said} (exit {code})"),
        (1, _) if has_findings(summary) => "FINDINGS (exit 1)".to_string(),
        (code, _) => format!("FAILED (exit {code})"),
    };
    // Why a clean run ended, when it is news (a limit, a signal); a failed one's apps say why.
    let reason = match reason {
        Some(reason) if summary.exit_code == 0 && *reason != Ending::Done => {
            format!(" ({reason})")
        }
        _ => String::new(),
    };
    let dry_run = match summary.dry_run == Some(true) {
        true => " DRY RUN, nothing written:",
        false => "",
    };
    let _ = writeln!(
        out,
        "{}:{dry_run} {verdict}{reason} in {}",
        summary.command,
        seconds(elapsed)
    );
    if let Some(error) = &summary.error {
        let _ = writeln!(out, "error: {error}");
    }
    apps(&mut out, &summary.apps);
    run_lists(&mut out, summary);
    let _ = writeln!(
        out,
        "run {}; every detail: --format json (or OUTBOX_ARCHIVER_FORMAT=json)",
        summary.run_id
    );
    out
}

/// The findings an app's line lists: purge's and compact's (verify's are the run's).
fn app_findings(app: &AppReport) -> &[Finding] {
    match &app.details {
        Some(AppDetails::Purge(p)) => &p.findings,
        Some(AppDetails::Compact(c)) => &c.findings,
        _ => &[],
    }
}

fn has_findings(summary: &Summary) -> bool {
    matches!(&summary.details, Some(RunDetails::Verify(v)) if !v.findings.is_empty())
        || summary.apps.iter().any(|a| !app_findings(a).is_empty())
}

/// One line per app: outcome, batches, rows, and what the command has to say of it.
fn apps(out: &mut String, apps: &[AppReport]) {
    if apps.is_empty() {
        return;
    }
    let width = apps
        .iter()
        .take(LIST)
        .map(|a| a.app_code.len())
        .max()
        .unwrap_or(3)
        .max(3);
    let _ = writeln!(
        out,
        "  {:width$}  {:14} {:>8} {:>12}",
        "app", "outcome", "batches", "rows"
    );
    for app in apps.iter().take(LIST) {
        let notes = app_notes(app);
        let _ = writeln!(
            out,
            "  {:width$}  {:14} {:>8} {:>12}{}",
            app.app_code,
            app.outcome.as_str(),
            thousands(app.batches),
            thousands(app.rows),
            match notes.is_empty() {
                true => String::new(),
                false => format!("  {}", notes.join("; ")),
            }
        );
        for finding in app_findings(app).iter().take(LIST) {
            let _ = writeln!(out, "    finding: {}", finding_text(finding));
        }
    }
    if apps.len() > LIST {
        let _ = writeln!(out, "  … and {} more apps", apps.len() - LIST);
    }
}

/// What an app's line says beyond its counts: what its command has to say, then why it
/// stopped (a run that did not fail) and its error.
fn app_notes(app: &AppReport) -> Vec<String> {
    let mut notes = app.details.as_ref().map(details_notes).unwrap_or_default();
    if app.outcome != Outcome::Failed {
        if let Some(reason) = app.stop_reason.as_ref().filter(|r| **r != Ending::Done) {
            notes.push(reason.to_string());
        }
    }
    if let Some(error) = &app.error {
        notes.push(format!("error: {error}"));
    }
    notes
}

/// What a command says of an app, from its own fields.
fn details_notes(details: &AppDetails) -> Vec<String> {
    match details {
        AppDetails::Archive(a) => {
            let mut notes = backlog_note(a.backlog.map(|b| b.backlog_rows));
            if a.kept_rows_archived_again > 0 {
                notes.push(format!(
                    "{} kept rows archived again as they are now",
                    thousands(a.kept_rows_archived_again)
                ));
            }
            notes
        }
        AppDetails::Status(s) => {
            let mut notes = backlog_note(Some(s.backlog_rows));
            for (reason, rows) in &s.kept_by_reason {
                notes.push(format!(
                    "{} rows kept by purge ({reason}), archived again by the next archive run",
                    thousands(*rows)
                ));
            }
            notes
        }
        AppDetails::Verify(v) => match v.stragglers {
            0 => Vec::new(),
            n => vec![format!("{n} stragglers")],
        },
        AppDetails::Purge(p) => purge_notes(p),
        AppDetails::Compact(c) => {
            let mut notes: Vec<String> = c
                .would_compact_member_rows
                .map(|n| format!("would compact {} member rows", thousands(n)))
                .into_iter()
                .collect();
            counted(&mut notes, "failed batches", c.failed_batches.len());
            counted(&mut notes, "pending thaw", c.pending_thaw.len());
            notes
        }
        AppDetails::Restore(r) => restore_notes(r),
        AppDetails::Recover(r) => {
            let mut notes = vec![format!(
                "{} batches ({} rows) recorded again from the store",
                r.recovered_batches,
                thousands(r.recovered_rows)
            )];
            counted(
                &mut notes,
                "of them purged already",
                r.already_purged_batches as usize,
            );
            counted(&mut notes, "leaves taken", r.taken_leaves as usize);
            notes
        }
    }
}

/// Rows still to archive, where there are some.
fn backlog_note(rows: Option<i64>) -> Vec<String> {
    rows.filter(|&n| n > 0)
        .map(|n| format!("{} rows still to archive", thousands(n as u64)))
        .into_iter()
        .collect()
}

/// `{n} {what}`, where there are some.
fn counted(notes: &mut Vec<String>, what: &str, n: usize) {
    if n > 0 {
        notes.push(format!("{n} {what}"));
    }
}

fn purge_notes(p: &PurgeApp) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(n) = p.would_purge_rows {
        notes.push(format!("would purge {} rows", thousands(n)));
    }
    if p.in_grace_rows > 0 {
        let from = p
            .eligible_from_ms
            .map(|ms| format!(", purgeable from {}", timespec::rfc3339(ms)))
            .unwrap_or_default();
        notes.push(format!(
            "{} rows in --grace{from}",
            thousands(p.in_grace_rows)
        ));
    }
    counted(&mut notes, "failed batches", p.failed_batches.len());
    counted(&mut notes, "waiting for the log", p.waiting_for_log.len());
    counted(&mut notes, "kept changed", p.kept_changed.len());
    notes
}

fn restore_notes(r: &RestoreApp) -> Vec<String> {
    let mut notes = Vec::new();
    if r.already_present_rows > 0 {
        notes.push(format!(
            "{} rows already there",
            thousands(r.already_present_rows)
        ));
    }
    if let Some(drills) = &r.drills {
        let failed = drills.iter().filter(|d| !d.ok).count();
        notes.push(format!("{} drills, {failed} failed", drills.len()));
    }
    counted(&mut notes, "failed batches", r.failed_batches.len());
    counted(&mut notes, "conflicts", r.conflicts.len());
    counted(&mut notes, "pending thaw", r.pending_thaw.len());
    notes
}

fn finding_text(f: &Finding) -> String {
    let mut text = f.kind.label();
    if let Some(batch) = &f.batch_id {
        let _ = write!(text, " batch {batch}");
    }
    if let Some(key) = &f.key {
        let _ = write!(text, " at {key}");
    }
    if let Some(event) = &f.event_id {
        let _ = write!(text, " (event {event})");
    }
    if let (Some(e), Some(a)) = (&f.expected, &f.actual) {
        let _ = write!(text, ": expected {e}, found {a}");
    }
    text
}

/// The run's own lists: findings, orphans, rows found, migrations applied, planned purges.
fn run_lists(out: &mut String, summary: &Summary) {
    match &summary.details {
        Some(RunDetails::Verify(run)) => verify_lists(out, run),
        Some(RunDetails::Find(run)) => find_lists(out, run),
        Some(RunDetails::Migrate(run)) => {
            match run.applied.is_empty() {
                true => {
                    let _ = writeln!(out, "applied no migration: the schema is up to date");
                }
                false => {
                    for m in &run.applied {
                        let _ = writeln!(out, "applied {m}");
                    }
                }
            }
            if run.seeded_rows > 0 {
                let _ = writeln!(
                    out,
                    "seeded {} synthetic rows over the last 30 days, apps {} (most delivered)",
                    thousands(run.seeded_rows),
                    run.seeded_apps.join(", ")
                );
            }
        }
        _ => {}
    }
    planned_purges(out, &summary.apps);
    if summary.dry_run == Some(true) {
        planned_batches(out, &summary.apps);
    }
}

/// verify's: the batches checked, the findings, the orphan objects.
fn verify_lists(out: &mut String, run: &VerifyRun) {
    let sample = run
        .sample
        .map(|s| {
            format!(
                " (a sample of {}% of {}: repeat it with --seed {})",
                serde_json::to_string(&s.percent).unwrap_or_default(),
                thousands(s.of),
                s.seed
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "checked {} batches{sample}",
        thousands(run.checked_batch_count)
    );
    if !run.findings.is_empty() {
        let _ = writeln!(out, "{} findings:", run.findings.len());
        for f in run.findings.iter().take(LIST) {
            let _ = writeln!(out, "  {}", finding_text(f));
        }
        more(out, run.findings.len());
    }
    keys(
        out,
        "orphan objects (no receipt; an interrupted run leaves them)",
        &run.orphans,
    );
}

/// find's: each row found with where it is kept, the events not found, what was searched.
fn find_lists(out: &mut String, run: &FindRun) {
    for row in run.found.iter().take(LIST) {
        let _ = writeln!(
            out,
            "found {} in app {} batch {} ({} line {}), now {}{}{}",
            row.event_id,
            row.app_code,
            row.batch_id,
            row.key,
            row.line,
            row.now,
            match &row.superseded_by {
                Some(batch) => format!("; batch {batch} holds it now"),
                None => String::new(),
            },
            match row.object_matches_receipt {
                false => " — the object does not match its receipt: run verify",
                true => "",
            }
        );
        let _ = writeln!(out, "  {}", row.row);
    }
    more(out, run.found.len());
    if !run.not_found.is_empty() {
        let ids: Vec<&str> = run
            .not_found
            .iter()
            .map(String::as_str)
            .take(LIST)
            .collect();
        let _ = writeln!(out, "not found: {}", ids.join(", "));
        more(out, run.not_found.len());
    }
    for u in run.could_not_look.iter().take(LIST) {
        let _ = writeln!(
            out,
            "could not look for {} in batch {} ({}): {}",
            u.event_id, u.batch_id, u.key, u.why
        );
    }
    more(out, run.could_not_look.len());
    for row in run.in_source.iter().take(LIST) {
        let _ = writeln!(
            out,
            "  {} is in the source (app {}, status {}, updated {}): {}",
            row.event_id,
            row.app_code,
            row.status,
            timespec::rfc3339(row.updated_at_ms),
            row.why
        );
    }
    if !run.missing_objects.is_empty() {
        let _ = write!(out, "could not read ");
        keys(out, "data objects", &run.missing_objects);
    }
    let _ = writeln!(
        out,
        "searched {} batches ({} compacted)",
        run.searched_batches, run.searched_compacted_batches
    );
}

/// A dry-run purge's: the batches it would purge, across the apps.
fn planned_purges(out: &mut String, apps: &[AppReport]) {
    let planned: Vec<_> = apps
        .iter()
        .filter_map(|a| match &a.details {
            Some(AppDetails::Purge(p)) => Some(&p.would_purge_batches),
            _ => None,
        })
        .flatten()
        .collect();
    if !planned.is_empty() {
        let _ = writeln!(out, "would purge {} batches:", planned.len());
        for b in planned.iter().take(LIST) {
            let _ = writeln!(
                out,
                "  {} {} {:>10} rows",
                b.batch_id,
                b.day,
                thousands(b.rows)
            );
        }
        more(out, planned.len());
    }
}

/// A dry-run archive's: the batches it would write, with their keys and rows.
fn planned_batches(out: &mut String, apps: &[AppReport]) {
    let planned: Vec<_> = apps
        .iter()
        .flat_map(|a| a.batch_list.iter().map(move |b| (a.app_code.as_str(), b)))
        .collect();
    if planned.is_empty() {
        return;
    }
    let _ = writeln!(out, "would write {} batches:", planned.len());
    for (app, b) in planned.iter().take(LIST) {
        let _ = writeln!(
            out,
            "  {app} {} {:>10} rows {:>12} bytes of NDJSON (uncompressed)  {}",
            b.batch_id,
            thousands(b.rows),
            thousands(b.uncompressed_bytes),
            b.data_object_key
        );
    }
    more(out, planned.len());
}

/// `{n} {what}:` and the first keys, one a line; nothing when there are none.
fn keys(out: &mut String, what: &str, keys: &[String]) {
    if keys.is_empty() {
        return;
    }
    let _ = writeln!(out, "{} {what}:", keys.len());
    for key in keys.iter().take(LIST) {
        let _ = writeln!(out, "  {key}");
    }
    more(out, keys.len());
}

fn more(out: &mut String, n: usize) {
    if n > LIST {
        let _ = writeln!(out, "  … and {} more", n - LIST);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::report::{AppReport, Outcome};

    #[test]
    fn an_archive_in_a_few_lines() {
        let mut summary = Summary::new(crate::model::command::CommandName::Archive);
        let mut a1 = AppReport::new("pay-sg", Outcome::Archived);
        a1.batches = 4;
        a1.rows = 33_334;
        let mut a2 = AppReport::new("a2", Outcome::Stopped);
        a2.rows = 20_000;
        a2.batches = 2;
        a2.stop_reason = Some(crate::pipeline::report::Stop::MaxRuntime.into());
        let mut a3 = AppReport::new("a3", Outcome::Failed);
        a3.error = Some("the lock was lost".into());
        summary.apps = vec![a1, a2, a3];
        let summary = summary.settle();
        let text = render(&summary, Duration::from_millis(12_800));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "archive: FAILED (exit 1) in 12.8s");
        assert_eq!(lines[1], "  app     outcome         batches         rows");
        assert_eq!(lines[2], "  pay-sg  archived              4       33,334");
        assert_eq!(
            lines[3],
            "  a2      stopped               2       20,000  --max-runtime reached"
        );
        assert_eq!(
            lines[4],
            "  a3      failed                0            0  error: the lock was lost"
        );
        assert!(lines[5].contains("--format json"), "{text}");
        assert_eq!(lines.len(), 6, "{text}");
    }
}
