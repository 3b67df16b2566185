//! The newcomer's tour behind `demo`: creates a throwaway database on the local MariaDB/MySQL,
//! an archive location (a real S3 server in this process, serving a local folder — the production
//! S3 code path — or a `file://` folder), seeds realistic rows over three apps, runs `archive`,
//! `verify` and `status` as an operator would, and says what was archived and where to look.
//!
//! The in-process S3 server comes with the `local-s3` feature (on by default, for the demo and
//! the tests); a release built with `--no-default-features` has no server in it, and its demo
//! uses a `file://` folder.

use crate::model::command::CommandName;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::commands::archive::{self, ArchiveOptions};
use crate::commands::{migrate, status, verify};
use crate::db::receipts::{Receipts, StoredReceipt};
use crate::db::{source, Db};
use crate::model::table::TableSpec;
use crate::model::timespec;
use crate::pipeline::apps::Apps;
use crate::pipeline::report::Summary;
use crate::pipeline::{Clock, RunContext};
use crate::store::{self, Location, ObjectStore};
use crate::testkit::seed::{self, SeedPlan};

/// The MariaDB/MySQL server to use when none is given: the local server's unix socket as root
/// (how a fresh Debian MariaDB lets root in).
pub const DEFAULT_SERVER_URL: &str = "mysql://root@localhost/?socket=/run/mysqld/mysqld.sock";

#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// A server URL (its database part is ignored: the demo creates `database`).
    pub server_url: String,
    pub database: String,
    pub rows: u64,
    pub dir: PathBuf,
    /// Use a `file://` folder instead of the in-process S3 server.
    pub file_store: bool,
    /// Drop the database and empty the folder even without the demo's marker.
    pub force: bool,
}

/// The file the demo leaves in its folder, and the table it leaves in its database: what tells
/// a later demo that emptying or dropping them destroys nothing of anyone else's.
const MARKER: &str = "outbox_archiver_demo";
const DIR_MARKER: &str = ".outbox-archiver-demo";

#[cfg(feature = "local-s3")]
const BUCKET: &str = "outbox-archive";
#[cfg(feature = "local-s3")]
const PREFIX: &str = "demo";

pub async fn run(
    spec: &'static TableSpec,
    opts: &DemoOptions,
    shutdown: CancellationToken,
    now_ms: Clock,
) -> Summary {
    match demo(spec, opts, shutdown, now_ms).await {
        Ok(summary) => summary,
        Err(e) => Summary::unusable(CommandName::Demo, e.to_string()),
    }
}

/// A line of the demo's own, on stderr above any progress lines.
fn say(text: String) {
    crate::output::progress::say(&format!("demo: {text}"));
}

async fn demo(
    spec: &'static TableSpec,
    opts: &DemoOptions,
    shutdown: CancellationToken,
    now_ms: Clock,
) -> anyhow::Result<Summary> {
    let now = now_ms();
    let db = database(spec, opts, now).await?;
    // Keeps the in-process S3 server (if any) running while the store is used.
    let (store, _server) = archive_location(opts).await?;
    let env = RunContext::new(spec, db.clone(), store.clone(), shutdown, now_ms);
    // Archive everything delivered more than 7 days ago.
    let cutoff_ms = timespec::cutoff_ms(now, 7 * 86_400_000, None);
    let options = ArchiveOptions {
        lock_prefix: format!("{}:", opts.database),
        ..ArchiveOptions::new(Apps::All, cutoff_ms)
    };
    let started = Instant::now();
    let summary = archive::run(&env, &options).await;
    let elapsed = started.elapsed();
    report(&db, spec, &options, &summary, store.as_ref(), opts, elapsed).await?;
    look_around(&env, cutoff_ms).await;
    db.close().await;
    Ok(Summary {
        command: CommandName::Demo,
        ..summary
    })
}

