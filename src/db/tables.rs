//! The repositories of one outbox table on one database, built once for a run
//! ([`crate::pipeline::DbContext`] holds them): each owns the pool and the table's spec, so a
//! caller names what it asks, never where to ask it.

use sqlx::MySqlPool;

use super::added::AddedValues;
use super::compact::CompactQueries;
use super::drills::Drills;
use super::home::Homes;
use super::kept::Kept;
use super::log_heads::LogHeads;
use super::logs::LogIdentities;
use super::members::Members;
use super::object_versions::ObjectVersions;
use super::receipts::Receipts;
use super::runs::Runs;
use super::source::SourceTable;
use crate::model::table::TableSpec;

/// The owned tables and the source table of one outbox table, each behind its repository.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    pub(super) pool: MySqlPool,
    pub(super) spec: &'static TableSpec,
    pub(crate) receipts: Receipts,
    pub(crate) members: Members,
    pub(crate) runs: Runs,
    pub(crate) source: SourceTable,
    pub(crate) logs: LogIdentities,
    pub(crate) log_heads: LogHeads,
    pub(crate) homes: Homes,
    pub(crate) versions: ObjectVersions,
    pub(crate) drills: Drills,
    pub(crate) compact: CompactQueries,
    pub(crate) added: AddedValues,
    pub(crate) kept: Kept,
}

impl Tables {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> Tables {
        Tables {
            pool: pool.clone(),
            spec,
            receipts: Receipts::new(pool, spec),
            members: Members::new(pool, spec),
            runs: Runs::new(pool, spec),
            source: SourceTable::new(pool, spec),
            logs: LogIdentities::new(pool, spec),
            log_heads: LogHeads::new(pool, spec),
            homes: Homes::new(pool, spec),
            versions: ObjectVersions::new(pool, spec),
            drills: Drills::new(pool, spec),
            compact: CompactQueries::new(pool, spec),
            added: AddedValues::new(spec),
            kept: Kept::new(pool, spec),
        }
    }
}
