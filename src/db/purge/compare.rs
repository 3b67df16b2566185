//! The rows of a purge chunk held to their members: read as they are now (locked inside the
//! delete transaction), encoded as the archive encoded their batch, and each line's fingerprint
//! compared with its member's. A row is deleted only when the batch holds every value it holds:
//! its line is the member's and the table has no stored column the batch's lines lack. A row
//! whose version is its member's but which is not what the batch holds is kept and marked, to be
//! archived again as it is now ([`crate::db::kept`]).

use std::collections::HashMap;

use sqlx::MySql;

use super::{ChunkOf, Over, PurgeQueries};
use crate::db::kept::KeptRow;
use crate::db::preflight::Flavour;
use crate::db::{Context, DbError};
use crate::model::batch::Member;
use crate::model::unarchived::Unarchived;

/// The rows of a chunk as they are now, held to their members: which are exactly what was
/// archived (their line's fingerprint is the member's, and the table has no column the lines
/// lack), which are there but changed, and how many another transaction held locked (not
/// looked at, left for a later run).
pub(super) struct Compared {
    pub(super) exact: Vec<String>,
    pub(super) changed: Vec<String>,
    pub(super) busy: u64,
    /// Why rows were kept that encode to their archived lines: columns the lines lack.
    pub(super) kept_for_columns: std::collections::BTreeSet<String>,
    /// The kept rows whose version is still their member's: archived again by the next
    /// archive run, as they are now.
    pub(super) again: Vec<KeptRow>,
}

impl PurgeQueries {
    /// Reads the rows of these members as they are now — `FOR UPDATE` inside a delete
    /// transaction, so that they cannot change before they are deleted — encodes each as the
    /// archive encoded the batch (`of.batch`: the table as its lines hold it) and compares its
    /// line's fingerprint with the member's. A row is exact only if every column is what was
    /// archived — status, `updated_at_ms`, payload, all of it — and the table has no stored
    /// column the lines lack (`unarchived`: a column added since, whose value in the row no
    /// object holds, whatever it is — a default can change, a backfill fills it per row).
    /// Members without a fingerprint never reach here (purge fills them from the data object).
    pub(super) async fn compare<'e, E>(
        &self,
        executor: E,
        flavour: Flavour,
        of: ChunkOf<'_>,
        for_update: bool,
        unarchived: &Unarchived,
    ) -> Result<Compared, DbError>
    where
        E: sqlx::Executor<'e, Database = MySql>,
    {
        let (app, batch) = (of.app, of.batch);
        let over = if for_update { Over::Lock } else { Over::Read };
        let ids = of.members.iter().map(|m| m.event_id.as_str());
        let list = batch.select_list();
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
            again: Vec::new(),
        };
        let lacking: Vec<&str> = unarchived.columns.iter().map(|c| c.name.as_str()).collect();
        let added = format!("added: {}", lacking.join(", "));
        let encoded = crate::db::source::encode_rows(batch, &batch.layout(), app, &rows)?;
        for row in encoded {
            let now = row.cursor();
            let Some(member) = want.get(now.event_id.as_str()) else {
                continue;
            };
            if member.updated_at_ms != now.updated_at_ms {
                // Another version: archived as it comes (after the cursor, or a straggler).
                compared.changed.push(now.event_id);
                continue;
            }
            let same = member.fingerprint == Some(crate::model::digest::row_fingerprint(&row.line));
            let reason = match (same, lacking.is_empty()) {
                (true, true) => {
                    compared.exact.push(now.event_id);
                    continue;
                }
                (false, _) => "changed".to_string(),
                (true, false) => {
                    for name in &lacking {
                        compared.kept_for_columns.insert(format!(
                            "{name} (added after the batch was archived: the row is archived again as it is now, then purged)"
                        ));
                    }
                    added.clone()
                }
            };
            compared.again.push(KeptRow {
                event_id: now.event_id.clone(),
                updated_at_ms: now.updated_at_ms,
                reason,
            });
            compared.changed.push(now.event_id);
        }
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
        Ok(self
            .compare(pool, flavour, of, false, &unarchived)
            .await?
            .exact
            .len() as u64)
    }
}
