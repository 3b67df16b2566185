//! `doctor`'s preflight: every check it can make of the database and the store without writing a
//! row, each an `ok` / `warning` / `problem` line with the fix. The only object it writes is one
//! probe under the archive's prefix, with the run's storage class, retention (the shortest the
//! store accepts: two seconds), legal hold and encryption, to see what the store really does with
//! them; the probe's version is then removed where the lock and the bucket policy allow, else it
//! is left and named.

use std::time::Duration;

use serde::Serialize;

use crate::db::preflight::{Access, Privilege};
use crate::db::{Db, DbError};
use crate::model::format;
use crate::model::profile;
use crate::model::protection::{header_time, is_cold_class, ObjectLock, WritePolicy};
use crate::model::table::TableSpec;
use crate::store::s3::{LockConfiguration, S3Store, Versioning};
use crate::store::{ConditionalPut, ObjectMeta, ObjectStore, PutMode, PutOptions, StoreError};

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Works, but not as an operator of financial records would want it.
    Warning,
    /// Something a run would fail on, or a guarantee that does not hold.
    Problem,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub check: String,
    pub status: Status,
    pub detail: String,
    /// What to do about it (warnings and problems).
    pub fix: Option<String>,
}

impl Check {
    fn ok(check: &str, detail: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warning(check: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            status: Status::Warning,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn problem(check: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            status: Status::Problem,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// A command whose database privileges doctor checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CommandName {
    Archive,
    Verify,
    Status,
    Purge,
    Restore,
    RestoreIntoSource,
    Compact,
}

impl CommandName {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandName::Archive => "archive",
            CommandName::Verify => "verify",
            CommandName::Status => "status",
            CommandName::Purge => "purge",
            CommandName::Restore => "restore",
            CommandName::RestoreIntoSource => "restore --into-source",
            CommandName::Compact => "compact",
        }
    }

    /// What the command reads and writes, table by table (deploy/mysql-grants.sql grants it).
    fn needs(self, spec: &TableSpec) -> Vec<(String, &'static [Privilege])> {
        use Privilege::*;
        let source = spec.name.to_string();
        let migrations = "_sqlx_migrations".to_string();
        let mut needs: Vec<(String, &'static [Privilege])> = match self {
            CommandName::Archive => vec![
                (source, &[Select]),
                (spec.receipts_table(), &[Select, Insert, Update]),
                (spec.members_table(), &[Select, Insert, Update, Delete]),
                (spec.superseded_table(), &[Select, Insert]),
                (spec.runs_table(), &[Select, Insert]),
                (migrations, &[Select]),
            ],
            CommandName::Verify => vec![
                (source, &[Select]),
                (spec.receipts_table(), &[Select]),
                (spec.members_table(), &[Select]),
                (spec.superseded_table(), &[Select]),
                (migrations, &[Select]),
            ],
            CommandName::Status => vec![
                (source, &[Select]),
                (spec.receipts_table(), &[Select]),
                (spec.runs_table(), &[Select]),
                (spec.drills_table(), &[Select]),
                (migrations, &[Select]),
            ],
            CommandName::Purge => vec![
                (source, &[Select, Delete]),
                (spec.receipts_table(), &[Select, Update]),
                (spec.members_table(), &[Select]),
                (spec.superseded_table(), &[Select]),
                (spec.runs_table(), &[Select, Insert]),
                (spec.drills_table(), &[Select]),
                (migrations, &[Select]),
            ],
            CommandName::Restore => vec![
                (spec.receipts_table(), &[Select]),
                (spec.members_table(), &[Select]),
                (spec.superseded_table(), &[Select]),
                (spec.drills_table(), &[Select, Insert]),
                (migrations, &[Select]),
                (format!("{}_restored", spec.name), &[Select, Insert]),
            ],
            CommandName::Compact => vec![
                (source, &[Select]),
                (spec.receipts_table(), &[Select, Update]),
                (spec.members_table(), &[Select, Delete]),
                (spec.superseded_table(), &[Select]),
                (spec.runs_table(), &[Select, Insert]),
                (migrations, &[Select]),
            ],
            CommandName::RestoreIntoSource => vec![
                (source, &[Select, Insert]),
                (spec.receipts_table(), &[Select, Update]),
                // A compacted batch's rows get their member rows back (an upsert: UPDATE too).
                (spec.members_table(), &[Select, Insert, Update]),
                (spec.superseded_table(), &[Select]),
                (migrations, &[Select]),
            ],
        };
        // Tables made from the description have no migrations history; a profile's table has
        // the record of its archived columns (read at every start, added to by archive).
        if spec.owned_by == crate::model::table::OwnedBy::Spec {
            needs.retain(|(table, _)| table != "_sqlx_migrations");
        }
        if !spec.is_builtin() {
            let privileges: &'static [Privilege] = match self {
                CommandName::Archive => &[Select, Insert],
                _ => &[Select],
            };
            needs.push((spec.columns_table(), privileges));
        }
        needs
    }
}

