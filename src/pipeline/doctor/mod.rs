//! `doctor`'s preflight: every check it can make of the database and the store without writing a
//! row, each an `ok` / `warning` / `problem` line with the fix. The only object it writes is one
//! probe under the archive's prefix, with the run's storage class, retention (the shortest the
//! store accepts: two seconds), legal hold and encryption, to see what the store really does with
//! them; the probe's version is then removed where the lock and the bucket policy allow, else it
//! is left and named.
//!
//! This module is the report: a [`Check`] per line, with its [`Status`], gathered in a
//! [`DoctorRun`]. The checks are `database`'s (connection, TLS, tables, the retention index,
//! grants, the buffer pool), `bucket`'s (access, region, versioning, Object Lock, encryption,
//! the KMS key, create-only puts) and `probe`'s (the one object written, and what the store kept
//! of it).

mod bucket;
mod database;
mod probe;

use serde::Serialize;

pub(crate) use bucket::{check_store, DoctorStore, OpenedStore};
pub(crate) use database::{check_database, GrantsFor};

use crate::model::protection::WritePolicy;

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
    pub(crate) fn ok(check: &str, detail: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    pub(crate) fn warning(check: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            status: Status::Warning,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    pub(crate) fn problem(check: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            status: Status::Problem,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct DoctorOptions {
    /// The commands this login is meant to run: their grants are checked.
    pub grants_for: Vec<GrantsFor>,
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
