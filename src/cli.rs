//! The command line (SPEC §6): one clap definition, where every option also reads an
//! environment variable (`OUTBOX_ARCHIVER_*`, `DATABASE_URL`, and the AWS SDK's own variables,
//! which the SDK reads itself). Secrets are hidden from help and never echoed.
//!
//! This module only turns arguments into the commands' option structs and an [`Env`]; the work
//! is in [`crate::commands`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

use crate::batch::Limits;
use crate::commands::archive::{self, Apps, ArchiveOptions};
use crate::commands::{demo, migrate, purge, restore, status, system_clock, verify, Env};
use crate::db::Db;
use crate::failpoint::FailPoints;
use crate::metrics;
use crate::shard::Shard;
use crate::store::{self, ConditionalPutSetting, Location, S3Settings, UploadChecksum};
use crate::summary::Summary;
use crate::table::{self, TableSpec};
use crate::timespec;

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

/// `--s3-upload-checksum`: which checksum a put carries for the store to check on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UploadChecksumArg {
    /// No upload checksum (the read-back still verifies every byte).
    None,
    /// `Content-MD5`: understood by practically every S3-compatible store, COS included.
    Md5,
    /// `x-amz-checksum-sha256`.
    Sha256,
    /// `x-amz-checksum-crc64nvme` (AWS S3's default full-object checksum).
    Crc64nvme,
}

impl From<UploadChecksumArg> for UploadChecksum {
    fn from(arg: UploadChecksumArg) -> UploadChecksum {
        match arg {
            UploadChecksumArg::None => UploadChecksum::None,
            UploadChecksumArg::Md5 => UploadChecksum::Md5,
            UploadChecksumArg::Sha256 => UploadChecksum::Sha256,
            UploadChecksumArg::Crc64nvme => UploadChecksum::Crc64nvme,
        }
    }
}

/// `status --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Table,
    Json,
}

impl From<FormatArg> for status::Format {
    fn from(arg: FormatArg) -> status::Format {
        match arg {
            FormatArg::Table => status::Format::Table,
            FormatArg::Json => status::Format::Json,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// Options every command accepts, before or after the subcommand.
#[derive(Debug, Args)]
pub struct Common {
    /// MySQL URL: mysql://user:password@host:3306/database
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Archive location: s3://bucket/prefix, or file:///absolute/path
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_STORE")]
    pub store: Option<String>,
    /// The outbox table to archive.
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_TABLE",
        default_value = "wallet_outbox"
    )]
    pub table: String,
    /// The status value that means delivered.
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_DELIVERED_STATUS",
        default_value = "DELIVERED"
    )]
    pub delivered_status: String,
    /// Prepended to advisory lock names, for servers that host several databases.
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_LOCK_PREFIX",
        default_value = ""
    )]
    pub lock_prefix: String,
    /// Log format on stderr [default: json when stderr is not a terminal, text otherwise]
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Log filter, in tracing's EnvFilter syntax.
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_LOG",
        default_value = "info"
    )]
    pub log: String,
    /// S3 endpoint for MinIO, COS and other compatible stores (AWS_ENDPOINT_URL works too).
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 region (AWS_REGION works too) [default: from the AWS config, else us-east-1]
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_S3_REGION")]
    pub s3_region: Option<String>,
    /// Path-style addressing [default: true when an endpoint is set]
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_S3_FORCE_PATH_STYLE")]
    pub s3_force_path_style: Option<bool>,
    /// Checksum sent with each upload, checked by the store on arrival.
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_S3_UPLOAD_CHECKSUM",
        value_enum,
        default_value = "md5"
    )]
    pub s3_upload_checksum: UploadChecksumArg,
    /// Create-only puts send If-None-Match: *. auto: probe once per run whether the store
    /// honours it, and fall back to HEAD-then-PUT if it does not; true: send it without probing;
    /// false: never send it (a store that rejects the header).
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_S3_CONDITIONAL_PUT", default_value = "auto", value_parser = parse_conditional_put)]
    pub s3_conditional_put: ConditionalPutSetting,
    /// Attempts per S3 request (first included), with exponential backoff and jitter between
    /// them; a body read that breaks off is resumed as many times.
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_S3_MAX_ATTEMPTS", default_value_t = store::DEFAULT_MAX_ATTEMPTS, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub s3_max_attempts: u32,
    /// Limit on opening a connection to the store, e.g. 10s.
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_S3_CONNECT_TIMEOUT", value_parser = parse_timeout, default_value = "10s")]
    pub s3_connect_timeout: Duration,
    /// Limit on waiting for a response to start, and on silence inside a body, e.g. 30s.
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_S3_READ_TIMEOUT", value_parser = parse_timeout, default_value = "30s")]
    pub s3_read_timeout: Duration,
    /// After a transient database error (restart, failover, killed connection), try the app
    /// again up to this many times, waiting 1 s, 2 s, 4 s, … in between (archive, purge).
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_DB_RETRIES", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub db_retries: u32,
    /// Print the effective configuration (each setting's value and where it came from, secrets
    /// redacted) and the problems found in it, then exit without connecting to anything.
    #[arg(long, global = true)]
    pub print_config: bool,
    /// Push the run's metrics to this Prometheus Pushgateway (http://host:9091).
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_METRICS_PUSHGATEWAY")]
    pub metrics_pushgateway: Option<String>,
    /// Write the run's metrics to this file for node_exporter's textfile collector (*.prom).
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_METRICS_TEXTFILE")]
    pub metrics_textfile: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply migrations/ (receipts and members tables).
    Migrate {
        /// Also create the reference source table (demos and tests).
        #[arg(long, env = "OUTBOX_ARCHIVER_WITH_SOURCE_TABLE")]
        with_source_table: bool,
    },
    /// Archive delivered rows below the cutoff (the CronJob).
    Archive(ArchiveArgs),
    /// Re-read archived batches and check them against receipts and members; find gaps.
    Verify(VerifyArgs),
    /// Per app: cursor, receipts, archived rows, backlog, rows awaiting purge, last run.
    Status(StatusArgs),
    /// Delete source rows that are exact members of VERIFIED receipts older than the grace period.
    Purge(PurgeArgs),
    /// Load archived batches back into a table, verifying every object first.
    Restore(RestoreArgs),
    /// Set up a throwaway database and archive location, seed rows, archive them, show the result.
    Demo(DemoArgs),
}

