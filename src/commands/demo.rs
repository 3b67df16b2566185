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

use crate::commands::migrate;
use crate::db::receipts::Receipts;
use crate::db::{source, Db};
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;
use crate::model::timespec;
use crate::pipeline::apps::Apps;
use crate::pipeline::archive::ArchiveOptions;
use crate::pipeline::report::Summary;
use crate::pipeline::{status, verify};
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
    /// Serve the last demo's folder as S3 again, on 127.0.0.1:`port`, until stopped (to explore
    /// the archive after the demo's own server ended with it).
    pub serve: bool,
    /// The port `--serve` listens on, and the one `demo.env` names.
    pub port: u16,
}

/// The demo's S3 credentials (a throwaway server on this machine's loopback; not secret).
#[cfg(feature = "local-s3")]
const ACCESS_KEY: &str = "demo-access-key";
#[cfg(feature = "local-s3")]
const SECRET_KEY: &str = "demo-secret-key-not-secret";

/// The file, in the demo's folder, with the settings that reach the demo's archive.
const ENV_FILE: &str = "demo.env";

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
    let result = match opts.serve {
        true => serve(opts, shutdown).await,
        false => demo(spec, opts, shutdown, now_ms).await,
    };
    match result {
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
    let (db, db_url) = database(spec, opts, now).await?;
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
    let summary = super::run(&env, &options).await;
    let elapsed = started.elapsed();
    report(&db, spec, &options, &summary, store.as_ref(), opts, elapsed).await?;
    look_around(&env, cutoff_ms).await;
    let env_file = write_env_file(opts, &db_url, store.location(), &options.lock_prefix)?;
    hints(spec, opts, &env_file, &summary);
    db.close().await;
    Ok(Summary {
        command: CommandName::Demo,
        ..summary
    })
}

