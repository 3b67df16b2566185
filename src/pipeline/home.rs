//! One archive, one home (SPEC §5.13). A table's archive is bound to the store its first batch
//! was archived to: the database records the store and an archive id, and the store holds the
//! same id in a marker object written once (`{prefix}/{table}/_archive.json`). Every command
//! that opens the store holds `--store` to that home before it does anything ([`check`]): another
//! bucket or prefix is refused naming both, and a store under the home's name that lacks the
//! marker (or holds another archive's) is refused too — a wrong endpoint or account. Moving the
//! archive is an explicit, recorded step ([`relocate`]), never a side effect of a setting: every
//! batch is re-read at the new home first, and the copy's object versions are recorded with the
//! move (`pipeline::versions`).
//!
//! An archive from before the home existed is held to its receipts instead (their keys' prefix,
//! and a few of their objects by HEAD), and is bound by its next batch.

use std::sync::Arc;

use bytes::Bytes;
use sqlx::MySqlPool;

use super::{Observer, RunContext};
use crate::db::home::{Home, Homes};
use crate::db::DbError;
use crate::model::format::{self, HomeMarker, Key};
use crate::model::protection::{PutOptions, WritePolicy};
use crate::model::table::TableSpec;
use crate::pipeline::doctor::Check;
use crate::pipeline::report::details::RelocateRun;
use crate::store::{self, Location, ObjectStore, PutMode, StoreError};

/// Why a store is not the archive's home (each message names the setting and the fix).
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error("{table}'s archive lives at {home} (bound {bound} by run {run}); --store / OUTBOX_ARCHIVER_STORE says {given}. Fix the setting. To move the archive to another bucket: copy it there, then `outbox-archiver relocate --to URL --reason TEXT` (README, \"Moving an archive\")")]
    Elsewhere {
        table: String,
        home: String,
        given: String,
        bound: String,
        run: String,
    },
    #[error("the store at {given} does not hold {table}'s archive: {detail}. --store names the archive's bucket and prefix, but --s3-endpoint / OUTBOX_ARCHIVER_S3_ENDPOINT (or AWS_ENDPOINT_URL) or the credentials may reach another service or account; if this is the archive's store, its objects are gone: escalate")]
    NotHere {
        table: String,
        given: String,
        detail: String,
    },
    #[error("{given} holds another archive ({key}: archive {found} of table {found_table} of database {found_database}); {table}'s archive of this database is {ours}. Two databases cannot share one prefix: point --store at this archive's own. (If it is this database's archive and the database lost its home — restored from a backup taken before the archive's first batch — take it back with `outbox-archiver relocate --to {given} --reason TEXT`)")]
    Foreign {
        table: String,
        given: String,
        key: String,
        found: String,
        found_table: String,
        found_database: String,
        ours: String,
    },
    #[error("{table}'s receipts name objects under {recorded}, but --store / OUTBOX_ARCHIVER_STORE {given} puts them under {expected}: --store names another prefix than the archive's")]
    PrefixMismatch {
        table: String,
        given: String,
        recorded: String,
        expected: String,
    },
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("the archive's marker {key}: {source}")]
    Store {
        key: String,
        #[source]
        source: StoreError,
    },
}

/// Where the archive stands with the store a run opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Its home, marker and all.
    Home(Home),
    /// Its home, whose marker is gone while its batches are there: the next archive writes the
    /// marker again.
    MarkerMissing(Home),
    /// Not bound yet: nothing archived, or an archive from before the home (its receipts agree
    /// with the store). The next batch archived binds it.
    Unbound { receipts: bool },
}

/// Of how many apps the newest batch is looked for by HEAD where the marker cannot vouch for a
/// store.
const APPS_LOOKED_AT: u32 = 3;

/// Holds the store `ctx` opened to the archive's home: one read of the home, one GET of the
/// marker (a few HEADs for an archive not bound yet).
pub async fn check(ctx: &RunContext) -> Result<Checked, HomeError> {
    check_in(ctx.spec, &ctx.db.pool, ctx.store.as_ref()).await
}

