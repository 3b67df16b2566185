//! The command line (SPEC §6) — the only place clap lives. [`args`] is its shape (option
//! groups with help headings, one struct per subcommand); `options` turns arguments into the
//! commands' options; [`print_config`] shows every setting and its source. This module opens
//! the run's context (database, store), runs the command, always closes the database, and sends
//! the metrics; the work is in [`crate::commands`] and [`crate::pipeline`].

pub(crate) mod args;
mod groups;
mod help;
mod line;
pub(crate) mod logs;
mod options;
mod parse;
pub(crate) mod print_config;
mod process;
mod short_help;

use crate::model::command::CommandName;
use clap::Parser;
use tokio_util::sync::CancellationToken;

pub(crate) use args::{Command, Common, LogArgs, LogFormat};
pub use line::command;
pub(crate) use line::parse_or_exit;
pub(crate) use options::Groups;
use options::{Connect, IntoOptions};
pub(crate) use print_config::effective_config;
pub use process::main;

use crate::commands::{demo, doctor, log_key, schema};
use crate::output::metrics;
use crate::pipeline;
use crate::pipeline::apps::Apps;
use crate::pipeline::doctor::OpenedStore;
use crate::pipeline::report::Summary;
use crate::pipeline::{system_clock, DbContext, RunContext};
use crate::store::{self, Location};

#[derive(Debug, Parser)]
#[command(
    name = "outbox-archiver",
    version,
    about = "Moves old delivered outbox rows to S3-compatible storage, with proof."
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Command,
}

/// Runs the parsed command line, then sends its metrics where configured; the summary says how
/// it went.
pub(crate) async fn run(cli: Cli, shutdown: CancellationToken) -> Summary {
    let started = std::time::Instant::now();
    for name in &cli.common.unknown_variables {
        tracing::warn!(
            variable = name.as_str(),
            "not a setting of this outbox-archiver (of another version?): ignored"
        );
    }
    let target = cli.command.groups().metrics_target();
    let table = cli.common.db.table.clone();
    let shard = cli.command.app_args().and_then(|apps| apps.shard);
    let mut summary = run_command(cli, shutdown).await;
    // A profile's table is named by the profile, not by --table.
    let table = summary.table.clone().unwrap_or(table);
    if !target.is_empty() {
        let run = metrics::Run {
            summary: &summary,
            table: &table,
            shard: shard.map(|s| s.to_string()),
            finished_at_ms: system_clock()(),
            duration: started.elapsed(),
        };
        let errors = metrics::publish(&target, &run).await;
        for error in &errors {
            tracing::error!("{error}");
        }
        summary.metrics_errors = errors;
    }
    summary
}

async fn run_command(cli: Cli, shutdown: CancellationToken) -> Summary {
    let Cli { common, command } = cli;
    let now = system_clock()();
    // A Ctrl-C this process took is the run's, though its work ended before it looked.
    let summary = command_summary(&common, command, now, shutdown)
        .await
        .interrupted(crate::pipeline::signal());
    note_run_level(&common, &summary, now).await;
    summary
}

async fn command_summary(
    common: &Common,
    command: Command,
    now: i64,
    shutdown: CancellationToken,
) -> Summary {
    let connect = command.groups().connect();
    let connect = &connect;
    // csv is attest's statement; asked of another command on its command line, it is a mistake
    // (from the environment, a preference every command shares, it reads as json).
    if common.log.format == Some(args::FormatArg::Csv)
        && !common.log.format_from_environment
        && !matches!(command, Command::Attest(_))
    {
        return Summary::unusable(
            command.name(),
            "--format csv is attest's (its statement per app and day); this command prints table or json".into(),
        );
    }
    match command {
        Command::Archive(args) => run_args(common, connect, args, now, shutdown).await,
        Command::Verify(args) => run_args(common, connect, args, now, shutdown).await,
        Command::Status(args) => run_args(common, connect, args, now, shutdown).await,
        Command::Find(args) => run_args(common, connect, args, now, shutdown).await,
        Command::History(args) => run_args(common, connect, args, now, shutdown).await,
        Command::Purge(args) => run_args(common, connect, args, now, shutdown).await,
        Command::Restore(args) => run_args(common, connect, args, now, shutdown).await,
        Command::Compact(args) => run_args(common, connect, args, now, shutdown).await,
        Command::Attest(args) => run_args(common, connect, args, now, shutdown).await,
        Command::Migrate(args) => migrate_command(common, &args).await,
        Command::Doctor(args) => doctor_command(common, args, now).await,
        Command::Schema => schema_command(common).await,
        Command::Demo(args) => demo_command(common, args, shutdown).await,
        Command::Relocate(args) => relocate_command(common, connect, &args, shutdown).await,
        Command::LogKey(args) => log_key::run(&args.name, &args.out),
    }
}

