//! The auditor's statement (`attest`): per app and UTC day of a period, what was archived —
//! rows, batches, control totals, first and last cursor — and what proves it in the app's log:
//! each batch's inclusion proof in the tree head at the period's end, that head's consistency
//! proofs from the head at the period's start (the previous statement's end) and to the store's
//! checkpoint, signed where a log key is configured (README, "The log of batches"). Per batch
//! too, when it was last verified in full and how, its retention and storage class. An app
//! whose period cannot be proven — a batch not appended yet, a leaf without its receipt, a
//! proof that fails — is not attested. Reads the period's receipts and the tiles on their
//! paths, not the app's history.
//!
//! A batch belongs to the day its receipt was recorded (UTC): the day it entered the archive.
//! The JSON is canonical — keys sorted at every level, no insignificant whitespace, one
//! trailing newline — so the same statement always has the same bytes and hash.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::log::{self, ChainError, Log, PeriodProof};
use crate::db::receipts::Receipts;
use crate::model::chain::{ChainFinding, Problem};
use crate::model::format::TotalValue;
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;
use crate::model::{timespec, tlog};

/// The statement's schema name.
pub(crate) const SCHEMA: &str = "outbox-archive-attestation/v2";

/// The period attested: UTC days `from..=to`.
#[derive(Debug, Clone, Copy)]
pub struct Period {
    pub from_ms: i64,
    /// The first millisecond after the last day.
    pub until_ms: i64,
}

/// Why an app's period is not attested.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub reason: String,
    pub finding: Option<Box<ChainFinding>>,
}

/// One app's period, proven.
struct Proven<'r> {
    folder: String,
    origin: String,
    receipts: &'r [Receipt],
    proof: PeriodProof,
    breaks: Vec<log::LogBreak>,
}

fn cursor(updated_at_ms: i64, event_id: &str) -> Value {
    json!({ "updated_at_ms": updated_at_ms, "event_id": event_id })
}

fn batch(spec: &TableSpec, r: &Receipt, inclusion: &(u64, Vec<tlog::Hash>)) -> Value {
    let c = &r.content;
    let (verified_at, how) = r.last_full_verification();
    let totals: Map<String, Value> = spec
        .totals
        .iter()
        .zip(&c.totals)
        .map(|(t, (_, v))| (t.field.to_string(), Value::String(v.to_string())))
        .collect();
    json!({
        "batch_id": r.batch_id,
        "leaf_index": inclusion.0,
        "inclusion_proof": inclusion.1.iter().map(log::hash_text).collect::<Vec<_>>(),
        "recorded_at": timespec::rfc3339(r.life.verified_at_ms),
        "rows": c.row_count,
        "first_cursor": cursor(c.first.updated_at_ms, &c.first.event_id),
        "last_cursor": cursor(c.last.updated_at_ms, &c.last.event_id),
        "totals": totals,
        // The hash the receipt's fields imply: what its leaf binds (its proof passed).
        "manifest_sha256": crate::model::digest::sha256_hex(
            &r.manifest(spec.name)
        ),
        "data_sha256": r.objects.data.sha256,
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

/// One app's days of the period, and the proofs of its log.
fn app_statement(p: &Proven<'_>, spec: &TableSpec, period: &Period) -> Value {
    let inclusions: BTreeMap<&str, &(u64, Vec<tlog::Hash>)> = p
        .receipts
        .iter()
        .map(|r| r.batch_id.as_str())
        .zip(&p.proof.inclusions)
        .collect();
    let mut days: BTreeMap<String, Vec<&Receipt>> = BTreeMap::new();
    for r in p.receipts {
        days.entry(timespec::utc_date(r.life.verified_at_ms))
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
                "batch_list": receipts.iter().map(|r| batch(spec, r, inclusions[r.batch_id.as_str()])).collect::<Vec<_>>(),
            })
        })
        .collect();
    let breaks: Vec<Value> = p
        .breaks
        .iter()
        .filter(|b| b.accepted_at_ms < period.until_ms)
        .map(|b| {
            json!({
                "leaves": b.leaves,
                "reason": b.reason,
                "accepted_at": timespec::rfc3339(b.accepted_at_ms),
            })
        })
        .collect();
    let mut proofs = p.proof.to_json(&p.origin);
    proofs["app_code"] = Value::String(p.folder.clone());
    proofs["entry"] = Value::String(format!(
        "{}\\n{{table}}\\n{{app_code}}\\n{{batch_id}}\\n{{manifest_sha256}}\\n",
        tlog::ENTRY_SCHEMA
    ));
    json!({
        "app_code": p.receipts.first().map_or(p.folder.clone(), |r| r.app_code.clone()),
        "log": proofs,
        "chain_breaks_accepted": breaks,
        "days": days,
    })
}