/// A throwaway database, migrated, with realistic rows: three apps, 30 days, mostly delivered.
async fn database(spec: &'static TableSpec, opts: &DemoOptions, now: i64) -> anyhow::Result<Db> {
    let db_url = recreate_database(&opts.server_url, &opts.database, opts.force).await?;
    let db = Db::connect(&db_url, 4).await?;
    let migrated = migrate::run(
        &db,
        spec,
        &migrate::MigrateOptions {
            with_source_table: true,
        },
    )
    .await;
    if let Some(e) = migrated.error {
        anyhow::bail!(e);
    }
    say(format!(
        "created database {} on {}",
        opts.database, db.url_redacted
    ));
    let plan = SeedPlan {
        apps: vec!["wallet-cn".into(), "wallet-sg".into(), "fun.games".into()],
        rows: opts.rows,
        start_ms: now - 30 * 86_400_000,
        end_ms: now,
        delivered_percent: 86,
        seed: 20261129,
        event_ids: seed::EventIds::Sequential,
    };
    let started = Instant::now();
    seed::seed(&db.pool, spec, &plan).await?;
    say(format!(
        "seeded {} rows over apps {:?} in {:.1}s",
        plan.rows,
        plan.apps,
        started.elapsed().as_secs_f64()
    ));
    Ok(db)
}

/// An archive location: a real S3 server in this process serving `opts.dir` (returned, to keep
/// it running), or the folder itself.
async fn archive_location(
    opts: &DemoOptions,
) -> anyhow::Result<(Arc<dyn ObjectStore>, Option<Box<dyn std::any::Any>>)> {
    if opts.dir.exists() {
        let marked = opts.dir.join(DIR_MARKER).exists();
        let empty = std::fs::read_dir(&opts.dir)?.next().is_none();
        if !marked && !empty && !opts.force {
            anyhow::bail!(
                "--dir {} is not empty and was not made by the demo (no {DIR_MARKER} in it): \
                 nothing was removed; give another --dir, or --force to empty it",
                opts.dir.display()
            );
        }
        std::fs::remove_dir_all(&opts.dir)?;
    }
    std::fs::create_dir_all(&opts.dir)?;
    std::fs::write(
        opts.dir.join(DIR_MARKER),
        "made by outbox-archiver demo; the next demo empties this folder\n",
    )?;
    #[cfg(feature = "local-s3")]
    if !opts.file_store {
        let server = crate::testkit::local_s3::LocalS3::start(
            &opts.dir,
            "demo-access-key",
            "demo-secret-key-not-secret",
        )
        .await?;
        server.create_bucket(BUCKET)?;
        let location = Location::S3 {
            bucket: BUCKET.into(),
            prefix: PREFIX.into(),
        };
        let store = store::open(location, &server.settings()).await?;
        store.confirm_access().await?;
        say(format!(
            "started an S3 server at {} serving {}",
            server.endpoint,
            opts.dir.display()
        ));
        return Ok((store, Some(Box::new(server))));
    }
    let location = Location::Local {
        root: opts.dir.clone(),
    };
    let store = store::open(location, &Default::default()).await?;
    store.confirm_access().await?;
    Ok((store, None))
}

/// Reads everything back as an operator would, and shows the state of each app.
async fn look_around(env: &RunContext, cutoff_ms: i64) {
    let started = Instant::now();
    let verified = verify::run(
        env,
        &verify::VerifyOptions::everything(cutoff_ms, "DELIVERED"),
    )
    .await;
    if let Some(crate::pipeline::report::RunDetails::Verify(run)) = &verified.details {
        say(format!(
            "verify re-read {} batches in {:.1}s: {} findings, {} orphans (exit status {})",
            run.checked_batches.len(),
            started.elapsed().as_secs_f64(),
            run.findings.len(),
            run.orphans.len(),
            verified.exit_code
        ));
    }
    let status_options = status::StatusOptions {
        apps: Apps::All,
        cutoff_ms,
        grace_ms: 24 * 3_600_000,
        delivered_status: "DELIVERED".into(),
        format: status::Format::Table,
    };
    let state = status::run(env, &status_options).await;
    say("status:".into());
    for line in state.text.unwrap_or_default().lines() {
        say(format!("  {line}"));
    }
    say(format!(
        "try: DATABASE_URL='{}' outbox-archiver status{}",
        env.db.url_redacted,
        match env.spec.name {
            "wallet_outbox" => String::new(),
            name => format!(" --table {name}"),
        }
    ));
    say("the archive run's summary follows on stdout (all of it: --format json)".into());
}

