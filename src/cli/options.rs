//! Arguments → the commands' options: one `into_options` per command, and the settings every
//! command shares (table, database, store).

use std::io::IsTerminal;
use std::sync::Arc;

use super::args::{
    AnyAppArgs, AppArgs, ArchiveArgs, AttestArgs, BatchScopeArgs, Command, CommandArg, Common,
    CompactArgs, CutoffArgs, DiscoveryArg, DoctorArgs, FindArgs, FormatArg, HistoryArgs,
    LockModeArg, LogFormat, MetricsArgs, ProtectionArgs, PurgeArgs, ReplicaArgs, RestoreArgs,
    S3Args, SourceArgs, SseArg, StatusArgs, StopArgs, ThawArgs, ThawTierArg, UploadArgs,
    UploadChecksumArg, VerifyArgs,
};
use super::parse::millis;
use crate::db::replica::{self, Discovery};
use crate::db::Db;
use crate::failpoint::FailPoints;
use crate::model::batch::Limits;
use crate::model::command::CommandName;
use crate::model::profile::Profile;
use crate::model::protection::{LockMode, Sse, SseAlgorithm, Thaw, ThawTier, WritePolicy};
use crate::model::table::{self, TableSpec};
use crate::model::timespec;
use crate::pipeline::apps::{Apps, Selection};
use crate::pipeline::doctor::{DoctorOptions, GrantsFor};
use crate::pipeline::replicas::ReplicaGate;
use crate::pipeline::Stops;
use crate::pipeline::{archive, attest, compact, find, history, purge, restore, status, verify};
use crate::store::{S3Settings, UploadChecksum};

/// A command's arguments, made its options (a pipeline's [`crate::pipeline::command::Command`]).
pub(crate) trait IntoOptions {
    type Options: crate::pipeline::command::Command;
    fn into_options(self, common: &Common, now_ms: i64) -> Result<Self::Options, String>;
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

impl AppArgs {
    pub(crate) fn apps(&self) -> Result<Apps, String> {
        match (self.all_apps, self.shard) {
            (true, Some(shard)) => Ok(Apps::Shard(shard)),
            (true, None) => Ok(Apps::All),
            (false, None) => Ok(Apps::Listed(split_apps(&self.apps))),
            (false, Some(shard)) => Err(format!(
                "--shard needs --all-apps (OUTBOX_ARCHIVER_ALL_APPS): shard {shard} is a share of every app, not of a list"
            )),
        }
    }
}

impl AnyAppArgs {
    pub(crate) fn apps(&self) -> Apps {
        match split_apps(&self.apps) {
            apps if apps.is_empty() => Apps::All,
            apps => Apps::Listed(apps),
        }
    }
}

/// `--app` values (and OUTBOX_ARCHIVER_APPS) split on commas and whitespace alike, as a
/// ConfigMap writes a list either way; an app code never holds either (SPEC §4).
fn split_apps(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(|c: char| c == ',' || c.is_whitespace()))
        .filter(|code| !code.is_empty())
        .map(str::to_string)
        .collect()
}

impl BatchScopeArgs {
    pub(crate) fn selection(self) -> Selection {
        Selection {
            apps: Some(self.apps.apps()),
            batch_ids: self.batch_ids,
            from_ms: self.from,
            to_ms: self.to,
        }
    }
}

impl CutoffArgs {
    pub(crate) fn cutoff_ms(&self, now_ms: i64) -> i64 {
        timespec::cutoff_ms(now_ms, self.older_than, self.cutoff)
    }
}

/// `OUTBOX_ARCHIVER_FAILPOINT=<point>` aborts the process there: a crash rehearsal.
fn failpoints_from_env() -> FailPoints {
    std::env::var("OUTBOX_ARCHIVER_FAILPOINT")
        .map(FailPoints::abort_at)
        .unwrap_or_default()
}