#[derive(Debug, Args)]
pub struct AppArgs {
    /// An app code to work on (repeatable).
    #[arg(
        long = "app",
        env = "OUTBOX_ARCHIVER_APPS",
        value_delimiter = ',',
        required_unless_present = "all_apps",
        conflicts_with = "all_apps"
    )]
    pub apps: Vec<String>,
    /// Every app code present in the source table.
    #[arg(long, env = "OUTBOX_ARCHIVER_ALL_APPS")]
    pub all_apps: bool,
    /// With --all-apps: only the apps whose stable hash falls in shard I of N (e.g. 0/4; an
    /// Indexed Job's completion index as I). N shards together cover every app exactly once.
    #[arg(long, env = "OUTBOX_ARCHIVER_SHARD")]
    pub shard: Option<Shard>,
}

impl AppArgs {
    fn apps(&self) -> Result<Apps, String> {
        match (self.all_apps, self.shard) {
            (true, Some(shard)) => Ok(Apps::Shard(shard)),
            (true, None) => Ok(Apps::All),
            (false, None) => Ok(Apps::Listed(self.apps.clone())),
            (false, Some(shard)) => Err(format!(
                "--shard needs --all-apps (OUTBOX_ARCHIVER_ALL_APPS): shard {shard} is a share of every app, not of a list"
            )),
        }
    }
}

/// `--app`/`--all-apps` where neither means every app.
#[derive(Debug, Args)]
pub struct AnyAppArgs {
    /// An app code to look at (repeatable) [default: every app]
    #[arg(
        long = "app",
        env = "OUTBOX_ARCHIVER_APPS",
        value_delimiter = ',',
        conflicts_with = "all_apps"
    )]
    pub apps: Vec<String>,
    /// Every app (the default).
    #[arg(long, env = "OUTBOX_ARCHIVER_ALL_APPS")]
    pub all_apps: bool,
}

impl AnyAppArgs {
    fn apps(self) -> Apps {
        if self.apps.is_empty() {
            Apps::All
        } else {
            Apps::Listed(self.apps)
        }
    }
}

