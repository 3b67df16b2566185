//! The auditor's statement (`attest`): per app and UTC day of a period, what was archived —
//! rows, batches, control totals, first and last cursor — and what proves it in the app's log:
//! each batch's inclusion proof in the tree head at the period's end, that head's consistency
//! proofs from the head at the period's start (the previous statement's end) and to the store's
//! checkpoint, signed where a log key is configured (README, "The log of batches"). Per batch
//! too, when it was last verified in full and how, its retention and storage class — and, when
//! its latest check found it other than recorded, what that check found: the statement names
//! such a batch (and lists it) rather than vouch for it. An app
//! whose period cannot be proven — a batch not appended yet, a leaf without its receipt, a
//! proof that fails — is not attested. Reads the period's receipts (each carries its latest
//! check) and the tiles on their paths, not the app's history.
//!
//! A batch belongs to the day its receipt was recorded (UTC): the day it entered the archive.
//! The JSON is canonical — keys sorted at every level, no insignificant whitespace, one
//! trailing newline — so the same statement always has the same bytes and hash.

use std::collections::{BTreeMap, BTreeSet};

use super::apps::{self, Apps, Driver, Gate, Population};
use super::command::Command;
use super::log::{self, Log, LogError, PeriodProof};
use super::report::statement::{
    AcceptedBreak, AppStatement, BatchStatement, DayStatement, FullVerification,
    RetentionStatement, Statement, UnresolvedBatch, UnresolvedFindings, SCHEMA,
};
use super::report::{Document, Summary};
use super::RunContext;
use crate::model::command::CommandName;
use crate::model::format::TotalValue;
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;
use crate::model::{timespec, tlog};
use crate::pipeline::log::finding::{LogFinding, Problem};

/// The period attested: UTC days `from..=to`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Period {
    pub from_ms: i64,
    /// The first millisecond after the last day.
    pub until_ms: i64,
}

/// Why an app's period is not attested.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub reason: String,
    pub finding: Option<Box<LogFinding>>,
}

/// One app's period, proven.
struct Proven<'r> {
    folder: String,
    origin: String,
    receipts: &'r [Receipt],
    proof: PeriodProof,
    breaks: Vec<log::LogBreak>,
    /// The linear chain of an older build the log carries on, if any.
    transition: Option<log::Transition>,
}

fn batch(spec: &TableSpec, r: &Receipt, inclusion: &(u64, Vec<tlog::Hash>)) -> BatchStatement {
    let c = &r.content;
    let (verified_at, how) = r.last_full_verification();
    BatchStatement {
        batch_id: r.batch_id.clone(),
        leaf_index: inclusion.0,
        inclusion_proof: inclusion.1.iter().map(log::hash_text).collect(),
        recorded_at: timespec::rfc3339(r.life.verified_at_ms),
        rows: c.row_count,
        first_cursor: c.first.clone(),
        last_cursor: c.last.clone(),
        totals: spec
            .totals
            .iter()
            .zip(&c.totals)
            .map(|(t, (_, v))| (t.field.to_string(), v.to_string()))
            .collect(),
        manifest_sha256: crate::model::digest::sha256_hex(&r.manifest(spec.name)),
        data_sha256: r.objects.data.sha256.clone(),
        data_object_key: r.keys.data.to_string(),
        last_full_verification: FullVerification {
            at: timespec::rfc3339(verified_at),
            how,
        },
        unresolved_findings: r.unresolved_findings().map(unresolved),
        retention: r.protection.lock.map(|l| RetentionStatement {
            mode: l.mode.as_str(),
            retain_until: timespec::rfc3339(l.retain_until_ms),
        }),
        legal_hold: r.protection.legal_hold,
        storage_class: r
            .protection
            .storage_class
            .clone()
            .unwrap_or_else(|| "STANDARD".into()),
    }
}

/// A batch's unresolved findings as its receipt keeps them (`{"count": n, "first": […]}`, as a
/// run's findings are kept); a text that is not that JSON is named as it is, never dropped.
fn unresolved((found_at, findings): (i64, &str)) -> UnresolvedFindings {
    let recorded: Option<serde_json::Value> = serde_json::from_str(findings).ok();
    let first = recorded
        .as_ref()
        .and_then(|v| v["first"].as_array().cloned())
        .unwrap_or_else(|| vec![serde_json::Value::from(findings)]);
    UnresolvedFindings {
        found_at: timespec::rfc3339(found_at),
        count: recorded
            .as_ref()
            .and_then(|v| v["count"].as_u64())
            .unwrap_or(first.len() as u64),
        first,
    }
}

