//! The auditor's statement as printed: canonical JSON — keys sorted at every level, no
//! insignificant whitespace, one trailing newline, so the same statement always has the same
//! bytes and hash — or CSV, one line per app and day (RFC 4180 quoting), both from the typed
//! [`Statement`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::pipeline::report::statement::{
    AppStatement, BatchStatement, DayStatement, Statement, UnresolvedBatch,
};

/// The statement as canonical JSON.
pub(crate) fn json(statement: &Statement) -> String {
    canonical(&serde_json::to_value(statement).expect("a statement always serialises"))
}

/// Canonical JSON of any value: keys sorted at every level, compact, one trailing newline (what
/// an auditor's edited statement is hashed as again).
pub fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let entries: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                let mut out = Map::new();
                for (k, v) in entries {
                    out.insert(k.clone(), v);
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let mut text = serde_json::to_string(&sorted(value)).expect("a value always serialises");
    text.push('\n');
    text
}

/// The CSV's columns: the day's figures, one column per summed total, the log and the checks
/// (the batches whose latest check found them other than recorded last).
fn csv_header(sums: &[&str]) -> Vec<String> {
    let mut header: Vec<String> = [
        "app_code",
        "day",
        "rows",
        "batches",
        "first_updated_at_ms",
        "first_event_id",
        "last_updated_at_ms",
        "last_event_id",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(sums.iter().map(|s| s.to_string()));
    header.extend(
        [
            "log_size_at_end",
            "log_root_at_end",
            "log_checkpoint_size",
            "oldest_full_verification",
            "verified_how",
            "earliest_retain_until",
            "storage_classes",
            "unresolved_findings",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    header
}

/// The statement as CSV: one line per app and day.
pub(crate) fn csv(statement: &Statement) -> String {
    let mut out = String::new();
    line(&mut out, &csv_header(&statement.sums));
    for app in &statement.apps {
        let log = &app.log;
        for day in &app.days {
            let batches = &day.batch_list;
            let joined = |f: &dyn Fn(&BatchStatement) -> String| {
                let set: BTreeSet<String> = batches.iter().map(f).collect();
                set.into_iter().collect::<Vec<_>>().join("+")
            };
            let mut row = vec![
                app.app_code.clone(),
                day.day.clone(),
                day.rows.to_string(),
                day.batches.to_string(),
                day.first_cursor.updated_at_ms.to_string(),
                day.first_cursor.event_id.clone(),
                day.last_cursor.updated_at_ms.to_string(),
                day.last_cursor.event_id.clone(),
            ];
            row.extend(
                statement
                    .sums
                    .iter()
                    .map(|s| day.totals.get(*s).cloned().unwrap_or_default()),
            );
            row.extend([
                log.at_end.size.to_string(),
                log.at_end.root.clone(),
                log.size.to_string(),
                batches
                    .iter()
                    .map(|b| b.last_full_verification.at.clone())
                    .filter(|t| !t.is_empty())
                    .min()
                    .unwrap_or_default(),
                joined(&|b| b.last_full_verification.how.clone()),
                batches
                    .iter()
                    .filter_map(|b| b.retention.as_ref().map(|r| r.retain_until.clone()))
                    .min()
                    .unwrap_or_default(),
                joined(&|b| b.storage_class.clone()),
                unresolved(&statement.batches_with_unresolved_findings, app, day),
            ]);
            line(&mut out, &row);
        }
    }
    out
}

/// The day's batches whose latest check found them other than recorded, with what it found:
/// `BATCH: kind, kind; BATCH: kind` (empty when the statement vouches for every batch).
fn unresolved(named: &[UnresolvedBatch], app: &AppStatement, day: &DayStatement) -> String {
    named
        .iter()
        .filter(|b| b.app_code == app.app_code && b.day == day.day)
        .map(|b| format!("{}: {}", b.batch_id, b.kinds.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn line(out: &mut String, fields: &[String]) {
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| {
            if f.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.clone()
            }
        })
        .collect();
    out.push_str(&quoted.join(","));
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let v = json!({"b": 1, "a": {"d": [ {"z": 1, "y": 2} ], "c": null}});
        assert_eq!(
            canonical(&v),
            "{\"a\":{\"c\":null,\"d\":[{\"y\":2,\"z\":1}]},\"b\":1}\n"
        );
    }

    #[test]
    fn csv_fields_are_quoted_when_they_must_be() {
        let mut out = String::new();
        line(&mut out, &["a".into(), "b,c".into(), "say \"hi\"".into()]);
        assert_eq!(out, "a,\"b,c\",\"say \"\"hi\"\"\"\r\n");
    }
}
