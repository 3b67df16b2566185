//! Writes paced by the replicas (pt-archiver's `--check-slave-lag` / `--max-lag`): before each
//! purge chunk and each archive receipt transaction, every replica's lag is read; while one is
//! over `--max-replica-lag`, or its lag cannot be told (unreachable, not replicating, NULL), the
//! work waits — with backoff, logging once per wait, keeping the app's lock connection alive —
//! and resumes when all are within the limit. A wait longer than `--replica-wait-timeout`
//! stops the app's work with the replica named (fail closed): never "treat as zero".
//!
//! A check that passed is trusted for `CHECK_INTERVAL`, so that fast chunks do not ask the
//! replicas hundreds of times a second. A timeout is the run's, not one app's: once a replica
//! outlasted it, every later write of the run stops at once (forty apps do not wait forty
//! timeouts each).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::failure::{Classify, Kind};
use crate::db::lock::AppLock;
use crate::db::replica::{Lag, Replica};
use crate::pipeline::report::Stop;

/// A passed check holds this long.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The replicas and the limits of their lag.
#[derive(Debug)]
pub struct ReplicaGate {
    pub replicas: Vec<Replica>,
    pub max_lag: Duration,
    pub timeout: Duration,
    /// `--heartbeat-table`: read the lag from a pt-heartbeat table instead of the status, the
    /// rows the primary (this server id) wrote.
    pub heartbeat: Option<(String, u32)>,
    passed_at: Mutex<Option<Instant>>,
    /// The timeout this run already hit: every later wait ends with it at once.
    timed_out: Mutex<Option<LagStop>>,
}

/// Why a wait for the replicas ended the app's work.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum LagStop {
    #[error("replica {replica}: {lag}, not within --max-replica-lag {max:?} for longer than --replica-wait-timeout {timeout:?}; stopped before writing more (fail closed: a lag that cannot be read is never taken as zero)")]
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

impl Classify for LagStop {
    fn kind(&self) -> Kind {
        match self {
            LagStop::Timeout { .. } => Kind::Fatal,
            LagStop::Shutdown => Kind::Stopped,
            LagStop::LockLost => Kind::LostLock,
        }
    }

    fn stop_reason(&self) -> Option<Stop> {
        Some(match self {
            LagStop::Timeout { replica, .. } => Stop::ReplicaLag {
                replica: replica.clone(),
            },
            LagStop::Shutdown => super::shutdown_reason(),
            LagStop::LockLost => Stop::LostLock,
        })
    }
}

impl ReplicaGate {
    pub fn new(
        replicas: Vec<Replica>,
        max_lag: Duration,
        timeout: Duration,
        heartbeat: Option<(String, u32)>,
    ) -> ReplicaGate {
        ReplicaGate {
            replicas,
            max_lag,
            timeout,
            heartbeat,
            passed_at: Mutex::new(None),
            timed_out: Mutex::new(None),
        }
    }

    /// The first replica over the limit, with its lag (`None`: all within it).
    async fn lagging(&self) -> Option<(&Replica, Lag)> {
        for replica in &self.replicas {
            let heartbeat = self.heartbeat.as_ref().map(|(t, id)| (t.as_str(), *id));
            match replica.lag(heartbeat).await {
                Lag::Behind(d) if d <= self.max_lag => {}
                lag => return Some((replica, lag)),
            }
        }
        None
    }

    /// Waits until every replica is within `--max-replica-lag`; returns how long it waited
    /// (zero when the first look found them within it). `lock` is kept alive meanwhile (and a
    /// lost lock ends the wait); shutdown ends it too.
    pub(crate) async fn wait(
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
        if let Some(stop) = self.timed_out.lock().expect("not poisoned").clone() {
            return Err(stop);
        }
        let started = Instant::now();
        let mut pause = Duration::from_millis(250);
        let mut logged = false;
        loop {
            let looked = tokio::select! {
                looked = self.lagging() => looked,
                _ = shutdown.cancelled() => return Err(LagStop::Shutdown),
            };
            let Some((replica, lag)) = looked else {
                *self.passed_at.lock().expect("not poisoned") = Some(Instant::now());
                if !logged {
                    return Ok(Duration::ZERO);
                }
                let waited = started.elapsed();
                tracing::info!(
                    app,
                    waited_ms = waited.as_millis() as u64,
                    "replicas within --max-replica-lag again; going on"
                );
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
                let stop = LagStop::Timeout {
                    replica: replica.name.clone(),
                    lag: lag.to_string(),
                    max: self.max_lag,
                    timeout: self.timeout,
                };
                *self.timed_out.lock().expect("not poisoned") = Some(stop.clone());
                return Err(stop);
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
