//! `find`: "was event X archived, where, and what did it say?" — answered without SQL or
//! `zcat | grep`. By event id: the member rows (and superseded rows) name the batch at once; a
//! compacted batch has lost its member rows, so for an id no member row names, the app's
//! compacted batches in scope are searched. By any column (`--where column=value`) over a time
//! range or listed batches: the batches in scope are searched. Each batch searched is one GET of
//! its data object, its bytes held to the receipt's SHA-256, several at a time; the line, its
//! number and where the row stands now (in the source, purged, restored) are reported.

use crate::model::command::CommandName;
use std::collections::{BTreeMap, BTreeSet};

use crate::db::source::LookedUp;
use futures_util::{StreamExt, TryStreamExt};

use super::apps::{self, Population, Selection};
use super::{Observer, RunContext};
use crate::db::receipts::Receipts;
use crate::db::DbError;
use crate::model::receipt::Receipt;
use crate::pipeline::report::details::{FindRun, FoundRow, InSource, Unlooked};
use crate::pipeline::report::{RunDetails, Summary};
use crate::store::{self, StoreError};

#[derive(Debug, Clone, Default)]
pub(crate) struct FindOptions {
    /// Which apps and batches to look in (batch ids and `--from`/`--to` narrow the search of
    /// compacted batches and `--where`).
    pub selection: Selection,
    /// The event ids to find.
    pub event_ids: Vec<String>,
    /// Or rows whose `column` (its NDJSON key) holds `value` (a string's text, a number as
    /// written, `null`).
    pub filter: Option<(String, String)>,
    /// Batches searched at once.
    pub parallel: usize,
    /// The status that means delivered, to say why an id in the source is not archived.
    pub delivered_status: String,
}

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What to look for in a batch's lines.
#[derive(Debug, Clone)]
enum Wanted {
    Ids(BTreeSet<String>),
    Filter(String, String),
}

#[async_trait::async_trait]
impl super::command::Command for FindOptions {
    const NAME: CommandName = CommandName::Find;
    type Context = RunContext;
    fn apps(&self) -> Option<&super::apps::Apps> {
        self.selection.apps.as_ref()
    }
    async fn run(&self, ctx: &RunContext, observer: &dyn Observer) -> Summary {
        run(ctx, self, observer).await
    }
}

/// `find` — where an archived event is, and what it said: by event id, or by any column over a
/// time range, with the batch, the object key, the line and the row itself, and where the row
/// stands now. Exit status 0 every event id found (with `--where`: at least one row), 1 not
/// found, 2 could not look.
pub(crate) async fn run(ctx: &RunContext, opts: &FindOptions, observer: &dyn Observer) -> Summary {
    let mut summary = Summary::new(CommandName::Find);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    let before = ctx.store_stats();
    if opts.event_ids.is_empty() == opts.filter.is_none() {
        return Summary::unusable(
            CommandName::Find,
            "find needs --event-id (repeatable, or --event-ids-from FILE) or --where COLUMN=VALUE"
                .into(),
        );
    }
    let sel = &opts.selection;
    if let Some((column, _)) = &opts.filter {
        if let Err(e) = known_key(ctx.spec, column) {
            return Summary::unusable(CommandName::Find, e);
        }
    }
    if opts.filter.is_some() && sel.whole_apps() {
        return Summary::unusable(CommandName::Find,
            "--where searches the data objects: narrow it with --from/--to or --batch-id (the whole archive would be read)".into(),
        );
    }
    if let Err(e) = sel.check_batch_ids(ctx).await {
        return summary.without_apps(e);
    }
    let apps = match apps::resolve(ctx, &sel.apps(), &Population::SourceAndReceipts).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    let mut run = FindRun {
        by_event_id: !opts.event_ids.is_empty(),
        ..FindRun::default()
    };
    if let Err(e) = find(ctx, opts, &apps, observer, &mut run).await {
        summary.error = Some(e.to_string());
    }
    if let Some(first) = run
        .could_not_look
        .iter()
        .find(|u| !run.missing_objects.contains(&u.key))
    {
        summary.error.get_or_insert_with(|| {
            format!(
                "could not read whole the data object of batch {} ({}), which holds event {}: run verify (damage is a finding), then find again",
                first.batch_id, first.key, first.event_id
            )
        });
    }
    if let Some(first) = run.missing_objects.first() {
        summary.error.get_or_insert_with(|| {
            format!(
                "could not read {} data object(s) the receipts name (the first: {first}), so what they hold was not looked at: check --store / OUTBOX_ARCHIVER_STORE, then run verify (a missing object is a finding)",
                run.missing_objects.len()
            )
        });
    }
    summary.store_requests = ctx.store_activity(&before);
    summary.details = Some(RunDetails::Find(run));
    summary.settle()
}