impl IntoOptions for ArchiveArgs {
    type Options = archive::ArchiveOptions;
    fn into_options(self, common: &Common, now_ms: i64) -> Result<archive::ArchiveOptions, String> {
        let cutoff_ms = self.cutoff.cutoff_ms(now_ms);
        if let Some(warning) = timespec::check_cutoff(now_ms, cutoff_ms)? {
            tracing::warn!("{warning}");
        }
        Ok(archive::ArchiveOptions {
            apps: self.apps.apps()?,
            cutoff_ms,
            limits: Limits {
                max_rows: self.batch_rows,
                max_bytes: self.batch_bytes,
            },
            gzip_level: self.gzip_level,
            max_batches: self.max_batches,
            max_runtime: self.max_runtime.map(millis),
            dry_run: self.dry_run,
            stragglers: self.stragglers,
            delivered_status: common.delivered_status(&self.source),
            lock_prefix: self.lock.lock_prefix.clone(),
            db_retries: self.retry.db_retries,
            parallel_apps: self.parallel_apps.resolve(super::parse::cores()),
            memory_budget: self.memory_budget,
            policy: write_policy(common.store.as_deref(), &self.upload, &self.protection)?,
            accept_log_break: self.accept_log_break.filter(|r| !r.trim().is_empty()),
            failpoints: failpoints_from_env(),
        })
    }
}

impl IntoOptions for VerifyArgs {
    type Options = verify::VerifyOptions;
    fn into_options(self, common: &Common, now_ms: i64) -> Result<verify::VerifyOptions, String> {
        Ok(verify::VerifyOptions {
            selection: self.scope.selection(),
            sample_percent: self.sample_percent,
            seed: self.seed.unwrap_or(now_ms as u64),
            metadata_only: self.metadata_only,
            parallel: self.parallel as usize,
            cutoff_ms: self.cutoff.cutoff_ms(now_ms),
            delivered_status: common.delivered_status(&self.source),
            max_stragglers: self.max_stragglers,
            thaw: self.thaw.thaw(),
            failpoints: failpoints_from_env(),
        })
    }
}

impl IntoOptions for PurgeArgs {
    type Options = purge::PurgeOptions;
    fn into_options(self, common: &Common, _: i64) -> Result<purge::PurgeOptions, String> {
        Ok(purge::PurgeOptions {
            apps: self.apps.apps()?,
            grace_ms: self.grace,
            max_rows_per_second: self.max_rows_per_second,
            max_runtime: self.max_runtime.map(millis),
            dry_run: self.dry_run,
            objects: match (self.reverify, self.trust_receipts) {
                (true, _) => crate::pipeline::report::details::ObjectCheck::Read,
                (false, true) => crate::pipeline::report::details::ObjectCheck::Trusted,
                (false, false) => crate::pipeline::report::details::ObjectCheck::Head,
            },
            include_restored: self.include_restored,
            delivered_status: common.delivered_status(&self.source),
            lock_prefix: self.lock.lock_prefix.clone(),
            db_retries: self.retry.db_retries,
            parallel_apps: self.parallel_apps as usize,
            failpoints: failpoints_from_env(),
        })
    }
}

impl IntoOptions for HistoryArgs {
    type Options = history::HistoryOptions;
    fn into_options(self, _: &Common, _: i64) -> Result<history::HistoryOptions, String> {
        Ok(history::HistoryOptions {
            app: self.app,
            command: self.command,
            last: self.last,
            since_ms: self.since,
            until_ms: self.until,
        })
    }
}

impl IntoOptions for FindArgs {
    type Options = find::FindOptions;
    fn into_options(self, common: &Common, _: i64) -> Result<find::FindOptions, String> {
        let mut event_ids = self.event_ids;
        if let Some(path) = &self.event_ids_from {
            let text = if path.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(path)
            }
            .map_err(|e| format!("--event-ids-from {}: {e}", path.display()))?;
            event_ids.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            );
        }
        let filter = match &self.filter {
            None => None,
            Some(text) => match text.split_once('=') {
                Some((column, value)) if !column.trim().is_empty() => {
                    Some((column.trim().to_string(), value.to_string()))
                }
                _ => return Err(format!("--where {text:?}: write COLUMN=VALUE")),
            },
        };
        Ok(find::FindOptions {
            selection: self.scope.selection(),
            event_ids,
            filter,
            parallel: self.parallel as usize,
            delivered_status: common.delivered_status(&self.source),
        })
    }
}