/// Which rows are old enough to archive.
#[derive(Debug, Args)]
pub struct CutoffArgs {
    /// Rows delivered longer ago than this are old enough (30s, 15m, 24h, 7d).
    #[arg(long, env = "OUTBOX_ARCHIVER_OLDER_THAN", default_value = "7d", value_parser = parse_duration)]
    pub older_than: i64,
    /// Rows with updated_at_ms below this instant (RFC 3339 or epoch ms); overrides --older-than.
    #[arg(long, env = "OUTBOX_ARCHIVER_CUTOFF", value_parser = parse_time)]
    pub cutoff: Option<i64>,
}

impl CutoffArgs {
    fn cutoff_ms(&self, now_ms: i64) -> i64 {
        timespec::cutoff_ms(now_ms, self.older_than, self.cutoff)
    }
}

/// Which receipts `verify` and `restore` work on.
#[derive(Debug, Args)]
pub struct BatchScopeArgs {
    #[command(flatten)]
    pub apps: AnyAppArgs,
    /// Only this batch (repeatable).
    #[arg(
        long = "batch-id",
        env = "OUTBOX_ARCHIVER_BATCH_IDS",
        value_delimiter = ','
    )]
    pub batch_ids: Vec<String>,
    /// Only batches with rows at or after this updated_at_ms (RFC 3339 or epoch ms).
    #[arg(long, env = "OUTBOX_ARCHIVER_FROM", value_parser = parse_time)]
    pub from: Option<i64>,
    /// Only batches with rows before this updated_at_ms (RFC 3339 or epoch ms).
    #[arg(long, env = "OUTBOX_ARCHIVER_TO", value_parser = parse_time)]
    pub to: Option<i64>,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub scope: BatchScopeArgs,
    /// Check a random sample of about this percent of the batches in scope.
    #[arg(long, env = "OUTBOX_ARCHIVER_SAMPLE_PERCENT", value_parser = parse_percent)]
    pub sample_percent: Option<f64>,
    /// Seed of the sample, to repeat it [default: chosen and printed]
    #[arg(long, env = "OUTBOX_ARCHIVER_SEED")]
    pub seed: Option<u64>,
    /// HEAD only: existence, sizes, store checksums and member counts; no download.
    #[arg(long, env = "OUTBOX_ARCHIVER_METADATA_ONLY")]
    pub metadata_only: bool,
    /// Batches checked at once.
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: u32,
    /// List at most this many stragglers per app.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_STRAGGLERS", default_value_t = 1000)]
    pub max_stragglers: usize,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
}

