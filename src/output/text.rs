//! The summary as a person reads it on a terminal: what the command did in a few lines, each
//! app on one, the findings and errors in full. Programs get the JSON (`--format json`, or
//! stdout not a terminal), which has everything; this leaves out the lists a person would not
//! read (batch lists, superseded rows) and says how to get them.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use crate::model::human::{seconds, thousands};
use crate::pipeline::report::Summary;

/// At most this many apps, findings or rows are listed; the rest are counted.
const LIST: usize = 20;

/// `summary` as a few lines of text, `elapsed` being how long the command took.
pub(crate) fn render(summary: &Summary, elapsed: Duration) -> String {
    let json = serde_json::to_value(summary).expect("a summary always serialises");
    let mut out = String::new();
    let reason = summary.stop_reason.as_deref();
    let verdict = match (summary.exit_code, reason) {
        (0, _) => "ok".to_string(),
        // A clean stop: what was in flight finished, and the next run resumes.
        (130, _) => "stopped by Ctrl-C (exit 130; the next run resumes)".to_string(),
        (1, Some(said @ ("not found" | "problems found"))) => format!("{said} (exit 1)"),
        (2, Some(said)) if said.starts_with("could not") => format!("{said} (exit 2)"),
        (1, _) if has_findings(&json) => "FINDINGS (exit 1)".to_string(),
        (code, _) => format!("FAILED (exit {code})"),
    };
    // Why a clean run ended, when it is news (a limit, a signal); a failed one's apps say why.
    let reason = match reason {
        Some(reason) if summary.exit_code == 0 && reason != "done" => format!(" ({reason})"),
        _ => String::new(),
    };
    let dry_run = match json.get("dry_run") == Some(&Value::Bool(true)) {
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
    apps(&mut out, &json);
    run_lists(&mut out, &json);
    let _ = writeln!(
        out,
        "run {}; every detail: --format json (or OUTBOX_ARCHIVER_FORMAT=json)",
        summary.run_id
    );
    out
}

fn has_findings(json: &Value) -> bool {
    let listed = |v: &Value| {
        v.get("findings")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    };
    listed(json)
        || json
            .get("apps")
            .and_then(Value::as_array)
            .is_some_and(|apps| apps.iter().any(listed))
}

fn number(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_u64).unwrap_or(0)
}

/// One line per app: outcome, batches, rows, and what the command has to say of it.
fn apps(out: &mut String, json: &Value) {
    let Some(apps) = json.get("apps").and_then(Value::as_array) else {
        return;
    };
    if apps.is_empty() {
        return;
    }
    let width = apps
        .iter()
        .take(LIST)
        .filter_map(|a| a["app_code"].as_str())
        .map(str::len)
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
            app["app_code"].as_str().unwrap_or("?"),
            app["outcome"].as_str().unwrap_or("?"),
            thousands(number(app.get("batches"))),
            thousands(number(app.get("rows"))),
            match notes.is_empty() {
                true => String::new(),
                false => format!("  {}", notes.join("; ")),
            }
        );
        for finding in app
            .get("findings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(LIST)
        {
            let _ = writeln!(out, "    finding: {}", finding_text(finding));
        }
    }
    if apps.len() > LIST {
        let _ = writeln!(out, "  … and {} more apps", apps.len() - LIST);
    }
}