/// Every batch of `apps` whose latest check found it other than recorded, with its findings'
/// kinds, in the statement's order.
fn unresolved_batches(apps: &[AppStatement]) -> Vec<UnresolvedBatch> {
    let mut out = Vec::new();
    for app in apps {
        for day in &app.days {
            for b in &day.batch_list {
                let Some(found) = &b.unresolved_findings else {
                    continue;
                };
                let kinds: BTreeSet<String> = found
                    .first
                    .iter()
                    .map(|f| f["kind"].as_str().unwrap_or("finding").to_string())
                    .collect();
                out.push(UnresolvedBatch {
                    app_code: app.app_code.clone(),
                    day: day.day.clone(),
                    batch_id: b.batch_id.clone(),
                    found_at: found.found_at.clone(),
                    kinds: kinds.into_iter().collect(),
                });
            }
        }
    }
    out
}

/// One UTC day of an app's period: its receipts' rows, batches, summed totals and range.
fn day(
    spec: &TableSpec,
    day: String,
    receipts: &[&Receipt],
    inclusions: &BTreeMap<&str, &(u64, Vec<tlog::Hash>)>,
) -> DayStatement {
    let mut sums: BTreeMap<&str, i128> = BTreeMap::new();
    for r in receipts {
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
    DayStatement {
        day,
        rows: receipts.iter().map(|r| r.content.row_count).sum(),
        batches: receipts.len(),
        totals: sums
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        first_cursor: first.clone(),
        last_cursor: last.clone(),
        batch_list: receipts
            .iter()
            .map(|r| batch(spec, r, inclusions[r.batch_id.as_str()]))
            .collect(),
    }
}

/// One app's days of the period, and the proofs of its log.
fn app_statement(p: &Proven<'_>, spec: &TableSpec, period: &Period) -> AppStatement {
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
    AppStatement {
        app_code: p
            .receipts
            .first()
            .map_or(p.folder.clone(), |r| r.app_code.clone()),
        log: p.proof.statement(&p.folder, &p.origin),
        chain_breaks_accepted: p
            .breaks
            .iter()
            .filter(|b| b.accepted_at_ms < period.until_ms)
            .map(|b| AcceptedBreak {
                leaves: b.leaves.clone(),
                reason: b.reason.clone(),
                accepted_at: timespec::rfc3339(b.accepted_at_ms),
            })
            .chain(p.transition.iter().flat_map(|t| {
                t.accepted().into_iter().map(|reason| AcceptedBreak {
                    leaves: Vec::new(),
                    reason,
                    accepted_at: timespec::rfc3339(t.at_ms),
                })
            }))
            .collect(),
        days: days
            .into_iter()
            .map(|(d, receipts)| day(spec, d, &receipts, &inclusions))
            .collect(),
    }
}

/// The whole statement of `apps` (their parts, by app code).
pub(crate) fn statement(
    spec: &TableSpec,
    store: &str,
    from: &str,
    to: &str,
    generated_at_ms: i64,
    apps: Vec<AppStatement>,
) -> Statement {
    Statement {
        schema: SCHEMA,
        table: spec.name.to_string(),
        store: store.to_string(),
        from: from.to_string(),
        to: to.to_string(),
        day_of_a_batch: "the UTC day its receipt was recorded",
        generated_at: timespec::rfc3339(generated_at_ms),
        batches_with_unresolved_findings: unresolved_batches(&apps),
        apps,
        sums: spec
            .totals
            .iter()
            .filter(|t| t.kind == crate::model::table::TotalKind::Sum)
            .map(|t| t.field)
            .collect(),
    }
}

/// The previous statement's checkpoints (`attest --previous`), by log folder.
#[derive(Debug, Clone, Default)]
pub(crate) struct Previous {
    file: String,
    checkpoints: BTreeMap<String, String>,
}

impl Previous {
    /// The head the previous statement saw of `log` (none: it did not state the app).
    fn head_of(&self, log: &Log<'_>) -> Result<Option<log::Seen>, String> {
        let Some(note) = self.checkpoints.get(&log.folder) else {
            return Ok(None);
        };
        match crate::model::note::Checkpoint::open(note.as_bytes(), &log.origin, &[]) {
            Ok(c) => Ok(Some(log::Seen {
                size: c.size,
                root: c.root,
                source: format!("the previous statement {}", self.file),
            })),
            Err(e) => Err(format!(
                "the previous statement {}'s checkpoint of log {}: {e}",
                self.file, log.folder
            )),
        }
    }
}

/// Reads the previous statement at `path`: a statement of `table`, its checkpoint per log.
pub(crate) fn previous_heads(path: &std::path::Path, table: &str) -> Result<Previous, String> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("--previous {file}: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!("--previous {file}: not a statement attest printed (not JSON: {e})")
    })?;
    let schema = value["schema"].as_str().unwrap_or_default();
    if !schema.starts_with("outbox-archive-attestation/") {
        return Err(format!(
            "--previous {file}: not a statement attest printed (schema {schema:?})"
        ));
    }
    if value["table"].as_str() != Some(table) {
        return Err(format!(
            "--previous {file}: a statement of table {}, not {table}",
            value["table"]
        ));
    }
    let mut checkpoints = BTreeMap::new();
    for app in value["apps"].as_array().into_iter().flatten() {
        let log = &app["log"];
        match (log["app_code"].as_str(), log["checkpoint"].as_str()) {
            (Some(folder), Some(note)) => {
                checkpoints.insert(folder.to_string(), note.to_string());
            }
            _ => {
                return Err(format!(
                    "--previous {file}: an app without its log's checkpoint"
                ))
            }
        }
    }
    Ok(Previous { file, checkpoints })
}