#[derive(Debug, Args)]
pub struct PurgeArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    /// Only batches verified longer ago than this (30s, 15m, 24h, 7d).
    #[arg(long, env = "OUTBOX_ARCHIVER_GRACE", default_value = "24h", value_parser = parse_duration)]
    pub grace: i64,
    /// Delete at most this many rows per second.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_ROWS_PER_SECOND")]
    pub max_rows_per_second: Option<u64>,
    /// Start no new chunk after this long.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_RUNTIME", value_parser = parse_duration)]
    pub max_runtime: Option<i64>,
    /// Count what would be deleted; delete nothing.
    #[arg(long, env = "OUTBOX_ARCHIVER_DRY_RUN")]
    pub dry_run: bool,
    /// Re-read and verify each batch's objects in full (as verify) right before deleting its
    /// rows, instead of the default HEAD check (set OUTBOX_ARCHIVER_PURGE_REVERIFY=true to make
    /// it the default).
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_PURGE_REVERIFY",
        conflicts_with = "trust_receipts"
    )]
    pub reverify: bool,
    /// Delete on the strength of the receipts alone: do not look at the batches' objects before
    /// deleting (for operators who scrub the archive with verify separately). Logged every run.
    #[arg(long, env = "OUTBOX_ARCHIVER_TRUST_RECEIPTS")]
    pub trust_receipts: bool,
    /// Purge batches restored into the source (restore --into-source) again too; without it
    /// their rows stay. Logged every run.
    #[arg(long, env = "OUTBOX_ARCHIVER_INCLUDE_RESTORED")]
    pub include_restored: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub scope: BatchScopeArgs,
    /// Target table [default: {table}_restored], created like the source if missing.
    #[arg(long, env = "OUTBOX_ARCHIVER_INTO", conflicts_with_all = ["into_source", "drill"])]
    pub into: Option<String>,
    /// Restore into the live source table (existing rows are never overwritten).
    #[arg(long, env = "OUTBOX_ARCHIVER_INTO_SOURCE", conflicts_with = "drill")]
    pub into_source: bool,
    /// Restore each batch into a scratch table, compare it with the receipt, record the result, drop it.
    #[arg(long, env = "OUTBOX_ARCHIVER_DRILL")]
    pub drill: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub apps: AnyAppArgs,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
    /// Output format [default: table on a terminal, json otherwise]
    #[arg(long, env = "OUTBOX_ARCHIVER_FORMAT", value_enum)]
    pub format: Option<FormatArg>,
}

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
    /// Most rows in one batch.
    #[arg(long, env = "OUTBOX_ARCHIVER_BATCH_ROWS", default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub batch_rows: u64,
    /// Most uncompressed NDJSON bytes in one batch (64MiB, 500KB, 1048576).
    #[arg(long, env = "OUTBOX_ARCHIVER_BATCH_BYTES", default_value = "64MiB", value_parser = parse_bytes)]
    pub batch_bytes: u64,
    /// gzip level, 1 (fast) to 9 (small).
    #[arg(long, env = "OUTBOX_ARCHIVER_GZIP_LEVEL", default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub gzip_level: u32,
    /// Stop each app after this many batches.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_BATCHES")]
    pub max_batches: Option<u64>,
    /// Start no new batch after this long (30s, 15m, 24h).
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_RUNTIME", value_parser = parse_duration)]
    pub max_runtime: Option<i64>,
    /// Plan the batches and print them; write nothing.
    #[arg(long, env = "OUTBOX_ARCHIVER_DRY_RUN")]
    pub dry_run: bool,
    /// Archive the stragglers `verify` reports (delivered rows below the cursor that no receipt
    /// owns), in batches of their own; the cursor does not move.
    #[arg(long, env = "OUTBOX_ARCHIVER_STRAGGLERS")]
    pub stragglers: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How many rows to seed.
    #[arg(long, default_value_t = 100_000)]
    pub rows: u64,
    /// Where the archive's objects go (emptied first).
    #[arg(long, default_value = "target/demo-archive")]
    pub dir: PathBuf,
    /// The throwaway database to (re)create.
    #[arg(long, default_value = "outbox_archiver_demo")]
    pub database: String,
    /// Write to a file:// folder instead of the in-process S3 server.
    #[arg(long)]
    pub file_store: bool,
}

fn parse_duration(text: &str) -> Result<i64, String> {
    timespec::parse_duration_ms(text)
}

/// A positive duration such as `500ms` or `30s`.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    match timespec::parse_duration_ms(text)? {
        0 => Err(format!("timeout {text:?} must be more than zero")),
        ms => Ok(Duration::from_millis(ms as u64)),
    }
}

fn parse_conditional_put(text: &str) -> Result<ConditionalPutSetting, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(ConditionalPutSetting::Auto),
        "true" | "on" | "yes" => Ok(ConditionalPutSetting::On),
        "false" | "off" | "no" => Ok(ConditionalPutSetting::Off),
        _ => Err(format!(
            "--s3-conditional-put {text:?}: write auto (probe the store), true or false"
        )),
    }
}

fn parse_time(text: &str) -> Result<i64, String> {
    timespec::parse_time_ms(text)
}

/// `OUTBOX_ARCHIVER_FAILPOINT=<point>` aborts the process there: a crash rehearsal.
fn failpoints_from_env() -> FailPoints {
    std::env::var("OUTBOX_ARCHIVER_FAILPOINT")
        .map(FailPoints::abort_at)
        .unwrap_or_default()
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

fn parse_percent(text: &str) -> Result<f64, String> {
    let p: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("invalid percent {text:?}"))?;
    if (0.0..=100.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("percent {text:?} is not between 0 and 100"))
    }
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let number: u64 = text[..digits]
        .parse()
        .map_err(|_| format!("invalid size {text:?} (write 64MiB, 500KB or a byte count)"))?;
    let unit: u64 = match text[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "kib" | "k" => 1 << 10,
        "mb" => 1_000_000,
        "mib" | "m" => 1 << 20,
        "gb" => 1_000_000_000,
        "gib" | "g" => 1 << 30,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    number
        .checked_mul(unit)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("size {text:?} out of range"))
}

impl Common {
    pub fn log_format(&self) -> LogFormat {
        self.log_format
            .unwrap_or(if std::io::stderr().is_terminal() {
                LogFormat::Text
            } else {
                LogFormat::Json
            })
    }

