//! The command line (SPEC §6) — the only place clap lives. [`args`] is its shape (option
//! groups with help headings, one struct per subcommand); `options` turns arguments into the
//! commands' options; [`print_config`] shows every setting and its source. This module opens
//! the run's context (database, store), runs the command, always closes the database, and sends
//! the metrics; the work is in [`crate::commands`] and [`crate::pipeline`].

pub mod args;
pub mod logs;
mod options;
mod parse;
pub mod print_config;

use crate::model::command::CommandName;
use clap::Parser;
use tokio_util::sync::CancellationToken;

pub use args::{Command, Common, LogArgs, LogFormat};
use options::Connect;
pub use options::Groups;
pub use print_config::effective_config;

use crate::commands::{
    archive, attest, compact, demo, doctor, find, history, migrate, purge, relocate, restore,
    status, verify,
};
use crate::output::metrics;
use crate::pipeline::apps::Apps;
use crate::pipeline::doctor::DoctorStore;
use crate::pipeline::report::Summary;
use crate::pipeline::{system_clock, DbContext, RunContext};
use crate::store::{self, Location};

#[derive(Debug, Parser)]
#[command(
    name = "outbox-archiver",
    version,
    about = "Moves old delivered outbox rows to S3-compatible storage, with proof."
)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Command,
}

/// The command line as the binary parses it: the derived shape, environment values never shown
/// in help, each command's own words.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    per_command_help(without_env_values(Cli::command()))
}

/// What each command's help says where one shared option means something of its own, and
/// every command's exit status.
fn per_command_help(command: clap::Command) -> clap::Command {
    command.mut_subcommands(|sub| {
        let Some(name) = CommandName::parse(sub.get_name()) else {
            return sub;
        };
        let all_apps = match name {
            CommandName::Archive => Some("Every app code with rows in the source table"),
            CommandName::Purge => Some(
                "Every app with VERIFIED receipts not purged yet (its rows may already be gone from the source)",
            ),
            CommandName::Compact => Some("Every app with receipts"),
            _ => None,
        };
        let sub = match all_apps {
            Some(text) if sub.get_arguments().any(|a| a.get_id() == "all_apps") => {
                sub.mut_arg("all_apps", |a| a.help(text))
            }
            _ => sub,
        };
        match exit_status(name) {
            Some(text) => sub.after_help(text),
            None => sub,
        }
    })
}

/// The "Exit status" paragraph of a command's help.
fn exit_status(command: CommandName) -> Option<&'static str> {
    Some(match command {
        CommandName::Migrate => "Exit status: 0 the schema is up to date (what was applied is in the summary); 2 the database could not be reached or a migration failed.",
        CommandName::Archive => "Exit status: 0 every app archived, up to date, skipped because another archiver holds its lock, or stopped by a limit or SIGTERM; 1 an app failed or was refused (the others still ran); 2 bad usage or configuration, an --app that matches nothing, or the apps could not be listed (nothing was done); 130 stopped by Ctrl-C (SIGINT) between batches.",
        CommandName::Verify => "Exit status: 0 clean (orphans are listed, not failed); 1 a finding (README, \"Recovering from a finding\", says what to do for each kind); 2 could not look (the store or database unreachable, --store pointing elsewhere, a --batch-id or --app that matches nothing); 130 Ctrl-C.",
        CommandName::Status => "Exit status: 0 the figures were read; 2 the database could not be reached or an --app matches nothing.",
        CommandName::Find => "Exit status: 0 every event asked for was found (or, with --where, at least one row); 1 not found; 2 could not look (bad usage, the store or database unreachable, a --batch-id that matches nothing).",
        CommandName::History => "Exit status: 0 the runs were read (also when there is none yet); 2 the database could not be reached.",
        CommandName::Purge => "Exit status: 0 every eligible batch purged (nothing eligible yet — rows in --grace — is 0 too; the summary says when they become eligible), or stopped by a limit or SIGTERM; 1 a batch was not purged because its objects or member rows disagree with its receipt (see findings), or an app failed; 2 bad usage or configuration, an --app that matches nothing; 130 Ctrl-C.",
        CommandName::Restore => "Exit status: 0 every batch restored (or drilled and matching); 1 a batch failed verification or loading, or a drill did not match; 2 bad usage or configuration, a --batch-id or --app that matches nothing; 130 Ctrl-C.",
        CommandName::Compact => "Exit status: 0 every eligible receipt compacted, or stopped by a limit or SIGTERM; 1 a batch was not compacted (its objects or member rows disagree with its receipt) or an app failed; 2 bad usage or configuration; 130 Ctrl-C.",
        CommandName::Attest => "Exit status: 0 the statement was printed (every app's chain whole and anchored up to the period's end); 1 an app's period is not attested (its chain has a gap, a mismatch or a fork, or a batch is not anchored yet: the summary names the finding) or could not be read; 2 bad usage or configuration, an --app that matches nothing.",
        CommandName::Doctor => "Exit status: 0 no line is a problem (warnings allowed); 1 a line is a problem (each says the fix); 2 the database or the store could not be reached at all (the other lines are still printed).",
        CommandName::Demo => "Exit status: 0 the demo ran end to end; 2 a step failed (the message says which), it would drop a database or empty a folder it did not make (--force), or the database could not be reached.",
        CommandName::Schema => "Exit status: 0 the schema was printed; 2 the table or profile could not be described.",
        CommandName::Relocate => "Exit status: 0 the archive's home moved (the move is recorded with its reason); 2 nothing moved: the archive has no home yet, --to has another prefix, or the new home lacks the archive's marker or batches (copy it whole first), or the database or the store could not be reached.",
        CommandName::None => return None,
    })
}