impl IntoOptions for RestoreArgs {
    type Options = restore::RestoreOptions;
    fn into_options(self, _: &Common, _: i64) -> Result<restore::RestoreOptions, String> {
        Ok(restore::RestoreOptions {
            selection: self.scope.selection(),
            into: self.into,
            into_source: self.into_source,
            drill: self.drill,
            lock_prefix: self.lock.lock_prefix.clone(),
            parallel_apps: self.parallel_apps as usize,
            thaw: self.thaw.thaw(),
            failpoints: failpoints_from_env(),
        })
    }
}

impl DoctorArgs {
    pub(crate) fn options(&self, policy: WritePolicy) -> DoctorOptions {
        let mut grants_for: Vec<GrantsFor> = self
            .grants_for
            .iter()
            .map(|c| match c {
                CommandArg::Archive => GrantsFor::Archive,
                CommandArg::Verify => GrantsFor::Verify,
                CommandArg::Status => GrantsFor::Status,
                CommandArg::Purge => GrantsFor::Purge,
                CommandArg::Restore => GrantsFor::Restore,
                CommandArg::RestoreIntoSource => GrantsFor::RestoreIntoSource,
                CommandArg::Compact => GrantsFor::Compact,
            })
            .collect();
        grants_for.sort();
        grants_for.dedup();
        DoctorOptions { grants_for, policy }
    }
}

impl ThawArgs {
    pub(crate) fn thaw(&self) -> Option<Thaw> {
        self.thaw.map(|days| Thaw {
            days,
            tier: match self.thaw_tier {
                ThawTierArg::Bulk => ThawTier::Bulk,
                ThawTierArg::Standard => ThawTier::Standard,
                ThawTierArg::Expedited => ThawTier::Expedited,
            },
        })
    }
}

impl IntoOptions for CompactArgs {
    type Options = compact::CompactOptions;
    fn into_options(self, _: &Common, _: i64) -> Result<compact::CompactOptions, String> {
        Ok(compact::CompactOptions {
            apps: self.apps.apps()?,
            older_than_ms: self.older_than,
            max_batches: self.max_batches,
            max_runtime: self.max_runtime.map(millis),
            dry_run: self.dry_run,
            thaw: self.thaw.thaw(),
            lock_prefix: self.lock.lock_prefix.clone(),
            db_retries: self.retry.db_retries,
            failpoints: failpoints_from_env(),
        })
    }
}

/// The statement is printed as `--format` asks ([`Common::output_format`]): canonical JSON or
/// CSV; a table is not a statement.
impl IntoOptions for AttestArgs {
    type Options = attest::AttestOptions;
    fn into_options(self, common: &Common, _: i64) -> Result<attest::AttestOptions, String> {
        if common.log.format == Some(FormatArg::Table) && !common.log.format_from_environment {
            return Err("attest prints the auditor's statement: --format json (the default, canonical) or csv, not table".into());
        }
        Ok(attest::AttestOptions {
            apps: self.apps.apps(),
            from: crate::model::timespec::utc_date(self.from),
            to: crate::model::timespec::utc_date(self.to),
            previous: self.previous,
        })
    }
}

impl IntoOptions for StatusArgs {
    type Options = status::StatusOptions;
    fn into_options(self, common: &Common, now_ms: i64) -> Result<status::StatusOptions, String> {
        Ok(status::StatusOptions {
            apps: self.apps.apps(),
            cutoff_ms: self.cutoff.cutoff_ms(now_ms),
            grace_ms: self.grace,
            delivered_status: common.delivered_status(&self.source),
        })
    }
}