    fn s3_settings(&self) -> S3Settings {
        S3Settings {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            force_path_style: self.s3_force_path_style,
            upload_checksum: Some(self.s3_upload_checksum.into()),
            conditional_put: Some(self.s3_conditional_put),
            static_credentials: None,
            max_attempts: Some(self.s3_max_attempts),
            connect_timeout: Some(self.s3_connect_timeout),
            read_timeout: Some(self.s3_read_timeout),
            initial_backoff: None,
        }
    }

    fn spec(&self) -> Result<&'static TableSpec, String> {
        table::find(&self.table).ok_or_else(|| {
            let known: Vec<_> = table::TABLES.iter().map(|t| t.name).collect();
            format!(
                "--table {:?} is not a table this build knows (known: {})",
                self.table,
                known.join(", ")
            )
        })
    }

    async fn database(&self) -> Result<Db, String> {
        let url = self
            .database_url
            .as_deref()
            .ok_or("no database given: set --database-url or DATABASE_URL (mysql://user:password@host:3306/database)")?;
        Db::connect(url, 4).await.map_err(|e| e.to_string())
    }

    /// Everything a command that reads the archive needs, checked before any work starts.
    async fn env(&self, shutdown: CancellationToken) -> Result<Env, String> {
        let spec = self.spec()?;
        let store_url = self.store.as_deref().ok_or(
            "no archive location given: set --store or OUTBOX_ARCHIVER_STORE (s3://bucket/prefix or file:///path)",
        )?;
        let location = Location::parse(store_url)?;
        let db = self.database().await?;
        db.require_tables(spec).await.map_err(|e| e.to_string())?;
        let store = store::open(location, &self.s3_settings())
            .await
            .map_err(|e| e.to_string())?;
        store
            .confirm_access()
            .await
            .map_err(|e| format!("{e} (store {})", store.location()))?;
        Ok(Env {
            spec,
            db,
            store,
            shutdown,
            now_ms: system_clock(),
        })
    }
}

/// Two listed app codes that the source table holds to be one (exit 2).
async fn refuse_equal_apps(env: &Env, apps: &Apps) -> Result<(), String> {
    match apps {
        Apps::Listed(list) => env
            .db
            .check_app_list(env.spec, list)
            .await
            .map_err(|e| e.to_string()),
        _ => Ok(()),
    }
}

/// `--print-config`: every setting as it takes effect — value and source (command line,
/// environment variable, default) — with URLs' passwords redacted, plus the problems a run would
/// stop on before connecting (a bad store URL, a shard without --all-apps, no database URL).
pub fn effective_config(cli: &Cli, matches: &clap::ArgMatches) -> (serde_json::Value, bool) {
    use clap::parser::ValueSource;
    use clap::CommandFactory;
    let command = Cli::command();
    let (name, sub_matches) = matches.subcommand().expect("clap requires a subcommand");
    let sub = command
        .find_subcommand(name)
        .expect("the subcommand parsed");
    let mut settings = serde_json::Map::new();
    for (cmd, m) in [(&command, matches), (sub, sub_matches)] {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version" | "print_config") {
                continue;
            }
            let key = arg.get_long().unwrap_or(id).to_string();
            let Some(source) = m.value_source(id) else {
                settings.insert(key, serde_json::json!({ "value": null, "source": "unset" }));
                continue;
            };
            let values: Vec<String> = m
                .get_raw(id)
                .map(|raw| {
                    raw.map(|v| crate::redact::url(&v.to_string_lossy()))
                        .collect()
                })
                .unwrap_or_default();
            let source = match source {
                ValueSource::CommandLine => "command line".to_string(),
                ValueSource::EnvVariable => format!(
                    "environment ({})",
                    arg.get_env()
                        .map(|e| e.to_string_lossy())
                        .unwrap_or_default()
                ),
                _ => "default".to_string(),
            };
            let value = match values.as_slice() {
                [one] => serde_json::json!(one),
                many => serde_json::json!(many),
            };
            settings.insert(key, serde_json::json!({ "value": value, "source": source }));
        }
    }
    let credentials = if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
        "static keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (not shown)"
    } else if std::env::var_os("AWS_WEB_IDENTITY_TOKEN_FILE").is_some() {
        "web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN): IRSA / workload identity"
    } else if std::env::var_os("AWS_PROFILE").is_some() {
        "the profile named by AWS_PROFILE"
    } else {
        "the AWS SDK's default chain (profile, container or instance role)"
    };
    let mut problems = Vec::new();
    if let Some(store) = &cli.common.store {
        if let Err(e) = Location::parse(store) {
            problems.push(e);
        }
    } else if !matches!(
        cli.command,
        Command::Migrate { .. } | Command::Status(_) | Command::Demo(_)
    ) {
        problems.push("no archive location: set --store or OUTBOX_ARCHIVER_STORE".to_string());
    }
    if cli.common.database_url.is_none() && !matches!(cli.command, Command::Demo(_)) {
        problems.push("no database: set --database-url or DATABASE_URL".to_string());
    }
    if let Err(e) = cli.common.spec() {
        problems.push(e);
    }
    let apps = match &cli.command {
        Command::Archive(args) => args.apps.apps().err(),
        Command::Purge(args) => args.apps.apps().err(),
        _ => None,
    };
    problems.extend(apps);
    let ok = problems.is_empty();
    (
        serde_json::json!({
            "command": name,
            "settings": settings,
            "s3_credentials": credentials,
            "problems": problems,
        }),
        ok,
    )
}

