//! One archive, one home (SPEC §5.13). A table's archive is bound to the store its first batch
//! was archived to: the database records the store and an archive id, and the store holds the
//! same id in a marker object written once (`{prefix}/{table}/_archive.json`). Every command
//! that opens the store holds `--store` to that home before it does anything ([`check`]): another
//! bucket or prefix is refused naming both, and a store under the home's name that lacks the
//! marker (or holds another archive's) is refused too — a wrong endpoint or account. Moving the
//! archive is an explicit, recorded step ([`relocate`]), never a side effect of a setting.
//!
//! An archive from before the home existed is held to its receipts instead (their keys' prefix,
//! and a few of their objects by HEAD), and is bound by its next batch.

use std::sync::Arc;

use bytes::Bytes;
use sqlx::MySqlPool;

use super::RunContext;
use crate::db::home::{Home, Homes};
use crate::db::DbError;
use crate::model::format::{self, HomeMarker};
use crate::model::protection::{PutOptions, WritePolicy};
use crate::model::table::TableSpec;
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
    #[error("the store at {given} does not hold {table}'s archive: {detail}. --store names the archive's bucket and prefix, but --s3-endpoint / AWS_ENDPOINT_URL or the credentials may reach another service or account; if this is the archive's store, its objects are gone: escalate")]
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

