//! The auditor's statement (`attest`): per app and UTC day of a period, what was archived —
//! rows, batches, control totals, first and last cursor — with the app's chain head at the
//! period's end and the checkpoint that anchors it, and per batch when it was last verified in
//! full and how, its retention and storage class. Built from the receipts and the store's
//! checkpoints once [`super::chain::audit`] found that they agree; an app whose chain has a
//! problem up to the period's end, or whose batches of the period are not all anchored, is not
//! attested.
//!
//! A batch belongs to the day its receipt was recorded (UTC): the day it entered the archive.
//! The JSON is canonical — keys sorted at every level, no insignificant whitespace, one
//! trailing newline — so the same statement always has the same bytes and hash.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::db::receipts::StoredReceipt;
use crate::model::chain::{Anchored, Audit, ChainFinding};
use crate::model::format::TotalValue;
use crate::model::table::TableSpec;
use crate::model::timespec;

/// The statement's schema name.
pub const SCHEMA: &str = "outbox-archive-attestation/v1";

/// One app's chain and receipts, audited.
#[derive(Debug, Clone)]
pub struct AppChain {
    pub app_code: String,
    pub audit: Audit,
    pub receipts: Vec<StoredReceipt>,
    pub anchored: Vec<Anchored>,
}

/// The period attested: UTC days `from..=to`.
#[derive(Debug, Clone, Copy)]
pub struct Period {
    pub from_ms: i64,
    /// The first millisecond after the last day.
    pub until_ms: i64,
}

/// Why an app's period is not attested.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub app_code: String,
    pub reason: String,
    pub finding: Option<Box<ChainFinding>>,
}

/// The app's receipts recorded within the period, in chain order.
fn in_period<'a>(chain: &'a AppChain, period: &Period) -> Vec<&'a StoredReceipt> {
    let mut out: Vec<&StoredReceipt> = chain
        .receipts
        .iter()
        .filter(|r| (period.from_ms..period.until_ms).contains(&r.verified_at_ms))
        .collect();
    out.sort_by_key(|r| r.chain.as_ref().map_or(u64::MAX, |(seq, _)| *seq));
    out
}

/// The head of the app's chain at the period's end: its last link recorded before then.
fn head_at_end<'a>(chain: &'a AppChain, period: &Period) -> Option<&'a StoredReceipt> {
    chain
        .receipts
        .iter()
        .filter(|r| r.verified_at_ms < period.until_ms && r.chain.is_some())
        .max_by_key(|r| r.chain.as_ref().map(|(seq, _)| *seq))
}

/// Whether the app's period can be attested: no chain problem up to its head at the period's
/// end, every batch of the period linked and anchored.
pub fn check(chain: &AppChain, period: &Period) -> Result<(), Refusal> {
    let refuse = |reason: String, finding: Option<ChainFinding>| Refusal {
        app_code: chain.app_code.clone(),
        reason,
        finding: finding.map(Box::new),
    };
    // Up to the head at the period's end — or further, to the last seq the store anchors: a
    // database that lost its last receipts has an earlier head, and the loss must not pass.
    let head = head_at_end(chain, period).map_or(0, |r| r.chain.as_ref().map_or(0, |(s, _)| *s));
    let bound = head.max(chain.audit.store_head);
    if let Some(problem) = chain.audit.first_problem_to(bound) {
        return Err(refuse(
            format!(
                "its chain has a problem at or before seq {bound} (the head at the period's end, or the last seq the store anchors)"
            ),
            Some(problem.clone()),
        ));
    }
    for r in in_period(chain, period) {
        let seq = r.chain.as_ref().map(|(seq, _)| *seq);
        if !chain.audit.is_sound(seq) {
            let why = match seq {
                Some(seq) => format!("batch {} (seq {seq}) is not anchored in the store yet: the next `outbox-archiver archive` of the app anchors it", r.batch_id),
                None => format!("batch {} is not linked into the chain: run `outbox-archiver migrate`", r.batch_id),
            };
            return Err(refuse(why, None));
        }
    }
    Ok(())
}

/// The key of the checkpoint that anchors `seq` with `link`.
fn anchored_in<'a>(chain: &'a AppChain, seq: u64, link: &str) -> Option<&'a str> {
    chain.anchored.iter().find_map(|a| {
        let c = a.checkpoint.as_ref().ok()?;
        c.links
            .iter()
            .any(|l| l.seq == seq && l.link == link)
            .then_some(a.key.as_str())
    })
}

fn cursor(updated_at_ms: i64, event_id: &str) -> Value {
    json!({ "updated_at_ms": updated_at_ms, "event_id": event_id })
}

/// How a batch was last verified in full: by verify, or the archive's own read-back.
fn last_full_verification(r: &StoredReceipt) -> (i64, String) {
    match &r.full_verified {
        Some((at, how)) if *at >= r.verified_at_ms => (*at, format!("verify ({how})")),
        _ => (
            r.verified_at_ms,
            format!("archive ({})", r.protection.verified_by.as_str()),
        ),
    }
}