impl Common {
    /// Whether the summary is printed as a table: `--format`; by default on a terminal, unless
    /// the logs were asked for as JSON (`--log-format json`: then everything is JSON).
    pub(crate) fn table_output(&self) -> bool {
        match self.log.format {
            Some(FormatArg::Table) => true,
            Some(FormatArg::Json | FormatArg::Csv) => false,
            None => self.log.log_format != Some(LogFormat::Json) && std::io::stdout().is_terminal(),
        }
    }

    /// How the run's end is printed: CSV where asked for (attest's statement: no other command
    /// takes it), else a table or the short summary for a person ([`Common::table_output`]),
    /// or JSON. A statement is canonical JSON in both (`output::render`): a document to hash
    /// and sign, whatever a person prefers for summaries.
    pub(crate) fn output_format(&self) -> crate::output::Format {
        use crate::output::Format;
        match self.log.format {
            Some(FormatArg::Csv) => Format::Csv,
            _ if self.table_output() => Format::Table,
            _ => Format::Json,
        }
    }

    pub(crate) fn log_format(&self) -> LogFormat {
        self.log
            .log_format
            .unwrap_or(if std::io::stderr().is_terminal() {
                LogFormat::Text
            } else {
                LogFormat::Json
            })
    }
}

/// The shared option groups a subcommand accepts (each `None` where it has no such group).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Groups<'a> {
    pub s3: Option<&'a S3Args>,
    pub upload: Option<&'a UploadArgs>,
    pub protection: Option<&'a ProtectionArgs>,
    pub replicas: Option<&'a ReplicaArgs>,
    pub stops: Option<&'a StopArgs>,
    pub metrics: Option<&'a MetricsArgs>,
    pub log_keys: Option<&'a super::groups::LogSigningArgs>,
}

impl Command {
    /// The command's name, as the command line spells it.
    pub(crate) fn name(&self) -> CommandName {
        match self {
            Command::Migrate(_) => CommandName::Migrate,
            Command::Archive(_) => CommandName::Archive,
            Command::Verify(_) => CommandName::Verify,
            Command::Status(_) => CommandName::Status,
            Command::Find(_) => CommandName::Find,
            Command::History(_) => CommandName::History,
            Command::Purge(_) => CommandName::Purge,
            Command::Restore(_) => CommandName::Restore,
            Command::Compact(_) => CommandName::Compact,
            Command::Attest(_) => CommandName::Attest,
            Command::Demo(_) => CommandName::Demo,
            Command::Schema => CommandName::Schema,
            Command::Doctor(_) => CommandName::Doctor,
            Command::Relocate(_) => CommandName::Relocate,
            Command::LogKey(_) => CommandName::LogKey,
        }
    }

    /// Its `--app`/`--all-apps`/`--shard`, where they name the apps it works on.
    pub(crate) fn app_args(&self) -> Option<&AppArgs> {
        match self {
            Command::Archive(args) => Some(&args.apps),
            Command::Purge(args) => Some(&args.apps),
            Command::Compact(args) => Some(&args.apps),
            _ => None,
        }
    }