/// The command with no environment variable's value shown in `--help` (the names stay): a
/// value may hold a password (`OUTBOX_ARCHIVER_METRICS_PUSHGATEWAY=http://user:pw@…`, a
/// replica's URL), and help is printed to terminals and CI logs (SPEC §5.8).
fn without_env_values(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| arg.hide_env_values(true))
        .mut_subcommands(without_env_values)
}

/// Bad usage: clap's message on stderr as always, and — as every run ends — one JSON summary on
/// stdout (`ok: false`, the message), for the CronJob's log parser; exit 2. Help and version are
/// printed as they are, exit 0.
fn usage_error(e: clap::Error, subcommands: &[String]) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let _ = e.print();
    // The subcommand the arguments name, if they name one.
    let named = std::env::args()
        .skip(1)
        .find(|a| subcommands.iter().any(|s| s == a));
    let command = named
        .as_deref()
        .and_then(CommandName::parse)
        .unwrap_or(CommandName::None);
    let text = e.render().to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("bad usage")
        .trim_start_matches("error: ")
        .to_string();
    let summary = Summary::unusable(command, format!("usage: {first} (see --help)"));
    println!("{}", summary.to_json());
    std::process::exit(2);
}

/// Parses the process's arguments and environment, exiting with clap's message on bad usage.
/// With `--print-config` it prints every setting and exits (0, or 2 when a setting is wrong)
/// without connecting to anything. Returns the command line and the subcommand's name.
pub fn parse_or_exit() -> (Cli, String) {
    use clap::FromArgMatches;
    let line = command();
    let names: Vec<String> = line
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let matches = line
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|_| m))
        .unwrap_or_else(|e| usage_error(e, &names));
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| usage_error(e, &names));
    cli.common.log.format_from_environment = matches!(
        matches.value_source("format"),
        Some(clap::parser::ValueSource::EnvVariable)
    );
    let (mistyped, unknown) = unknown_variables(&command(), std::env::vars().map(|(k, _)| k));
    if cli.common.print_config {
        let (mut config, ok) = effective_config(&cli, &matches);
        if let Some(problems) = config["problems"].as_array_mut() {
            problems.extend(mistyped.iter().map(|m| serde_json::Value::from(m.as_str())));
        }
        config["unknown_variables"] = serde_json::json!(unknown);
        println!("{}", serde_json::to_string_pretty(&config).expect("JSON"));
        std::process::exit(if ok && mistyped.is_empty() { 0 } else { 2 });
    }
    // A setting whose name is one or two letters off is a typo that would be ignored without a
    // word (a retention not applied, a store not read): refused, naming the one meant.
    if let Some(first) = mistyped.first() {
        eprintln!("error: {first}");
        let name = matches
            .subcommand_name()
            .and_then(CommandName::parse)
            .unwrap_or(CommandName::None);
        println!("{}", Summary::unusable(name, first.clone()).to_json());
        std::process::exit(2);
    }
    cli.common.unknown_variables = unknown;
    let name = matches.subcommand_name().unwrap_or_default().to_string();
    (cli, name)
}