#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// The commands this login is meant to run: their grants are checked.
    pub grants_for: Vec<CommandName>,
    /// What `archive` would write objects with.
    pub policy: WritePolicy,
}

/// Everything doctor found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DoctorRun {
    pub checks: Vec<Check>,
    /// Probe object versions that could not be removed (retention or bucket policy): key,
    /// version and until when.
    pub probe_objects_left: Vec<String>,
    /// The database or the store could not be reached at all (exit status 2, as for the other
    /// commands).
    #[serde(skip)]
    pub unreachable: bool,
}

impl DoctorRun {
    pub fn worst(&self) -> Status {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::Ok)
    }
}

/// The database's checks: connection, tables and collations, the retention index, grants, and
/// the buffer pool against the table.
pub async fn check_database(
    db: Result<&Db, &str>,
    spec: &TableSpec,
    opts: &DoctorOptions,
    run: &mut DoctorRun,
) {
    let db = match db {
        Ok(db) => db,
        Err(e) => {
            run.unreachable = true;
            run.checks.push(Check::problem(
                "database",
                e,
                "fix --database-url / DATABASE_URL (user, password, host, database), then run doctor again",
            ));
            return;
        }
    };
    let checks = &mut run.checks;
    match (db.server().await, db.current_user().await) {
        (Ok(server), Ok(user)) if server.supported() => checks.push(Check::ok(
            "database",
            format!("{server}, logged in as {user}"),
        )),
        (Ok(server), Ok(user)) => checks.push(Check::warning(
            "database",
            format!("{server}, logged in as {user}: a release the archiver is not tested on"),
            "the archiver is tested on MySQL 8.4 and 9.7 and MariaDB 10.11 (it needs MySQL 8.0 or MariaDB 10.6 at least)",
        )),
        (Err(e), _) | (_, Err(e)) => checks.push(Check::problem(
            "database",
            e.to_string(),
            "check --database-url / DATABASE_URL",
        )),
    }
    checks.push(tls(db).await);
    checks.push(packet(db).await);
    checks.push(tables(db, spec).await);
    checks.push(retention_index(db, spec).await);
    for command in &opts.grants_for {
        checks.push(grants(db, spec, *command).await);
    }
    checks.push(buffer_pool(db, spec).await);
}

/// How the connection is protected: the TLS the server negotiated and what `ssl-mode` verified.
async fn tls(db: &Db) -> Check {
    use sqlx::mysql::MySqlSslMode as Mode;
    let tls = match db.tls().await {
        Ok(tls) => tls,
        Err(e) => return Check::warning("tls", e.to_string(), "see the message"),
    };
    let mode = db.options.get_ssl_mode();
    let verify = "connect with ?ssl-mode=VERIFY_IDENTITY&ssl-ca=/path/to/ca.pem in --database-url / DATABASE_URL (README, \"TLS to the database\")";
    // Nobody stands between this process and a server on this machine.
    let host = db.options.get_host();
    let local = if db.options.get_socket().is_some() {
        Some("a unix socket on this machine".to_string())
    } else if ["127.0.0.1", "localhost", "::1"].contains(&host) {
        Some(format!("{host} is this machine"))
    } else {
        None
    };
    let Some(version) = tls.version else {
        return match local {
            Some(local) => Check::ok("tls", format!("no TLS: {local}")),
            None => Check::warning(
                "tls",
                format!("no TLS to {host}: the password and every archived row cross the network in clear"),
                verify,
            ),
        };
    };
    let state = format!("{version} ({})", tls.cipher);
    match mode {
        Mode::VerifyIdentity => Check::ok(
            "tls",
            format!("{state}, ssl-mode=VERIFY_IDENTITY: the server's certificate and host name are verified"),
        ),
        _ if local.is_some() && !matches!(mode, Mode::VerifyCa) => Check::ok(
            "tls",
            format!(
                "{state}, ssl-mode {mode:?}: {}, so the certificate need not be verified",
                local.unwrap_or_default()
            ),
        ),
        Mode::VerifyCa => Check::warning(
            "tls",
            format!("{state}, ssl-mode=VERIFY_CA: the certificate's CA is verified, not the host name (and the client also trusts the public web CAs)"),
            verify,
        ),
        _ => Check::warning(
            "tls",
            format!("{state}, but the server's certificate is not verified (ssl-mode {mode:?}): anyone between can pose as the server"),
            verify,
        ),
    }
}