    /// The shared groups this subcommand accepts.
    pub(crate) fn groups(&self) -> Groups<'_> {
        let none = Groups::default();
        match self {
            Command::Archive(a) => Groups {
                s3: Some(&a.s3),
                upload: Some(&a.upload),
                protection: Some(&a.protection),
                replicas: Some(&a.replicas),
                stops: Some(&a.stops),
                log_keys: Some(&a.log_keys),
                metrics: Some(&a.metrics),
            },
            Command::Verify(a) => Groups {
                s3: Some(&a.s3),
                stops: Some(&a.stops),
                log_keys: Some(&a.log_keys),
                metrics: Some(&a.metrics),
                ..none
            },
            Command::Find(a) => Groups {
                s3: Some(&a.s3),
                stops: Some(&a.stops),
                metrics: Some(&a.metrics),
                ..none
            },
            Command::Purge(a) => Groups {
                s3: Some(&a.s3),
                replicas: Some(&a.replicas),
                stops: Some(&a.stops),
                log_keys: Some(&a.log_keys),
                metrics: Some(&a.metrics),
                ..none
            },
            Command::Restore(a) => Groups {
                s3: Some(&a.s3),
                replicas: Some(&a.replicas),
                stops: Some(&a.stops),
                metrics: Some(&a.metrics),
                ..none
            },
            Command::Compact(a) => Groups {
                s3: Some(&a.s3),
                replicas: Some(&a.replicas),
                stops: Some(&a.stops),
                metrics: Some(&a.metrics),
                ..none
            },
            Command::Attest(a) => Groups {
                s3: Some(&a.s3),
                log_keys: Some(&a.log_keys),
                metrics: Some(&a.metrics),
                ..none
            },
            Command::Doctor(a) => Groups {
                s3: Some(&a.s3),
                upload: Some(&a.upload),
                protection: Some(&a.protection),
                metrics: Some(&a.metrics),
                ..none
            },
            Command::Status(a) => Groups {
                metrics: Some(&a.metrics),
                ..none
            },
            Command::Relocate(a) => Groups {
                s3: Some(&a.s3),
                stops: Some(&a.stops),
                ..none
            },
            Command::Migrate(_)
            | Command::History(_)
            | Command::Demo(_)
            | Command::Schema
            | Command::LogKey(_) => none,
        }
    }
}

impl Groups<'_> {
    /// How to reach the store: `--s3-*` (defaults where the command has none), the upload
    /// settings and encryption of a command that writes.
    pub(crate) fn s3_settings(&self) -> S3Settings {
        let defaults;
        let s3 = match self.s3 {
            Some(s3) => s3,
            None => {
                defaults = default_s3_args();
                &defaults
            }
        };
        let upload = self.upload.cloned().unwrap_or_default();
        S3Settings {
            endpoint: s3.s3_endpoint.clone(),
            region: s3.s3_region.clone(),
            force_path_style: s3.s3_force_path_style,
            upload_checksum: Some(upload.s3_upload_checksum.into()),
            conditional_put: Some(upload.s3_conditional_put),
            static_credentials: None,
            max_attempts: Some(s3.s3_max_attempts),
            connect_timeout: Some(s3.s3_connect_timeout),
            read_timeout: Some(s3.s3_read_timeout),
            initial_backoff: None,
            sse: self.protection.and_then(sse),
            kms_endpoint: self.protection.and_then(|p| p.kms_endpoint.clone()),
            // The AWS CLI's and SDKs' variable, which the Rust SDK does not read itself.
            ca_bundle: s3
                .store_ca_bundle
                .clone()
                .or_else(|| std::env::var_os("AWS_CA_BUNDLE").map(Into::into)),
        }
    }

    /// What opening the run needs of the groups, owned (the arguments become the command's
    /// options).
    pub(crate) fn connect(&self) -> Connect {
        Connect {
            s3: self.s3_settings(),
            sentinel: self.stops.and_then(|s| s.sentinel.clone()),
            replicas: self.replicas.cloned(),
            log_keys: self.log_keys.cloned(),
        }
    }

    /// Where the run's metrics go.
    pub(crate) fn metrics_target(&self) -> crate::output::metrics::MetricsTarget {
        crate::output::metrics::MetricsTarget {
            pushgateway: self.metrics.and_then(|m| m.metrics_pushgateway.clone()),
            textfile: self.metrics.and_then(|m| m.metrics_textfile.clone()),
        }
    }

    /// How often progress is logged where it is not drawn (commands without progress: never).
    pub(crate) fn progress_every(&self) -> i64 {
        self.stops.map_or(0, |s| s.progress_every)
    }
}

/// How a command reaches the store and what stops or paces it.
#[derive(Debug, Clone)]
pub(crate) struct Connect {
    pub s3: S3Settings,
    pub sentinel: Option<std::path::PathBuf>,
    pub replicas: Option<ReplicaArgs>,
    pub log_keys: Option<super::groups::LogSigningArgs>,
}