fn batch(chain: &AppChain, spec: &TableSpec, r: &StoredReceipt) -> Value {
    let c = &r.content;
    let (seq, link) = r.chain.clone().unwrap_or_default();
    let (verified_at, how) = last_full_verification(r);
    let totals: Map<String, Value> = spec
        .totals
        .iter()
        .zip(&c.totals)
        .map(|(t, (_, v))| (t.field.to_string(), Value::String(v.to_string())))
        .collect();
    json!({
        "batch_id": r.batch_id,
        "seq": seq,
        "link": link,
        "anchored_in": anchored_in(chain, seq, &link),
        "recorded_at": timespec::rfc3339(r.verified_at_ms),
        "rows": c.row_count,
        "first_cursor": cursor(c.first.updated_at_ms, &c.first.event_id),
        "last_cursor": cursor(c.last.updated_at_ms, &c.last.event_id),
        "totals": totals,
        "manifest_sha256": r.manifest_sha256,
        "data_sha256": r.data.sha256,
        "data_object_key": r.keys.data,
        "last_full_verification": { "at": timespec::rfc3339(verified_at), "how": how },
        "retention": r.protection.lock.map(|l| json!({
            "mode": l.mode.as_str(),
            "retain_until": timespec::rfc3339(l.retain_until_ms),
        })),
        "legal_hold": r.protection.legal_hold,
        "storage_class": r.protection.storage_class.clone().unwrap_or_else(|| "STANDARD".into()),
    })
}

/// One app's days of the period, and its chain head at the period's end.
pub fn app_statement(chain: &AppChain, spec: &TableSpec, period: &Period) -> Value {
    let receipts = in_period(chain, period);
    // The period's seqs: consecutive statements must join (one's last + 1 is the next's first).
    let seqs: Vec<u64> = receipts
        .iter()
        .filter_map(|r| r.chain.as_ref().map(|(s, _)| *s))
        .collect();
    let mut days: BTreeMap<String, Vec<&StoredReceipt>> = BTreeMap::new();
    for r in receipts {
        days.entry(timespec::utc_date(r.verified_at_ms))
            .or_default()
            .push(r);
    }
    let days: Vec<Value> = days
        .into_iter()
        .map(|(day, receipts)| {
            let mut sums: BTreeMap<&str, i128> = BTreeMap::new();
            for r in &receipts {
                for (t, (_, v)) in spec.totals.iter().zip(&r.content.totals) {
                    if let TotalValue::Sum(n) = v {
                        // An i128 of i64 sums: overflow would take 2^64 batches.
                        let sum = sums.entry(t.field).or_insert(0);
                        *sum = sum.checked_add(*n).expect("a day's total fits in an i128");
                    }
                }
            }
            let first = receipts
                .iter()
                .map(|r| &r.content.first)
                .min_by(|a, b| (a.updated_at_ms, &a.event_id).cmp(&(b.updated_at_ms, &b.event_id)))
                .expect("a day has a batch");
            let last = receipts
                .iter()
                .map(|r| &r.content.last)
                .max_by(|a, b| (a.updated_at_ms, &a.event_id).cmp(&(b.updated_at_ms, &b.event_id)))
                .expect("a day has a batch");
            json!({
                "day": day,
                "rows": receipts.iter().map(|r| r.content.row_count).sum::<u64>(),
                "batches": receipts.len(),
                "totals": sums.into_iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect::<Map<_, _>>(),
                "first_cursor": cursor(first.updated_at_ms, &first.event_id),
                "last_cursor": cursor(last.updated_at_ms, &last.event_id),
                "batch_list": receipts.iter().map(|r| batch(chain, spec, r)).collect::<Vec<_>>(),
            })
        })
        .collect();
    let head = head_at_end(chain, period).and_then(|r| {
        let (seq, link) = r.chain.clone()?;
        Some(json!({
            "seq": seq,
            "link": link,
            "batch_id": r.batch_id,
            "anchored_in": anchored_in(chain, seq, &link),
        }))
    });
    let breaks: Vec<Value> = chain
        .audit
        .breaks
        .iter()
        .filter(|b| b.accepted_at_ms < period.until_ms)
        .map(|b| {
            json!({
                "from_seq": b.from_seq,
                "prev_link": b.prev_link,
                "abandoned_checkpoints": b.abandoned,
                "removed_receipts": b.dropped,
                "reason": b.reason,
                "accepted_at": timespec::rfc3339(b.accepted_at_ms),
            })
        })
        .collect();
    json!({
        "app_code": chain.app_code,
        "chain_head_at_end": head,
        "seqs": { "first": seqs.first(), "last": seqs.last() },
        "chain_breaks_accepted": breaks,
        "days": days,
    })
}

/// The whole statement, as a value (canonical once encoded by [`canonical`]).
pub fn statement(
    spec: &TableSpec,
    store: &str,
    from: &str,
    to: &str,
    generated_at_ms: i64,
    apps: Vec<Value>,
) -> Value {
    json!({
        "schema": SCHEMA,
        "table": spec.name,
        "store": store,
        "from": from,
        "to": to,
        "day_of_a_batch": "the UTC day its receipt was recorded",
        "generated_at": timespec::rfc3339(generated_at_ms),
        "apps": apps,
    })
}