/// `max_allowed_packet` against the largest statement the archiver sends: restore's INSERTs
/// of up to [`crate::db::restore::RESTORE_CHUNK_BYTES`] of rows.
async fn packet(db: &Db) -> Check {
    let chunk = crate::db::restore::RESTORE_CHUNK_BYTES as u64;
    // A chunk's rows as SQL values, with the statement around them.
    let needed = chunk + chunk / 4;
    match db.bytes_variable("max_allowed_packet").await {
        Ok(packet) if packet >= needed => Check::ok(
            "max_allowed_packet",
            format!("{} (restore sends at most about {} a statement)", mib(packet), mib(needed)),
        ),
        Ok(packet) => Check::problem(
            "max_allowed_packet",
            format!(
                "{}: restore's INSERTs of up to {} of rows would fail (\"packet too large\")",
                mib(packet),
                mib(needed)
            ),
            format!("SET GLOBAL max_allowed_packet = {} and in the server's configuration (MySQL's default is 64 MiB)", 64u64 << 20),
        ),
        Err(e) => Check::warning("max_allowed_packet", e.to_string(), "see the message"),
    }
}

async fn tables(db: &Db, spec: &TableSpec) -> Check {
    match db.require_tables(spec).await {
        Ok(()) => Check::ok(
            "tables",
            format!(
                "{} and the archiver's tables are in place, every migration applied; event ids compare in binary and app codes as finely as the source's",
                spec.name
            ),
        ),
        Err(DbError::NotMigrated { missing }) => Check::problem(
            "tables",
            format!("migration {missing} is not applied"),
            "run `outbox-archiver migrate` as the migration role (a user that may CREATE and ALTER)",
        ),
        Err(DbError::NoSourceTable { table }) => Check::problem(
            "tables",
            format!("source table {table} is missing"),
            "check --table and the database in --database-url",
        ),
        Err(DbError::Collation { table, column, found, why, fix }) => Check::problem(
            "collations",
            format!("{table}.{column} compares with collation {found}, {why}"),
            fix,
        ),
        Err(e) => Check::problem("tables", e.to_string(), "see the message"),
    }
}

async fn retention_index(db: &Db, spec: &TableSpec) -> Check {
    let roles = [
        spec.app_code,
        spec.status,
        spec.updated_at_ms,
        spec.event_id,
    ];
    match db.indexes(spec.name).await {
        Ok(indexes) => {
            match profile::retention_index(spec.name, roles, Some(spec.retention_index), &indexes)
            {
                Ok(name) => Check::ok(
                    "retention_index",
                    format!("{name} ({})", roles.join(", ")),
                ),
                Err(problem) => Check::problem(
                    "retention_index",
                    problem,
                    "add the index as the message says (archive, verify and status force it and refuse to start without it)",
                ),
            }
        }
        Err(e) => Check::warning("retention_index", e.to_string(), "see the message"),
    }
}