fn default_s3_args() -> S3Args {
    S3Args {
        s3_endpoint: None,
        store_ca_bundle: None,
        s3_region: None,
        s3_force_path_style: None,
        s3_max_attempts: crate::store::DEFAULT_MAX_ATTEMPTS,
        s3_connect_timeout: std::time::Duration::from_secs(10),
        s3_read_timeout: std::time::Duration::from_secs(30),
    }
}

/// The encryption every put asks for: `--sse`, or aws:kms when only a key is named.
pub(super) fn sse(p: &ProtectionArgs) -> Option<Sse> {
    let algorithm = match (p.sse, &p.sse_kms_key_id) {
        (Some(SseArg::Aes256), _) => SseAlgorithm::Aes256,
        (Some(SseArg::Kms), _) | (None, Some(_)) => SseAlgorithm::Kms,
        (None, None) => return None,
    };
    Some(Sse {
        algorithm,
        kms_key_id: p.sse_kms_key_id.clone(),
        bucket_key: p.sse_bucket_key,
    })
}

/// What `archive` writes each batch with, or the setting that cannot be right (exit 2).
pub(super) fn write_policy(
    store: Option<&str>,
    upload: &UploadArgs,
    p: &ProtectionArgs,
) -> Result<WritePolicy, String> {
    let lock = match (p.object_lock_mode, p.retention) {
        (Some(mode), Some(retention)) => Some((
            match mode {
                LockModeArg::Governance => LockMode::Governance,
                LockModeArg::Compliance => LockMode::Compliance,
            },
            retention,
        )),
        (None, None) => None,
        (Some(_), None) => {
            return Err("--object-lock-mode needs --retention (OUTBOX_ARCHIVER_RETENTION), e.g. 7y: how long each batch's objects stay locked".into())
        }
        (None, Some(_)) => {
            return Err("--retention needs --object-lock-mode governance|compliance (OUTBOX_ARCHIVER_OBJECT_LOCK_MODE)".into())
        }
    };
    if (lock.is_some() || p.legal_hold) && upload.s3_upload_checksum == UploadChecksumArg::None {
        return Err("--object-lock-mode / --legal-hold need an upload checksum: Object Lock buckets refuse puts without Content-MD5 or x-amz-checksum-*; set --s3-upload-checksum md5, sha256 or crc64nvme (not none)".into());
    }
    if p.sse == Some(SseArg::Aes256) && p.sse_kms_key_id.is_some() {
        return Err("--sse-kms-key-id goes with --sse aws:kms, not AES256".into());
    }
    let policy = WritePolicy {
        lock,
        legal_hold: p.legal_hold,
        storage_class: p.s3_storage_class.clone(),
    };
    let local = store.is_some_and(|s| s.starts_with("file://"));
    if local && (policy.is_set() || sse(p).is_some()) {
        return Err("--object-lock-mode, --legal-hold, --s3-storage-class and --sse need an s3:// store; a file:// folder cannot keep them".into());
    }
    Ok(policy)
}

impl Common {
    /// The profile file `--table-profile` names, read (not yet checked against the database).
    pub(crate) fn profile(&self) -> Result<Option<Profile>, String> {
        self.db
            .table_profile
            .as_deref()
            .map(Profile::load)
            .transpose()
    }

    /// `--delivered-status`, else the profile's, else `DELIVERED`.
    pub(crate) fn delivered_status(&self, source: &SourceArgs) -> String {
        source
            .delivered_status
            .clone()
            .or_else(|| self.profile().ok().flatten()?.delivered_status)
            .unwrap_or_else(|| "DELIVERED".into())
    }

