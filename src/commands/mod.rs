//! The subcommands. Each module has an options struct and one `run` that returns the
//! [`crate::summary::Summary`] to print. [`Env`] is what they share: the table, the database, the
//! store, the clock and the shutdown signal — all passed in, never reached for.

pub mod archive;
pub mod demo;
pub mod migrate;
pub mod purge;
pub mod restore;
pub mod status;
pub mod verify;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::db::Db;
use crate::store::ObjectStore;
use crate::table::TableSpec;

/// Milliseconds since the Unix epoch, from whatever clock the caller chose.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| chrono::Utc::now().timestamp_millis())
}

/// What every command that touches the archive works with.
#[derive(Clone)]
pub struct Env {
    pub spec: &'static TableSpec,
    pub db: Db,
    pub store: Arc<dyn ObjectStore>,
    /// Cancelled on SIGTERM/SIGINT; loops check it between batches.
    pub shutdown: CancellationToken,
    pub now_ms: Clock,
}