/// A throwaway database, migrated, with realistic rows: three apps, 30 days, mostly delivered;
/// and its URL.
async fn database(
    spec: &'static TableSpec,
    opts: &DemoOptions,
    now: i64,
) -> anyhow::Result<(Db, String)> {
    let db_url = recreate_database(&opts.server_url, &opts.database, opts.force).await?;
    let db = Db::connect(&db_url, 4).await?;
    let migrated = migrate::run(
        &db,
        spec,
        &migrate::MigrateOptions {
            with_source_table: true,
            seed_rows: None,
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
    let plan = SeedPlan::trial(opts.rows, now);
    let started = Instant::now();
    seed::seed(&db.pool, spec, &plan).await?;
    say(format!(
        "seeded {} rows over apps {:?} in {:.1}s",
        plan.rows,
        plan.apps,
        started.elapsed().as_secs_f64()
    ));
    Ok((db, db_url))
}

/// An archive location: a real S3 server in this process serving `opts.dir` (returned, to keep
/// it running), or the folder itself.
async fn archive_location(
    opts: &DemoOptions,
) -> anyhow::Result<(Arc<dyn ObjectStore>, Option<Box<dyn std::any::Any + Send>>)> {
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
        let server =
            crate::testkit::local_s3::LocalS3::start(&opts.dir, ACCESS_KEY, SECRET_KEY).await?;
        server.create_bucket(BUCKET)?;
        let location = Location::S3 {
            bucket: BUCKET.into(),
            prefix: crate::model::key::Prefix::parse(PREFIX).expect("the demo's prefix"),
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
    let verified = super::run(
        env,
        &verify::VerifyOptions::everything(cutoff_ms, "DELIVERED"),
    )
    .await;
    if let Some(crate::pipeline::report::RunDetails::Verify(run)) = &verified.details {
        say(format!(
            "verify re-read {} batches in {:.1}s: {} findings, {} orphans (exit status {})",
            run.checked_batch_count,
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
    };
    let state = super::run(&env.base, &status_options).await;
    say("status:".into());
    let table = crate::output::render(
        &state,
        crate::output::Format::Table,
        std::time::Duration::ZERO,
        env.now(),
    );
    for line in table.lines() {
        say(format!("  {line}"));
    }
}

/// The settings that reach the demo's archive — the database URL (its password included), the
/// store and, for the S3 server, its endpoint as `--serve` serves it and its credentials — as
/// `export` lines in `{dir}/demo.env`, readable by its owner only: what the hints source, so
/// that no password is printed and every hint can be pasted.
fn write_env_file(
    opts: &DemoOptions,
    db_url: &str,
    location: &Location,
    lock_prefix: &str,
) -> anyhow::Result<PathBuf> {
    let quoted = |v: &str| format!("'{}'", v.replace('\'', r"'\''"));
    #[cfg_attr(not(feature = "local-s3"), allow(unused_mut))]
    let mut lines = vec![
        "# Made by `outbox-archiver demo`: the settings that reach its archive. Source it: . demo.env".to_string(),
        format!("export DATABASE_URL={}", quoted(db_url)),
        format!("export OUTBOX_ARCHIVER_STORE={}", quoted(&location.to_string())),
        format!("export OUTBOX_ARCHIVER_LOCK_PREFIX={}", quoted(lock_prefix)),
    ];
    #[cfg(feature = "local-s3")]
    if matches!(location, Location::S3 { .. }) {
        lines.extend([
            "# The demo's S3 server ends with it: `outbox-archiver demo --serve` serves the folder again here.".to_string(),
            format!("export OUTBOX_ARCHIVER_DEMO_DIR={}", quoted(&opts.dir.display().to_string())),
            format!("export OUTBOX_ARCHIVER_DEMO_PORT={}", opts.port),
            format!(
                "export OUTBOX_ARCHIVER_S3_ENDPOINT={}",
                quoted(&format!("http://127.0.0.1:{}", opts.port))
            ),
            format!("export AWS_ACCESS_KEY_ID={}", quoted(ACCESS_KEY)),
            format!("export AWS_SECRET_ACCESS_KEY={}", quoted(SECRET_KEY)),
            "export AWS_REGION='us-east-1'".to_string(),
        ]);
    }
    let path = opts.dir.join(ENV_FILE);
    let mut text = lines.join("\n");
    text.push('\n');
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        // `mode` holds for a file created now; one already there is made private too.
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        file.write_all(text.as_bytes())?;
    }
    Ok(path)
}

/// How to explore the archive after the demo: commands that can be pasted as they are.
fn hints(spec: &TableSpec, opts: &DemoOptions, env_file: &std::path::Path, summary: &Summary) {
    let exe = std::env::current_exe()
        .ok()
        .map(|exe| {
            let here = std::env::current_dir().unwrap_or_default();
            exe.strip_prefix(&here).map(PathBuf::from).unwrap_or(exe)
        })
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "outbox-archiver".into());
    let table = match spec.name {
        "wallet_outbox" => String::new(),
        name => format!(" --table {name}"),
    };
    let first = summary.apps.iter().find_map(|a| {
        a.batch_list
            .first()
            .map(|b| (a.app_code.clone(), b.clone()))
    });
    say(format!(
        "explore it yourself — the settings, password included, are in {} (only you can read it):",
        env_file.display()
    ));
    say(format!("  . {}", env_file.display()));
    if !opts.file_store {
        // The demo's S3 server ended with it: this serves the folder again, in the background.
        say(format!(
            "  {exe} demo --serve > {} 2>&1 &",
            opts.dir.join("serve.log").display()
        ));
    }
    say(format!("  {exe} status{table}"));
    if let Some((app, batch)) = first {
        say(format!(
            "  {exe} find{table} --event-id {}",
            batch.first_cursor.event_id
        ));
        say(format!("  {exe} verify{table} --app {app}"));
    }
    say(format!("  {exe} history{table}"));
    if !opts.file_store {
        say(format!(
            "  kill %1   # the S3 server on 127.0.0.1:{}, when you are done",
            opts.port
        ));
    }
    say("the archive run's summary follows on stdout (all of it: --format json)".into());
}

/// `demo --serve`: the last demo's folder served as S3 again, on 127.0.0.1:`port` (what
/// `demo.env` names), until SIGTERM or Ctrl-C.
async fn serve(opts: &DemoOptions, shutdown: CancellationToken) -> anyhow::Result<Summary> {
    if !opts.dir.join(DIR_MARKER).exists() {
        anyhow::bail!(
            "--dir {} holds no demo's archive (no {DIR_MARKER}): run `outbox-archiver demo` first",
            opts.dir.display()
        );
    }
    #[cfg(feature = "local-s3")]
    {
        let server = crate::testkit::local_s3::LocalS3::start_on(
            &opts.dir, ACCESS_KEY, SECRET_KEY, opts.port,
        )
        .await
        .map_err(|e| anyhow::anyhow!("--port {}: {e}", opts.port))?;
        say(format!(
            "serving {} as S3 at {} until Ctrl-C; in another terminal: . {}",
            opts.dir.display(),
            server.endpoint,
            opts.dir.join(ENV_FILE).display()
        ));
        shutdown.cancelled().await;
        drop(server);
        let mut summary = Summary::new(CommandName::Demo);
        summary.stop_reason = Some(crate::pipeline::shutdown_reason().into());
        Ok(summary.settle())
    }
    #[cfg(not(feature = "local-s3"))]
    {
        let _ = shutdown;
        anyhow::bail!("this build has no S3 server (the local-s3 feature): its demo uses a file:// folder, which needs no serving")
    }
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
    let receipts = Receipts::new(&db.pool, spec).first(5).await?;
    let total = Receipts::new(&db.pool, spec)
        .count(&Default::default())
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
            r.objects.data.size,
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
    first: Option<&Receipt>,
    client: &str,
) {
    let root = match store.location() {
        Location::S3 { bucket, .. } => opts.dir.join(bucket),
        Location::Local { root } => root.clone(),
    };
    say(format!(
        "objects are under {}",
        root.join(store.location().prefix().trimmed())
            .join(spec.name)
            .display()
    ));
    if let Some(first) = first {
        let path = root.join(first.keys.data.as_str());
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
        "query the receipts: {} -e 'SELECT app_code, COUNT(*), SUM(row_count) FROM {} GROUP BY app_code'",
        client_line(client, &opts.server_url, &opts.database),
        spec.receipts_table()
    ));
}

/// The server's client pointed where `server_url` points — host, port, socket and user; `-p`
/// to be asked for a password the URL has (never the password itself).
fn client_line(client: &str, server_url: &str, database: &str) -> String {
    let mut line = client.to_string();
    let Ok(url) = url::Url::parse(server_url) else {
        return format!("{line} {database}");
    };
    let socket = url
        .query_pairs()
        .find(|(k, _)| k == "socket")
        .map(|(_, v)| v.into_owned());
    match (socket, url.host_str()) {
        (Some(socket), _) => line.push_str(&format!(" --socket={socket}")),
        (None, Some(host)) if host != "localhost" => line.push_str(&format!(" -h {host}")),
        _ => {}
    }
    if let Some(port) = url.port().filter(|p| *p != 3306) {
        line.push_str(&format!(" -P {port}"));
    }
    if !url.username().is_empty() {
        line.push_str(&format!(" -u {}", url.username()));
    }
    if url.password().is_some() {
        line.push_str(" -p");
    }
    format!("{line} {database}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_client_line_goes_where_the_url_goes_and_never_shows_the_password() {
        use super::client_line;
        assert_eq!(
            client_line("mariadb", "mysql://root@localhost/", "d"),
            "mariadb -u root d"
        );
        assert_eq!(
            client_line("mysql", "mysql://archiver:s3cret@127.0.0.1:3307/x", "d"),
            "mysql -h 127.0.0.1 -P 3307 -u archiver -p d"
        );
        assert_eq!(
            client_line(
                "mariadb",
                "mysql://root@localhost/?socket=/run/mysqld/mysqld.sock",
                "d"
            ),
            "mariadb --socket=/run/mysqld/mysqld.sock -u root d"
        );
    }
}