    /// The table: `--table-profile`'s, resolved against the live schema, or the built-in
    /// `--table`.
    pub(crate) async fn spec_on(&self, db: &Db) -> Result<&'static TableSpec, String> {
        match self.profile()? {
            Some(profile) => db
                .resolve_profile(&profile)
                .await
                .map_err(|e| format!("--table-profile {}: {e}", self.profile_path())),
            // The built-in table as the database holds it: with the columns added to it since.
            None => db
                .resolve_builtin(self.spec()?)
                .await
                .map_err(|e| e.to_string()),
        }
    }

    fn profile_path(&self) -> String {
        self.db
            .table_profile
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// The built-in `--table` (a profile needs the database: [`Common::spec_on`]).
    pub(crate) fn spec(&self) -> Result<&'static TableSpec, String> {
        if self.db.table_profile.is_some() {
            self.profile()?;
            return Err(format!(
                "--table-profile {}: this command runs the built-in tables only (--table)",
                self.profile_path()
            ));
        }
        table::find(&self.db.table).ok_or_else(|| {
            let known: Vec<_> = table::TABLES.iter().map(|t| t.name).collect();
            format!(
                "--table {:?} is not a table this build knows (known: {})",
                self.db.table,
                known.join(", ")
            )
        })
    }

    /// The operator's stops: the sentinel for every command that works in batches, and, for
    /// commands that write (`writes`), the replicas whose lag paces them — listed, or found on
    /// the primary with the database URL's credentials.
    pub(crate) async fn stops(
        &self,
        db: &Db,
        connect: &Connect,
        writes: bool,
    ) -> Result<Stops, String> {
        let mut stops = Stops {
            sentinel: connect.sentinel.clone(),
            replicas: None,
        };
        let Some(s) = connect.replicas.as_ref().filter(|_| writes) else {
            return Ok(stops);
        };
        let mut urls = s.replicas.clone();
        if let Some(how) = s.replicas_from {
            let (how, what) = match how {
                DiscoveryArg::Hosts => (
                    Discovery::Hosts,
                    "SHOW REPLICA HOSTS lists only replicas that set report_host",
                ),
                DiscoveryArg::Processlist => (
                    Discovery::Processlist,
                    "the processlist shows Binlog Dump threads only to a user with PROCESS",
                ),
            };
            let url = self.db.database_url.as_deref().unwrap_or_default();
            let found = replica::discover(db, url, how)
                .await
                .map_err(|e| format!("--replicas-from: {e}"))?;
            if found.is_empty() {
                // Fail closed: no replica found is not "no replica lags".
                return Err(format!(
                    "--replicas-from / OUTBOX_ARCHIVER_REPLICAS_FROM found no replica ({what}); list them with --replica instead"
                ));
            }
            urls.extend(found);
        }
        if urls.is_empty() {
            return Ok(stops);
        }
        let replicas = urls
            .iter()
            .map(|url| replica::Replica::new(url))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let names: Vec<&str> = replicas.iter().map(|r| r.name.as_str()).collect();
        tracing::info!(
            replicas = names.join(", "),
            "writes wait for these replicas (--max-replica-lag)"
        );
        // The heartbeat rows that count are the primary's own.
        let heartbeat = match &s.heartbeat_table {
            Some(table) => {
                let id = replica::server_id(db).await.map_err(|e| {
                    format!("--heartbeat-table: reading the primary's server_id: {e}")
                })?;
                Some((table.clone(), id))
            }
            None => None,
        };
        stops.replicas = Some(Arc::new(ReplicaGate::new(
            replicas,
            s.max_replica_lag,
            s.replica_wait_timeout,
            heartbeat,
        )));
        Ok(stops)
    }

    pub(crate) async fn database(&self) -> Result<Db, String> {
        let url = self
            .db
            .database_url
            .as_deref()
            .ok_or("no database given: set --database-url or DATABASE_URL (mysql://user:password@host:3306/database)")?;
        // Connections open as needed: up to three per app at work (its page reads, the next
        // batch's checks, its receipt transaction) for up to eight apps at a time
        // (`--parallel-apps`), and status queries.
        Db::connect(url, 26).await.map_err(|e| e.to_string())
    }
}