impl HomeError {
    /// A store setting that cannot be right, or a store that cannot be reached: exit 2. A
    /// database failure is the run's to classify.
    pub fn is_configuration(&self) -> bool {
        match self {
            HomeError::Db(_) => false,
            HomeError::Store { source, .. } => source.is_configuration(),
            _ => true,
        }
    }
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

/// How many receipts' objects are looked for by HEAD where the marker cannot vouch for a store.
const RECEIPTS_LOOKED_AT: u32 = 3;

/// Holds the store `ctx` opened to the archive's home: one read of the home, one GET of the
/// marker (a few HEADs for an archive not bound yet).
pub async fn check(ctx: &RunContext) -> Result<Checked, HomeError> {
    check_in(ctx.spec, &ctx.db.pool, ctx.store.as_ref()).await
}

/// [`check`], of `spec`'s archive in `store` (doctor's line, outside a run).
pub async fn check_in(
    spec: &'static TableSpec,
    pool: &MySqlPool,
    store: &dyn ObjectStore,
) -> Result<Checked, HomeError> {
    let homes = Homes::new(spec);
    let given = store.location().to_string();
    let table = spec.name.to_string();
    match homes.current(pool).await? {
        Some(home) if home.store != given => Err(HomeError::Elsewhere {
            table,
            home: home.store.clone(),
            given,
            bound: crate::model::timespec::rfc3339(home.bound_at_ms),
            run: home.run_id.clone().unwrap_or_else(|| "?".into()),
        }),
        Some(home) => match read_marker(store, &home.marker_key).await? {
            Some(marker) if marker.archive_id == home.archive_id => Ok(Checked::Home(home)),
            Some(marker) => Err(foreign(
                spec,
                store,
                &home.marker_key,
                marker,
                &home.archive_id,
            )),
            None => {
                batches_here(spec, pool, store, "its marker is missing").await?;
                tracing::warn!(
                    key = home.marker_key,
                    "the archive's marker is missing while its batches are in the store: the next archive writes it again"
                );
                Ok(Checked::MarkerMissing(home))
            }
        },
        None => {
            // A store that holds an archive's marker while this database has no home is
            // another archive's (or this one's, by a database restored from before its first
            // batch: `relocate` takes it back explicitly).
            let marker_key = format::home_marker_key(&format::table_prefix(
                store.location().prefix(),
                spec.name,
            ));
            if let Some(marker) = read_marker(store, &marker_key).await? {
                return Err(foreign(spec, store, &marker_key, marker, "not bound yet"));
            }
            let keys = homes.some_data_keys(pool, RECEIPTS_LOOKED_AT).await?;
            if keys.is_empty() {
                return Ok(Checked::Unbound { receipts: false });
            }
            let expected = format::table_prefix(store.location().prefix(), spec.name);
            if let Some(off) = keys.iter().find(|k| !k.starts_with(&expected)) {
                return Err(HomeError::PrefixMismatch {
                    table,
                    given,
                    recorded: off.clone(),
                    expected,
                });
            }
            batches_here(spec, pool, store, "no marker").await?;
            Ok(Checked::Unbound { receipts: true })
        }
    }
}

fn table_prefix(ctx: &RunContext) -> String {
    format::table_prefix(ctx.store.location().prefix(), ctx.spec.name)
}

/// A store without the marker is the archive's only if it holds its batches: a few receipts'
/// data objects are looked for by HEAD, and one found is enough.
async fn batches_here(
    spec: &'static TableSpec,
    pool: &MySqlPool,
    store: &dyn ObjectStore,
    why: &str,
) -> Result<(), HomeError> {
    let keys = Homes::new(spec)
        .some_data_keys(pool, RECEIPTS_LOOKED_AT)
        .await?;
    for key in &keys {
        match store.head(key).await {
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
        detail: match keys.first() {
            Some(first) => format!(
                "{why}, and none of {} of its batches' objects is there (such as {first})",
                keys.len()
            ),
            None => format!("{why}, and it has no batch to look for"),
        },
    })
}

fn foreign(
    spec: &TableSpec,
    store: &dyn ObjectStore,
    key: &str,
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

async fn read_marker(store: &dyn ObjectStore, key: &str) -> Result<Option<HomeMarker>, HomeError> {
    let bytes = store::get_all(store, key)
        .await
        .map_err(|source| HomeError::Store {
            key: key.to_string(),
            source,
        })?;
    Ok(bytes.map(|b| {
        // Bytes that are no marker are some other archive's business, never ours.
        HomeMarker::parse(&b).unwrap_or(HomeMarker {
            archive_id: "(not a marker)".into(),
            table: "?".into(),
            database: "?".into(),
            created_at_ms: 0,
        })
    }))
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
    pub async fn ensure(&self, ctx: &RunContext, policy: &WritePolicy) -> Result<&Home, HomeError> {
        self.0.get_or_try_init(|| bind(ctx, policy)).await
    }
}

/// Binds the archive to the run's store (or confirms the binding another run just made), its
/// marker written once under the batches' retention and read back.
async fn bind(ctx: &RunContext, policy: &WritePolicy) -> Result<Home, HomeError> {
    let homes = Homes::new(ctx.spec);
    let pool = &ctx.db.pool;
    loop {
        let home = match check(ctx).await? {
            Checked::Home(home) => return Ok(home),
            Checked::MarkerMissing(home) => {
                put_marker(ctx, &home, policy).await?;
                return Ok(home);
            }
            Checked::Unbound { .. } => {
                let marker_key = format::home_marker_key(&table_prefix(ctx));
                if let Some(marker) = read_marker(ctx.store.as_ref(), &marker_key).await? {
                    return Err(foreign(
                        ctx.spec,
                        ctx.store.as_ref(),
                        &marker_key,
                        marker,
                        "not bound yet",
                    ));
                }
                Home {
                    id: 1,
                    store: ctx.store.location().to_string(),
                    archive_id: new_archive_id(),
                    marker_key,
                    bound_at_ms: (ctx.now_ms)(),
                    moved_from: None,
                    reason: None,
                    run_id: Some(crate::pipeline::report::run_id().to_string()),
                }
            }
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
            Err(e) => {
                // Nothing is archived under this binding yet: take it back, so that the next
                // run binds afresh (or is refused, if the store is another archive's).
                homes.withdraw(pool, &home).await?;
                return Err(e);
            }
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
        lock: policy.lock_at((ctx.now_ms)()),
        legal_hold: policy.legal_hold,
    };
    let key = &home.marker_key;
    let stored = |source| HomeError::Store {
        key: key.clone(),
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
        Some(found) if found.archive_id == home.archive_id => Ok(()),
        Some(found) => Err(foreign(
            ctx.spec,
            ctx.store.as_ref(),
            key,
            found,
            &home.archive_id,
        )),
        None => Err(stored(StoreError::Other {
            op: "get",
            key: key.clone(),
            detail: "written, but not there when read back".into(),
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

/// `relocate` where the database has no home: the store `ctx` opened holds an archive's marker
/// and this database's batches (a database restored from before its archive's first batch, or
/// one whose home row was lost): the home is recorded with that marker's id, and the reason.
async fn adopt(ctx: &RunContext, reason: &str) -> Result<Relocated, String> {
    let homes = Homes::new(ctx.spec);
    let to = ctx.store.as_ref();
    let target = to.location().to_string();
    let marker_key = format::home_marker_key(&table_prefix(ctx));
    let Some(marker) = read_marker(to, &marker_key)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Err(format!(
            "{}'s archive has no home yet and {target} holds no archive's marker: there is nothing to relocate (its first archive binds it)",
            ctx.spec.name
        ));
    };
    if marker.table != ctx.spec.name {
        return Err(format!(
            "{marker_key} is the marker of table {}'s archive, not {}'s",
            marker.table, ctx.spec.name
        ));
    }
    let keys = homes
        .some_data_keys(&ctx.db.pool, RECEIPTS_LOOKED_AT)
        .await
        .map_err(|e| e.to_string())?;
    if keys.is_empty() {
        return Err(format!(
            "this database has no receipt of {}: nothing ties it to the archive at {target}",
            ctx.spec.name
        ));
    }
    let mut checked = vec![marker_key.clone()];
    for key in keys {
        match to.head(&key).await {
            Ok(Some(_)) => checked.push(key),
            Ok(None) => {
                return Err(format!(
                    "{target} holds an archive's marker but not this database's batch {key}: it is another database's archive"
                ))
            }
            Err(e) => return Err(format!("{target}: {e}")),
        }
    }
    let home = Home {
        id: 1,
        store: target.clone(),
        archive_id: marker.archive_id.clone(),
        marker_key,
        bound_at_ms: (ctx.now_ms)(),
        moved_from: None,
        reason: Some(reason.to_string()),
        run_id: Some(crate::pipeline::report::run_id().to_string()),
    };
    if !homes
        .insert(&ctx.db.pool, &home)
        .await
        .map_err(|e| e.to_string())?
    {
        return Err(
            "another run bound the archive at the same moment: look at it again (doctor)".into(),
        );
    }
    Ok(Relocated {
        from: "(no home: taken back)".into(),
        to: target,
        archive_id: marker.archive_id,
        checked,
    })
}

/// What `relocate` did: the archive's old and new home.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Relocated {
    pub from: String,
    pub to: String,
    pub archive_id: String,
    /// The objects looked for at the new home (the marker, and a few receipts' data objects).
    pub checked: Vec<String>,
}

/// Moves the archive's home to the store `ctx` opened (`--to`), where an operator copied it
/// (its marker included): under the same prefix (object keys are part of what every receipt,
/// manifest and chain link recorded), holding this archive's marker and a few of its batches.
/// Recorded with the operator's reason; the old home need not be reachable (a lost bucket's
/// archive restored from a replica moves too).
pub async fn relocate(ctx: &RunContext, reason: &str) -> Result<Relocated, String> {
    let homes = Homes::new(ctx.spec);
    let pool = &ctx.db.pool;
    let to = ctx.store.as_ref();
    let Some(home) = homes.current(pool).await.map_err(|e| e.to_string())? else {
        return adopt(ctx, reason).await;
    };
    let target = to.location().to_string();
    if target == home.store {
        return Err(format!("the archive already lives at {target}"));
    }
    let old_prefix = Location::parse(&home.store)
        .map(|l| l.prefix().to_string())
        .unwrap_or_default();
    if to.location().prefix() != old_prefix {
        return Err(format!(
            "--to {target} has another key prefix than the archive's home {} ({:?}, not {old_prefix:?}): every receipt, manifest and chain link records its objects' full keys, so the archive moves only to another bucket (or folder) under the same prefix",
            home.store,
            to.location().prefix(),
        ));
    }
    let mut checked = Vec::new();
    match read_marker(to, &home.marker_key).await.map_err(|e| e.to_string())? {
        Some(marker) if marker.archive_id == home.archive_id => checked.push(home.marker_key.clone()),
        Some(marker) => {
            return Err(format!(
                "{target} holds another archive's marker ({}: archive {}), not this one's ({})",
                home.marker_key, marker.archive_id, home.archive_id
            ))
        }
        None => {
            return Err(format!(
                "{target} does not hold the archive's marker {}: copy the whole archive there first, the marker included (aws s3 sync {} {target}), then relocate",
                home.marker_key, home.store
            ))
        }
    }
    let keys = homes
        .some_data_keys(pool, RECEIPTS_LOOKED_AT)
        .await
        .map_err(|e| e.to_string())?;
    for key in keys {
        match to.head(&key).await {
            Ok(Some(_)) => checked.push(key),
            Ok(None) => {
                return Err(format!(
                    "{target} lacks {key}, a batch's data object: copy the whole archive there first, then relocate (and verify it there)"
                ))
            }
            Err(e) => return Err(format!("{target}: {e}")),
        }
    }
    let moved = Home {
        id: home.id + 1,
        store: target.clone(),
        archive_id: home.archive_id.clone(),
        marker_key: home.marker_key.clone(),
        bound_at_ms: (ctx.now_ms)(),
        moved_from: Some(home.store.clone()),
        reason: Some(reason.to_string()),
        run_id: Some(crate::pipeline::report::run_id().to_string()),
    };
    if !homes
        .insert(pool, &moved)
        .await
        .map_err(|e| e.to_string())?
    {
        return Err("another run moved or bound the archive at the same moment: look at it again (doctor), then relocate again if still needed".into());
    }
    Ok(Relocated {
        from: home.store,
        to: target,
        archive_id: home.archive_id,
        checked,
    })
}