/// Runs the parsed command line, then sends its metrics where configured; the summary says how
/// it went.
pub async fn run(cli: Cli, shutdown: CancellationToken) -> Summary {
    let started = std::time::Instant::now();
    let target = metrics::MetricsTarget {
        pushgateway: cli.common.metrics_pushgateway.clone(),
        textfile: cli.common.metrics_textfile.clone(),
    };
    let table = cli.common.table.clone();
    let shard = match &cli.command {
        Command::Archive(args) => args.apps.shard,
        Command::Purge(args) => args.apps.shard,
        _ => None,
    };
    let mut summary = run_command(cli, shutdown).await;
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
    let common = &cli.common;
    match cli.command {
        Command::Migrate { with_source_table } => {
            let spec = match common.spec() {
                Ok(spec) => spec,
                Err(e) => return Summary::unusable("migrate", e),
            };
            match common.database().await {
                Ok(db) => {
                    let summary =
                        migrate::run(&db, spec, &migrate::MigrateOptions { with_source_table })
                            .await;
                    db.close().await;
                    summary
                }
                Err(e) => Summary::unusable("migrate", e),
            }
        }
        Command::Archive(args) => {
            let apps = match args.apps.apps() {
                Ok(apps) => apps,
                Err(e) => return Summary::unusable("archive", e),
            };
            let now = system_clock()();
            let cutoff_ms = args.cutoff.cutoff_ms(now);
            match timespec::check_cutoff(now, cutoff_ms) {
                Err(e) => return Summary::unusable("archive", e),
                Ok(Some(warning)) => tracing::warn!("{warning}"),
                Ok(None) => {}
            }
            let env = match common.env(shutdown).await {
                Ok(env) => env,
                Err(e) => return Summary::unusable("archive", e),
            };
            if let Err(e) = refuse_equal_apps(&env, &apps).await {
                env.db.close().await;
                return Summary::unusable("archive", e);
            }
            let options = ArchiveOptions {
                apps,
                cutoff_ms,
                limits: Limits {
                    max_rows: args.batch_rows,
                    max_bytes: args.batch_bytes,
                },
                gzip_level: args.gzip_level,
                max_batches: args.max_batches,
                max_runtime: args.max_runtime.map(millis),
                dry_run: args.dry_run,
                stragglers: args.stragglers,
                delivered_status: common.delivered_status.clone(),
                lock_prefix: common.lock_prefix.clone(),
                db_retries: common.db_retries,
                failpoints: failpoints_from_env(),
            };
            let summary = archive::run(&env, &options).await;
            env.db.close().await;
            summary
        }
        Command::Verify(args) => {
            let env = match common.env(shutdown).await {
                Ok(env) => env,
                Err(e) => return Summary::unusable("verify", e),
            };
            let apps = args.scope.apps.apps();
            if let Err(e) = refuse_equal_apps(&env, &apps).await {
                env.db.close().await;
                return Summary::unusable("verify", e);
            }
            let now = (env.now_ms)();
            let options = verify::VerifyOptions {
                apps: Some(apps),
                batch_ids: args.scope.batch_ids,
                from_ms: args.scope.from,
                to_ms: args.scope.to,
                sample_percent: args.sample_percent,
                seed: args.seed.unwrap_or(now as u64),
                metadata_only: args.metadata_only,
                parallel: args.parallel as usize,
                cutoff_ms: args.cutoff.cutoff_ms(now),
                delivered_status: common.delivered_status.clone(),
                max_stragglers: args.max_stragglers,
            };
            let summary = verify::run(&env, &options).await;
            env.db.close().await;
            summary
        }
        Command::Purge(args) => {
            let apps = match args.apps.apps() {
                Ok(apps) => apps,
                Err(e) => return Summary::unusable("purge", e),
            };
            let env = match common.env(shutdown).await {
                Ok(env) => env,
                Err(e) => return Summary::unusable("purge", e),
            };
            if let Err(e) = refuse_equal_apps(&env, &apps).await {
                env.db.close().await;
                return Summary::unusable("purge", e);
            }
            let options = purge::PurgeOptions {
                apps,
                grace_ms: args.grace,
                max_rows_per_second: args.max_rows_per_second,
                max_runtime: args.max_runtime.map(millis),
                dry_run: args.dry_run,
                objects: match (args.reverify, args.trust_receipts) {
                    (true, _) => purge::ObjectCheck::Read,
                    (false, true) => purge::ObjectCheck::Trusted,
                    (false, false) => purge::ObjectCheck::Head,
                },
                include_restored: args.include_restored,
                delivered_status: common.delivered_status.clone(),
                lock_prefix: common.lock_prefix.clone(),
                db_retries: common.db_retries,
                failpoints: failpoints_from_env(),
            };
            let summary = purge::run(&env, &options).await;
            env.db.close().await;
            summary
        }
        Command::Restore(args) => {
            let env = match common.env(shutdown).await {
                Ok(env) => env,
                Err(e) => return Summary::unusable("restore", e),
            };
            let apps = args.scope.apps.apps();
            if let Err(e) = refuse_equal_apps(&env, &apps).await {
                env.db.close().await;
                return Summary::unusable("restore", e);
            }
            let options = restore::RestoreOptions {
                apps: Some(apps),
                batch_ids: args.scope.batch_ids,
                from_ms: args.scope.from,
                to_ms: args.scope.to,
                into: args.into,
                into_source: args.into_source,
                drill: args.drill,
                lock_prefix: common.lock_prefix.clone(),
            };
            let summary = restore::run(&env, &options).await;
            env.db.close().await;
            summary
        }
        Command::Status(args) => {
            let spec = match common.spec() {
                Ok(spec) => spec,
                Err(e) => return Summary::unusable("status", e),
            };
            let db = match common.database().await {
                Ok(db) => db,
                Err(e) => return Summary::unusable("status", e),
            };
            if let Err(e) = db.require_tables(spec).await {
                return Summary::unusable("status", e.to_string());
            }
            let clock = system_clock();
            let format =
                args.format
                    .map(Into::into)
                    .unwrap_or(if std::io::stdout().is_terminal() {
                        status::Format::Table
                    } else {
                        status::Format::Json
                    });
            let options = status::StatusOptions {
                apps: args.apps.apps(),
                cutoff_ms: args.cutoff.cutoff_ms(clock()),
                delivered_status: common.delivered_status.clone(),
                format,
            };
            let summary = status::run(&db, spec, &options, clock).await;
            db.close().await;
            summary
        }
        Command::Demo(args) => {
            let spec = match common.spec() {
                Ok(spec) => spec,
                Err(e) => return Summary::unusable("demo", e),
            };
            let options = demo::DemoOptions {
                server_url: common
                    .database_url
                    .clone()
                    .unwrap_or_else(|| demo::DEFAULT_SERVER_URL.to_string()),
                database: args.database,
                rows: args.rows,
                dir: std::path::absolute(&args.dir).unwrap_or(args.dir),
                file_store: args.file_store,
            };
            demo::run(spec, &options, shutdown, system_clock()).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("500KB"), Ok(500_000));
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("12 parsecs").is_err());
    }

    #[test]
    fn cli_is_well_formed_and_hides_the_database_url() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("DATABASE_URL"));
        std::env::set_var("DATABASE_URL", "mysql://u:hunter2@h/db");
        let help = Cli::command().render_long_help().to_string();
        assert!(!help.contains("hunter2"));
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