/// Variables the binary reads besides its options' (`OUTBOX_ARCHIVER_TEST_*` are the test
/// suite's).
const OTHER_VARIABLES: [&str; 1] = ["OUTBOX_ARCHIVER_FAILPOINT"];

/// Of the `OUTBOX_ARCHIVER_*` variables in `names` that no option of any command reads: those
/// within two letters of one that does (a typo: the message names it), and the rest (a setting
/// of another version, say: warned about).
fn unknown_variables(
    command: &clap::Command,
    names: impl Iterator<Item = String>,
) -> (Vec<String>, Vec<String>) {
    fn known(command: &clap::Command, out: &mut Vec<String>) {
        out.extend(
            command
                .get_arguments()
                .filter_map(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned()),
        );
        for sub in command.get_subcommands() {
            known(sub, out);
        }
    }
    let mut read = Vec::new();
    known(command, &mut read);
    read.extend(OTHER_VARIABLES.map(str::to_string));
    read.sort();
    read.dedup();
    let (mut mistyped, mut unknown) = (Vec::new(), Vec::new());
    for name in names {
        if !name.starts_with("OUTBOX_ARCHIVER_")
            || name.starts_with("OUTBOX_ARCHIVER_TEST_")
            || read.contains(&name)
        {
            continue;
        }
        let closest = read
            .iter()
            .map(|k| (crate::model::appcode::distance(&name, k), k))
            .min();
        match closest {
            Some((d, meant)) if d <= 2 => mistyped.push(format!(
                "{name} is not a setting of outbox-archiver: did you mean {meant}? (as it is, it would be ignored)"
            )),
            _ => unknown.push(name),
        }
    }
    mistyped.sort();
    unknown.sort();
    (mistyped, unknown)
}

