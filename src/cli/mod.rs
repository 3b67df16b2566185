//! The command line (SPEC §6) — the only place clap lives. [`args`] holds the common options
//! and the groups several commands share; `command/` one file per subcommand (its arguments,
//! its words in help, what it makes of them) and the one list of them; `options` the settings
//! every command shares (table, database, store, stops); [`print_config`] shows every setting
//! and its source. This module opens what a command runs with ([`Opens`]: database, store),
//! runs it, always closes the database, and sends the metrics; the work is in
//! [`crate::pipeline`] (and [`crate::commands`] for what is not a pipeline's).

pub(crate) mod args;
mod command;
mod groups;
mod help;
mod line;
pub(crate) mod logs;
mod options;
mod parse;
pub(crate) mod print_config;
mod process;
mod short_help;

use clap::Parser;
use tokio_util::sync::CancellationToken;

pub(crate) use args::{Common, LogArgs, LogFormat};
pub(crate) use command::Command;
pub use line::command;
pub(crate) use line::parse_or_exit;
use options::{Connect, IntoOptions};
pub(crate) use print_config::effective_config;
pub use process::main;

use crate::output::metrics;
use crate::pipeline;
use crate::pipeline::apps::Apps;
use crate::pipeline::report::Summary;
use crate::pipeline::{system_clock, DbContext, RunContext};
use crate::store::{self, Location};

#[derive(Debug, Parser)]
#[command(
    name = "outbox-archiver",
    version = crate::db::layout::BUILD,
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
    command.run(common, connect, now, shutdown).await
}

/// A command that is a pipeline's work: its arguments made its options, what its options run
/// with opened and checked ([`Opens`]), the work run, the database always closed.
pub(super) async fn run_args<A: IntoOptions>(
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

/// What a command runs with, opened from the settings and checked before any work starts.
#[async_trait::async_trait]
pub(super) trait Opens: Sized + Sync {
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