/// A command that is a pipeline's work: its arguments made its options, what its options run
/// with opened and checked ([`Opens`]), the work run, the database always closed.
async fn run_args<A: IntoOptions>(
    common: &Common,
    connect: &Connect,
    args: A,
    now: i64,
    shutdown: CancellationToken,
) -> Summary
where
    <A::Options as pipeline::command::Command>::Context: Opens,
{
    use pipeline::command::Command as _;
    let name = <A::Options as pipeline::command::Command>::NAME;
    let options = match args.into_options(common, now) {
        Ok(options) => options,
        Err(e) => return Summary::unusable(name, e),
    };
    let opened = Opens::open(common, connect, options.apps(), options.writes(), shutdown).await;
    let ctx: <A::Options as pipeline::command::Command>::Context = match opened {
        Ok(ctx) => ctx,
        Err(e) => return Summary::unusable(name, e),
    };
    let summary = crate::commands::run(&ctx, &options).await;
    ctx.db().close().await;
    summary
}

/// `migrate`: the table's spec needs the database (a profile's columns are read from it).
async fn migrate_command(common: &Common, args: &args::MigrateArgs) -> Summary {
    let options = crate::commands::migrate::MigrateOptions {
        with_source_table: args.with_source_table,
        seed_rows: args.seed_rows,
    };
    if let Err(e) = common.profile() {
        return Summary::unusable(CommandName::Migrate, e);
    }
    let db = match common.database().await {
        Ok(db) => db,
        Err(e) => return Summary::unusable(CommandName::Migrate, e),
    };
    let summary = match common.spec_on(&db).await {
        Ok(spec) => crate::commands::migrate::run(&db, spec, &options).await,
        Err(e) => Summary::unusable(CommandName::Migrate, e),
    };
    db.close().await;
    summary
}

/// `demo` makes its own database and store; it needs only the server's URL from the settings.
async fn demo_command(
    common: &Common,
    args: args::DemoArgs,
    shutdown: CancellationToken,
) -> Summary {
    let spec = match common.spec() {
        Ok(spec) => spec,
        Err(e) => return Summary::unusable(CommandName::Demo, e),
    };
    let options = demo::DemoOptions {
        server_url: common
            .db
            .database_url
            .clone()
            .unwrap_or_else(|| demo::DEFAULT_SERVER_URL.to_string()),
        database: args.database,
        rows: args.rows,
        dir: std::path::absolute(&args.dir).unwrap_or(args.dir),
        file_store: args.file_store,
        force: args.force,
        serve: args.serve,
        port: args.port,
    };
    demo::run(spec, &options, shutdown, system_clock()).await
}

/// What a command runs with, opened from the settings and checked before any work starts.
#[async_trait::async_trait]
trait Opens: Sized + Sync {
    async fn open(
        common: &Common,
        connect: &Connect,
        apps: Option<&Apps>,
        writes: bool,
        shutdown: CancellationToken,
    ) -> Result<Self, String>;
    fn db(&self) -> &crate::db::Db;
}