async fn find(
    ctx: &RunContext,
    opts: &FindOptions,
    apps: &[String],
    observer: &dyn Observer,
    run: &mut FindRun,
) -> Result<(), AppError> {
    let receipts = &ctx.tables.receipts;
    let candidates = candidates(ctx, opts, apps, receipts, run).await?;
    for (batch, wanted, found) in
        search_all(ctx, receipts, candidates, opts.parallel, observer).await
    {
        run.searched_batches += 1;
        let (rows, unread) = match found? {
            Searched::Rows(rows) => (rows, None),
            Searched::Damaged(rows, key) => (rows, Some((key, "its bytes are not the archived ones (run verify): what it holds was read only in part"))),
            Searched::Missing(key) => {
                run.missing_objects.push(key.clone());
                (Vec::new(), Some((key, "its data object is not in the store (run verify)")))
            }
        };
        // An id this batch was to hold and did not show: the batch could not be looked at
        // whole, so the id is "could not look", never "not found".
        if let (Some((key, why)), Wanted::Ids(ids)) = (unread, &wanted) {
            for id in ids
                .iter()
                .filter(|id| !rows.iter().any(|r| &r.event_id == *id))
            {
                run.could_not_look.push(Unlooked {
                    event_id: id.clone(),
                    batch_id: batch.clone(),
                    key: key.clone(),
                    why: why.to_string(),
                });
            }
        }
        run.found.extend(rows);
    }
    run.missing_objects.sort();
    run.could_not_look
        .sort_by(|a, b| (&a.event_id, &a.batch_id).cmp(&(&b.event_id, &b.batch_id)));
    for row in &mut run.found {
        row.now = where_it_stands(ctx, row).await?;
        // Two batches may hold one version of a row: a row purge kept (changed in place, or
        // holding a column added since) is archived again, and the later batch holds it now.
        row.superseded_by = ctx
            .tables
            .members
            .batch_holding(&row.app_code, &row.event_id)
            .await?
            .filter(|holding| *holding != row.batch_id);
    }
    run.found.sort_by(|a, b| {
        (&a.app_code, a.updated_at_ms, &a.event_id, &a.batch_id).cmp(&(
            &b.app_code,
            b.updated_at_ms,
            &b.event_id,
            &b.batch_id,
        ))
    });
    let found: BTreeSet<&str> = run.found.iter().map(|f| f.event_id.as_str()).collect();
    let unlooked: BTreeSet<&str> = run
        .could_not_look
        .iter()
        .map(|u| u.event_id.as_str())
        .collect();
    run.not_found = opts
        .event_ids
        .iter()
        .filter(|id| !found.contains(id.as_str()) && !unlooked.contains(id.as_str()))
        .cloned()
        .collect();
    // Where the ids not found stand in the source: a diagnosis, never a reason to fail.
    if !run.not_found.is_empty() {
        for app in apps {
            match in_source(ctx, opts, app, &run.not_found).await {
                Ok(rows) => run.in_source.extend(rows),
                Err(e) => {
                    tracing::warn!(app, error = %e, "could not look the ids not found up in the source table")
                }
            }
        }
    }
    Ok(())
}

/// `--where`'s column must be a key of the table's records: one that is not would match no row,
/// and "not found" would hide the typo.
fn known_key(spec: &crate::model::table::TableSpec, column: &str) -> Result<(), String> {
    let keys: Vec<String> = spec
        .columns
        .iter()
        .map(|c| c.json_key.to_string())
        .collect();
    if keys.iter().any(|k| k == column) {
        return Ok(());
    }
    let closest = crate::db::apps::closest(column, &keys);
    let hint = match closest.as_slice() {
        [] => String::new(),
        some => format!("; did you mean {}?", some.join(" or ")),
    };
    Err(format!(
        "--where {column}=…: the records of {} have no key {column:?}{hint} (their keys: {})",
        spec.name,
        keys.join(", ")
    ))
}

