//! Replicas of the source database, and how far behind they are: `SHOW REPLICA STATUS`
//! (`Seconds_Behind_Master` / `Seconds_Behind_Source`, and whether both replication threads
//! run), or a pt-heartbeat table when one is named (accurate to the write, where the status is
//! accurate to the second and reads 0 on a replica whose IO thread fell behind). Finding the
//! replicas from the primary: `SHOW REPLICAS` / `SHOW REPLICA HOSTS` (replicas that set `report_host`) or the
//! primary's binlog dump threads (`Binlog Dump` in the processlist).
//!
//! Nothing here decides what a lag means; an answer that is not a number is [`Lag::Unknown`]
//! with its reason, never zero.

use std::time::Duration;

use sqlx::mysql::{MySqlPool, MySqlPoolOptions, MySqlRow};
use sqlx::{AssertSqlSafe, Row as _};

use super::{Context, Db, DbError};
use crate::model::redact;

/// How far behind a replica is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lag {
    Behind(Duration),
    /// Not a number: not replicating, NULL, unreachable — with why.
    Unknown(String),
}

impl std::fmt::Display for Lag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lag::Behind(d) => write!(f, "{:.1}s behind", d.as_secs_f64()),
            Lag::Unknown(why) => write!(f, "lag unknown ({why})"),
        }
    }
}

/// One replica, reached on a pool of one connection that opens when first asked.
#[derive(Debug)]
pub struct Replica {
    /// `host:port`, for messages (never the URL: it has the password).
    pub name: String,
    pool: MySqlPool,
}

impl Replica {
    /// A replica at `url` (`--replica`); nothing is connected yet, so a replica that is down
    /// at the start is a lag to wait for, not a failure to start.
    pub fn new(url: &str) -> Result<Replica, DbError> {
        let options = super::connect_options(url, "--replica")?;
        let parsed = url::Url::parse(url).ok();
        let name = match parsed
            .as_ref()
            .and_then(|u| u.host_str().map(str::to_string))
        {
            Some(host) => format!("{host}:{}", parsed.and_then(|u| u.port()).unwrap_or(3306)),
            None => redact::url(url),
        };
        let pool = MySqlPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy_with(options);
        Ok(Replica { name, pool })
    }

    /// How far behind this replica is now: by the heartbeat table when given (rows written by
    /// the primary `primary_server_id`), else by its replication status. An error asking, or no
    /// answer within `ASK_TIMEOUT`, is an unknown lag, with why.
    pub async fn lag(&self, heartbeat: Option<(&str, u32)>) -> Lag {
        let asked = async {
            match heartbeat {
                Some((table, primary)) => self.heartbeat_lag(table, primary).await,
                None => self.status_lag().await,
            }
        };
        match tokio::time::timeout(ASK_TIMEOUT, asked).await {
            Ok(Ok(lag)) => lag,
            Ok(Err(e)) => Lag::Unknown(format!("cannot ask it: {e}")),
            Err(_) => Lag::Unknown(format!("no answer within {} s", ASK_TIMEOUT.as_secs())),
        }
    }

    /// `UTC_TIMESTAMP(6)` on the replica minus the newest `ts` the primary wrote into a
    /// pt-heartbeat table (`pt-heartbeat --update --utc`, replicated like any row). A heartbeat
    /// more than a second in the replica's future was not written in UTC: unknown, never zero.
    async fn heartbeat_lag(&self, table: &str, primary: u32) -> Result<Lag, sqlx::Error> {
        let sql = format!(
            "SELECT TIMESTAMPDIFF(MICROSECOND, MAX(ts), UTC_TIMESTAMP(6)) FROM {table} WHERE server_id = ?"
        );
        let micros: Option<i64> = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(primary)
            .fetch_one(&self.pool)
            .await?;
        Ok(match micros {
            Some(us) if us < -1_000_000 => Lag::Unknown(format!(
                "the heartbeat in {table} is {:.1} s in the future: write it with pt-heartbeat --utc",
                -us as f64 / 1e6
            )),
            Some(us) => Lag::Behind(Duration::from_micros(us.max(0) as u64)),
            None => Lag::Unknown(format!(
                "the heartbeat table {table} has no row of the primary (server_id {primary})"
            )),
        })
    }

