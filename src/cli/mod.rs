//! The command line (SPEC §6) — the only place clap lives. [`args`] is its shape (option
//! groups with help headings, one struct per subcommand); `options` turns arguments into the
//! commands' options; [`print_config`] shows every setting and its source. This module opens
//! the run's context (database, store), runs the command, always closes the database, and sends
//! the metrics; the work is in [`crate::commands`] and [`crate::pipeline`].

pub(crate) mod args;
mod groups;
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
use options::Connect;
pub(crate) use options::Groups;
pub(crate) use print_config::effective_config;
pub use process::main;

use crate::commands::{
    archive, attest, compact, demo, doctor, find, history, log_key, migrate, purge, relocate,
    restore, schema, status, verify,
};
use crate::output::metrics;
use crate::pipeline::apps::Apps;
use crate::pipeline::doctor::OpenedStore;
use crate::pipeline::report::{Outcome, Summary};
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
    let shard = match &cli.command {
        Command::Archive(args) => args.apps.shard,
        Command::Purge(args) => args.apps.shard,
        Command::Compact(args) => args.apps.shard,
        _ => None,
    };
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

/// The options of a command that runs over the database and the store ([`with_context`] opens
/// both for it): its name, the apps it lists, whether it writes, and its run.
#[async_trait::async_trait]
trait CommandOptions: Sync {
    const NAME: CommandName;
    fn apps(&self) -> Option<&Apps>;
    /// Whether it writes to the database the replicas follow (then their lag paces it).
    fn writes(&self) -> bool {
        false
    }
    async fn run(&self, ctx: &RunContext) -> Summary;
}