/// What an app's line says beyond its counts, from the command's own fields.
fn app_notes(app: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    let rows = |key: &str| app.get(key).and_then(Value::as_u64);
    if let Some(n) = rows("would_purge_rows") {
        notes.push(format!("would purge {} rows", thousands(n)));
    }
    if let Some(n) = rows("would_compact_member_rows") {
        notes.push(format!("would compact {} member rows", thousands(n)));
    }
    if let Some(n) = rows("in_grace_rows").filter(|&n| n > 0) {
        let from = app
            .get("eligible_from_ms")
            .and_then(Value::as_i64)
            .map(|ms| format!(", purgeable from {}", crate::model::timespec::rfc3339(ms)))
            .unwrap_or_default();
        notes.push(format!("{} rows in --grace{from}", thousands(n)));
    }
    if let Some(n) = rows("backlog_rows").filter(|&n| n > 0) {
        notes.push(format!("{} rows still to archive", thousands(n)));
    }
    if let Some(n) = rows("already_present_rows").filter(|&n| n > 0) {
        notes.push(format!("{} rows already there", thousands(n)));
    }
    if let Some(n) = rows("stragglers").filter(|&n| n > 0) {
        notes.push(format!("{n} stragglers"));
    }
    if let Some(drills) = app.get("drills").and_then(Value::as_array) {
        let failed = drills.iter().filter(|d| d["ok"] == false).count();
        notes.push(format!("{} drills, {failed} failed", drills.len()));
    }
    for key in [
        "failed_batches",
        "kept_changed",
        "conflicts",
        "pending_thaw",
    ] {
        if let Some(n) = app.get(key).and_then(Value::as_array).map(Vec::len) {
            if n > 0 {
                notes.push(format!("{n} {}", key.replace('_', " ")));
            }
        }
    }
    if app["outcome"] != "failed" {
        if let Some(reason) = app.get("stop_reason").and_then(Value::as_str) {
            if reason != "done" {
                notes.push(reason.to_string());
            }
        }
    }
    if let Some(error) = app.get("error").and_then(Value::as_str) {
        notes.push(format!("error: {error}"));
    }
    notes
}

fn finding_text(f: &Value) -> String {
    let mut text = f["kind"].as_str().unwrap_or("finding").to_string();
    if let Some(batch) = f.get("batch_id").and_then(Value::as_str) {
        let _ = write!(text, " batch {batch}");
    }
    if let Some(key) = f.get("key").and_then(Value::as_str) {
        let _ = write!(text, " at {key}");
    }
    if let Some(event) = f.get("event_id").and_then(Value::as_str) {
        let _ = write!(text, " (event {event})");
    }
    if let (Some(e), Some(a)) = (
        f.get("expected").and_then(Value::as_str),
        f.get("actual").and_then(Value::as_str),
    ) {
        let _ = write!(text, ": expected {e}, found {a}");
    }
    text
}

/// The run's own lists: findings, orphans, rows found, migrations applied, planned purges.
fn run_lists(out: &mut String, json: &Value) {
    verify_lists(out, json);
    find_lists(out, json);
    migrate_list(out, json);
    planned_purges(out, json);
    planned_batches(out, json);
}

fn list<'a>(json: &'a Value, key: &str) -> Option<&'a Vec<Value>> {
    json.get(key).and_then(Value::as_array)
}

/// verify's: the batches checked, the findings, the orphan objects.
fn verify_lists(out: &mut String, json: &Value) {
    let list = |key: &str| list(json, key);
    if let Some(checked) = json.get("checked_batch_count").and_then(Value::as_u64) {
        let sample = json
            .get("sample")
            .filter(|s| !s.is_null())
            .map(|s| {
                format!(
                    " (a sample of {}% of {}: repeat it with --seed {})",
                    s["percent"],
                    thousands(number(s.get("of"))),
                    s["seed"]
                )
            })
            .unwrap_or_default();
        let _ = writeln!(out, "checked {} batches{sample}", thousands(checked));
    }
    if let Some(findings) = list("findings").filter(|f| !f.is_empty()) {
        let _ = writeln!(out, "{} findings:", findings.len());
        for f in findings.iter().take(LIST) {
            let _ = writeln!(out, "  {}", finding_text(f));
        }
        more(out, findings.len());
    }
    if let Some(orphans) = list("orphans").filter(|o| !o.is_empty()) {
        let _ = writeln!(
            out,
            "{} orphan objects (no receipt; an interrupted run leaves them):",
            orphans.len()
        );
        for key in orphans.iter().take(LIST) {
            let _ = writeln!(out, "  {}", key.as_str().unwrap_or("?"));
        }
        more(out, orphans.len());
    }
}