    /// The worst of every replication channel the replica has (MariaDB's multi-source
    /// connections, MySQL's channels): any channel not replicating is an unknown lag.
    async fn status_lag(&self) -> Result<Lag, sqlx::Error> {
        let mut rows = None;
        for statement in [
            "SHOW ALL REPLICAS STATUS",
            "SHOW REPLICA STATUS",
            "SHOW SLAVE STATUS",
        ] {
            match sqlx::raw_sql(statement).fetch_all(&self.pool).await {
                // Not this server's words (MySQL has no ALL; old servers only SLAVE): the next.
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42000") => continue,
                other => {
                    rows = Some(other?);
                    break;
                }
            }
        }
        let rows = rows.unwrap_or_default();
        if rows.is_empty() {
            return Ok(Lag::Unknown(
                "SHOW REPLICA STATUS is empty: the server does not replicate".into(),
            ));
        }
        let mut worst = Lag::Behind(Duration::ZERO);
        for row in &rows {
            match (lag_of(row), &worst) {
                (unknown @ Lag::Unknown(_), _) => return Ok(unknown),
                (Lag::Behind(d), Lag::Behind(w)) if d > *w => worst = Lag::Behind(d),
                _ => {}
            }
        }
        Ok(worst)
    }
}

/// How long asking a replica may take: a hung connection (a firewall dropping packets, a
/// status blocked behind `STOP SLAVE`) must not outlast `--replica-wait-timeout`.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The lag a `SHOW REPLICA STATUS` row says: both threads running and a number of seconds.
fn lag_of(row: &MySqlRow) -> Lag {
    let text = |names: &[&str]| -> Option<String> {
        names.iter().find_map(|name| {
            row.try_get::<Option<String>, _>(*name)
                .ok()
                .flatten()
                .or_else(|| {
                    row.try_get::<Option<i64>, _>(*name)
                        .ok()
                        .flatten()
                        .map(|n| n.to_string())
                })
                .or_else(|| {
                    row.try_get::<Option<u64>, _>(*name)
                        .ok()
                        .flatten()
                        .map(|n| n.to_string())
                })
        })
    };
    for (thread, names) in [
        ("IO", ["Replica_IO_Running", "Slave_IO_Running"]),
        ("SQL", ["Replica_SQL_Running", "Slave_SQL_Running"]),
    ] {
        let running = text(&names);
        if running.as_deref() != Some("Yes") {
            return Lag::Unknown(format!(
                "the replication {thread} thread is not running ({}: {})",
                names[1],
                running.as_deref().unwrap_or("NULL")
            ));
        }
    }
    match text(&["Seconds_Behind_Source", "Seconds_Behind_Master"]).map(|s| s.parse::<u64>()) {
        Some(Ok(seconds)) => Lag::Behind(Duration::from_secs(seconds)),
        _ => Lag::Unknown("Seconds_Behind_Master is NULL".into()),
    }
}

/// How `--replicas-from` finds the replicas on the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Discovery {
    /// `SHOW REPLICA HOSTS`: replicas that set `report_host` (and `report_port`).
    Hosts,
    /// The primary's binlog dump threads: the replica's host, on the primary's port.
    Processlist,
}

/// This server's `server_id`: the primary's, whose pt-heartbeat rows are the ones that count.
pub(crate) async fn server_id(db: &Db) -> Result<u32, sqlx::Error> {
    sqlx::query_scalar("SELECT CAST(@@server_id AS UNSIGNED)")
        .fetch_one(&db.pool)
        .await
}

/// The URLs of the primary's replicas: the primary's URL (`url`, its credentials and database)
/// with each replica's host and port.
pub(crate) async fn discover(db: &Db, url: &str, how: Discovery) -> Result<Vec<String>, DbError> {
    let base = url::Url::parse(url).map_err(|e| DbError::InvalidUrl {
        setting: "--database-url / DATABASE_URL".into(),
        url: redact::url(url),
        detail: e.to_string(),
    })?;
    let primary_port = base.port().unwrap_or(3306);
    let found = match how {
        Discovery::Hosts => reported_hosts(db).await?,
        Discovery::Processlist => dump_thread_hosts(db, primary_port).await?,
    };
    let mut urls = Vec::new();
    for (host, port) in found {
        let mut replica = base.clone();
        // An IPv6 address goes in brackets in a URL.
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        if replica.set_host(Some(&host)).is_err() || replica.set_port(Some(port)).is_err() {
            return Err(DbError::Query {
                context: format!(
                    "a replica's host {host:?} cannot be put into the database URL; list the replicas with --replica"
                ),
                source: sqlx::Error::RowNotFound,
            });
        }
        urls.push(replica.to_string());
    }
    urls.sort();
    urls.dedup();
    Ok(urls)
}

