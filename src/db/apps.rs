//! An app's one spelling (SPEC §5.4), taken from the data, never from what was typed: under a
//! case-insensitive collation `KA` and `ka` are one app, and every lock name, receipt and query
//! of it must use one spelling, or two processes could work one app under two locks.
//!
//! The rule: the spelling the archiver's receipts record it under, if it has any; else the
//! spelling of its first row in the source table's primary-key order (the row an index dive
//! finds first). Receipts recorded under several spellings (an older archiver took the spelling
//! typed, and each batch's objects carry the spelling it was archived under, so they cannot be
//! renamed) are one app all the same: the first spelling by bytes is its lock's, and a warning
//! says so. A typed code that matches no app is an error naming the closest ones.

use sqlx::AssertSqlSafe;

use super::tables::Tables;
use super::{Context, DbError};

/// The most spellings of one app looked for (an app has one; an older build may have left a
/// few).
const MAX_SPELLINGS: usize = 64;

impl Tables {
    /// The spelling of the app `typed` names, under the tables' collations.
    pub(crate) async fn canonical_app(&self, typed: &str) -> Result<Option<String>, DbError> {
        let (pool, spec) = (&self.pool, self.spec);
        let receipts = spec.receipts_table();
        // The spellings in byte order, one index dive each on the spellings key (migration 13):
        // never a read of every receipt of the app.
        let sql = format!(
            "SELECT app_code_bytes FROM {receipts} WHERE app_code = ? AND app_code_bytes > ? \
         ORDER BY app_code_bytes LIMIT 1"
        );
        let mut recorded: Vec<Vec<u8>> = Vec::new();
        while recorded.len() < MAX_SPELLINGS {
            let after = recorded.last().cloned().unwrap_or_default();
            let next: Option<Vec<u8>> = sqlx::query_scalar(AssertSqlSafe(sql.clone()))
                .bind(typed)
                .bind(after)
                .fetch_optional(pool)
                .await
                .context(|| format!("looking up app {typed:?} in {receipts}"))?;
            match next {
                Some(spelling) => recorded.push(spelling),
                None => break,
            }
        }
        let recorded: Vec<String> = recorded
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect();
        match recorded.as_slice() {
            [] => {}
            [one] => return Ok(Some(one.clone())),
            several => {
                tracing::warn!(
                    app = several[0],
                    spellings = ?several,
                    "the app's receipts are recorded under several spellings (an older archiver took \
                     the spelling typed); they are one app under the source's collation, worked \
                     under the lock of the first"
                );
                return Ok(Some(several[0].clone()));
            }
        }
        let sql = format!(
        "SELECT CAST({app} AS BINARY) FROM {table} WHERE {app} = ? ORDER BY {app}, {id} LIMIT 1",
        app = spec.app_code,
        table = spec.name,
        id = spec.event_id,
    );
        let first: Option<Vec<u8>> = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(typed)
            .fetch_optional(pool)
            .await
            .context(|| format!("looking up app {typed:?} in {}", spec.name))?;
        Ok(first.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }
}

/// The known apps closest to `typed` (by edit distance, case aside), at most three.
pub(crate) fn closest<'a>(typed: &str, known: &'a [String]) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = known
        .iter()
        .map(|k| {
            (
                crate::model::appcode::distance(
                    &typed.to_ascii_lowercase(),
                    &k.to_ascii_lowercase(),
                ),
                k.as_str(),
            )
        })
        .filter(|(d, k)| *d <= 3.max(k.len() / 3))
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, k)| k).collect()
}