/// [`check`], of `spec`'s archive in `store` (doctor's line, outside a run).
pub(crate) async fn check_in(
    spec: &'static TableSpec,
    pool: &MySqlPool,
    store: &dyn ObjectStore,
) -> Result<Checked, HomeError> {
    let given = store.location().to_string();
    match Homes::new(pool, spec).current().await? {
        Some(home) if home.store != given => Err(HomeError::Elsewhere {
            table: spec.name.to_string(),
            home: home.store.clone(),
            given,
            bound: crate::model::timespec::rfc3339(home.bound_at_ms),
            run: home.run_id.clone().unwrap_or_else(|| "?".into()),
        }),
        Some(home) => at_home(spec, pool, store, home).await,
        None => unbound(spec, pool, store).await,
    }
}

/// The archive bound to this very store: held to its marker there — or, where the marker
/// cannot be read now or is missing, to the batches the store holds.
async fn at_home(
    spec: &'static TableSpec,
    pool: &MySqlPool,
    store: &dyn ObjectStore,
    home: Home,
) -> Result<Checked, HomeError> {
    let marker_key = Key::stored(home.marker_key.as_str());
    match read_marker(store, &marker_key).await? {
        Marker::Found(marker) if marker.archive_id == home.archive_id => Ok(Checked::Home(home)),
        Marker::Found(marker) => Err(foreign(spec, store, &marker_key, marker, &home.archive_id)),
        // A lifecycle rule moved it to a cold class: the batches vouch for the store.
        Marker::Cold => {
            batches_here(
                spec,
                pool,
                store,
                "its marker cannot be read now (a cold class)",
            )
            .await?;
            Ok(Checked::Home(home))
        }
        Marker::Absent => {
            batches_here(spec, pool, store, "its marker is missing").await?;
            tracing::warn!(
                key = home.marker_key,
                "the archive's marker is missing: the next archive writes it again"
            );
            Ok(Checked::MarkerMissing(home))
        }
    }
}

/// An archive this database has not bound to a store yet. A store that holds an archive's
/// marker is another archive's (or this one's, by a database restored from before its first
/// batch: `relocate` takes it back explicitly); receipts recorded before homes were (an older
/// build's) must point into this store's prefix and find their batches there.
async fn unbound(
    spec: &'static TableSpec,
    pool: &MySqlPool,
    store: &dyn ObjectStore,
) -> Result<Checked, HomeError> {
    let expected = format::table_prefix(store.location().prefix(), spec.name);
    let marker_key = format::home_marker_key(&expected);
    if let Marker::Found(marker) = read_marker(store, &marker_key).await? {
        return Err(foreign(spec, store, &marker_key, marker, "not bound yet"));
    }
    let objects = Homes::new(pool, spec)
        .newest_data_objects(Some(APPS_LOOKED_AT))
        .await?;
    if objects.is_empty() {
        return Ok(Checked::Unbound { receipts: false });
    }
    if let Some((off, _)) = objects.iter().find(|(k, _)| expected.relative(k).is_none()) {
        return Err(HomeError::PrefixMismatch {
            table: spec.name.to_string(),
            given: store.location().to_string(),
            recorded: off.clone(),
            expected: expected.to_string(),
        });
    }
    batches_here(spec, pool, store, "no marker").await?;
    Ok(Checked::Unbound { receipts: true })
}

fn table_prefix(ctx: &RunContext) -> format::Prefix {
    format::table_prefix(ctx.store.location().prefix(), ctx.spec.name)
}

/// A store without a readable marker is the archive's only if it holds its batches: the newest
/// receipt's data object of a few apps is looked for by HEAD, and one found is enough. An
/// archive without a batch has nothing to look for: its store is taken at its word.
async fn batches_here(
    spec: &'static TableSpec,
    pool: &MySqlPool,
    store: &dyn ObjectStore,
    why: &str,
) -> Result<(), HomeError> {
    let objects = Homes::new(pool, spec)
        .newest_data_objects(Some(APPS_LOOKED_AT))
        .await?;
    if objects.is_empty() {
        return Ok(());
    }
    for (key, _) in &objects {
        match store.head(&Key::stored(key.as_str())).await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {}
            Err(source) => {
                return Err(HomeError::Store {
                    key: key.clone(),
                    source,
                })
            }
        }
    }
    Err(HomeError::NotHere {
        table: spec.name.to_string(),
        given: store.location().to_string(),
        detail: format!(
            "{why}, and none of the newest batches of {} of its apps is there (such as {})",
            objects.len(),
            objects[0].0
        ),
    })
}