/// A command that touches the archive: the table, the database (migrated, collations right),
/// the store (reachable, these credentials allowed), the listed apps (none equal under the
/// table's collation), the operator's stops and log keys, and `--store` held to the archive's
/// home.
#[async_trait::async_trait]
impl Opens for RunContext {
    async fn open(
        common: &Common,
        connect: &Connect,
        apps: Option<&Apps>,
        writes: bool,
        shutdown: CancellationToken,
    ) -> Result<RunContext, String> {
        common.profile()?;
        let store_url = common.store.as_deref().ok_or(
            "no archive location given: set --store or OUTBOX_ARCHIVER_STORE (s3://bucket/prefix or file:///path)",
        )?;
        let location = Location::parse(store_url)?;
        let db = common.database().await?;
        let checked = async {
            let spec = common.spec_on(&db).await?;
            pipeline::command::check_database(&db, spec, apps).await?;
            let store = store::open(location, &connect.s3)
                .await
                .map_err(|e| e.to_string())?;
            store
                .confirm_access()
                .await
                .map_err(|e| format!("{e} (store {})", store.location()))?;
            let stops = common.stops(&db, connect, writes).await?;
            let log_keys = match &connect.log_keys {
                Some(keys) => keys.keys()?,
                None => Default::default(),
            };
            Ok::<_, String>((spec, store, stops, log_keys))
        }
        .await;
        match checked {
            Ok((spec, store, stops, log_keys)) => {
                let ctx = RunContext {
                    log_keys,
                    ..RunContext::new(spec, db, store, shutdown, system_clock()).with_stops(stops)
                };
                pipeline::command::start(ctx).await
            }
            Err(e) => {
                db.close().await;
                Err(e)
            }
        }
    }

    fn db(&self) -> &crate::db::Db {
        &self.db
    }
}

/// A command of the database side only (`status`, `history`: no store), checked as every
/// command checks it.
#[async_trait::async_trait]
impl Opens for DbContext {
    async fn open(
        common: &Common,
        _: &Connect,
        _: Option<&Apps>,
        _: bool,
        shutdown: CancellationToken,
    ) -> Result<DbContext, String> {
        common.profile()?;
        let db = common.database().await?;
        let spec = async {
            let spec = common.spec_on(&db).await?;
            pipeline::command::check_database(&db, spec, None).await?;
            Ok::<_, String>(spec)
        };
        match spec.await {
            Ok(spec) => Ok(DbContext::new(spec, db, shutdown, system_clock())),
            Err(e) => {
                db.close().await;
                Err(e)
            }
        }
    }

    fn db(&self) -> &crate::db::Db {
        &self.db
    }
}

/// `relocate` opens the database and the archive's new home (`--to`), not `--store`: the old
/// home need not be reachable, and the new one is checked by the move itself.
async fn relocate_command(
    common: &Common,
    connect: &Connect,
    args: &args::RelocateArgs,
    shutdown: CancellationToken,
) -> Summary {
    let name = CommandName::Relocate;
    let location = match Location::parse(&args.to) {
        Ok(location) => location,
        Err(e) => return Summary::unusable(name, e.replace("--store", "--to")),
    };
    let base = match <DbContext as Opens>::open(common, connect, None, false, shutdown).await {
        Ok(base) => base,
        Err(e) => return Summary::unusable(name, e),
    };
    let opened = async {
        let store = store::open(location, &connect.s3)
            .await
            .map_err(|e| e.to_string())?;
        store
            .confirm_access()
            .await
            .map_err(|e| format!("{e} (--to {})", store.location()))?;
        Ok::<_, String>(store)
    };
    let summary = match opened.await {
        Ok(store) => {
            // `--sentinel` stops the re-read before the next batch (nothing moves).
            let stops = pipeline::Stops {
                sentinel: connect.sentinel.clone(),
                replicas: None,
            };
            let ctx = RunContext::new(base.spec, base.db.clone(), store, base.shutdown, base.clock)
                .with_stops(stops);
            let options = pipeline::relocate::RelocateOptions {
                reason: args.reason.clone(),
                parallel: args.parallel as usize,
            };
            // A progress line (a terminal) or log lines (`--progress-every`) while every batch
            // is re-read at the new home: a large archive's move takes a while.
            let progress = crate::output::progress::Progress::new(name);
            pipeline::relocate::run(&ctx, &options, &progress).await
        }
        Err(e) => Summary::unusable(name, e),
    };
    base.db.close().await;
    summary
}

