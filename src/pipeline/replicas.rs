//! Writes paced by the replicas (pt-archiver's `--check-slave-lag` / `--max-lag`): before each
//! purge chunk and each archive receipt transaction, every replica's lag is read; while one is
//! over `--max-replica-lag`, or its lag cannot be told (unreachable, not replicating, NULL), the
//! work waits — with backoff, logging once per wait, keeping the app's lock connection alive —
//! and resumes when all are within the limit. A wait longer than `--replica-wait-timeout`
//! stops the app's work with the replica named (fail closed): never "treat as zero".
//!
//! A check that passed is trusted for [`CHECK_INTERVAL`], so that fast chunks do not ask the
//! replicas hundreds of times a second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::db::lock::AppLock;
use crate::db::replica::{Lag, Replica};

/// A passed check holds this long.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The replicas and the limits of their lag.
#[derive(Debug)]
pub struct ReplicaGate {
    pub replicas: Vec<Replica>,
    pub max_lag: Duration,
    pub timeout: Duration,
    /// `--heartbeat-table`: read the lag from a pt-heartbeat table instead of the status.
    pub heartbeat: Option<String>,
    passed_at: Mutex<Option<Instant>>,
}

/// Why a wait for the replicas ended the app's work.
#[derive(Debug, thiserror::Error)]
pub enum LagStop {
    #[error("replica {replica}: {lag}, above --max-replica-lag {max:?} for longer than --replica-wait-timeout {timeout:?}; stopped before writing more (fail closed: a lag that cannot be read is never taken as zero)")]
    Timeout {
        replica: String,
        lag: String,
        max: Duration,
        timeout: Duration,
    },
    #[error("shutdown requested while waiting for the replicas")]
    Shutdown,
    #[error("the app's advisory lock was lost while waiting for the replicas")]
    LockLost,
}

impl LagStop {
    /// The app's `stop_reason`.
    pub fn stop_reason(&self) -> String {
        match self {
            LagStop::Timeout { replica, .. } => {
                format!("replica lag: {replica} above --max-replica-lag for longer than --replica-wait-timeout")
            }
            LagStop::Shutdown => super::SHUTDOWN.to_string(),
            LagStop::LockLost => super::apps::LOST_LOCK.to_string(),
        }
    }
}

impl ReplicaGate {
    pub fn new(
        replicas: Vec<Replica>,
        max_lag: Duration,
        timeout: Duration,
        heartbeat: Option<String>,
    ) -> ReplicaGate {
        ReplicaGate {
            replicas,
            max_lag,
            timeout,
            heartbeat,
            passed_at: Mutex::new(None),
        }
    }

    /// The first replica over the limit, with its lag (`None`: all within it).
    async fn lagging(&self) -> Option<(&Replica, Lag)> {
        for replica in &self.replicas {
            match replica.lag(self.heartbeat.as_deref()).await {
                Lag::Behind(d) if d <= self.max_lag => {}
                lag => return Some((replica, lag)),
            }
        }
        None
    }

    /// Waits until every replica is within `--max-replica-lag`; returns how long it waited.
    /// `lock` is kept alive meanwhile (and a lost lock ends the wait); shutdown ends it too.
    pub async fn wait(
        &self,
        app: &str,
        lock: Option<&AppLock>,
        shutdown: &CancellationToken,
    ) -> Result<Duration, LagStop> {
        let recent = self
            .passed_at
            .lock()
            .expect("not poisoned")
            .is_some_and(|at| at.elapsed() < CHECK_INTERVAL);
        if recent || self.replicas.is_empty() {
            return Ok(Duration::ZERO);
        }
        let started = Instant::now();
        let mut pause = Duration::from_millis(250);
        let mut logged = false;
        loop {
            let Some((replica, lag)) = self.lagging().await else {
                *self.passed_at.lock().expect("not poisoned") = Some(Instant::now());
                let waited = started.elapsed();
                if logged {
                    tracing::info!(
                        app,
                        waited_ms = waited.as_millis() as u64,
                        "replicas within --max-replica-lag again; going on"
                    );
                }
                return Ok(waited);
            };
            if !logged {
                tracing::warn!(
                    app,
                    replica = replica.name,
                    lag = %lag,
                    max_lag_ms = self.max_lag.as_millis() as u64,
                    "waiting for a replica before writing more (--max-replica-lag)"
                );
                logged = true;
            }
            if started.elapsed() >= self.timeout {
                return Err(LagStop::Timeout {
                    replica: replica.name.clone(),
                    lag: lag.to_string(),
                    max: self.max_lag,
                    timeout: self.timeout,
                });
            }
            if let Some(lock) = lock {
                // A query on the lock connection: proxies that cut idle connections leave it be.
                if !lock.keep_alive().await {
                    return Err(LagStop::LockLost);
                }
            }
            let left = self.timeout.saturating_sub(started.elapsed());
            tokio::select! {
                _ = tokio::time::sleep(pause.min(left).max(Duration::from_millis(10))) => {}
                _ = shutdown.cancelled() => return Err(LagStop::Shutdown),
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }
}