fn foreign(
    spec: &TableSpec,
    store: &dyn ObjectStore,
    key: &crate::model::key::Key,
    marker: HomeMarker,
    ours: &str,
) -> HomeError {
    HomeError::Foreign {
        table: spec.name.to_string(),
        given: store.location().to_string(),
        key: key.to_string(),
        found: marker.archive_id,
        found_table: marker.table,
        found_database: marker.database,
        ours: ours.to_string(),
    }
}

/// The archive's home (SPEC §5.13): whether `--store` is the store the archive is bound to, its
/// marker there; or that it is not bound yet.
pub(crate) async fn doctor_line(
    spec: &'static TableSpec,
    db: &crate::db::Db,
    store: &dyn ObjectStore,
) -> Check {
    match check_in(spec, &db.pool, store).await {
        Ok(Checked::Home(home)) => Check::ok(
            "archive_home",
            format!(
                "{}'s archive lives here (bound {}{}); its marker {} holds archive {}",
                spec.name,
                crate::model::timespec::rfc3339(home.bound_at_ms),
                home.moved_from
                    .as_deref()
                    .map(|from| format!(", moved from {from}: {}", home.reason.as_deref().unwrap_or("")))
                    .unwrap_or_default(),
                home.marker_key,
                home.archive_id
            ),
        ),
        Ok(Checked::MarkerMissing(home)) => Check::warning(
            "archive_home",
            format!(
                "{}'s archive lives here and its batches are here, but its marker {} is gone",
                spec.name, home.marker_key
            ),
            "the next archive writes it again; find who deleted it (a lifecycle rule?)",
        ),
        Ok(Checked::Unbound { receipts: false }) => Check::ok(
            "archive_home",
            format!("{}'s archive has no batch yet: its first binds it to this store", spec.name),
        ),
        Ok(Checked::Unbound { receipts: true }) => Check::ok(
            "archive_home",
            format!(
                "{}'s archive (from before the home was recorded) is here, as its receipts say: its next batch binds it",
                spec.name
            ),
        ),
        Err(e) => Check::problem(
            "archive_home",
            e.to_string(),
            "point --store at the archive's home (README, \"Moving an archive\")",
        ),
    }
}

/// What is at a marker's key.
enum Marker {
    Found(HomeMarker),
    Absent,
    /// In a storage class that cannot be read at once (a lifecycle rule moved it).
    Cold,
}

async fn read_marker(
    store: &dyn ObjectStore,
    key: &crate::model::key::Key,
) -> Result<Marker, HomeError> {
    let bytes = match store::get_all(store, key).await {
        Ok(bytes) => bytes,
        Err(StoreError::NotReadable { .. }) => return Ok(Marker::Cold),
        Err(source) => {
            return Err(HomeError::Store {
                key: key.to_string(),
                source,
            })
        }
    };
    Ok(match bytes {
        None => Marker::Absent,
        // Bytes that are no marker are some other archive's business, never ours.
        Some(b) => Marker::Found(HomeMarker::parse(&b).unwrap_or(HomeMarker {
            archive_id: "(not a marker)".into(),
            table: "?".into(),
            database: "?".into(),
            created_at_ms: 0,
        })),
    })
}

/// The binding of a run that archives: set once, when its first batch is about to be written
/// (or at once, by [`check`], where the archive has its home).
#[derive(Debug, Default, Clone)]
pub struct Binding(Arc<tokio::sync::OnceCell<Home>>);

impl Binding {
    /// A run whose store [`check`] found to be the archive's home.
    pub fn found(checked: &Checked) -> Binding {
        let binding = Binding::default();
        if let Checked::Home(home) = checked {
            let _ = binding.0.set(home.clone());
        }
        binding
    }

    /// The archive's home, bound now if it has none (its marker written again if it was
    /// missing): called before a batch's objects are written.
    pub(crate) async fn ensure(
        &self,
        ctx: &RunContext,
        policy: &WritePolicy,
    ) -> Result<&Home, HomeError> {
        self.0.get_or_try_init(|| bind(ctx, policy)).await
    }
}

