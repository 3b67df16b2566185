//! The rows of a purge chunk held to their members: read as they are now (locked inside the
//! delete transaction), encoded as the archive encoded their batch, each line's fingerprint
//! compared with its member's, and the columns the batch's lines lack held to what its deleted
//! rows held ([`crate::model::unarchived`]).

use std::collections::HashMap;

use sqlx::MySql;

use super::{ChunkOf, Over, PurgeQueries};
use crate::db::preflight::Flavour;
use crate::db::{Context, DbError};
use crate::model::batch::Member;
use crate::model::table::TableSpec;
use crate::model::unarchived::{Recorded, Unarchived};

/// The rows of a chunk as they are now, held to their members: which are exactly what was
/// archived (their line's fingerprint is the member's, and the columns the lines lack hold what
/// the batch's deleted rows held), which are there but changed, and how many another transaction
/// held locked (not looked at, left for a later run).
pub(super) struct Compared {
    pub(super) exact: Vec<String>,
    pub(super) changed: Vec<String>,
    pub(super) busy: u64,
    /// Why rows were kept that encode to their archived lines: columns the lines lack.
    pub(super) kept_for_columns: std::collections::BTreeSet<String>,
    /// What the batch's deleted rows held in columns its lines lack, to record with the delete.
    pub(super) record: Vec<(String, String)>,
}

impl PurgeQueries {
    /// Reads the rows of these members as they are now — `FOR UPDATE` inside a delete
    /// transaction, so that they cannot change before they are deleted — encodes each as the
    /// archive encoded the batch (`of.batch`: the table as its lines hold it) and compares its
    /// line's fingerprint with the member's. A row is exact only if every column is what was
    /// archived — status, `updated_at_ms`, payload, all of it — and every column the lines lack
    /// (`unarchived`) holds what the batch's deleted rows held (`recorded`, or chosen now:
    /// [`crate::model::unarchived::decide`]). Members without a fingerprint never reach here
    /// (purge fills them from the data object).
    pub(super) async fn compare<'e, E>(
        &self,
        executor: E,
        flavour: Flavour,
        of: ChunkOf<'_>,
        for_update: bool,
        unarchived: &Unarchived,
        recorded: &Recorded,
    ) -> Result<Compared, DbError>
    where
        E: sqlx::Executor<'e, Database = MySql>,
    {
        let (app, batch) = (of.app, of.batch);
        let over = if for_update { Over::Lock } else { Over::Read };
        let ids = of.members.iter().map(|m| m.event_id.as_str());
        let list = format!("{}{}", batch.select_list(), unarchived.select_items());
        let context = || format!("reading the rows of app {app} to compare before a delete");
        let rows = self
            .selecting_over_rows(&list, over, flavour, app, ids, None)
            .build()
            .fetch_all(executor)
            .await
            .context(context)?;
        let want: HashMap<&str, &Member> = of
            .members
            .iter()
            .map(|m| (m.event_id.as_str(), m))
            .collect();
        let mut compared = Compared {
            exact: Vec::new(),
            changed: Vec::new(),
            busy: 0,
            kept_for_columns: Default::default(),
            record: Vec::new(),
        };
        let encoded = crate::db::source::encode_rows(batch, &batch.layout(), app, &rows)?;
        let mut candidates = Vec::new();
        let mut held = Vec::new();
        for (row, raw) in encoded.into_iter().zip(&rows) {
            let now = row.cursor();
            let same = want.get(now.event_id.as_str()).is_some_and(|m| {
                m.updated_at_ms == now.updated_at_ms
                    && m.fingerprint == Some(crate::model::digest::row_fingerprint(&row.line))
            });
            match same {
                true => {
                    held.push(lacking_values(raw, batch, unarchived).context(context)?);
                    candidates.push(now.event_id);
                }
                false => compared.changed.push(now.event_id),
            }
        }
        let decided = crate::model::unarchived::decide(unarchived, recorded, &held);
        for (id, exact) in candidates.into_iter().zip(decided.exact) {
            match exact {
                true => compared.exact.push(id),
                false => compared.changed.push(id),
            }
        }
        if !compared.exact.is_empty() {
            compared.record = decided.record;
        }
        compared.kept_for_columns = decided.kept_for;
        compared.changed.sort();
        Ok(compared)
    }

    /// How many of these members (of a batch of `of.batch`) would be deleted now (`--dry-run`):
    /// rows exactly as archived.
    pub(crate) async fn count(&self, of: ChunkOf<'_>) -> Result<u64, DbError> {
        let pool = &self.pool;
        let flavour = self.flavour().await?;
        let live = self.live().await?;
        let unarchived = Unarchived::of(of.batch, &live.columns);
        let recorded = match unarchived.is_empty() {
            true => Recorded::new(),
            false => self.recorded(pool, of.app, of.batch_id).await?,
        };
        Ok(self
            .compare(pool, flavour, of, false, &unarchived, &recorded)
            .await?
            .exact
            .len() as u64)
    }
}

/// A compared row's values in the columns its batch's lines lack, each as JSON text as a line
/// would hold it (`None`: a column whose values cannot be recorded); they follow the batch's
/// columns in the row.
fn lacking_values(
    raw: &sqlx::mysql::MySqlRow,
    batch: &TableSpec,
    unarchived: &Unarchived,
) -> Result<Vec<Option<String>>, sqlx::Error> {
    let first = batch.columns.len();
    unarchived
        .columns
        .iter()
        .enumerate()
        .map(|(k, c)| match &c.column {
            Ok(column) => {
                let value = crate::db::source::value_at(raw, first + k, column)?;
                Ok(Some(crate::model::codec::encode_value(column, value)))
            }
            Err(_) => Ok(None),
        })
        .collect()
}
