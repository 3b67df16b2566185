//! One archiver per app (SPEC §5.4): `GET_LOCK(name, 0)` on a connection reserved for the whole
//! run. The connection never goes back to a pool — a pooled connection that is dropped keeps its
//! lock — and is closed explicitly on release.
//!
//! Before a commit the lock is confirmed twice: on the lock connection itself
//! (`IS_USED_LOCK(name) = CONNECTION_ID()`, which fails if that connection is gone) and through
//! the committing transaction (`IS_USED_LOCK(name)` equals the lock connection's id). The first
//! is what survives a server restart: connection ids start again from 1, so after one another
//! session can hold the lock under the very id this lock connection had. A lock found lost there
//! is one error, [`LockLost`], whatever the transaction was doing: it is rolled back.
//!
//! Function results are CAST to one integer type: MySQL types `IS_USED_LOCK` and
//! `CONNECTION_ID()` as BIGINT UNSIGNED, MariaDB as signed, and sqlx decodes each strictly.
//!
//! The name is `{lock_prefix}{table}_archive:{app_code}`, the one the services' own archiver
//! uses, so the two exclude each other during a cut-over. MySQL limits names to 64 characters;
//! a longer one is shortened deterministically to its first 47 characters, `~`, and the first 16
//! hex digits of the SHA-256 of the whole name.

use sqlx::{Connection, Executor, MySqlConnection};

use super::{Context, Db, DbError};
use crate::model::digest::sha256_hex;

const MAX_LOCK_NAME: usize = 64;

/// The advisory lock name for an app.
pub fn lock_name(prefix: &str, table: &str, app_code: &str) -> String {
    let full = format!("{prefix}{table}_archive:{app_code}");
    if full.chars().count() <= MAX_LOCK_NAME {
        return full;
    }
    let head: String = full.chars().take(47).collect();
    format!("{head}~{}", &sha256_hex(full.as_bytes())[..16])
}

/// The second lock every run takes for an app, whatever its `--lock-prefix`:
/// `{database}.{table}_archive:{app_code}` (shortened as [`lock_name`] shortens). Two jobs on
/// one database configured with different prefixes would otherwise take different locks for one
/// app; this one they share. Two databases on one server never share it.
pub fn database_lock_name(database: &str, table: &str, app_code: &str) -> String {
    lock_name("", &format!("{database}.{table}"), app_code)
}

/// Held advisory locks and the connection holding them.
#[derive(Debug)]
pub struct AppLock {
    conn: tokio::sync::Mutex<MySqlConnection>,
    /// The first is the one named in messages (the services' name, with the prefix).
    names: Vec<String>,
    connection_id: u64,
}

impl AppLock {
    /// Takes the lock without waiting; `None` when another session holds it.
    pub async fn try_acquire(db: &Db, name: &str) -> Result<Option<AppLock>, DbError> {
        AppLock::try_acquire_all(db, &[name.to_string()]).await
    }

    /// Takes every one of `names` on one connection, without waiting; `None` when another
    /// session holds any of them (then none is kept).
    pub(crate) async fn try_acquire_all(
        db: &Db,
        names: &[String],
    ) -> Result<Option<AppLock>, DbError> {
        let mut conn = db.dedicated().await?;
        for name in names {
            let got: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, 0) AS SIGNED)")
                .bind(name)
                .fetch_one(&mut conn)
                .await
                .context(|| format!("taking advisory lock {name}"))?;
            if got != Some(1) {
                // Closing the connection releases the ones taken.
                let _ = conn.close().await;
                return Ok(None);
            }
        }
        let connection_id: u64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
            .fetch_one(&mut conn)
            .await
            .context(|| "reading the lock connection's id".into())?;
        Ok(Some(AppLock {
            conn: tokio::sync::Mutex::new(conn),
            names: names.to_vec(),
            connection_id,
        }))
    }

    pub fn name(&self) -> &str {
        &self.names[0]
    }

    pub fn connection_id(&self) -> u64 {
        self.connection_id
    }

    /// The error of a transaction that found this lock lost before committing batch `batch_id`.
    pub(crate) fn lost(&self, batch_id: &str, doing: Doing) -> LockLost {
        LockLost {
            lock: self.name().to_string(),
            batch_id: batch_id.to_string(),
            doing,
        }
    }

    /// Whether the locks are still held by their connection: asked on the lock connection
    /// itself (a connection that is gone holds nothing), and through `executor` (the receipt
    /// transaction, just before it commits).
    pub async fn held_per<'e, E>(&self, executor: E) -> Result<bool, DbError>
    where
        E: Executor<'e, Database = sqlx::MySql>,
    {
        if !self.held_on_own_connection().await {
            return Ok(false);
        }
        // One statement for every name: `<=>` so that a free lock (NULL) is simply not held.
        let held = vec!["(CAST(IS_USED_LOCK(?) AS SIGNED) <=> ?)"; self.names.len()].join(" AND ");
        let sql = format!("SELECT CAST({held} AS SIGNED)");
        let mut query = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql));
        for name in &self.names {
            query = query.bind(name).bind(self.connection_id as i64);
        }
        let held = query
            .fetch_one(executor)
            .await
            .context(|| format!("checking advisory lock {}", self.name()))?;
        Ok(held == 1)
    }

    /// Whether the locks are still held, asked on their own connection — a query that also keeps
    /// the connection from looking idle during a long wait (replica lag).
    pub(crate) async fn keep_alive(&self) -> bool {
        self.held_on_own_connection().await
    }

    /// `IS_USED_LOCK(name) = CONNECTION_ID()` for every name, on the lock connection. Any error
    /// there means the connection is gone, and with it the locks.
    async fn held_on_own_connection(&self) -> bool {
        let mut conn = self.conn.lock().await;
        for name in &self.names {
            let mine: Result<Option<i64>, _> =
                sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) = CONNECTION_ID() AS SIGNED)")
                    .bind(name)
                    .fetch_one(&mut *conn)
                    .await;
            match mine {
                Ok(Some(1)) => {}
                Ok(_) => return false,
                Err(e) => {
                    tracing::warn!(lock = name, error = %e, "the lock connection is gone, and the lock with it");
                    return false;
                }
            }
        }
        true
    }

    /// Releases the locks and closes their connection (closing alone would release them too).
    pub async fn release(self) {
        let mut conn = self.conn.into_inner();
        for name in &self.names {
            let _ = sqlx::query("SELECT RELEASE_LOCK(?)")
                .bind(name)
                .execute(&mut conn)
                .await;
        }
        let _ = conn.close().await;
    }
}