/// Runs the parsed command line, then sends its metrics where configured; the summary says how
/// it went.
pub async fn run(cli: Cli, shutdown: CancellationToken) -> Summary {
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

/// A command that works over the archive: its name, its listed apps, and its run.
#[async_trait::async_trait]
trait ArchiveCommand: Sync {
    const NAME: CommandName;
    fn apps(&self) -> Option<&Apps>;
    /// Whether it writes to the database the replicas follow (then their lag paces it).
    fn writes(&self) -> bool {
        false
    }
    async fn run(&self, ctx: &RunContext) -> Summary;
}

#[async_trait::async_trait]
impl ArchiveCommand for archive::ArchiveOptions {
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
impl ArchiveCommand for purge::PurgeOptions {
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
impl ArchiveCommand for verify::VerifyOptions {
    const NAME: CommandName = CommandName::Verify;
    fn apps(&self) -> Option<&Apps> {
        self.selection.apps.as_ref()
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        verify::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl ArchiveCommand for attest::AttestOptions {
    const NAME: CommandName = CommandName::Attest;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        attest::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl ArchiveCommand for restore::RestoreOptions {
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
impl ArchiveCommand for find::FindOptions {
    const NAME: CommandName = CommandName::Find;
    fn apps(&self) -> Option<&Apps> {
        self.selection.apps.as_ref()
    }
    async fn run(&self, ctx: &RunContext) -> Summary {
        find::run(ctx, self).await
    }
}

#[async_trait::async_trait]
impl ArchiveCommand for compact::CompactOptions {
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
    let summary = command_summary(&common, command, now, shutdown).await;
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
            CommandName::parse(command_name(&command)).unwrap_or(CommandName::None),
            "--format csv is attest's (its statement per app and day); this command prints table or json".into(),
        );
    }
    match command {
        Command::Migrate(args) => migrate_command(common, args.with_source_table).await,
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
            let options = args.into_options(common);
            with_database(common, CommandName::History, shutdown, |ctx| async move {
                history::run(&ctx, &options).await
            })
            .await
        }
        Command::Doctor(args) => doctor_command(common, args, now).await,
        Command::Schema => schema_command(common).await,
        Command::Demo(args) => demo_command(common, args, shutdown).await,
        Command::Relocate(args) => relocate_command(common, connect, &args, shutdown).await,
    }
}

/// The subcommand's name, as the command line spells it.
fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Migrate(_) => "migrate",
        Command::Archive(_) => "archive",
        Command::Verify(_) => "verify",
        Command::Status(_) => "status",
        Command::Find(_) => "find",
        Command::History(_) => "history",
        Command::Purge(_) => "purge",
        Command::Restore(_) => "restore",
        Command::Compact(_) => "compact",
        Command::Attest(_) => "attest",
        Command::Demo(_) => "demo",
        Command::Schema => "schema",
        Command::Doctor(_) => "doctor",
        Command::Relocate(_) => "relocate",
    }
}

/// `migrate`: the table's spec needs the database (a profile's columns are read from it).
async fn migrate_command(common: &Common, with_source_table: bool) -> Summary {
    let options = migrate::MigrateOptions { with_source_table };
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
async fn with_context<C: ArchiveCommand>(
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
            RunContext::new(spec, db, store, shutdown, system_clock()).with_stops(stops)
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
    if let Err(e) = common.profile() {
        return Summary::unusable(name, e);
    }
    let db = match common.database().await {
        Ok(db) => db,
        Err(e) => return Summary::unusable(name, e),
    };
    let opened = async {
        let spec = common.spec_on(&db).await?;
        db.require_tables(spec).await.map_err(|e| e.to_string())?;
        let store = store::open(location, &connect.s3)
            .await
            .map_err(|e| e.to_string())?;
        store
            .confirm_access()
            .await
            .map_err(|e| format!("{e} (--to {})", store.location()))?;
        Ok::<_, String>((spec, store))
    }
    .await;
    let summary = match opened {
        Ok((spec, store)) => {
            let ctx = RunContext::new(spec, db.clone(), store, shutdown, system_clock());
            relocate::run(&ctx, &args.reason).await
        }
        Err(e) => Summary::unusable(name, e),
    };
    db.close().await;
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
    let opened = match &location {
        Location::S3 { .. } => store::S3Store::connect(location.clone(), &s3_settings)
            .await
            .map(|s3| Opened::S3(Box::new(s3))),
        Location::Local { .. } => Ok(Opened::Local(store::LocalStore::new(location.clone()))),
    };
    let handle = match &opened {
        Ok(Opened::S3(s3)) => Ok(DoctorStore::S3(s3)),
        Ok(Opened::Local(local)) => Ok(DoctorStore::Other(local)),
        Err(e) => Err(e.to_string()),
    };
    let format = match common.table_output() {
        true => doctor::Format::Table,
        false => doctor::Format::Json,
    };
    let summary = doctor::run(
        spec,
        db.as_ref().map_err(Clone::clone),
        handle,
        &options,
        format,
        now_ms,
    )
    .await;
    if let Ok(db) = db {
        db.close().await;
    }
    summary
}

/// The store doctor opened.
enum Opened {
    S3(Box<store::S3Store>),
    Local(store::LocalStore),
}

/// `schema`: a built-in table's record schema needs nothing; a profile's, the database that
/// describes its columns.
async fn schema_command(common: &Common) -> Summary {
    let spec = match common.profile() {
        Err(e) => return Summary::unusable(CommandName::Schema, e),
        Ok(None) => common.spec(),
        Ok(Some(_)) => match common.database().await {
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
        Ok(spec) => {
            let mut summary = Summary::new(CommandName::Schema);
            summary.table = Some(spec.name.to_string());
            summary.text = Some(crate::model::record_schema::to_text(spec));
            summary.settle()
        }
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
                0 => "done",
                130 => "stopped",
                _ => "failed",
            };
            let store = summary.store.clone().or_else(|| common.store.clone());
            let record = crate::db::runs::Record {
                app: "",
                command: summary.command.as_str(),
                outcome,
                // The apps' own rows count their batches and rows; this one says the error.
                batches: 0,
                rows: 0,
                error: summary.error.as_deref(),
                started_at_ms,
                finished_at_ms: system_clock()(),
                run_id: summary.run_id,
                store: store.as_deref(),
                stop_reason: summary.stop_reason.as_deref(),
                dry_run: summary.dry_run.unwrap_or(false),
                findings: None,
            };
            crate::db::runs::Runs::new(spec)
                .note(&db.pool, &record)
                .await;
        }
    }
    db.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed_and_hides_the_database_url() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("DATABASE_URL"));
        // The value a variable would have is never rendered: hide_env_values on the argument.
        let database_url = Cli::command()
            .get_arguments()
            .find(|a| a.get_id() == "database_url")
            .map(|a| a.is_hide_env_values_set());
        assert_eq!(database_url, Some(true));
    }

    /// The smallest command line of each subcommand. Parsing it runs clap's `FromArgMatches`,
    /// which is where a shared option and a command's own one under the same id clash (attest's
    /// `--format` did: every `attest` panicked) — `debug_assert` does not look there.
    const SMALLEST: &[&[&str]] = &[
        &["migrate"],
        &["archive", "--all-apps"],
        &["verify"],
        &["status"],
        &["find", "--event-id", "e1"],
        &["history"],
        &["purge", "--all-apps"],
        &["restore"],
        &["compact", "--all-apps"],
        &["attest", "--from", "2026-11-01", "--to", "2026-11-02"],
        &[
            "attest",
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-02",
            "--format",
            "csv",
        ],
        &["demo"],
        &["schema"],
        &["doctor"],
        &["relocate", "--to", "s3://b/p", "--reason", "moved"],
    ];

    #[test]
    fn every_subcommand_parses_into_its_arguments() {
        use clap::FromArgMatches;
        let names: Vec<String> = command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        for name in &names {
            assert!(
                SMALLEST.iter().any(|args| args[0] == name),
                "no smallest command line for {name}: add one to SMALLEST"
            );
        }
        for args in SMALLEST {
            let argv = std::iter::once("outbox-archiver").chain(args.iter().copied());
            let matches = command()
                .try_get_matches_from(argv)
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            Cli::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn a_commands_help_shows_its_own_options_first_and_only_what_applies() {
        let mut command = command();
        command.build();
        let help = |name: &str, command: &mut clap::Command| {
            command
                .find_subcommand_mut(name)
                .unwrap()
                .render_help()
                .to_string()
        };
        let history = help("history", &mut command);
        for absent in [
            "--replica",
            "--sse-kms-key-id",
            "--object-lock-mode",
            "--s3-endpoint",
        ] {
            assert!(
                !history.contains(absent),
                "history --help lists {absent}:\n{history}"
            );
        }
        assert!(history.lines().count() < 40, "{history}");
        let archive = help("archive", &mut command);
        let own = archive.find("--batch-rows").unwrap();
        let shared = archive.find("--s3-endpoint").unwrap();
        let common = archive.find("Common options:").unwrap();
        assert!(own < shared && shared < common, "{archive}");
        assert!(archive.contains("--object-lock-mode"));
        // An option of another command is refused, not ignored.
        let refused = command.try_get_matches_from_mut(["x", "history", "--retention", "7y"]);
        assert!(refused.is_err());
    }

    #[test]
    fn a_variable_a_letter_or_two_off_a_setting_is_a_typo() {
        let names = [
            "OUTBOX_ARCHIVER_RETENTON",
            "OUTBOX_ARCHIVER_RETENTION",
            "OUTBOX_ARCHIVER_STOR",
            "OUTBOX_ARCHIVER_SOMETHING_NEWER",
            "OUTBOX_ARCHIVER_TEST_SERVER",
            "OUTBOX_ARCHIVER_FAILPOINT",
            "PATH",
        ]
        .map(str::to_string);
        let (mistyped, unknown) = unknown_variables(&command(), names.into_iter());
        assert_eq!(mistyped.len(), 2, "{mistyped:?}");
        assert!(
            mistyped[0].contains("did you mean OUTBOX_ARCHIVER_RETENTION?"),
            "{mistyped:?}"
        );
        assert!(
            mistyped[1].contains("did you mean OUTBOX_ARCHIVER_STORE?"),
            "{mistyped:?}"
        );
        assert_eq!(unknown, ["OUTBOX_ARCHIVER_SOMETHING_NEWER"]);
    }

    #[test]
    fn options_go_before_or_after_the_subcommand() {
        let a =
            Cli::try_parse_from(["x", "--store", "file:///a", "archive", "--app", "a1"]).unwrap();
        let b =
            Cli::try_parse_from(["x", "archive", "--app", "a1", "--store", "file:///a"]).unwrap();
        assert_eq!(a.common.store, b.common.store);
        assert!(
            Cli::try_parse_from(["x", "archive"]).is_err(),
            "--app or --all-apps is required"
        );
        assert!(Cli::try_parse_from(["x", "archive", "--app", "a", "--all-apps"]).is_err());
    }
}