/// Canonical JSON: keys sorted at every level, compact, one trailing newline.
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

/// The CSV's columns: the day's figures, one column per summed total, the chain and the checks.
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
            "chain_head_seq",
            "chain_head_link",
            "chain_head_anchored_in",
            "oldest_full_verification",
            "verified_how",
            "earliest_retain_until",
            "storage_classes",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    header
}

/// The statement as CSV: one line per app and day (RFC 4180 quoting).
pub fn csv(spec: &TableSpec, statement: &Value) -> String {
    let sums: Vec<&str> = spec
        .totals
        .iter()
        .filter(|t| t.kind == crate::model::table::TotalKind::Sum)
        .map(|t| t.field)
        .collect();
    let header = csv_header(&sums);
    let mut out = String::new();
    line(&mut out, &header);
    let empty = Vec::new();
    for app in statement["apps"].as_array().unwrap_or(&empty) {
        let head = &app["chain_head_at_end"];
        for day in app["days"].as_array().unwrap_or(&empty) {
            let batches = day["batch_list"].as_array().unwrap_or(&empty);
            let text = |v: &Value| match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let joined = |f: &dyn Fn(&Value) -> String| {
                let set: std::collections::BTreeSet<String> = batches.iter().map(f).collect();
                set.into_iter().collect::<Vec<_>>().join("+")
            };
            let mut row = vec![
                text(&app["app_code"]),
                text(&day["day"]),
                text(&day["rows"]),
                text(&day["batches"]),
                text(&day["first_cursor"]["updated_at_ms"]),
                text(&day["first_cursor"]["event_id"]),
                text(&day["last_cursor"]["updated_at_ms"]),
                text(&day["last_cursor"]["event_id"]),
            ];
            row.extend(sums.iter().map(|s| text(&day["totals"][*s])));
            row.extend([
                text(&head["seq"]),
                text(&head["link"]),
                text(&head["anchored_in"]),
                batches
                    .iter()
                    .map(|b| text(&b["last_full_verification"]["at"]))
                    .filter(|t| !t.is_empty())
                    .min()
                    .unwrap_or_default(),
                joined(&|b| text(&b["last_full_verification"]["how"])),
                batches
                    .iter()
                    .map(|b| text(&b["retention"]["retain_until"]))
                    .filter(|t| !t.is_empty())
                    .min()
                    .unwrap_or_default(),
                joined(&|b| text(&b["storage_class"])),
            ]);
            line(&mut out, &row);
        }
    }
    out
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

/// `attest`'s work for one app: its chain audited, its period checked, its part of the
/// statement built; the parts gather in [`Attest::into_parts`].
pub struct Attest<'a> {
    ctx: &'a super::RunContext,
    period: Period,
    parts: std::sync::Mutex<Vec<(String, Value)>>,
    refusals: std::sync::Mutex<Vec<Refusal>>,
}

impl<'a> Attest<'a> {
    pub fn new(ctx: &'a super::RunContext, period: Period) -> Attest<'a> {
        Attest {
            ctx,
            period,
            parts: Default::default(),
            refusals: Default::default(),
        }
    }

    /// Every app's part of the statement (by app code), and the apps refused.
    pub fn into_parts(self) -> (Vec<Value>, Vec<Refusal>) {
        let mut parts = self.parts.into_inner().expect("not poisoned");
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        (
            parts.into_iter().map(|(_, v)| v).collect(),
            self.refusals.into_inner().expect("not poisoned"),
        )
    }
}

#[async_trait::async_trait]
impl super::apps::AppWork for Attest<'_> {
    fn start(&self, app: &str) -> super::report::AppReport {
        super::report::AppReport::new(app, super::report::Outcome::Done)
    }

    async fn work(
        &self,
        app: &str,
        _: super::apps::Access<'_>,
        mut report: super::report::AppReport,
    ) -> super::report::AppReport {
        let chain = match super::chain::audit(self.ctx, app).await {
            Ok(chain) => chain,
            Err(e) => {
                report.fail(&e);
                return report;
            }
        };
        match check(&chain, &self.period) {
            Ok(()) => {
                let part = app_statement(&chain, self.ctx.spec, &self.period);
                let receipts = in_period(&chain, &self.period);
                report.batches = receipts.len() as u64;
                report.rows = receipts.iter().map(|r| r.content.row_count).sum();
                self.parts
                    .lock()
                    .expect("not poisoned")
                    .push((app.to_string(), part));
            }
            Err(refusal) => {
                report.outcome = super::report::Outcome::Failed;
                report.error = Some(match &refusal.finding {
                    Some(f) => format!(
                        "not attested: {} — {} at seq {}: expected {}, found {}",
                        refusal.reason,
                        f.problem.kind(),
                        f.seq.map_or("-".into(), |s| s.to_string()),
                        f.expected,
                        f.actual
                    ),
                    None => format!("not attested: {}", refusal.reason),
                });
                self.refusals.lock().expect("not poisoned").push(refusal);
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