/// find's: each row found with where it is kept, the events not found, what was searched.
fn find_lists(out: &mut String, json: &Value) {
    let list = |key: &str| list(json, key);
    if let Some(found) = list("found") {
        for row in found.iter().take(LIST) {
            let _ = writeln!(
                out,
                "found {} in app {} batch {} ({} line {}), now {}{}",
                row["event_id"].as_str().unwrap_or("?"),
                row["app_code"].as_str().unwrap_or("?"),
                row["batch_id"].as_str().unwrap_or("?"),
                row["key"].as_str().unwrap_or("?"),
                row["line"],
                row["now"].as_str().unwrap_or("?"),
                match row["object_matches_receipt"] == false {
                    true => " — the object does not match its receipt: run verify",
                    false => "",
                }
            );
            let _ = writeln!(out, "  {}", row["row"]);
        }
        more(out, found.len());
        if let Some(missing) = list("not_found").filter(|m| !m.is_empty()) {
            let ids: Vec<&str> = missing
                .iter()
                .filter_map(Value::as_str)
                .take(LIST)
                .collect();
            let _ = writeln!(out, "not found: {}", ids.join(", "));
            more(out, missing.len());
        }
        for row in list("in_source").into_iter().flatten().take(LIST) {
            let _ = writeln!(
                out,
                "  {} is in the source (app {}, status {}, updated {}): {}",
                row["event_id"].as_str().unwrap_or("?"),
                row["app_code"].as_str().unwrap_or("?"),
                row["status"].as_str().unwrap_or("?"),
                row["updated_at_ms"]
                    .as_i64()
                    .map(crate::model::timespec::rfc3339)
                    .unwrap_or_default(),
                row["why"].as_str().unwrap_or("?")
            );
        }
        if let Some(missing) = list("missing_objects").filter(|m| !m.is_empty()) {
            let _ = writeln!(out, "could not read {} data objects:", missing.len());
            for key in missing.iter().take(LIST) {
                let _ = writeln!(out, "  {}", key.as_str().unwrap_or("?"));
            }
            more(out, missing.len());
        }
        let _ = writeln!(
            out,
            "searched {} batches ({} compacted)",
            number(json.get("searched_batches")),
            number(json.get("searched_compacted_batches"))
        );
    }
}

/// migrate's: the migrations applied.
fn migrate_list(out: &mut String, json: &Value) {
    if let Some(applied) = list(json, "applied") {
        match applied.is_empty() {
            true => {
                let _ = writeln!(out, "applied no migration: the schema is up to date");
            }
            false => {
                for m in applied {
                    let _ = writeln!(out, "applied {}", m.as_str().unwrap_or("?"));
                }
            }
        }
    }
}

/// A dry-run purge's: the batches it would purge, across the apps.
fn planned_purges(out: &mut String, json: &Value) {
    let planned: Vec<&Value> = json
        .get("apps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("would_purge_batches").and_then(Value::as_array))
        .flatten()
        .collect();
    if !planned.is_empty() {
        let _ = writeln!(out, "would purge {} batches:", planned.len());
        for b in planned.iter().take(LIST) {
            let _ = writeln!(
                out,
                "  {} {} {:>10} rows",
                b["batch_id"].as_str().unwrap_or("?"),
                b["day"].as_str().unwrap_or("?"),
                thousands(number(b.get("rows")))
            );
        }
        more(out, planned.len());
    }
}

/// A dry-run archive's: the batches it would write, with their keys and rows.
fn planned_batches(out: &mut String, json: &Value) {
    if json.get("dry_run") != Some(&Value::Bool(true)) {
        return;
    }
    let planned: Vec<(&str, &Value)> = json
        .get("apps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|a| {
            let app = a["app_code"].as_str().unwrap_or("?");
            a.get("batch_list")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(move |b| (app, b))
        })
        .collect();
    if planned.is_empty() {
        return;
    }
    let _ = writeln!(out, "would write {} batches:", planned.len());
    for (app, b) in planned.iter().take(LIST) {
        let _ = writeln!(
            out,
            "  {app} {} {:>10} rows {:>12} bytes  {}",
            b["batch_id"].as_str().unwrap_or("?"),
            thousands(number(b.get("rows"))),
            thousands(number(b.get("uncompressed_bytes"))),
            b["data_object_key"].as_str().unwrap_or("?")
        );
    }
    more(out, planned.len());
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
        a2.stop_reason = Some("--max-runtime reached".into());
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