/// Whether the login may run what `command` runs, table by table.
async fn grants(db: &Db, spec: &TableSpec, command: CommandName) -> Check {
    let name = format!(
        "grants_{}",
        command.as_str().replace(" --", "_").replace('-', "_")
    );
    let (database, user) = match (db.database_name().await, db.current_user().await) {
        (Ok(d), Ok(u)) => (d, u),
        (Err(e), _) | (_, Err(e)) => {
            return Check::warning(&name, e.to_string(), "see the message")
        }
    };
    let mut granted = Vec::new();
    let mut missing: Vec<(String, Vec<&'static str>)> = Vec::new();
    let mut notes = Vec::new();
    let mut unchecked = 0;
    for (table, privileges) in command.needs(spec) {
        let mut lacking = Vec::new();
        let mut checked = true;
        for privilege in privileges {
            match db.access(&table, *privilege).await {
                Ok(Access::Granted) => {}
                Ok(Access::Denied(_)) => lacking.push(privilege.as_str()),
                Ok(Access::NoTable) if command == CommandName::Restore => {
                    notes.push(format!(
                        "{table} does not exist yet: restore creates it, which needs CREATE on the database (an EXPLAIN cannot check that)"
                    ));
                    checked = false;
                    break;
                }
                Ok(Access::NoTable) => {
                    notes.push(format!("{table} is missing (see `tables`), not checked"));
                    unchecked += 1;
                    checked = false;
                    break;
                }
                Err(e) => {
                    notes.push(format!("{table} could not be checked: {e}"));
                    unchecked += 1;
                    checked = false;
                    break;
                }
            }
        }
        if !lacking.is_empty() {
            missing.push((table, lacking));
        } else if checked {
            granted.push(table);
        }
    }
    if missing.is_empty() && unchecked > 0 {
        return Check::warning(
            &name,
            format!(
                "{user}: granted on {}; {}",
                granted.join(", "),
                notes.join("; ")
            ),
            "fix what `tables` reports, then run doctor again",
        );
    }
    if missing.is_empty() {
        let mut detail = format!(
            "{user} may run what `{}` runs on {}",
            command.as_str(),
            granted.join(", ")
        );
        if !notes.is_empty() {
            detail.push_str("; ");
            detail.push_str(&notes.join("; "));
        }
        return Check::ok(&name, detail);
    }
    let lacks: Vec<String> = missing
        .iter()
        .map(|(t, p)| format!("{} on {t}", p.join(", ")))
        .collect();
    let fix: Vec<String> = missing
        .iter()
        .map(|(t, p)| format!("GRANT {} ON `{database}`.`{t}` TO {user};", p.join(", ")))
        .collect();
    Check::problem(
        &name,
        format!(
            "{user} lacks {} — `{}` would fail (deploy/mysql-grants.sql has the roles){}",
            lacks.join("; "),
            command.as_str(),
            if notes.is_empty() {
                String::new()
            } else {
                format!("; {}", notes.join("; "))
            }
        ),
        fix.join(" "),
    )
}

async fn buffer_pool(db: &Db, spec: &TableSpec) -> Check {
    let (pool, size) = match (db.buffer_pool_bytes().await, db.table_size(spec.name).await) {
        (Ok(pool), Ok(size)) => (pool, size),
        (Err(e), _) | (_, Err(e)) => {
            return Check::warning("buffer_pool", e.to_string(), "see the message")
        }
    };
    let Some(size) = size else {
        return Check::ok(
            "buffer_pool",
            format!("innodb_buffer_pool_size {}", mib(pool)),
        );
    };
    let detail = format!(
        "innodb_buffer_pool_size {} against {} of {} (about {} rows, data and indexes)",
        mib(pool),
        mib(size.bytes),
        spec.name,
        size.rows
    );
    if pool >= size.bytes {
        Check::ok("buffer_pool", detail)
    } else {
        let wanted = size.bytes.div_ceil(1 << 30).max(1);
        Check::warning(
            "buffer_pool",
            format!(
                "{detail}: the table does not fit, so archive's and purge's scans read from disk (measured 5-7x slower on a 1M-row scan with the 128 MiB default)"
            ),
            format!(
                "raise innodb_buffer_pool_size towards {wanted} GiB (SET GLOBAL innodb_buffer_pool_size = {} and in the server's configuration), or archive in shorter windows (--max-batches)",
                wanted << 30
            ),
        )
    }
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

/// How doctor reaches the store.
#[derive(Clone, Copy)]
pub enum DoctorStore<'a> {
    S3(&'a S3Store),
    Other(&'a dyn ObjectStore),
}

impl DoctorStore<'_> {
    pub fn location(&self) -> &crate::store::Location {
        self.store().location()
    }

    fn store(&self) -> &dyn ObjectStore {
        match self {
            DoctorStore::S3(s3) => *s3,
            DoctorStore::Other(store) => *store,
        }
    }
}

/// The store's checks: access, versioning, Object Lock, encryption and the KMS key, create-only
/// puts, and a probe object written as archive would write (then removed where allowed).
pub async fn check_store(
    store: Result<DoctorStore<'_>, &str>,
    opts: &DoctorOptions,
    now_ms: i64,
    run: &mut DoctorRun,
) {
    let store = match store {
        Ok(store) => store,
        Err(e) => {
            run.unreachable = true;
            run.checks.push(Check::problem(
                "store",
                e,
                "fix --store / OUTBOX_ARCHIVER_STORE, the endpoint and the credentials",
            ));
            return;
        }
    };
    let location = store.store().location().to_string();
    if let Err(e) = store.store().confirm_access().await {
        run.unreachable = e.is_configuration();
        run.checks.push(Check::problem(
            "store",
            format!("{location}: {e}"),
            "fix --store, the endpoint, the credentials or the bucket policy (s3:ListBucket on the prefix)",
        ));
        return;
    }
    run.checks.push(Check::ok(
        "store",
        format!("{location} is reachable and listable"),
    ));
    let s3 = match store {
        DoctorStore::S3(s3) => s3,
        DoctorStore::Other(_) => {
            run.checks.push(Check::warning(
                "bucket",
                "a file:// folder keeps no versions, Object Lock retention or encryption",
                "archive financial records to an s3:// bucket with versioning and Object Lock",
            ));
            return;
        }
    };
    run.checks.push(region(s3).await);
    let lock_config = s3.lock_configuration().await;
    let mut probed = DoctorRun::default();
    let probe_version = probe(
        s3,
        opts,
        lock_config.as_ref().ok().cloned(),
        now_ms,
        &mut probed,
    )
    .await;
    run.checks.push(versioning(s3, probe_version).await);
    run.checks.push(object_lock(&lock_config, opts, now_ms));
    run.checks.push(default_encryption(s3).await);
    if let Some(check) = kms_key(s3).await {
        run.checks.push(check);
    }
    run.checks.push(conditional_put(s3).await);
    run.checks.append(&mut probed.checks);
    run.probe_objects_left
        .append(&mut probed.probe_objects_left);
}

/// The region requests are signed for, where it came from, and whether it is the bucket's.
async fn region(s3: &S3Store) -> Check {
    let (signed, source) = s3.region();
    let fix = |region: &str| {
        format!("set --s3-region / OUTBOX_ARCHIVER_S3_REGION (or AWS_REGION) to {region}")
    };
    match s3.bucket_region().await {
        Ok(Some(bucket)) if bucket != signed => Check::problem(
            "region",
            format!(
                "requests are signed for {signed} ({source}), but {} is in {bucket}: AWS S3 refuses or redirects them",
                bucket_of(s3)
            ),
            fix(&bucket),
        ),
        Ok(Some(_)) => Check::ok(
            "region",
            format!("{signed} ({source}), the bucket's own region"),
        ),
        Ok(None) | Err(_) if source == crate::store::s3::NO_REGION && !s3.custom_endpoint() => {
            Check::warning(
                "region",
                format!("no region is set: requests are signed for {signed}, and the bucket's region could not be read"),
                fix("the bucket's region"),
            )
        }
        Ok(None) | Err(_) => Check::ok(
            "region",
            format!("{signed} ({source}); the store does not report the bucket's region"),
        ),
    }
}

/// The bucket's versioning, as GetBucketVersioning says, or else as the probe object's version
/// id shows it (a store whose answer cannot be read, or a role without the permission).
async fn versioning(s3: &S3Store, probe_version: Option<Option<String>>) -> Check {
    let fix = format!(
        "enable it: aws s3api put-bucket-versioning --bucket {} --versioning-configuration Status=Enabled (Object Lock needs it too)",
        bucket_of(s3)
    );
    let lost = "an overwrite or a delete destroys an archived object for good";
    let asked = s3.versioning().await;
    let versioning = match (&asked, &probe_version) {
        (Ok(v), _) => *v,
        (Err(_), Some(Some(_))) => Versioning::Enabled,
        (Err(_), Some(None)) => Versioning::Off,
        (Err(e), None) => {
            return Check::warning(
                "bucket_versioning",
                format!("cannot tell: {e}"),
                "allow s3:GetBucketVersioning to the job's role (deploy/iam-policy.json)",
            )
        }
    };
    let how = match &asked {
        Ok(_) => String::new(),
        Err(StoreError::AccessDenied { .. }) => {
            " (as the probe object's version id shows; GetBucketVersioning was denied)".into()
        }
        Err(_) => " (as the probe object's version id shows; the store's answer to GetBucketVersioning could not be read)".into(),
    };
    match versioning {
        Versioning::Enabled => Check::ok(
            "bucket_versioning",
            format!("enabled: an overwrite or delete keeps the archived version{how}"),
        ),
        Versioning::Suspended => {
            Check::problem("bucket_versioning", format!("suspended: {lost}{how}"), fix)
        }
        Versioning::Off => Check::problem(
            "bucket_versioning",
            format!("not enabled: {lost}{how}"),
            fix,
        ),
    }
}

fn object_lock(
    config: &Result<LockConfiguration, StoreError>,
    opts: &DoctorOptions,
    now_ms: i64,
) -> Check {
    let wanted = opts.policy.lock;
    let enable = "create the bucket with Object Lock (aws s3api create-bucket --object-lock-enabled-for-bucket …) or enable it on a versioned bucket (aws s3api put-object-lock-configuration … ObjectLockEnabled=Enabled)";
    match config {
        Ok(LockConfiguration { enabled: true, default }) => {
            let default_text = match default {
                Some((mode, length)) => format!("bucket default {mode} for {length}"),
                None => "no default retention".to_string(),
            };
            match (wanted, default) {
                // A retention named on a put replaces the bucket's default for that object.
                (Some((mode, retention)), Some((default_mode, default_retention)))
                    if mode < *default_mode
                        || retention.until_ms(now_ms) < default_retention.until_ms(now_ms) =>
                {
                    Check::problem(
                        "object_lock",
                        format!("archive writes {mode} retention of {retention}, weaker than the bucket's default {default_mode} for {default_retention}: a retention named on a put replaces the default, so archived objects would be less protected than the bucket promises"),
                        format!("set --object-lock-mode {} --retention {default_retention} (or longer), or unset both to let the bucket's default apply", default_mode.as_str().to_ascii_lowercase()),
                    )
                }
                (Some((mode, retention)), _) => Check::ok(
                    "object_lock",
                    format!("enabled ({default_text}); archive writes {mode} retention of {retention} on every object"),
                ),
                (None, Some(_)) => Check::ok(
                    "object_lock",
                    format!("enabled; every object gets the {default_text}"),
                ),
                (None, None) if opts.policy.legal_hold => Check::ok(
                    "object_lock",
                    "enabled, no default retention; archive puts a legal hold on every object",
                ),
                (None, None) => Check::warning(
                    "object_lock",
                    "enabled, but neither a default retention nor --object-lock-mode is set: archived objects are not locked",
                    "set --object-lock-mode compliance --retention 7y (or governance), or a default retention on the bucket",
                ),
            }
        }
        Ok(_) if wanted.is_some() || opts.policy.legal_hold => Check::problem(
            "object_lock",
            "not enabled on the bucket, but --object-lock-mode / --legal-hold are set: every put would be refused",
            enable,
        ),
        Ok(_) => Check::warning(
            "object_lock",
            "not enabled: nothing stops an archived object version from being deleted (no WORM retention)",
            format!("for records that must be kept (SEC 17a-4, FINRA, MiFID): {enable}, then --object-lock-mode compliance --retention 7y"),
        ),
        Err(StoreError::AccessDenied { detail }) => Check::warning(
            "object_lock",
            format!("cannot read the Object Lock configuration ({detail})"),
            "allow s3:GetBucketObjectLockConfiguration (deploy/iam-policy.json); the probe below still tries the retention",
        ),
        Err(e) => Check::warning("object_lock", e.to_string(), "see the message"),
    }
}

async fn default_encryption(s3: &S3Store) -> Check {
    let asked = s3.encryption();
    let asked_text = asked.map(|sse| match &sse.kms_key_id {
        Some(key) => format!(
            "every put asks for {} with key {key}",
            sse.algorithm.as_str()
        ),
        None => format!("every put asks for {}", sse.algorithm.as_str()),
    });
    match (s3.default_encryption().await, asked_text) {
        (Ok(Some(d)), asked) => {
            let key = d
                .kms_key_id
                .map(|k| format!(" with key {k}"))
                .unwrap_or_default();
            let bucket_key = if d.bucket_key { ", bucket key on" } else { "" };
            Check::ok(
                "default_encryption",
                format!(
                    "the bucket encrypts with {}{key}{bucket_key}{}",
                    d.algorithm,
                    asked.map(|a| format!("; {a}")).unwrap_or_default()
                ),
            )
        }
        (Ok(None), Some(asked)) => Check::ok(
            "default_encryption",
            format!("no default encryption on the bucket; {asked}"),
        ),
        (Ok(None), None) => Check::warning(
            "default_encryption",
            "the bucket reports no default encryption and --sse is not set",
            "set --sse aws:kms --sse-kms-key-id <key ARN> (or a default encryption on the bucket)",
        ),
        (Err(StoreError::AccessDenied { detail }), _) => Check::warning(
            "default_encryption",
            format!("cannot read the bucket's encryption ({detail})"),
            "allow s3:GetEncryptionConfiguration (deploy/iam-policy.json) so doctor can check it",
        ),
        (Err(e), _) => Check::warning("default_encryption", e.to_string(), "see the message"),
    }
}

async fn kms_key(s3: &S3Store) -> Option<Check> {
    let key = s3.encryption()?.kms_key_id.clone()?;
    Some(match s3.describe_kms_key(&key).await {
        Ok(Some(k)) if k.enabled => Check::ok("kms_key", format!("{key} is {} ({})", k.state, k.arn)),
        Ok(Some(k)) => Check::problem(
            "kms_key",
            format!("{key} is {} ({}): puts with it fail", k.state, k.arn),
            "enable the key in KMS, or name an enabled one with --sse-kms-key-id",
        ),
        Ok(None) => Check::problem(
            "kms_key",
            format!("KMS knows no key {key}"),
            "check --sse-kms-key-id / OUTBOX_ARCHIVER_SSE_KMS_KEY_ID: the key's ARN or id, in the bucket's region",
        ),
        Err(StoreError::AccessDenied { detail }) => Check::warning(
            "kms_key",
            format!("cannot describe {key} ({detail})"),
            "allow kms:DescribeKey on the key so doctor can check it; the probe put below uses it regardless",
        ),
        Err(e) => Check::warning(
            "kms_key",
            format!("could not ask KMS about {key}: {e}"),
            "the probe put below uses the key regardless",
        ),
    })
}

async fn conditional_put(s3: &S3Store) -> Check {
    let key = format::conditional_put_probe_key(s3.location().prefix());
    match s3.probe_conditional_put(&key).await {
        Ok(ConditionalPut::Honoured | ConditionalPut::Native) => Check::ok(
            "conditional_put",
            "the store refuses a create-only put (If-None-Match: *) at an existing key",
        ),
        Ok(ConditionalPut::Trusted) => Check::ok(
            "conditional_put",
            "--s3-conditional-put true: If-None-Match: * is sent without a probe",
        ),
        Ok(ConditionalPut::Off) => Check::ok(
            "conditional_put",
            "--s3-conditional-put false: every create-only put is HEAD-then-PUT",
        ),
        Ok(ConditionalPut::Ignored) => Check::warning(
            "conditional_put",
            "the store accepts If-None-Match: * and overwrites anyway; archive falls back to HEAD-then-PUT under the app's lock",
            "nothing to do; --s3-conditional-put false skips the probe",
        ),
        Err(e) => Check::problem(
            "conditional_put",
            format!("the probe put was refused: {e}"),
            "allow s3:PutObject under the prefix (deploy/iam-policy.json)",
        ),
    }
}

/// The probe object's key: one per run, so that two doctors at once (the archive and the purge
/// role of the doctor Job) never remove each other's probe.
fn probe_key(prefix: &str) -> String {
    let name = format!(
        "_outbox_archiver/doctor-probe-{}",
        crate::pipeline::report::run_id()
    );
    if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    }
}

/// Writes one object as archive writes a data object (its storage class, a retention in the
/// run's mode but of two seconds, the legal hold, the encryption), reads back what the store
/// did with it, and removes that version again where the lock and the bucket policy allow.
async fn probe(
    s3: &S3Store,
    opts: &DoctorOptions,
    lock_config: Option<LockConfiguration>,
    now_ms: i64,
    run: &mut DoctorRun,
) -> Option<Option<String>> {
    let started = std::time::Instant::now();
    let key = probe_key(s3.location().prefix());
    // The run's mode, or the bucket's default mode: a two-second retention, never the bucket's
    // years-long default on a probe.
    // Where the configuration cannot be read, governance: if the bucket has a default
    // retention, the probe must not get it (and a bucket without Object Lock refuses the
    // header, so the put is then tried without).
    let unknown = lock_config.is_none();
    let mode = opts
        .policy
        .lock
        .map(|(mode, _)| mode)
        .or(match lock_config {
            Some(config) => config.default.map(|(mode, _)| mode),
            None => Some(crate::model::protection::LockMode::Governance),
        });
    let lock = mode.map(|mode| ObjectLock {
        mode,
        retain_until_ms: (now_ms / 1000 + 3) * 1000,
    });
    let mut options = PutOptions {
        storage_class: opts.policy.storage_class.clone(),
        lock,
        legal_hold: opts.policy.legal_hold,
    };
    let body = bytes::Bytes::from_static(
        b"outbox-archiver doctor: a probe of how this store keeps archived objects; safe to delete\n",
    );
    let mut put = s3
        .put_with(&key, body.clone(), PutMode::Overwrite, &options)
        .await;
    if unknown
        && opts.policy.lock.is_none()
        && matches!(put, Err(StoreError::ObjectLockRefused { .. }))
    {
        options.lock = None;
        put = s3
            .put_with(&key, body.clone(), PutMode::Overwrite, &options)
            .await;
    }
    if let Err(e) = put {
        let (check, fix) = match &e {
            StoreError::InvalidStorageClass { .. } => ("storage_class", "check --s3-storage-class (STANDARD_IA, GLACIER_IR, DEEP_ARCHIVE, …)"),
            StoreError::Kms { .. } => ("kms_key", "check --sse-kms-key-id and the role's kms:GenerateDataKey / kms:Decrypt"),
            StoreError::ObjectLockRefused { .. } => ("object_lock", "enable Object Lock on the bucket, or drop --object-lock-mode / --legal-hold"),
            StoreError::ChecksumRequired { .. } => ("upload_checksum", "set --s3-upload-checksum md5, sha256 or crc64nvme"),
            _ => ("probe_object", "allow s3:PutObject (and s3:PutObjectRetention / s3:PutObjectLegalHold with Object Lock) under the prefix"),
        };
        run.checks.push(Check::problem(
            check,
            format!("a put as archive makes it was refused: {e}"),
            fix,
        ));
        return None;
    }
    let meta = match s3.head(&key).await {
        Ok(Some(meta)) => meta,
        Ok(None) => {
            run.checks.push(Check::problem(
                "probe_object",
                format!("{key} was accepted but is not there"),
                "the store loses writes: do not archive to it",
            ));
            return None;
        }
        Err(e) => {
            run.checks.push(Check::problem(
                "probe_object",
                format!("HEAD of {key}: {e}"),
                "allow s3:GetObject under the prefix",
            ));
            return None;
        }
    };
    run.checks
        .extend(what_the_store_kept(s3, opts, &options, &meta, &body));
    // Past the retention, counted from `now_ms` on this process's monotonic clock.
    let locked_for = options
        .lock
        .map(|l| Duration::from_millis((l.retain_until_ms - now_ms + 1_000).max(0) as u64));
    let wait = locked_for.map(|d| d.saturating_sub(started.elapsed()));
    clean_up(s3, &key, &options, &meta, wait, run).await;
    Some(meta.version_id)
}

/// The probe's HEAD against what it was written with: class, checksum, retention, legal hold,
/// encryption.
fn what_the_store_kept(
    s3: &S3Store,
    opts: &DoctorOptions,
    options: &PutOptions,
    meta: &ObjectMeta,
    body: &[u8],
) -> Vec<Check> {
    let mut checks = Vec::new();
    let stored_class = meta.storage_class.as_deref().unwrap_or("STANDARD");
    match &opts.policy.storage_class {
        None => checks.push(Check::ok(
            "storage_class",
            format!("data objects go to the bucket's default class ({stored_class})"),
        )),
        Some(class) if class == stored_class && is_cold_class(class) => {
            let checksum = meta.crc64nvme == Some(crate::model::digest::crc64nvme(body))
                || meta.sha256.as_deref() == Some(crate::model::digest::sha256_hex(body).as_str());
            checks.push(if checksum {
                Check::ok(
                    "storage_class",
                    format!("{class} accepted; its objects cannot be read right after upload, so batches are verified by the store's own checksum of the stored object, which the store reported for the probe (verified_by: store_checksum)"),
                )
            } else {
                Check::problem(
                    "storage_class",
                    format!("{class} accepted, but the store reported no checksum of the stored probe: a batch in {class} could not be verified (it cannot be read back at once)"),
                    "set --s3-upload-checksum crc64nvme (or sha256), or a class that can be read at once (GLACIER_IR)",
                )
            });
        }
        Some(class) if class == stored_class => {
            checks.push(Check::ok("storage_class", format!("{class} accepted")))
        }
        Some(class) => checks.push(Check::problem(
            "storage_class",
            format!("asked for {class}, the store keeps the probe in {stored_class}"),
            "check --s3-storage-class; this store may not support the class",
        )),
    }
    if let Some(wanted) = &options.lock {
        checks.push(if meta.lock.is_some_and(|l| l.covers(wanted)) {
            Check::ok(
                "retention",
                format!(
                    "the store holds the probe under {} until {} (archive: {})",
                    wanted.mode,
                    header_time(wanted.retain_until_ms),
                    opts.policy
                        .lock
                        .map(|(m, r)| format!("{m} for {r}"))
                        .unwrap_or_else(|| "the bucket's default".into())
                ),
            )
        } else {
            Check::problem(
                "retention",
                match meta.lock {
                    None => "the store accepted the retention but reports none on the probe: archived objects would not be locked".to_string(),
                    Some(l) => format!(
                        "asked for {} until {}, the store reports {} until {}",
                        wanted.mode,
                        header_time(wanted.retain_until_ms),
                        l.mode,
                        header_time(l.retain_until_ms)
                    ),
                },
                "enable Object Lock on the bucket; HEAD shows retention only to roles with s3:GetObjectRetention",
            )
        });
    }
    if options.legal_hold {
        checks.push(if meta.legal_hold {
            Check::ok("legal_hold", "the store holds the probe under a legal hold")
        } else {
            Check::problem(
                "legal_hold",
                "the store accepted the legal hold but reports none on the probe",
                "enable Object Lock on the bucket; HEAD shows it only to roles with s3:GetObjectLegalHold",
            )
        });
    }
    if let Some(sse) = s3.encryption() {
        let (algorithm, key) = (
            meta.sse_algorithm.as_deref(),
            meta.sse_kms_key_id.as_deref(),
        );
        checks.push(if sse.reported_matches(algorithm, key) {
            Check::ok(
                "encryption",
                format!(
                    "the probe is stored with {}{}",
                    algorithm.unwrap_or_default(),
                    key.map(|k| format!(" key {k}")).unwrap_or_default()
                ),
            )
        } else {
            Check::problem(
                "encryption",
                format!(
                    "asked for {}{}, the store reports {}{}",
                    sse.algorithm.as_str(),
                    sse.kms_key_id
                        .as_deref()
                        .map(|k| format!(" key {k}"))
                        .unwrap_or_default(),
                    algorithm.unwrap_or("no encryption"),
                    key.map(|k| format!(" key {k}")).unwrap_or_default()
                ),
                "check --sse / --sse-kms-key-id and the bucket's encryption settings",
            )
        });
    }
    checks
}

/// Removes the probe's version: after lifting its legal hold, once its two-second retention is
/// over. A bucket policy that denies deletes (deploy/bucket-policy.json) keeps it: named.
async fn clean_up(
    s3: &S3Store,
    key: &str,
    options: &PutOptions,
    meta: &ObjectMeta,
    wait: Option<Duration>,
    run: &mut DoctorRun,
) {
    let version = meta.version_id.as_deref();
    if let (true, Some(version)) = (options.legal_hold, version) {
        if let Err(e) = s3.lift_legal_hold(key, version).await {
            tracing::debug!(key, error = %e, "could not lift the probe's legal hold");
        }
    }
    if let Some(wait) = wait {
        tokio::time::sleep(wait.min(Duration::from_secs(5))).await;
    }
    let removed = match version {
        Some(version) => s3.delete_version(key, version).await,
        None => s3.delete(key).await,
    };
    match removed {
        Ok(()) => run.checks.push(Check::ok(
            "probe_object",
            format!("{key} written, checked and removed"),
        )),
        Err(e) => {
            let left = format!(
                "{key}{}{}",
                version
                    .map(|v| format!(" (version {v})"))
                    .unwrap_or_default(),
                options
                    .lock
                    .map(|l| format!(", retained until {}", header_time(l.retain_until_ms)))
                    .unwrap_or_default()
            );
            run.checks.push(Check::warning(
                "probe_object",
                format!("{left} could not be removed ({e}); it stays, 90 bytes"),
                "nothing, if the bucket policy or the role denies s3:DeleteObjectVersion (deploy/bucket-policy.json does) or a retention still holds it; a retention admin may remove it later",
            ));
            run.probe_objects_left.push(left);
        }
    }
}

fn bucket_of(s3: &S3Store) -> String {
    match s3.location() {
        crate::store::Location::S3 { bucket, .. } => bucket.clone(),
        other => other.to_string(),
    }
}