/// The ids no batch holds that the source table has under `app` (primary-key lookups, 500 at a
/// time): their status, and why they are not archived — whether the status is the delivered one
/// and where the row lies against the app's cursor are the database's comparisons, as archive
/// makes them (event ids are never ordered in Rust).
async fn in_source(
    ctx: &RunContext,
    opts: &FindOptions,
    app: &str,
    ids: &[String],
) -> Result<Vec<InSource>, DbError> {
    let cursor =
        ctx.tables
            .receipts
            .latest_cursor(app)
            .await?
            .unwrap_or(crate::model::format::Cursor {
                updated_at_ms: i64::MIN,
                event_id: String::new(),
            });
    let mut out = Vec::new();
    for chunk in ids.chunks(500) {
        let rows = ctx
            .tables
            .source
            .look_up(app, chunk, &opts.delivered_status, &cursor)
            .await?;
        for LookedUp {
            event_id,
            status,
            updated_at_ms,
            delivered,
            after_cursor,
        } in rows
        {
            let why = if !delivered {
                format!("not delivered yet (status {status}): only delivered rows are archived")
            } else if after_cursor {
                "delivered, after the app's archive cursor: an archive run takes it once it is older than its cutoff".to_string()
            } else {
                "delivered, below the app's archive cursor and in no batch: a straggler (verify reports it; archive --stragglers takes it)".to_string()
            };
            out.push(InSource {
                event_id,
                app_code: app.to_string(),
                status,
                updated_at_ms,
                why,
            });
        }
    }
    out.sort_by(|a, b| {
        ids.iter()
            .position(|i| *i == a.event_id)
            .cmp(&ids.iter().position(|i| *i == b.event_id))
    });
    Ok(out)
}

/// (app, batch) → what to look for in it.
type Candidates = BTreeMap<(String, String), Wanted>;

/// The batches to search, and what for: with `--where`, every batch in scope; by event id, the
/// batches member rows name — and, for ids none names, the compacted batches in scope.
async fn candidates(
    ctx: &RunContext,
    opts: &FindOptions,
    apps: &[String],
    receipts: &Receipts,
    run: &mut FindRun,
) -> Result<Candidates, AppError> {
    let mut candidates = Candidates::new();
    if let Some((column, value)) = &opts.filter {
        for app in apps {
            let scope = opts.selection.scope(Some(app));
            let listed = receipts.stream(scope);
            futures_util::pin_mut!(listed);
            while let Some(receipt) = listed.try_next().await? {
                candidates.insert(
                    (receipt.app_code, receipt.batch_id),
                    Wanted::Filter(column.clone(), value.clone()),
                );
            }
        }
        return Ok(candidates);
    }
    let mut unplaced: BTreeSet<String> = opts.event_ids.iter().cloned().collect();
    for app in apps {
        for id in &opts.event_ids {
            for batch in batches_naming(ctx, app, id).await? {
                unplaced.remove(id);
                want_id(&mut candidates, app, &batch, id);
            }
        }
    }
    // Ids no member row names may be in a compacted batch (its member rows of purged rows
    // are gone): those batches, in scope, are searched for them.
    if !unplaced.is_empty() {
        for app in apps {
            let scope = opts.selection.scope(Some(app));
            let listed = receipts.stream(scope);
            futures_util::pin_mut!(listed);
            while let Some(receipt) = listed.try_next().await? {
                if receipt.life.compaction.is_some() {
                    run.searched_compacted_batches += 1;
                    for id in &unplaced {
                        want_id(&mut candidates, app, &receipt.batch_id, id);
                    }
                }
            }
        }
    }
    Ok(candidates)
}