/// Whether the archive still lives where the run opened it, read again under an app's lock:
/// `relocate` moves the home holding every app's lock, so a run that took one after a move
/// learns of it here and writes nothing to the old home.
pub(crate) async fn still_home(ctx: &RunContext) -> Result<(), HomeError> {
    match ctx.tables.homes.current().await? {
        Some(home) if home.store != ctx.store.location().to_string() => Err(HomeError::Elsewhere {
            table: ctx.spec.name.to_string(),
            home: home.store.clone(),
            given: ctx.store.location().to_string(),
            bound: crate::model::timespec::rfc3339(home.bound_at_ms),
            run: home.run_id.unwrap_or_else(|| "?".into()),
        }),
        _ => Ok(()),
    }
}

/// Binds the archive to the run's store (or confirms the binding another run just made), its
/// marker written once under the batches' retention and read back.
async fn bind(ctx: &RunContext, policy: &WritePolicy) -> Result<Home, HomeError> {
    let homes = &ctx.tables.homes;
    let pool = &ctx.db.pool;
    loop {
        let home = match check(ctx).await? {
            Checked::Home(home) => return Ok(home),
            // Lost, or never written (a run that recorded the home died before its marker, or
            // another run's binding is a moment ahead of its marker): written now, once.
            Checked::MarkerMissing(home) => {
                put_marker(ctx, &home, policy).await?;
                return Ok(home);
            }
            Checked::Unbound { .. } => Home {
                id: 1,
                store: ctx.store.location().to_string(),
                archive_id: new_archive_id(),
                marker_key: format::home_marker_key(&table_prefix(ctx)).to_string(),
                bound_at_ms: ctx.now(),
                moved_from: None,
                reason: None,
                run_id: Some(crate::pipeline::report::run_id().to_string()),
            },
        };
        if !homes.insert(pool, &home).await? {
            continue; // another run bound it first: hold to what it bound
        }
        match put_marker(ctx, &home, policy).await {
            Ok(()) => {
                tracing::info!(
                    store = home.store,
                    archive_id = home.archive_id,
                    marker = home.marker_key,
                    "bound the archive to its store (its home: every command holds --store to it)"
                );
                return Ok(home);
            }
            // Another archive's marker is there (it came between the check and the put):
            // nothing is archived under this binding, and it cannot stand — taken back.
            Err(e @ HomeError::Foreign { .. }) => {
                homes.withdraw(&home).await?;
                return Err(e);
            }
            // Any other failure leaves the binding: the marker's put may have landed, and the
            // next run finds the home without it (or with it) and writes it then.
            Err(e) => return Err(e),
        }
    }
}

/// Writes the home's marker once and reads it back: one already there must be this very
/// archive's (a retry), else the store is another archive's.
async fn put_marker(ctx: &RunContext, home: &Home, policy: &WritePolicy) -> Result<(), HomeError> {
    let marker = HomeMarker {
        archive_id: home.archive_id.clone(),
        table: ctx.spec.name.to_string(),
        database: ctx
            .db
            .options
            .get_database()
            .unwrap_or_default()
            .to_string(),
        created_at_ms: home.bound_at_ms,
    };
    let options = PutOptions {
        storage_class: None,
        lock: policy.lock_at(ctx.now()),
        legal_hold: policy.legal_hold,
    };
    let key = &Key::stored(home.marker_key.as_str());
    let stored = |source| HomeError::Store {
        key: key.to_string(),
        source,
    };
    match ctx
        .store
        .put_with(
            key,
            Bytes::from(marker.to_bytes()),
            PutMode::Create,
            &options,
        )
        .await
    {
        Ok(()) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(e) => return Err(stored(e)),
    }
    match read_marker(ctx.store.as_ref(), key).await? {
        Marker::Found(found) if found.archive_id == home.archive_id => Ok(()),
        Marker::Found(found) => Err(foreign(
            ctx.spec,
            ctx.store.as_ref(),
            key,
            found,
            &home.archive_id,
        )),
        Marker::Absent | Marker::Cold => Err(stored(StoreError::Other {
            op: "get",
            key: key.to_string(),
            detail: "written, but not readable when read back".into(),
        })),
    }
}