/// The replicas the primary lists (`SHOW REPLICA HOSTS`): each one's `report_host` and
/// `report_port`.
async fn reported_hosts(db: &Db) -> Result<Vec<(String, u16)>, DbError> {
    // MySQL 8.0.22+ says SHOW REPLICAS (9.x has nothing else); MariaDB SHOW REPLICA HOSTS
    // (10.5.2+) or SHOW SLAVE HOSTS.
    let mut rows = None;
    for statement in ["SHOW REPLICAS", "SHOW REPLICA HOSTS", "SHOW SLAVE HOSTS"] {
        match sqlx::raw_sql(statement).fetch_all(&db.pool).await {
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42000") => continue,
            other => {
                rows = Some(other.context(|| format!("listing the replicas ({statement})"))?);
                break;
            }
        }
    }
    let rows = rows.ok_or_else(|| DbError::Query {
        context:
            "listing the replicas: the server knows neither SHOW REPLICAS nor SHOW REPLICA HOSTS"
                .into(),
        source: sqlx::Error::RowNotFound,
    })?;
    rows.iter().map(reported_host).collect()
}

/// The host and port one row of `SHOW REPLICA HOSTS` reports; a replica without a host is an
/// error.
fn reported_host(r: &MySqlRow) -> Result<(String, u16), DbError> {
    let host: String = r.try_get("Host").unwrap_or_default();
    // An integer of whichever width and sign the server gives it; 0 (no report_port) is the
    // default port.
    let port = r
        .try_get::<i64, _>("Port")
        .ok()
        .or_else(|| r.try_get::<u32, _>("Port").ok().map(i64::from))
        .or_else(|| r.try_get::<u64, _>("Port").ok().map(|p| p as i64))
        .or_else(|| r.try_get::<i32, _>("Port").ok().map(i64::from))
        .ok_or_else(|| DbError::Query {
            context: format!("reading the port of replica {host:?}"),
            source: sqlx::Error::ColumnNotFound("Port".into()),
        })?;
    let port = if port == 0 { 3306 } else { port };
    if host.is_empty() {
        // Fail closed: a replica that cannot be reached by name is not skipped.
        let id = ["Server_id", "Server_Id"]
            .iter()
            .find_map(|name| {
                r.try_get::<i64, _>(*name)
                    .ok()
                    .or_else(|| r.try_get::<u32, _>(*name).ok().map(i64::from))
            })
            .map_or_else(|| "?".into(), |i| i.to_string());
        return Err(DbError::Query {
            context: format!(
                "replica server_id {id} is connected but did not set report_host: set it, or list the replicas with --replica"
            ),
            source: sqlx::Error::RowNotFound,
        });
    }
    Ok((host, port as u16))
}

/// The hosts of the primary's binlog dump threads, each on the primary's port (the processlist
/// does not say the replica's).
async fn dump_thread_hosts(db: &Db, primary_port: u16) -> Result<Vec<(String, u16)>, DbError> {
    let hosts: Vec<(String,)> = super::schema_rows(
        &db.pool,
        "SELECT CAST(HOST AS CHAR) FROM information_schema.PROCESSLIST WHERE COMMAND IN ('Binlog Dump', 'Binlog Dump GTID')",
        &[],
    )
    .await
    .context(|| "listing the replicas (the processlist's Binlog Dump threads)".into())?;
    let hosts: Vec<String> = hosts.into_iter().map(|(h,)| h).collect();
    Ok(hosts
        .into_iter()
        .map(|h| {
            let host = h.rsplit_once(':').map_or(h.as_str(), |(host, _)| host);
            (host.to_string(), primary_port)
        })
        .collect())
}
