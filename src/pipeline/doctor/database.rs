//! Doctor's database checks, all read-only: the server and login, the connection's TLS,
//! `max_allowed_packet`, the tables and their collations, the retention index, each command's
//! grants table by table ([`GrantsFor`] says what each needs), and the buffer pool against
//! the table.

use super::{Check, DoctorOptions, DoctorRun};
use crate::db::preflight::{Access, Privilege};
use crate::db::{Db, DbError};
use crate::model::profile;
use crate::model::table::TableSpec;

/// A command whose database privileges doctor checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum GrantsFor {
    Archive,
    Verify,
    Status,
    Purge,
    Restore,
    RestoreIntoSource,
    Compact,
}

impl GrantsFor {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            GrantsFor::Archive => "archive",
            GrantsFor::Verify => "verify",
            GrantsFor::Status => "status",
            GrantsFor::Purge => "purge",
            GrantsFor::Restore => "restore",
            GrantsFor::RestoreIntoSource => "restore --into-source",
            GrantsFor::Compact => "compact",
        }
    }

    /// The role of deploy/mysql-grants.sql that runs the command.
    pub(crate) fn role(self) -> Role {
        match self {
            GrantsFor::Archive | GrantsFor::Verify | GrantsFor::Status => Role::Archive,
            GrantsFor::Purge => Role::Purge,
            GrantsFor::Compact => Role::Compaction,
            GrantsFor::Restore | GrantsFor::RestoreIntoSource => Role::Restore,
        }
    }

    /// The command as `--grants-for` names it.
    fn arg(self) -> &'static str {
        match self {
            GrantsFor::RestoreIntoSource => "restore-into-source",
            other => other.as_str(),
        }
    }

    /// What the command reads and writes, table by table (deploy/mysql-grants.sql grants it).
    fn needs(self, spec: &TableSpec) -> Vec<(String, &'static [Privilege])> {
        use Privilege::*;
        let source = spec.name.to_string();
        let migrations = "_sqlx_migrations".to_string();
        let mut needs: Vec<(String, &'static [Privilege])> = match self {
            // The home: its first batch binds the archive (a binding whose marker could not be
            // written is taken back, DELETE). The logs: an app's log identity is recorded when
            // its log begins, or at its next archive for one an older build began.
            GrantsFor::Archive => vec![
                (source, &[Select]),
                (spec.receipts_table(), &[Select, Insert, Update]),
                (spec.members_table(), &[Select, Insert, Update, Delete]),
                (spec.superseded_table(), &[Select, Insert]),
                (spec.runs_table(), &[Select, Insert]),
                (spec.home_table(), &[Select, Insert, Delete]),
                (spec.logs_table(), &[Select, Insert]),
                (spec.log_heads_table(), &[Select, Insert]),
                (migrations, &[Select]),
            ],
            GrantsFor::Verify => vec![
                (source, &[Select]),
                (spec.receipts_table(), &[Select]),
                (spec.members_table(), &[Select]),
                (spec.superseded_table(), &[Select]),
                (spec.home_table(), &[Select]),
                (spec.logs_table(), &[Select]),
                (spec.log_heads_table(), &[Select]),
                (migrations, &[Select]),
            ],
            GrantsFor::Status => vec![
                (source, &[Select]),
                (spec.receipts_table(), &[Select]),
                (spec.runs_table(), &[Select]),
                (spec.drills_table(), &[Select]),
                (migrations, &[Select]),
            ],
            GrantsFor::Purge => vec![
                (source, &[Select, Delete]),
                (spec.receipts_table(), &[Select, Update]),
                (spec.members_table(), &[Select]),
                (spec.superseded_table(), &[Select]),
                (spec.runs_table(), &[Select, Insert]),
                (spec.drills_table(), &[Select]),
                (spec.home_table(), &[Select]),
                (spec.logs_table(), &[Select]),
                (spec.log_heads_table(), &[Select]),
                (migrations, &[Select]),
            ],
            GrantsFor::Restore => vec![
                (spec.receipts_table(), &[Select]),
                (spec.members_table(), &[Select]),
                (spec.superseded_table(), &[Select]),
                (spec.drills_table(), &[Select, Insert]),
                (spec.home_table(), &[Select]),
                (migrations, &[Select]),
                (format!("{}_restored", spec.name), &[Select, Insert]),
            ],
            GrantsFor::Compact => vec![
                (source, &[Select]),
                (spec.receipts_table(), &[Select, Update]),
                (spec.members_table(), &[Select, Delete]),
                (spec.superseded_table(), &[Select]),
                (spec.runs_table(), &[Select, Insert]),
                (spec.home_table(), &[Select]),
                (migrations, &[Select]),
            ],
            GrantsFor::RestoreIntoSource => vec![
                (source, &[Select, Insert]),
                (spec.receipts_table(), &[Select, Update]),
                // A compacted batch's rows get their member rows back (an upsert: UPDATE too).
                (spec.members_table(), &[Select, Insert, Update]),
                (spec.superseded_table(), &[Select]),
                (spec.home_table(), &[Select]),
                (migrations, &[Select]),
            ],
        };
        self.of_table(spec, &mut needs);
        needs
    }

    /// What every command needs besides, and what the table's kind changes: tables made from
    /// the description have no migrations history; the record of the archived columns is read at
    /// every start (added to by archive, which also takes back a generated column's entry), and
    /// so is the table of the values purge records for columns a batch's lines lack (start-up
    /// checks every owned table; purge writes it, restore reads it). The object versions table
    /// too: the archive role writes it (`relocate` and `verify --batch-id` record objects under
    /// new versions: a verify role without INSERT reports them instead, saying so). And the
    /// layout table.
    fn of_table(self, spec: &TableSpec, needs: &mut Vec<(String, &'static [Privilege])>) {
        use Privilege::*;
        if spec.owned_by == crate::model::table::OwnedBy::Spec {
            needs.retain(|(table, _)| table != "_sqlx_migrations");
        }
        let columns: &'static [Privilege] = match self {
            GrantsFor::Archive => &[Select, Insert, Update, Delete],
            _ => &[Select],
        };
        needs.push((spec.columns_table(), columns));
        // The batches' column lists: archive records them with its receipts, every command
        // reads them with the receipts.
        let sets: &'static [Privilege] = match self {
            GrantsFor::Archive => &[Select, Insert],
            _ => &[Select],
        };
        needs.push((spec.column_sets_table(), sets));
        // What builds before layout 2 recorded of the rows they purged: restore reads it.
        needs.push((spec.added_values_table(), &[Select]));
        // The rows purge kept: purge marks them, archive clears the marks of those it archives
        // again, status counts them.
        let kept: &'static [Privilege] = match self {
            GrantsFor::Purge => &[Select, Insert],
            GrantsFor::Archive => &[Select, Delete],
            _ => &[Select],
        };
        needs.push((spec.kept_table(), kept));
        let versions: &'static [Privilege] = match self {
            GrantsFor::Archive => &[Select, Insert],
            _ => &[Select],
        };
        needs.push((spec.object_versions_table(), versions));
        // The layout, read at every start; a command that writes reads it in each transaction
        // with a shared lock, which MySQL 8.0.22+ allows only with UPDATE (`db::layout`).
        let layout: &'static [Privilege] = match self {
            GrantsFor::Archive
            | GrantsFor::Purge
            | GrantsFor::Compact
            | GrantsFor::RestoreIntoSource => &[Select, Update],
            GrantsFor::Verify | GrantsFor::Status | GrantsFor::Restore => &[Select],
        };
        needs.push((spec.layout_table(), layout));
    }
}