/// Drops and creates the demo database; returns its URL.
async fn recreate_database(
    server_url: &str,
    database: &str,
    force: bool,
) -> anyhow::Result<String> {
    crate::db::recreate_database(server_url, database, MARKER, force)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "{e}. Start the local server (for MariaDB: start-stop-daemon --start --oknodo \
                 --background --exec /usr/sbin/mariadbd) or pass --database-url \
                 mysql://user:password@host:3306 of a server where you may create databases"
            )
        })
}

async fn report(
    db: &Db,
    spec: &'static TableSpec,
    options: &ArchiveOptions,
    summary: &Summary,
    store: &dyn ObjectStore,
    opts: &DemoOptions,
    elapsed: Duration,
) -> anyhow::Result<()> {
    let rows: u64 = summary.apps.iter().map(|a| a.rows).sum();
    let batches: u64 = summary.apps.iter().map(|a| a.batches).sum();
    say(format!(
        "archived {rows} rows in {batches} batches in {:.1}s ({:.0} rows/s), cutoff {}",
        elapsed.as_secs_f64(),
        rows as f64 / elapsed.as_secs_f64().max(1e-9),
        timespec::rfc3339(options.cutoff_ms)
    ));
    reconcile(db, spec, options, summary).await?;
    let receipts = Receipts::new(spec).first(&db.pool, 5).await?;
    let total = Receipts::new(spec)
        .count(&db.pool, &Default::default())
        .await?;
    say(format!(
        "{total} VERIFIED receipts in {}; the first few:",
        spec.receipts_table()
    ));
    for r in &receipts {
        say(format!(
            "  {:<10} {} {:>6} rows from {} {:>8} B gzip  {}",
            r.app_code,
            r.batch_id,
            r.content.row_count,
            timespec::rfc3339(r.content.first.updated_at_ms),
            r.data.size,
            r.keys.data
        ));
    }
    // The server's own client: `mysql` for MySQL, `mariadb` for MariaDB.
    let client = match db.server().await.map(|s| s.flavour) {
        Ok(crate::db::preflight::Flavour::MySql) => "mysql",
        _ => "mariadb",
    };
    where_to_look(spec, store, opts, receipts.first(), client);
    Ok(())
}

/// Each app's archived rows beside what the source says should have been archived.
async fn reconcile(
    db: &Db,
    spec: &'static TableSpec,
    options: &ArchiveOptions,
    summary: &Summary,
) -> anyhow::Result<()> {
    for app in &summary.apps {
        let (expected, left) = source::archivable_and_other(
            &db.pool,
            spec,
            &app.app_code,
            "DELIVERED",
            options.cutoff_ms,
        )
        .await?;
        say(format!(
            "  {:<10} {:?}: {} rows in {} batches (delivered rows older than the cutoff: {expected} {}); {left} newer or undelivered rows stay",
            app.app_code,
            app.outcome,
            app.rows,
            app.batches,
            if expected as u64 == app.rows { "— all archived" } else { "— MISMATCH" }
        ));
    }
    Ok(())
}

/// Where the objects are and the commands that show one batch and the receipts.
fn where_to_look(
    spec: &TableSpec,
    store: &dyn ObjectStore,
    opts: &DemoOptions,
    first: Option<&StoredReceipt>,
    client: &str,
) {
    let root = match store.location() {
        Location::S3 { bucket, .. } => opts.dir.join(bucket),
        Location::Local { root } => root.clone(),
    };
    say(format!(
        "objects are under {}",
        root.join(store.location().prefix())
            .join(spec.name)
            .display()
    ));
    if let Some(first) = first {
        let path = root.join(&first.keys.data);
        say(format!(
            "look at one batch:  zcat {} | head -n 2",
            path.display()
        ));
        say(format!(
            "its manifest:       cat {}",
            path.with_file_name("manifest.json").display()
        ));
    }
    say(format!(
        "query the receipts: {client} {} -e 'SELECT app_code, COUNT(*), SUM(row_count) FROM {} GROUP BY app_code'",
        opts.database,
        spec.receipts_table()
    ));
}
