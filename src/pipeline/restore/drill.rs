//! A drill's comparison: what a scratch table a batch was restored into holds, against what
//! its receipt vouches for.

use std::collections::BTreeSet;

use crate::db::restore::{first_difference, TableFacts};
use crate::model::batch::Member;
use crate::model::codec::Row;
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;

/// What a drill's scratch table holds that its batch's receipt does not vouch for: another
/// row count, other totals, other `(event_id, updated_at_ms)` pairs than the members (or, for a
/// compacted receipt, than its digest), rows other than the archived lines.
pub(super) fn problems(
    spec: &'static TableSpec,
    receipt: &Receipt,
    proven: &[Member],
    rows: &[Row],
    facts: &TableFacts,
    restored: &[Row],
) -> Vec<String> {
    let mut problems = Vec::new();
    if facts.rows != receipt.content.row_count {
        problems.push(format!(
            "row count {} != receipt {}",
            facts.rows, receipt.content.row_count
        ));
    }
    let totals: Vec<crate::model::format::TotalValue> = receipt
        .content
        .totals
        .iter()
        .map(|(_, v)| v.clone())
        .collect();
    if facts.totals != totals {
        problems.push(format!("totals {:?} != receipt {totals:?}", facts.totals));
    }
    match &receipt.life.compaction {
        // Compacted: the restored rows' pairs against the receipt's digest of them.
        Some(compaction) => {
            let restored = crate::model::format::members_digest(
                facts
                    .members
                    .iter()
                    .map(|m| (m.event_id.as_str(), m.updated_at_ms)),
            );
            if restored != compaction.digest {
                problems.push(format!(
                        "restored rows' (event_id, updated_at_ms) hash to {} ({} pairs), the receipt's digest is {} ({} pairs)",
                        restored.sha256, restored.rows, compaction.digest.sha256, compaction.digest.rows
                    ));
            }
        }
        // Compared as sets of (event_id, updated_at_ms): the table lists them in its
        // collation's order (`x\t` before `x` under a PAD SPACE one), the member list by bytes.
        None if key_set(&facts.members) != key_set(proven) => {
            problems.push("restored rows differ from the member list".to_string());
        }
        None => {}
    }
    if let Some(difference) = first_difference(spec, rows, restored) {
        problems.push(format!(
            "restored rows differ from the archive: {difference}"
        ));
    }
    problems
}

/// The `(event_id, updated_at_ms)` of members, as a set.
fn key_set(members: &[Member]) -> BTreeSet<(&str, i64)> {
    members
        .iter()
        .map(|m| (m.event_id.as_str(), m.updated_at_ms))
        .collect()
}