/// `attest`'s work for one app: its chain audited, its period checked, its part of the
/// statement built; the parts gather in [`Attest::into_parts`].
pub(crate) struct Attest<'a> {
    ctx: &'a super::RunContext,
    period: Period,
    /// The previous statement's checkpoint of each log (by its folder), and where it was read.
    previous: Previous,
    parts: std::sync::Mutex<Vec<(String, AppStatement)>>,
    refusals: std::sync::Mutex<Vec<Refusal>>,
}

impl<'a> Attest<'a> {
    pub(crate) fn new(
        ctx: &'a super::RunContext,
        period: Period,
        previous: Previous,
    ) -> Attest<'a> {
        Attest {
            ctx,
            period,
            previous,
            parts: Default::default(),
            refusals: Default::default(),
        }
    }

    /// Every app's part of the statement (by app code), and the apps refused.
    pub(crate) fn into_parts(self) -> (Vec<AppStatement>, Vec<Refusal>) {
        let mut parts = self.parts.into_inner().expect("not poisoned");
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        (
            parts.into_iter().map(|(_, part)| part).collect(),
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
    ) -> Result<Result<Proven<'r>, Refusal>, LogError> {
        let (ctx, period) = (self.ctx, &self.period);
        let refuse = |reason: String, finding: Option<LogFinding>| Refusal {
            reason,
            finding: finding.map(Box::new),
        };
        if let Some(r) = receipts.iter().find(|r| r.log_index.is_none()) {
            return Ok(Err(refuse(format!("batch {} is not appended to the log yet: the next `outbox-archiver archive` of the app appends it", r.batch_id), None)));
        }
        let log = Log::open(ctx, app).await?;
        let table = &ctx.tables.receipts;
        let before = |until| table.last_leaf_before(app, until);
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
            let finding = LogFinding {
                problem: Problem::Gap,
                seq: Some(gap),
                batch_id: None,
                expected: format!("a receipt of the period for leaf {gap}"),
                actual: "the database has none (removed, or lost in a restore)".into(),
            };
            return Ok(Err(refuse(format!("leaf {gap}, within the period's leaves {start}..{end}, has no receipt recorded in the period"), Some(finding))));
        }
        let previous = match self.previous.head_of(&log) {
            Ok(p) => p,
            Err(reason) => return Ok(Err(refuse(reason, None))),
        };
        let transition = log.transition().await?;
        Ok(
            match log::prove_period(&log, receipts, (start, end), previous).await? {
                Ok(proof) => Ok(Proven {
                    folder: log.folder.clone(),
                    origin: log.origin.clone(),
                    receipts,
                    proof,
                    breaks,
                    transition,
                }),
                Err(finding) => Err(refuse(
                    "its log does not prove the period".into(),
                    Some(finding),
                )),
            },
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
        // A database restored from a backup lacks batches the store holds: a statement of its
        // receipts would understate what was archived.
        match super::log::behind(self.ctx, app).await {
            Err(e) => {
                report.fail(&e);
                return report;
            }
            Ok(Some(behind)) => {
                report.outcome = super::report::Outcome::Failed;
                report.error = Some(format!("not attested: {behind}"));
                return report;
            }
            Ok(None) => {}
        }
        let period = &self.period;
        let receipts = match self
            .ctx
            .tables
            .receipts
            .recorded_in(app, period.from_ms, period.until_ms)
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
                        f.problem.kind().label(),
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

/// `attest` — the auditor's statement for a period: every app in scope through the driver,
/// each app's period proven in its log (inclusion and consistency proofs); printed as canonical
/// JSON or CSV when every app's period is whole, refused (exit 1, each app's finding named in
/// the summary) when any is not. A statement that names batches whose latest check found them
/// other than recorded is printed, and exits 1 naming them.
pub(crate) async fn run(ctx: &RunContext, opts: &AttestOptions) -> Summary {
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
        Some(path) => match previous_heads(path, ctx.spec.name) {
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
        let statement = statement(
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

#[async_trait::async_trait]
impl Command for AttestOptions {
    const NAME: CommandName = CommandName::Attest;
    type Context = RunContext;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    async fn run(&self, ctx: &RunContext, _: &dyn super::Observer) -> Summary {
        run(ctx, self).await
    }
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