/// The database's checks: connection, tables and collations, the retention index, grants, and
/// the buffer pool against the table.
pub(crate) async fn check_database(
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
    if let Some(check) = added_columns(db, spec).await {
        checks.push(check);
    }
    checks.push(retention_index(db, spec).await);
    // The login is checked as the role of the first command named (deploy/mysql-grants.sql
    // gives each role its own login); a command of another role is checked too, but what it
    // lacks is never advised as a grant to this login — that would give one role another's
    // rights — only that the other role be checked as itself.
    let role = opts.grants_for.first().map(|c| c.role());
    for command in &opts.grants_for {
        let check = grants(db, spec, *command).await;
        checks.push(match role {
            Some(role) if command.role() != role => of_another_role(check, *command, role),
            _ => check,
        });
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
                "{} and the archiver's tables are in place, every migration applied (archive layout {}); event ids compare in binary and app codes as finely as the source's",
                spec.name,
                crate::db::layout::LAYOUT
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

/// A built-in table's columns added to it since, each archived by its SQL type: every one a
/// command would refuse is named (every command refuses to start on such a table). A
/// profile's columns are resolved before doctor's checks, and a refusal there is its answer.
async fn added_columns(db: &Db, spec: &TableSpec) -> Option<Check> {
    if !spec.is_builtin() {
        return None;
    }
    let live = match db.describe(spec.name).await {
        Ok(live) if !live.is_empty() => live,
        _ => return None,
    };
    let (added, refused) = profile::added_columns(spec, &live);
    // The spec here is the table as this build knows it (doctor starts without the database):
    // the columns dropped are asked of the database.
    let dropped = db.dropped_columns(spec).await.unwrap_or_default();
    let dropped: Vec<&str> = dropped.iter().map(|c| c.name).collect();
    let dropped = match dropped.is_empty() {
        true => String::new(),
        false => format!(
            "; dropped since earlier batches archived them: {} (those batches keep the values; a restore into the table needs the column(s) back or --without-column)",
            dropped.join(", ")
        ),
    };
    let check = added_check(spec, added, refused);
    Some(Check {
        detail: format!("{}{dropped}", check.detail),
        ..check
    })
}

/// [`added_columns`]'s check of the columns added and refused.
fn added_check(spec: &TableSpec, added: Vec<String>, refused: Vec<String>) -> Check {
    match refused.is_empty() {
        true if added.is_empty() => Check::ok(
            "columns",
            format!("{}: its own columns, none added", spec.name),
        ),
        true => Check::ok(
            "columns",
            format!(
                "{} has columns added to it, each archived by its type after the table's own: {}",
                spec.name,
                added.join(", ")
            ),
        ),
        false => Check::problem(
            "columns",
            format!(
                "every command would refuse {}: {}",
                spec.name,
                refused.join("; ")
            ),
            "change the column's type to one the archiver encodes exactly, or describe the table with --table-profile (README, \"Archiving another outbox table\")",
        ),
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
async fn grants(db: &Db, spec: &TableSpec, command: GrantsFor) -> Check {
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
    let Survey {
        granted,
        missing,
        notes,
        unchecked,
    } = survey(db, spec, command).await;
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

/// A command of another role than the login's that this login may not run: as it should be
/// (a warning, not a problem), with the way to check that role as itself.
fn of_another_role(check: Check, command: GrantsFor, role: Role) -> Check {
    if check.status != super::Status::Problem {
        return check;
    }
    let other = command.role();
    Check::warning(
        &check.check,
        format!(
            "{} — as it should be if this login is the {} role: deploy/mysql-grants.sql gives `{}` to the {} role",
            check.detail,
            role.as_str(),
            command.as_str(),
            other.as_str()
        ),
        format!(
            "check the {} role as itself: DATABASE_URL=<the {} role's URL> outbox-archiver doctor --grants-for {} (do not grant this login the {} role's rights)",
            other.as_str(),
            other.as_str(),
            command.arg(),
            other.as_str()
        ),
    )
}

/// The logins of deploy/mysql-grants.sql, each for its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// archive, verify, status (`outbox_archiver`).
    Archive,
    /// purge (`outbox_purger`).
    Purge,
    /// compact (`outbox_compactor`).
    Compaction,
    /// restore, by hand (`outbox_restorer`).
    Restore,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Archive => "archive",
            Role::Purge => "purge",
            Role::Compaction => "compaction",
            Role::Restore => "restore",
        }
    }
}

/// What the login may do on each table a command needs.
#[derive(Default)]
struct Survey {
    /// Tables on which every privilege the command needs is granted.
    granted: Vec<String>,
    /// Tables with the privileges lacking on them.
    missing: Vec<(String, Vec<&'static str>)>,
    /// Why a table was not checked (missing, restore's table not made yet, the question failed).
    notes: Vec<String>,
    /// Tables that could not be checked and should have been.
    unchecked: usize,
}

/// Asks the server, privilege by privilege, whether the login may do what `command` does on
/// each table (an EXPLAIN of the statement: nothing runs).
async fn survey(db: &Db, spec: &TableSpec, command: GrantsFor) -> Survey {
    let mut survey = Survey::default();
    for (table, privileges) in command.needs(spec) {
        let mut lacking = Vec::new();
        let mut checked = true;
        for privilege in privileges {
            match db.access(&table, *privilege).await {
                Ok(Access::Granted) => {}
                Ok(Access::Denied(_)) => lacking.push(privilege.as_str()),
                Ok(Access::NoTable) if command == GrantsFor::Restore => {
                    survey.notes.push(format!(
                        "{table} does not exist yet: restore creates it, which needs CREATE on the database (an EXPLAIN cannot check that)"
                    ));
                    checked = false;
                    break;
                }
                Ok(Access::NoTable) => {
                    survey
                        .notes
                        .push(format!("{table} is missing (see `tables`), not checked"));
                    survey.unchecked += 1;
                    checked = false;
                    break;
                }
                Err(e) => {
                    survey
                        .notes
                        .push(format!("{table} could not be checked: {e}"));
                    survey.unchecked += 1;
                    checked = false;
                    break;
                }
            }
        }
        if !lacking.is_empty() {
            survey.missing.push((table, lacking));
        } else if checked {
            survey.granted.push(table);
        }
    }
    survey
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
