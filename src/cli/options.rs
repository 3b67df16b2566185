//! What arguments become: the settings every command shares (table, database, store, stops,
//! the write policy), the shared groups' values, and [`IntoOptions`], which each pipeline
//! command's arguments implement in their file under `command/`.

use std::io::IsTerminal;
use std::sync::Arc;

use super::args::{
    AnyAppArgs, AppArgs, BatchScopeArgs, Common, CutoffArgs, DiscoveryArg, FormatArg, LockModeArg,
    LogFormat, MetricsArgs, ProtectionArgs, ReplicaArgs, S3Args, SourceArgs, SseArg, StopArgs,
    ThawArgs, ThawTierArg, UploadArgs, UploadChecksumArg,
};
use crate::db::replica::{self, Discovery};
use crate::db::Db;
use crate::failpoint::FailPoints;
use crate::model::profile::Profile;
use crate::model::protection::{LockMode, Sse, SseAlgorithm, Thaw, ThawTier, WritePolicy};
use crate::model::table::{self, TableSpec};
use crate::model::timespec;
use crate::pipeline::apps::{Apps, Selection};
use crate::pipeline::replicas::ReplicaGate;
use crate::pipeline::Stops;
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
pub(super) fn failpoints_from_env() -> FailPoints {
    std::env::var("OUTBOX_ARCHIVER_FAILPOINT")
        .map(FailPoints::abort_at)
        .unwrap_or_default()
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
        let spec = self.resolved_on(db).await?;
        // With the columns earlier batches archived that the table no longer has: the batches
        // that hold them are read by them.
        let dropped = db.dropped_columns(spec).await.map_err(|e| e.to_string())?;
        Ok(crate::model::table::with_dropped(spec, dropped))
    }

    async fn resolved_on(&self, db: &Db) -> Result<&'static TableSpec, String> {
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
