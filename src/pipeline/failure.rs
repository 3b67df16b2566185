//! How a failure ends an app's attempt, decided once per error type: worth another attempt (a
//! transient database error), the app's lock lost, stopped by the operator, or final — and,
//! where the error says more than "error", why the app's run ended.
//!
//! Each error answers for itself ([`Classify`]): the errors of the layers below (the database,
//! the store) and of the shared steps (building, publishing) here; each command's own error next
//! to its definition, by asking the error it wraps. The driver ([`super::apps`]) retries on the
//! answer, [`super::report::AppReport::fail`] notes it; nothing else looks inside an error to
//! tell.

use super::builder::BuildError;
use super::publish::PublishError;
use crate::db::compact::CompactError;
use crate::db::lock::LockLost;
use crate::db::purge::PurgeError;
use crate::db::record::RecordError;
use crate::db::restore::LoadError;
use crate::db::DbError;
use crate::store::StoreError;

/// How a failure ends an app's attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A restart, a failover, a killed connection, a deadlock: another attempt may not meet it.
    Transient,
    /// The app's advisory lock was found lost before a commit (or while waiting for the
    /// replicas): nothing more of the app without it.
    LostLock,
    /// The operator asked the run to stop (shutdown, the sentinel) while the work was in hand.
    Stopped,
    /// The database's layout is newer than this build's (SPEC §20): no app can go on, and
    /// the run ends as one that could not start would (exit status 2).
    Fenced,
    /// Anything else: another attempt would meet it again.
    Fatal,
}

impl Kind {
    /// Whether the driver tries the app again. A restart or failover drops the lock with the
    /// connection, so a lost lock is worth it too: another attempt goes back through the gate,
    /// takes the lock anew, or reports the app skipped if another process has it.
    pub(crate) fn worth_retry(self) -> bool {
        matches!(self, Kind::Transient | Kind::LostLock)
    }
}

/// An error that knows how it ends an app's attempt.
pub(crate) trait Classify {
    fn kind(&self) -> Kind;

    /// Why the app's run ended, where the error says more than "error".
    fn stop_reason(&self) -> Option<crate::model::ending::Stop> {
        None
    }
}

impl Classify for DbError {
    fn kind(&self) -> Kind {
        match self {
            DbError::NewerLayout { .. } => Kind::Fenced,
            e if e.is_transient() => Kind::Transient,
            _ => Kind::Fatal,
        }
    }
}

impl Classify for LockLost {
    fn kind(&self) -> Kind {
        Kind::LostLock
    }
}

impl Classify for RecordError {
    fn kind(&self) -> Kind {
        match self {
            RecordError::Db(e) => e.kind(),
            RecordError::LockLost(e) => e.kind(),
            _ => Kind::Fatal,
        }
    }
}

impl Classify for PurgeError {
    fn kind(&self) -> Kind {
        match self {
            PurgeError::Db(e) => e.kind(),
            PurgeError::LockLost(e) => e.kind(),
            _ => Kind::Fatal,
        }
    }
}

impl Classify for CompactError {
    fn kind(&self) -> Kind {
        match self {
            CompactError::Db(e) => e.kind(),
            CompactError::LockLost(e) => e.kind(),
            _ => Kind::Fatal,
        }
    }
}

impl Classify for LoadError {
    fn kind(&self) -> Kind {
        match self {
            LoadError::Db(e) => e.kind(),
            LoadError::LockLost(e) => e.kind(),
            _ => Kind::Fatal,
        }
    }
}

impl Classify for BuildError {
    fn kind(&self) -> Kind {
        match self {
            BuildError::Db(e) => e.kind(),
            BuildError::Encode(_) => Kind::Fatal,
        }
    }
}

/// The S3 store retries a failed request itself (`store_requests` counts it): a store error
/// that reaches an app's work is not tried again.
impl Classify for StoreError {
    fn kind(&self) -> Kind {
        Kind::Fatal
    }
}

impl Classify for super::log::LogError {
    fn kind(&self) -> Kind {
        match self {
            super::log::LogError::Db(e) => e.kind(),
            super::log::LogError::Store(e) => e.kind(),
            super::log::LogError::Refused { .. } => Kind::Fatal,
        }
    }
}

impl Classify for PublishError {
    fn kind(&self) -> Kind {
        match self {
            PublishError::Store(e) => e.kind(),
            PublishError::LockLost(e) => e.kind(),
            PublishError::Mismatch { .. } | PublishError::Failpoint(_) => Kind::Fatal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::replicas::LagStop;

    fn lost_connection() -> DbError {
        DbError::Query {
            context: "reading".into(),
            source: sqlx::Error::Io(std::io::Error::other("reset")),
        }
    }

    #[test]
    fn a_wrapped_database_error_keeps_its_kind_and_a_lost_lock_is_retried() {
        assert_eq!(RecordError::Db(lost_connection()).kind(), Kind::Transient);
        assert_eq!(BuildError::Db(lost_connection()).kind(), Kind::Transient);
        let lost = PurgeError::LockLost(LockLost {
            lock: "l".into(),
            batch_id: "b".into(),
            doing: crate::db::lock::Doing::Purging,
        });
        assert_eq!(lost.kind(), Kind::LostLock);
        assert!(Kind::LostLock.worth_retry() && Kind::Transient.worth_retry());
        let refused = DbError::NotMigrated {
            missing: "9".into(),
        };
        assert_eq!(CompactError::Db(refused).kind(), Kind::Fatal);
        assert!(!Kind::Fatal.worth_retry() && !Kind::Stopped.worth_retry());
    }

    #[test]
    fn the_replicas_say_why_the_run_ended() {
        assert_eq!(LagStop::Shutdown.kind(), Kind::Stopped);
        assert_eq!(
            LagStop::LockLost.stop_reason(),
            Some(crate::model::ending::Stop::LostLock)
        );
        assert_eq!(RecordError::Db(lost_connection()).stop_reason(), None);
    }
}