/// Each candidate batch searched, `parallel` at a time, with a progress line over them all.
async fn search_all(
    ctx: &RunContext,
    receipts: &Receipts,
    candidates: Candidates,
    parallel: usize,
    observer: &dyn Observer,
) -> Vec<(String, Wanted, Result<Searched, AppError>)> {
    observer.start("batches", "batches", Some(candidates.len() as u64));
    let searched = futures_util::stream::iter(candidates)
        .map(|((app, batch), wanted)| async move {
            let found = async {
                Ok(match receipts.get(&app, &batch).await? {
                    Some(receipt) => search(ctx, &receipt, &wanted).await?,
                    None => Searched::Rows(Vec::new()),
                })
            }
            .await;
            observer.advance("batches", 1, "");
            (batch, wanted, found)
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    observer.finish("batches");
    searched
}

fn want_id(candidates: &mut Candidates, app: &str, batch: &str, id: &str) {
    let entry = candidates
        .entry((app.to_string(), batch.to_string()))
        .or_insert_with(|| Wanted::Ids(BTreeSet::new()));
    if let Wanted::Ids(ids) = entry {
        ids.insert(id.to_string());
    }
}

/// The batches whose member or superseded rows name `event_id` of `app` (primary-key lookups).
async fn batches_naming(
    ctx: &RunContext,
    app: &str,
    event_id: &str,
) -> Result<Vec<String>, DbError> {
    ctx.tables.members.batches_naming(app, event_id).await
}

/// What searching one batch found.
enum Searched {
    /// The object read whole, its bytes the archived ones: the rows that match.
    Rows(Vec<FoundRow>),
    /// Its bytes are not the archived ones (or do not inflate to the end): the rows that
    /// matched in what could be read.
    Damaged(Vec<FoundRow>, String),
    /// Its data object is not in the store.
    Missing(String),
}

/// One GET of the batch's data object; its lines that match, with their numbers.
async fn search(
    ctx: &RunContext,
    receipt: &Receipt,
    wanted: &Wanted,
) -> Result<Searched, AppError> {
    use std::io::BufRead;
    let key = &receipt.keys.data;
    let Some(bytes) = store::get_all(ctx.store.as_ref(), key).await? else {
        return Ok(Searched::Missing(key.to_string()));
    };
    let intact = crate::model::digest::sha256_hex(&bytes) == receipt.objects.data.sha256;
    let layout = ctx.spec.layout();
    let id_key = ctx.spec.columns[layout.event_id].json_key;
    let updated_key = ctx.spec.columns[layout.updated_at_ms].json_key;
    let mut out = Vec::new();
    let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let mut whole = intact;
    for (n, line) in reader.split(b'\n').enumerate() {
        let Ok(line) = line else {
            // A damaged object: what was read so far is reported, `intact` says so.
            whole = false;
            break;
        };
        let matches = match wanted {
            Wanted::Ids(ids) => {
                // A cheap test before parsing: the id's JSON text must occur in the line.
                ids.iter().any(|id| {
                    let quoted = serde_json::to_string(id).unwrap_or_default();
                    memchr::memmem::find(&line, quoted.as_bytes()).is_some()
                })
            }
            Wanted::Filter(_, value) => memchr::memmem::find(&line, value.as_bytes()).is_some(),
        };
        if !matches {
            continue;
        }
        let Ok(row) = serde_json::from_slice::<serde_json::Value>(&line) else {
            continue;
        };
        let hit = match wanted {
            Wanted::Ids(ids) => row[id_key].as_str().is_some_and(|id| ids.contains(id)),
            Wanted::Filter(column, value) => match &row[column.as_str()] {
                serde_json::Value::String(s) => s == value,
                serde_json::Value::Null => value == "null",
                other => other.to_string().as_str() == value.as_str(),
            },
        };
        if hit {
            out.push(FoundRow {
                event_id: row[id_key].as_str().unwrap_or_default().to_string(),
                app_code: receipt.app_code.clone(),
                batch_id: receipt.batch_id.clone(),
                key: key.to_string(),
                line: n as u64 + 1,
                updated_at_ms: row[updated_key].as_i64().unwrap_or_default(),
                object_matches_receipt: intact,
                now: String::new(),
                superseded_by: None,
                row,
            });
        }
    }
    match whole {
        true => Ok(Searched::Rows(out)),
        false => Ok(Searched::Damaged(out, key.to_string())),
    }
}

/// Where a found row stands now: in the source as archived, in the source in another version,
/// back in the source by a restore, or gone (purged).
async fn where_it_stands(ctx: &RunContext, row: &FoundRow) -> Result<String, DbError> {
    let in_source = ctx
        .tables
        .source
        .updated_at_of(&row.app_code, &row.event_id)
        .await?;
    let receipt = ctx
        .tables
        .receipts
        .get(&row.app_code, &row.batch_id)
        .await?;
    let restored = receipt
        .as_ref()
        .is_some_and(|r| r.life.restored_at_ms.is_some());
    Ok(match in_source {
        Some(ms) if ms == row.updated_at_ms && restored => "in the source, restored".into(),
        Some(ms) if ms == row.updated_at_ms => "in the source (not purged yet)".into(),
        Some(ms) => format!("in the source in another version (updated_at_ms {ms})"),
        None => "purged from the source".into(),
    })
}