/// What a transaction under the app's lock was doing when it found the lock lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    /// Archive's receipt and members.
    Recording,
    /// A purge chunk.
    Purging,
    /// A restore chunk into the source table.
    Restoring,
    /// Compaction's digest and deletes.
    Compacting,
    /// Archive's puts of a batch's objects.
    Publishing,
}

/// The app's advisory lock was found lost before a commit (a killed connection, a server
/// restart, another process): the transaction was rolled back.
#[derive(Debug)]
pub struct LockLost {
    pub lock: String,
    pub batch_id: String,
    pub doing: Doing,
}

impl std::fmt::Display for LockLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (lock, batch_id) = (&self.lock, &self.batch_id);
        match self.doing {
            Doing::Recording => write!(f, "lost advisory lock {lock} before committing batch {batch_id} (killed connection, server restart or another archiver); nothing recorded"),
            Doing::Purging => write!(f, "lost advisory lock {lock} while purging batch {batch_id}; the chunk was rolled back"),
            Doing::Restoring => write!(f, "lost advisory lock {lock} while restoring batch {batch_id} into the source (killed connection, server restart or a proxy's idle timeout); the chunk was rolled back — run restore again"),
            Doing::Compacting => write!(f, "lost advisory lock {lock} while compacting batch {batch_id}; rolled back"),
            Doing::Publishing => write!(f, "lost advisory lock {lock} before writing an object of batch {batch_id} (killed connection, server restart or another archiver); nothing more written, nothing recorded — the archiver that holds the lock writes the batch"),
        }
    }
}

impl std::error::Error for LockLost {}

#[cfg(test)]
mod tests {
    use super::{lock_name, Doing, LockLost};

    #[test]
    fn a_lost_lock_says_what_was_rolled_back() {
        let lost = |doing| {
            LockLost {
                lock: "t_archive:a1".into(),
                batch_id: "b1".into(),
                doing,
            }
            .to_string()
        };
        assert_eq!(lost(Doing::Recording), "lost advisory lock t_archive:a1 before committing batch b1 (killed connection, server restart or another archiver); nothing recorded");
        assert_eq!(
            lost(Doing::Purging),
            "lost advisory lock t_archive:a1 while purging batch b1; the chunk was rolled back"
        );
        assert_eq!(lost(Doing::Restoring), "lost advisory lock t_archive:a1 while restoring batch b1 into the source (killed connection, server restart or a proxy's idle timeout); the chunk was rolled back — run restore again");
        assert_eq!(
            lost(Doing::Compacting),
            "lost advisory lock t_archive:a1 while compacting batch b1; rolled back"
        );
    }

    #[test]
    fn names() {
        assert_eq!(
            lock_name("", "wallet_outbox", "app1"),
            "wallet_outbox_archive:app1"
        );
        assert_eq!(
            lock_name("t1:", "wallet_outbox", "app1"),
            "t1:wallet_outbox_archive:app1"
        );
        let long = lock_name(
            "a-very-long-tenant-prefix-for-shared-servers:",
            "wallet_outbox",
            &"x".repeat(32),
        );
        assert_eq!(long.chars().count(), 64);
        assert!(long.starts_with("a-very-long-tenant-prefix-for-shared-servers:wa~"));
        assert_eq!(
            long,
            lock_name(
                "a-very-long-tenant-prefix-for-shared-servers:",
                "wallet_outbox",
                &"x".repeat(32)
            )
        );
        assert_ne!(
            long,
            lock_name(
                "a-very-long-tenant-prefix-for-shared-servers:",
                "wallet_outbox",
                &"y".repeat(32)
            )
        );
    }
}