/// The whole statement, as a value (canonical once encoded by [`canonical`]).
pub(crate) fn statement(
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
            "log_size_at_end",
            "log_root_at_end",
            "log_checkpoint_size",
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
pub(crate) fn csv(spec: &TableSpec, statement: &Value) -> String {
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
        let head = &app["log"];
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
                text(&head["at_end"]["size"]),
                text(&head["at_end"]["root"]),
                text(&head["size"]),
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
pub(crate) struct Attest<'a> {
    ctx: &'a super::RunContext,
    period: Period,
    parts: std::sync::Mutex<Vec<(String, Value)>>,
    refusals: std::sync::Mutex<Vec<Refusal>>,
}

impl<'a> Attest<'a> {
    pub(crate) fn new(ctx: &'a super::RunContext, period: Period) -> Attest<'a> {
        Attest {
            ctx,
            period,
            parts: Default::default(),
            refusals: Default::default(),
        }
    }

    /// Every app's part of the statement (by app code), and the apps refused.
    pub(crate) fn into_parts(self) -> (Vec<Value>, Vec<Refusal>) {
        let mut parts = self.parts.into_inner().expect("not poisoned");
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        (
            parts.into_iter().map(|(_, v)| v).collect(),
            self.refusals.into_inner().expect("not poisoned"),
        )
    }
}

impl Attest<'_> {
    /// The app's period proven in its log, or why it cannot be.
    async fn prove<'r>(
        &self,
        app: &str,
        receipts: &'r [Receipt],
    ) -> Result<Result<Proven<'r>, Refusal>, ChainError> {
        let (ctx, period) = (self.ctx, &self.period);
        let refuse = |reason: String, finding: Option<ChainFinding>| Refusal {
            reason,
            finding: finding.map(Box::new),
        };
        if let Some(r) = receipts.iter().find(|r| r.log_index.is_none()) {
            return Ok(Err(refuse(format!("batch {} is not appended to the log yet: the next `outbox-archiver archive` of the app appends it", r.batch_id), None)));
        }
        let log = Log::open(ctx, app).await?;
        let table = Receipts::new(ctx.spec);
        let before = |until| table.last_leaf_before(&ctx.db.pool, app, until);
        let first = receipts.iter().filter_map(|r| r.log_index).min();
        let last = receipts.iter().filter_map(|r| r.log_index).max();
        let start = before(period.from_ms).await?.map_or(0, |i| i + 1);
        let start = first.map_or(start, |f| f.min(start));
        let end = match last {
            Some(l) => l + 1,
            None => before(period.until_ms).await?.map_or(0, |i| i + 1),
        }
        .max(start);
        // Every leaf of the period is one of its receipts, or accepted as gone.
        let breaks = log.breaks().await?;
        let accepted: BTreeSet<u64> = breaks
            .iter()
            .flat_map(|b| b.leaves.iter().map(|(i, _)| *i))
            .collect();
        let ours: BTreeSet<u64> = receipts.iter().filter_map(|r| r.log_index).collect();
        if let Some(gap) = (start..end).find(|i| !ours.contains(i) && !accepted.contains(i)) {
            let finding = ChainFinding {
                problem: Problem::Gap,
                seq: Some(gap),
                batch_id: None,
                expected: format!("a receipt of the period for leaf {gap}"),
                actual: "the database has none (removed, or lost in a restore)".into(),
            };
            return Ok(Err(refuse(format!("leaf {gap}, within the period's leaves {start}..{end}, has no receipt recorded in the period"), Some(finding))));
        }
        Ok(match log::prove_period(&log, receipts, start, end).await? {
            Ok(proof) => Ok(Proven {
                folder: log.folder.clone(),
                origin: log.origin.clone(),
                receipts,
                proof,
                breaks,
            }),
            Err(finding) => Err(refuse(
                "its log does not prove the period".into(),
                Some(finding),
            )),
        })
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
        let period = &self.period;
        let receipts = match Receipts::new(self.ctx.spec)
            .recorded_in(&self.ctx.db.pool, app, period.from_ms, period.until_ms)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                report.fail(&e);
                return report;
            }
        };
        match self.prove(app, &receipts).await {
            Err(e) => report.fail(&e),
            Ok(Ok(proven)) => {
                let part = app_statement(&proven, self.ctx.spec, period);
                report.batches = receipts.len() as u64;
                report.rows = receipts.iter().map(|r| r.content.row_count).sum();
                self.parts
                    .lock()
                    .expect("not poisoned")
                    .push((app.to_string(), part));
            }
            Ok(Err(refusal)) => {
                report.outcome = super::report::Outcome::Failed;
                report.error = Some(match &refusal.finding {
                    Some(f) => format!(
                        "not attested: {} — {} at leaf {}: expected {}, found {}",
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
