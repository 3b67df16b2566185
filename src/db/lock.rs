//! One archiver per app (SPEC §5.4): `GET_LOCK(name, 0)` on a connection reserved for the whole
//! run. The connection never goes back to a pool — a pooled connection that is dropped keeps its
//! lock — and is closed explicitly on release.
//!
//! Before a commit the lock is confirmed twice: on the lock connection itself
//! (`IS_USED_LOCK(name) = CONNECTION_ID()`, which fails if that connection is gone) and through
//! the committing transaction (`IS_USED_LOCK(name)` equals the lock connection's id). The first
//! is what survives a server restart: connection ids start again from 1, so after one another
//! session can hold the lock under the very id this lock connection had.
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
use crate::digest::sha256_hex;

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

/// A held advisory lock and the connection holding it.
#[derive(Debug)]
pub struct AppLock {
    conn: tokio::sync::Mutex<MySqlConnection>,
    name: String,
    connection_id: u64,
}

impl AppLock {
    /// Takes the lock without waiting; `None` when another session holds it.
    pub async fn try_acquire(db: &Db, name: &str) -> Result<Option<AppLock>, DbError> {
        let mut conn = db.dedicated().await?;
        let got: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, 0) AS SIGNED)")
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .context(|| format!("taking advisory lock {name}"))?;
        if got != Some(1) {
            let _ = conn.close().await;
            return Ok(None);
        }
        let connection_id: u64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
            .fetch_one(&mut conn)
            .await
            .context(|| "reading the lock connection's id".into())?;
        Ok(Some(AppLock {
            conn: tokio::sync::Mutex::new(conn),
            name: name.to_string(),
            connection_id,
        }))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn connection_id(&self) -> u64 {
        self.connection_id
    }

    /// Whether this lock is still held by its connection: asked on the lock connection itself
    /// (a connection that is gone holds nothing), and through `executor` (the receipt
    /// transaction, just before it commits).
    pub async fn held_per<'e, E>(&self, executor: E) -> Result<bool, DbError>
    where
        E: Executor<'e, Database = sqlx::MySql>,
    {
        if !self.held_on_own_connection().await {
            return Ok(false);
        }
        let holder: Option<i64> = sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
            .bind(&self.name)
            .fetch_one(executor)
            .await
            .context(|| format!("checking advisory lock {}", self.name))?;
        Ok(holder == Some(self.connection_id as i64))
    }

    /// Whether the lock is still held, asked on its own connection — a query that also keeps
    /// the connection from looking idle during a long wait (replica lag).
    pub async fn keep_alive(&self) -> bool {
        self.held_on_own_connection().await
    }

    /// `IS_USED_LOCK(name) = CONNECTION_ID()` on the lock connection. Any error there means the
    /// connection is gone, and with it the lock.
    async fn held_on_own_connection(&self) -> bool {
        let mut conn = self.conn.lock().await;
        let mine: Result<Option<i64>, _> =
            sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) = CONNECTION_ID() AS SIGNED)")
                .bind(&self.name)
                .fetch_one(&mut *conn)
                .await;
        match mine {
            Ok(held) => held == Some(1),
            Err(e) => {
                tracing::warn!(lock = self.name, error = %e, "the lock connection is gone, and the lock with it");
                false
            }
        }
    }

    /// Releases the lock and closes its connection (closing alone would release it too).
    pub async fn release(self) {
        let mut conn = self.conn.into_inner();
        let _ = sqlx::query("SELECT RELEASE_LOCK(?)")
            .bind(&self.name)
            .execute(&mut conn)
            .await;
        let _ = conn.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::lock_name;

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