/// 32 random hex digits (the kernel's randomness; the process's hash keys where there is none).
fn new_archive_id() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        use std::hash::{BuildHasher, Hasher};
        for half in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            half.copy_from_slice(&h.finish().to_be_bytes());
        }
    }
    hex::encode(bytes)
}

/// Why the archive's home did not move (nothing moved, whatever the reason).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RelocateError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Home(#[from] HomeError),
    /// The move is refused: what the new home lacks or holds, or what is in the way, in words
    /// that say what to do.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Log(#[from] super::log::LogError),
}

/// Every app's log checked at the copy `ctx` opened, as `verify` checks it — its checkpoint held
/// to the largest head the database recorded, every leaf to its receipt, the tiles to the root —
/// so that no move leaves the archive with a log its commands would refuse (`log_rollback` on
/// every archive and purge). The refusal names each app's first finding and the folder to copy.
async fn copy_holds_every_log(ctx: &RunContext, home: Option<&str>) -> Result<(), RelocateError> {
    let mut apps = ctx.tables.receipts.apps_with_receipts().await?;
    apps.extend(super::log::logged_apps(ctx, &apps).await?);
    let mut problems = Vec::new();
    for app in &apps {
        let audit = super::log::audit(ctx, app).await?;
        if let Some(first) = audit.findings.first() {
            problems.push(format!(
                "app {app}: {} — expected {}, {} ({} finding(s))",
                first.problem.kind().label(),
                first.expected,
                first.actual,
                audit.findings.len()
            ));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let target = ctx.store.location().to_string();
    let logs = format::logs_prefix(&table_prefix(ctx));
    let folder = logs
        .as_str()
        .strip_prefix(ctx.store.location().prefix().as_str())
        .unwrap_or(logs.as_str());
    let copy = match home {
        Some(home) => format!(
            "copy the log too — the whole folder {folder} of the archive's home, byte for byte (aws s3 sync {}/{folder} {}/{folder})",
            home.trim_end_matches('/'),
            target.trim_end_matches('/')
        ),
        None => format!("copy the log's folder {folder} there too, byte for byte"),
    };
    Err(RelocateError::Refused(format!(
        "{target} holds every batch but not the archive's log as the database knows it (nothing moved): {}. Then {copy}, and relocate again",
        problems.join("; ")
    )))
}

/// Every batch re-read at the copy `ctx` opened (`pipeline::versions::reread`): the records the
/// move writes, or the refusal that names what the copy lacks or holds otherwise, and what to
/// copy (`home`: the archive's home now, where there is one).
async fn copy_holds_every_batch(
    ctx: &RunContext,
    parallel: usize,
    observer: &dyn Observer,
    home: Option<&str>,
) -> Result<super::versions::Reread, RelocateError> {
    let target = ctx.store.location().to_string();
    let reread = super::versions::reread(ctx, parallel, observer)
        .await
        .map_err(|e| match e {
            super::versions::RereadError::Db(e) => RelocateError::Db(e),
            e => RelocateError::Refused(e.to_string()),
        })?;
    if reread.unproven_count == 0 {
        return Ok(reread);
    }
    let listed: Vec<String> = reread.unproven.iter().map(|u| u.to_string()).collect();
    let more = reread.unproven_count - reread.unproven.len() as u64;
    let from = match home {
        Some(home) => format!(
            "from the archive's home (aws s3 sync {home} {target}, or aws s3 cp of each key)"
        ),
        None => "from wherever the archive is kept".to_string(),
    };
    Err(RelocateError::Refused(format!(
        "{target} does not hold {} of the {} batches as their receipts say (each was read in full there; nothing moved): {}{}. Copy those objects again {from}, byte for byte and readable at once, then relocate again",
        reread.unproven_count,
        reread.unproven_count + reread.versions.len() as u64,
        listed.join("; "),
        if more > 0 { format!("; and {more} more") } else { String::new() },
    )))
}

/// Records a move (or a home taken back) and every batch's record, in one transaction: the home
/// row and the receipts' new identities, or nothing. `Ok(false)`: another run recorded a home
/// with that id first.
async fn record_move(
    ctx: &RunContext,
    home: &Home,
    reread: &super::versions::Reread,
    failpoints: &crate::failpoint::FailPoints,
) -> Result<bool, RelocateError> {
    use crate::db::Context as _;
    let context = || "recording the archive's move".to_string();
    let mut tx = ctx.db.pool.begin().await.context(context)?;
    crate::db::layout::hold(&mut tx, ctx.spec).await?;
    if !ctx.tables.homes.insert(&mut *tx, home).await? {
        tx.rollback().await.context(context)?;
        return Ok(false);
    }
    let run_id = home.run_id.as_deref().unwrap_or_default();
    ctx.tables
        .versions
        .record_move(&mut tx, &reread.versions, run_id)
        .await?;
    failpoints
        .pass("relocate-before-commit")
        .map_err(DbError::from)?;
    tx.commit().await.context(context)?;
    Ok(true)
}

/// What a move checked, for its report.
fn moved_report(
    from: String,
    home: &Home,
    reason: &str,
    reread: &super::versions::Reread,
) -> RelocateRun {
    RelocateRun {
        from,
        to: home.store.clone(),
        archive_id: home.archive_id.clone(),
        reason: reason.to_string(),
        marker: home.marker_key.clone(),
        checked_batches: reread.versions.len() as u64,
        checked_bytes: reread.bytes,
        recorded_versions: reread.changed(),
    }
}

/// Every app's lock (the one every `--lock-prefix` shares on this database), so that no archive,
/// purge or compaction works an app while its home moves; a run that takes an app's lock after
/// the move reads the new home ([`still_home`]) and writes nothing to the old one.
async fn lock_every_app(
    ctx: &RunContext,
) -> Result<Option<crate::db::lock::AppLock>, RelocateError> {
    let apps = ctx.tables.receipts.apps_with_receipts().await?;
    if apps.is_empty() {
        return Ok(None);
    }
    let database = ctx.db.options.get_database().unwrap_or_default();
    let names: Vec<String> = apps
        .iter()
        .map(|app| crate::db::lock::database_lock_name(database, ctx.spec.name, app))
        .collect();
    match crate::db::lock::AppLock::try_acquire_all(&ctx.db, &names).await? {
        Some(lock) => Ok(Some(lock)),
        None => Err(RelocateError::Refused(format!(
            "another run holds the lock of one of the {} apps ({}): stop the archive, purge and compact jobs (the sentinel, or suspend the CronJobs), then relocate",
            apps.len(),
            apps.join(", ")
        ))),
    }
}

/// `relocate` where the database has no home: the store `ctx` opened holds an archive's marker
/// and this database's batches (a database restored from before its archive's first batch, or
/// one whose home row was lost): the home is recorded with that marker's id, and the reason.
async fn adopt(
    ctx: &RunContext,
    reason: &str,
    parallel: usize,
    failpoints: &crate::failpoint::FailPoints,
    observer: &dyn Observer,
) -> Result<RelocateRun, RelocateError> {
    let to = ctx.store.as_ref();
    let target = to.location().to_string();
    let marker_key = format::home_marker_key(&table_prefix(ctx));
    let Marker::Found(marker) = read_marker(to, &marker_key).await? else {
        return Err(RelocateError::Refused(format!(
            "{}'s archive has no home yet and {target} holds no readable archive's marker: there is nothing to relocate (its first archive binds it)",
            ctx.spec.name
        )));
    };
    if marker.table != ctx.spec.name {
        return Err(RelocateError::Refused(format!(
            "{marker_key} is the marker of table {}'s archive, not {}'s",
            marker.table, ctx.spec.name
        )));
    }
    let reread = copy_holds_every_batch(ctx, parallel, observer, None).await?;
    copy_holds_every_log(ctx, None).await?;
    if reread.versions.is_empty() {
        return Err(RelocateError::Refused(format!(
            "this database has no receipt of {}: nothing ties it to the archive at {target} (marker of database {})",
            ctx.spec.name, marker.database
        )));
    }
    let home = Home {
        id: 1,
        store: target.clone(),
        archive_id: marker.archive_id.clone(),
        marker_key: marker_key.to_string(),
        bound_at_ms: ctx.now(),
        moved_from: None,
        reason: Some(reason.to_string()),
        run_id: Some(crate::pipeline::report::run_id().to_string()),
    };
    if !record_move(ctx, &home, &reread, failpoints).await? {
        return Err(RelocateError::Refused(
            "another run bound the archive at the same moment: look at it again (doctor)".into(),
        ));
    }
    Ok(moved_report(
        "(no home: taken back)".into(),
        &home,
        reason,
        &reread,
    ))
}

/// Moves the archive's home to the store `ctx` opened (`--to`), where an operator copied it
/// (its marker included): under the same prefix (object keys are part of what every receipt,
/// manifest and chain link recorded), holding this archive's marker and every batch — each
/// re-read there in full against its receipt, `parallel` at a time. Every app's lock is held
/// meanwhile. Recorded with the operator's reason, and with every batch's objects' identity
/// there (a copy has new version ids, often new ETags: verify and purge hold the objects to
/// those from then on), in one transaction; the old home need not be reachable (a lost bucket's
/// archive restored from a replica moves too).
pub(crate) async fn relocate(
    ctx: &RunContext,
    reason: &str,
    parallel: usize,
    failpoints: &crate::failpoint::FailPoints,
    observer: &dyn Observer,
) -> Result<RelocateRun, RelocateError> {
    let lock = lock_every_app(ctx).await?;
    let moved = relocate_locked(ctx, reason, parallel, failpoints, observer).await;
    if let Some(lock) = lock {
        lock.release().await;
    }
    moved
}

async fn relocate_locked(
    ctx: &RunContext,
    reason: &str,
    parallel: usize,
    failpoints: &crate::failpoint::FailPoints,
    observer: &dyn Observer,
) -> Result<RelocateRun, RelocateError> {
    let homes = &ctx.tables.homes;
    let to = ctx.store.as_ref();
    let Some(home) = homes.current().await? else {
        return adopt(ctx, reason, parallel, failpoints, observer).await;
    };
    let target = to.location().to_string();
    if target == home.store {
        return Err(RelocateError::Refused(format!(
            "the archive already lives at {target}"
        )));
    }
    let old_prefix = Location::parse(&home.store)
        .map(|l| l.prefix().clone())
        .unwrap_or_default();
    if to.location().prefix() != &old_prefix {
        return Err(RelocateError::Refused(format!(
            "--to {target} has another key prefix than the archive's home {} ({:?}, not {old_prefix:?}): every receipt, manifest and chain link records its objects' full keys, so the archive moves only to another bucket (or folder) under the same prefix",
            home.store,
            to.location().prefix().trimmed(),
            old_prefix = old_prefix.trimmed(),
        )));
    }
    match read_marker(to, &Key::stored(home.marker_key.as_str())).await? {
        Marker::Found(marker) if marker.archive_id == home.archive_id => {}
        Marker::Found(marker) => {
            return Err(RelocateError::Refused(format!(
                "{target} holds another archive's marker ({}: archive {}), not this one's ({})",
                home.marker_key, marker.archive_id, home.archive_id
            )))
        }
        Marker::Absent | Marker::Cold => {
            return Err(RelocateError::Refused(format!(
                "{target} does not hold the archive's marker {} readable: copy the whole archive there first, the marker included (aws s3 sync {} {target}), then relocate",
                home.marker_key, home.store
            )))
        }
    }
    let reread = copy_holds_every_batch(ctx, parallel, observer, Some(&home.store)).await?;
    copy_holds_every_log(ctx, Some(&home.store)).await?;
    let moved = Home {
        id: home.id + 1,
        store: target.clone(),
        archive_id: home.archive_id.clone(),
        marker_key: home.marker_key.clone(),
        bound_at_ms: ctx.now(),
        moved_from: Some(home.store.clone()),
        reason: Some(reason.to_string()),
        run_id: Some(crate::pipeline::report::run_id().to_string()),
    };
    if !record_move(ctx, &moved, &reread, failpoints).await? {
        return Err(RelocateError::Refused("another run moved or bound the archive at the same moment: look at it again (doctor), then relocate again if still needed".into()));
    }
    Ok(moved_report(home.store, &moved, reason, &reread))
}