/// `doctor` opens the database and the store itself: that one cannot be reached is a finding it
/// reports (with exit status 2), not a reason to stop before looking at the other.
async fn doctor_command(common: &Common, args: args::DoctorArgs, now_ms: i64) -> Summary {
    let policy = options::write_policy(common.store.as_deref(), &args.upload, &args.protection);
    let (profile, policy) = match (common.profile(), policy) {
        (Ok(profile), Ok(policy)) => (profile, policy),
        (Err(e), _) | (_, Err(e)) => return Summary::unusable(CommandName::Doctor, e),
    };
    // A built-in table's spec now; a profile's once the database describes it.
    let spec = match profile {
        Some(_) => None,
        None => match common.spec() {
            Ok(spec) => Some(spec),
            Err(e) => return Summary::unusable(CommandName::Doctor, e),
        },
    };
    let s3_settings = Groups {
        s3: Some(&args.s3),
        upload: Some(&args.upload),
        protection: Some(&args.protection),
        ..Groups::default()
    }
    .s3_settings();
    let location = match common.store.as_deref().map(Location::parse) {
        Some(Ok(location)) => location,
        Some(Err(e)) => return Summary::unusable(CommandName::Doctor, e),
        None => {
            return Summary::unusable(CommandName::Doctor,
                "no archive location given: set --store or OUTBOX_ARCHIVER_STORE (s3://bucket/prefix or file:///path)".into(),
            )
        }
    };
    let options = args.options(policy);
    let db = common.database().await;
    // A profile's table is known once the database describes it: a profile that does not fit
    // is doctor's answer (exit 2), like a command's start-up refusal.
    let spec = match (spec, &db) {
        (Some(spec), _) => spec,
        (None, Ok(db)) => match common.spec_on(db).await {
            Ok(spec) => spec,
            Err(e) => {
                db.close().await;
                return Summary::unusable(CommandName::Doctor, e);
            }
        },
        (None, Err(e)) => return Summary::unusable(CommandName::Doctor, e.clone()),
    };
    let opened = OpenedStore::open(location, &s3_settings).await;
    let handle = opened
        .as_ref()
        .map(OpenedStore::handle)
        .map_err(Clone::clone);
    let summary = doctor::run(
        spec,
        db.as_ref().map_err(Clone::clone),
        handle,
        &options,
        now_ms,
    )
    .await;
    if let Ok(db) = db {
        db.close().await;
    }
    summary
}

/// `schema`: a built-in table's record schema needs nothing (its own columns; with a database, the
/// columns added to the table too); a profile's, the database that describes its columns.
async fn schema_command(common: &Common) -> Summary {
    let spec = match common.profile() {
        Err(e) => return Summary::unusable(CommandName::Schema, e),
        Ok(None) if common.db.database_url.is_none() => common.spec(),
        Ok(_) => match common.database().await {
            Err(e) => Err(e),
            Ok(db) => {
                let spec = common.spec_on(&db).await;
                db.close().await;
                spec
            }
        },
    };
    match spec {
        Err(e) => Summary::unusable(CommandName::Schema, e),
        Ok(spec) => schema::run(spec),
    }
}

/// Records a run that has no app of its own to record it, where the database can be reached
/// ([`pipeline::command::note_run_level`]).
async fn note_run_level(common: &Common, summary: &Summary, started_at_ms: i64) {
    if !pipeline::command::needs_run_level_row(summary) {
        return;
    }
    let Ok(db) = common.database().await else {
        return;
    };
    if let Ok(spec) = common.spec_on(&db).await {
        let store = common.store.as_deref();
        pipeline::command::note_run_level(&db, spec, summary, started_at_ms, store).await;
    }
    db.close().await;
}