#[async_trait::async_trait]
impl CommandOptions for archive::ArchiveOptions {
    const NAME: CommandName = CommandName::Archive;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    fn writes(&self) -> bool {
        !self.dry_run
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        archive::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl CommandOptions for purge::PurgeOptions {
    const NAME: CommandName = CommandName::Purge;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    fn writes(&self) -> bool {
        !self.dry_run
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        purge::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl CommandOptions for verify::VerifyOptions {
    const NAME: CommandName = CommandName::Verify;
    fn apps(&self) -> Option<&Apps> {
        self.selection.apps.as_ref()
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        verify::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl CommandOptions for attest::AttestOptions {
    const NAME: CommandName = CommandName::Attest;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        attest::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl CommandOptions for restore::RestoreOptions {
    const NAME: CommandName = CommandName::Restore;
    fn apps(&self) -> Option<&Apps> {
        self.selection.apps.as_ref()
    }
    fn writes(&self) -> bool {
        self.into_source
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        restore::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl CommandOptions for find::FindOptions {
    const NAME: CommandName = CommandName::Find;
    fn apps(&self) -> Option<&Apps> {
        self.selection.apps.as_ref()
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        find::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl CommandOptions for compact::CompactOptions {
    const NAME: CommandName = CommandName::Compact;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    fn writes(&self) -> bool {
        !self.dry_run
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        compact::run(ctx, self).await
    }
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
            CommandName::parse(line::command_name(&command)).unwrap_or(CommandName::None),
            "--format csv is attest's (its statement per app and day); this command prints table or json".into(),
        );
    }
    match command {
        Command::Migrate(args) => migrate_command(common, &args).await,
        Command::Archive(args) => match args.into_options(common, now) {
            Err(e) => Summary::unusable(CommandName::Archive, e),
            Ok(options) => with_context(common, connect, &options, shutdown).await,
        },
        Command::Purge(args) => match args.into_options(common) {
            Err(e) => Summary::unusable(CommandName::Purge, e),
            Ok(options) => with_context(common, connect, &options, shutdown).await,
        },
        Command::Compact(args) => match args.into_options() {
            Err(e) => Summary::unusable(CommandName::Compact, e),
            Ok(options) => with_context(common, connect, &options, shutdown).await,
        },
        Command::Verify(args) => {
            let options = args.into_options(common, now);
            with_context(common, connect, &options, shutdown).await
        }
        Command::Attest(args) => match args.into_options(common) {
            Err(e) => Summary::unusable(CommandName::Attest, e),
            Ok(options) => with_context(common, connect, &options, shutdown).await,
        },
        Command::Restore(args) => {
            let options = args.into_options();
            with_context(common, connect, &options, shutdown).await
        }
        Command::Status(args) => {
            let options = args.into_options(common, now);
            status_command(common, &options, shutdown).await
        }
        Command::Find(args) => match args.into_options(common) {
            Err(e) => Summary::unusable(CommandName::Find, e),
            Ok(options) => with_context(common, connect, &options, shutdown).await,
        },
        Command::History(args) => {
            let options = args.into_options();
            with_database(common, CommandName::History, shutdown, |ctx| async move {
                history::run(&ctx, &options).await
            })
            .await
        }
        Command::Doctor(args) => doctor_command(common, args, now).await,
        Command::Schema => schema_command(common).await,
        Command::Demo(args) => demo_command(common, args, shutdown).await,
        Command::Relocate(args) => relocate_command(common, connect, &args, shutdown).await,
        Command::LogKey(args) => log_key::run(&args.name, &args.out),
    }
}

/// `migrate`: the table's spec needs the database (a profile's columns are read from it).
async fn migrate_command(common: &Common, args: &args::MigrateArgs) -> Summary {
    let options = migrate::MigrateOptions {
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
        Ok(spec) => migrate::run(&db, spec, &options).await,
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

/// Opens everything a command that touches the archive needs — checked before any work starts:
/// the table, the database (migrated, collations right), the store (reachable, these credentials
/// allowed), the listed apps (none equal under the table's collation) — runs `work`, and always
/// closes the database.
async fn with_context<C: CommandOptions>(
    common: &Common,
    connect: &Connect,
    command: &C,
    shutdown: CancellationToken,
) -> Summary {
    let ctx = match open(common, connect, command.apps(), command.writes(), shutdown).await {
        Ok(ctx) => ctx,
        Err(e) => return Summary::unusable(C::NAME, e),
    };
    let summary = command.run(&ctx).await;
    ctx.db.close().await;
    summary
}

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
        db.require_tables(spec).await.map_err(|e| e.to_string())?;
        if let Some(Apps::Listed(list)) = apps {
            db.check_app_list(spec, list)
                .await
                .map_err(|e| e.to_string())?;
        }
        let store = store::open(location, &connect.s3)
            .await
            .map_err(|e| e.to_string())?;
        store
            .confirm_access()
            .await
            .map_err(|e| format!("{e} (store {})", store.location()))?;
        let stops = common.stops(&db, connect, writes).await?;
        Ok::<_, String>((spec, store, stops))
    }
    .await;
    let ctx = match checked {
        Ok((spec, store, stops)) => {
            let mut ctx =
                RunContext::new(spec, db, store, shutdown, system_clock()).with_stops(stops);
            if let Some(keys) = &connect.log_keys {
                match keys.keys() {
                    Ok(keys) => ctx.log_keys = keys,
                    Err(e) => {
                        ctx.db.close().await;
                        return Err(e);
                    }
                }
            }
            ctx
        }
        Err(e) => {
            db.close().await;
            return Err(e);
        }
    };
    // One archive, one home: --store is held to the store the archive is bound to.
    match crate::pipeline::home::check(&ctx).await {
        Ok(checked) => Ok(RunContext {
            binding: crate::pipeline::home::Binding::found(&checked),
            ..ctx
        }),
        Err(e) => {
            ctx.db.close().await;
            Err(e.to_string())
        }
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
    with_database(common, name, shutdown, |base| async move {
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
        match opened.await {
            Ok(store) => {
                // `--sentinel` stops the re-read before the next batch (nothing moves).
                let stops = crate::pipeline::Stops {
                    sentinel: connect.sentinel.clone(),
                    replicas: None,
                };
                let ctx = RunContext::new(base.spec, base.db, store, base.shutdown, base.clock)
                    .with_stops(stops);
                relocate::run(&ctx, &args.reason, args.parallel as usize).await
            }
            Err(e) => Summary::unusable(name, e),
        }
    })
    .await
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

/// `status` needs no store: the database side only.
async fn status_command(
    common: &Common,
    options: &status::StatusOptions,
    shutdown: CancellationToken,
) -> Summary {
    with_database(common, CommandName::Status, shutdown, |ctx| async move {
        status::run(&ctx, options).await
    })
    .await
}

/// Opens the database side only (`status`, `history`: no store), checked as every command
/// checks it, runs `work`, and always closes the database.
async fn with_database<F, Fut>(
    common: &Common,
    name: CommandName,
    shutdown: CancellationToken,
    work: F,
) -> Summary
where
    F: FnOnce(DbContext) -> Fut,
    Fut: std::future::Future<Output = Summary>,
{
    if let Err(e) = common.profile() {
        return Summary::unusable(name, e);
    }
    let db = match common.database().await {
        Ok(db) => db,
        Err(e) => return Summary::unusable(name, e),
    };
    let spec = async {
        let spec = common.spec_on(&db).await?;
        db.require_tables(spec).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(spec)
    };
    let summary = match spec.await {
        Err(e) => Summary::unusable(name, e),
        Ok(spec) => work(DbContext::new(spec, db.clone(), shutdown, system_clock())).await,
    };
    db.close().await;
    summary
}

/// Records, as a run of the whole command (app code empty), a run that has no app of its own
/// to record it — it could not start, failed before its first app, found no app to work, or
/// works no app by nature (`find`) — and a run-level error beside its apps, where the database
/// can be reached: `history` shows every run, and why last night's failed even when it failed
/// before its first app. Only the commands whose runs are recorded
/// ([`CommandName::is_recorded`]): `doctor`, the preflight, writes no row, so that it needs no
/// write grant.
async fn note_run_level(common: &Common, summary: &Summary, started_at_ms: i64) {
    if !summary.command.is_recorded() || (!summary.apps.is_empty() && summary.error.is_none()) {
        return;
    }
    let Ok(db) = common.database().await else {
        return;
    };
    if let Ok(spec) = common.spec_on(&db).await {
        if db.require_tables(spec).await.is_ok() {
            let outcome = match summary.exit_code {
                0 => Outcome::Done,
                130 => Outcome::Stopped,
                _ => Outcome::Failed,
            };
            let store = summary.store.clone().or_else(|| common.store.clone());
            let record = crate::db::runs::Record {
                app: "",
                command: summary.command,
                outcome,
                // The apps' own rows count their batches and rows; this one says the error.
                batches: 0,
                rows: 0,
                error: summary.error.as_deref(),
                started_at_ms,
                finished_at_ms: system_clock()(),
                run_id: summary.run_id,
                store: store.as_deref(),
                stop_reason: summary.stop_reason.as_ref(),
                dry_run: summary.dry_run.unwrap_or(false),
                findings: None,
            };
            crate::db::runs::Runs::new(&db.pool, spec)
                .note(&record)
                .await;
        }
    }
    db.close().await;
}
