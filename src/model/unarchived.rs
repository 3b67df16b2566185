//! Columns of the live table that a batch's lines do not hold: stored columns added to the table
//! after the batch was archived (SPEC §4, §5.14, §5.16). The archive holds the whole row as it was
//! when archived; a column that came later is, for that batch's rows, something the archive never
//! saw. Purge therefore records, with the batch and in the transaction that deletes, what such a
//! column held in the rows it deletes — one value per column per batch — and deletes only the rows
//! holding exactly that value; restore writes it back. A row holding anything else stays (and is
//! reported). Nothing here depends on the column's default, which can change later.
//!
//! The value recorded for a batch is the one recorded before (an earlier chunk or run of the same
//! batch), or else the one most of the chunk's otherwise exact rows hold (the first such row's on
//! a tie). A column whose values cannot be recorded exactly (a name that would need quoting, a type
//! without an exact encoding) keeps every row that lacks it. A generated column is derived, never
//! lacking.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::profile::LiveColumn;
use crate::model::table::{Column, TableSpec};

/// One column a batch's lines lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnarchivedColumn {
    pub name: String,
    /// How its value is read and recorded (by its SQL type); why it cannot be, otherwise.
    pub(crate) column: Result<Column, String>,
}

/// The columns of the live table that a batch's lines lack, in table order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unarchived {
    pub columns: Vec<UnarchivedColumn>,
}

impl Unarchived {
    /// The stored columns of `live` that `batch` (the table as the batch's lines hold it) has no
    /// key for, each read by its SQL type.
    pub(crate) fn of(batch: &TableSpec, live: &[LiveColumn]) -> Unarchived {
        let columns = live
            .iter()
            .filter(|l| {
                !l.generated
                    && !batch
                        .columns
                        .iter()
                        .any(|c| c.name.eq_ignore_ascii_case(&l.name))
            })
            .map(|l| UnarchivedColumn {
                name: l.name.clone(),
                column: l.by_type(batch.name),
            })
            .collect();
        Unarchived { columns }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// How column `name`'s values are encoded (a kind's name; empty for one not recordable).
    pub(crate) fn encoding_of(&self, name: &str) -> &'static str {
        self.columns
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.column.as_ref().ok())
            .map_or("", |c| c.kind.encoding())
    }

    /// What to append to a SELECT list of the batch's columns: each column read as its kind
    /// (`NULL` where it cannot be recorded).
    pub(crate) fn select_items(&self) -> String {
        self.columns
            .iter()
            .map(|c| match &c.column {
                Ok(column) => format!(", {}", column.select()),
                Err(_) => ", NULL".to_string(),
            })
            .collect()
    }
}

/// What the deleted rows of one batch held in columns its lines lack (column name → the value as
/// JSON text, encoded as a line would encode it).
pub(crate) type Recorded = BTreeMap<String, String>;

/// What one chunk's rows come to, held to the values recorded for their batch.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Decided {
    /// Per row given, whether it holds exactly what is recorded (or recorded now) in every column.
    pub exact: Vec<bool>,
    /// Values to record with the batch now (columns nothing was recorded for yet).
    pub record: Vec<(String, String)>,
    /// Why rows were kept, for a person (`note (…)`).
    pub kept_for: BTreeSet<String>,
}

/// Holds each row's values in the lacking columns (`rows[i][k]`: column `k`'s value as JSON text,
/// `None` where it cannot be recorded) to what is `recorded` for the batch. Where nothing is
/// recorded yet for some columns, the values most of the rows that hold what is recorded hold in
/// them together (the first such row's on a tie) are recorded now: every value recorded is one a
/// deleted row held.
pub(crate) fn decide(
    unarchived: &Unarchived,
    recorded: &Recorded,
    rows: &[Vec<Option<String>>],
) -> Decided {
    let mut decided = Decided {
        exact: vec![true; rows.len()],
        ..Decided::default()
    };
    let why_differs = |name: &str| {
        format!(
            "{name} (holds other than the batch's deleted rows held, which restore writes back)"
        )
    };
    let mut open = Vec::new();
    for (k, column) in unarchived.columns.iter().enumerate() {
        match (&column.column, recorded.get(&column.name)) {
            (Err(why), _) => {
                if !rows.is_empty() {
                    decided.kept_for.insert(format!("{} ({why})", column.name));
                }
                decided.exact.iter_mut().for_each(|e| *e = false);
            }
            (Ok(_), Some(value)) => {
                for (row, exact) in rows.iter().zip(decided.exact.iter_mut()) {
                    if row[k].as_deref() != Some(value.as_str()) {
                        *exact = false;
                        decided.kept_for.insert(why_differs(&column.name));
                    }
                }
            }
            (Ok(_), None) => open.push(k),
        }
    }
    if open.is_empty() {
        return decided;
    }
    let held = |i: usize| open.iter().map(|&k| rows[i][k].clone()).collect::<Vec<_>>();
    let candidates = (0..rows.len()).filter(|&i| decided.exact[i]).map(held);
    let Some(chosen) = most_held(candidates) else {
        return decided;
    };
    for (i, exact) in decided.exact.iter_mut().enumerate() {
        for (&k, value) in open.iter().zip(&chosen) {
            if rows[i][k] != *value {
                *exact = false;
                decided
                    .kept_for
                    .insert(why_differs(&unarchived.columns[k].name));
            }
        }
    }
    decided.record = open
        .iter()
        .zip(chosen)
        .map(|(&k, value)| {
            let value = value.expect("a recordable column's value");
            (unarchived.columns[k].name.clone(), value)
        })
        .collect();
    decided
}

/// The table as a batch's rows are restored, and the values to append to each: its lines'
/// columns (`batch`), then — in table order (`live`) — every stored column the lines lack whose
/// value purge recorded with the batch (`added`: name, encoding, JSON text). A column recorded but
/// gone from the table is left out; one whose type no longer reads the recorded value the same
/// way refuses the batch, naming it (nothing is written half right).
pub(crate) fn restoring(
    batch: &'static TableSpec,
    live: &[LiveColumn],
    added: &[(String, String, String)],
) -> Result<(&'static TableSpec, Vec<crate::model::codec::Value>), String> {
    let mut columns = Vec::new();
    let mut values = Vec::new();
    for l in Unarchived::of(batch, live).columns {
        let Some((_, encoding, json)) = added.iter().find(|(name, _, _)| *name == l.name) else {
            continue;
        };
        let column = l.column?;
        if column.kind.encoding() != encoding {
            return Err(format!(
                "column {} held {json} when the batch's rows were deleted, recorded as {encoding}; the column is {} now, which would not write it back the same: change the column back to restore the batch",
                column.name,
                column.kind.encoding()
            ));
        }
        values.push(crate::model::codec::decode_value(&column, json)?);
        columns.push(column);
    }
    Ok((crate::model::table::with_added(batch, columns), values))
}

/// The value most of these hold; on a tie, the first held.
fn most_held<T: PartialEq>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: Vec<(T, usize)> = Vec::new();
    for v in values {
        match counts.iter_mut().find(|(c, _)| *c == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    let max = counts.iter().map(|(_, n)| *n).max()?;
    counts.into_iter().find(|(_, n)| *n == max).map(|(v, _)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::table::WALLET_OUTBOX;

    fn live(name: &str, data_type: &str, generated: bool) -> LiveColumn {
        LiveColumn {
            name: name.into(),
            data_type: data_type.into(),
            column_type: data_type.into(),
            nullable: true,
            collation: None,
            max_chars: Some(8),
            generated,
        }
    }

    #[test]
    fn the_columns_a_batch_lacks_are_the_stored_ones_it_has_no_key_for() {
        let mut table: Vec<LiveColumn> = WALLET_OUTBOX
            .columns
            .iter()
            .map(|c| live(&c.name.to_uppercase(), "bigint", false))
            .collect();
        assert!(Unarchived::of(&WALLET_OUTBOX, &table).is_empty());
        table.push(live("region", "varchar", false));
        table.push(live("bucket", "bigint", true));
        table.push(live("rate", "time", false));
        table.push(live("odd-name", "varchar", false));
        let unarchived = Unarchived::of(&WALLET_OUTBOX, &table);
        let names: Vec<&str> = unarchived.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["region", "rate", "odd-name"], "generated: derived");
        assert!(unarchived.columns[0].column.is_ok());
        assert!(unarchived.columns[1]
            .column
            .as_ref()
            .unwrap_err()
            .contains("time"));
        assert!(unarchived.columns[2]
            .column
            .as_ref()
            .unwrap_err()
            .contains("odd-name"));
        assert_eq!(unarchived.select_items(), ", region, NULL, NULL");
    }

    fn region() -> Unarchived {
        let table = [
            live("region", "varchar", false),
            live("note", "text", false),
        ];
        Unarchived::of(&WALLET_OUTBOX, &table)
    }

    fn rows(values: &[(&str, &str)]) -> Vec<Vec<Option<String>>> {
        values
            .iter()
            .map(|(a, b)| vec![Some(a.to_string()), Some(b.to_string())])
            .collect()
    }

    #[test]
    fn a_batch_records_what_most_of_its_rows_hold_and_keeps_the_others() {
        let unarchived = region();
        let chunk = rows(&[
            ("\"eu\"", "null"),
            ("\"us\"", "null"),
            ("\"eu\"", "\"precious\""),
            ("\"eu\"", "null"),
        ]);
        let decided = decide(&unarchived, &Recorded::new(), &chunk);
        assert_eq!(
            decided.record,
            [
                ("region".to_string(), "\"eu\"".to_string()),
                ("note".to_string(), "null".to_string())
            ]
        );
        assert_eq!(decided.exact, [true, false, false, true]);
        assert_eq!(decided.kept_for.len(), 2);
        // A later chunk is held to what was recorded, even where its own rows mostly differ.
        let recorded: Recorded = decided.record.into_iter().collect();
        let later = rows(&[("\"us\"", "null"), ("\"us\"", "null"), ("\"eu\"", "null")]);
        let decided = decide(&unarchived, &recorded, &later);
        assert!(decided.record.is_empty());
        assert_eq!(decided.exact, [false, false, true]);
        // A tie goes to the first row's value.
        let tie = rows(&[("\"us\"", "null"), ("\"eu\"", "null")]);
        assert_eq!(
            decide(&unarchived, &Recorded::new(), &tie).record[0].1,
            "\"us\""
        );
        assert_eq!(
            decide(&unarchived, &Recorded::new(), &[]),
            Decided::default()
        );
        // The values are chosen together: each one recorded is one a deleted row held.
        let apart = rows(&[
            ("\"a\"", "1"),
            ("\"b\"", "2"),
            ("\"a\"", "3"),
            ("\"b\"", "2"),
        ]);
        let decided = decide(&unarchived, &Recorded::new(), &apart);
        assert_eq!(decided.exact, [false, true, false, true]);
        assert_eq!(decided.record[0].1, "\"b\"");
    }

    #[test]
    fn a_batch_restores_with_what_its_deleted_rows_held() {
        let table: Vec<LiveColumn> = WALLET_OUTBOX
            .columns
            .iter()
            .map(|c| live(c.name, "bigint", false))
            .chain([
                live("bucket", "bigint", true),
                live("region", "varchar", false),
                live("note", "text", false),
            ])
            .collect();
        let added = |name: &str, encoding: &str, json: &str| {
            (name.to_string(), encoding.to_string(), json.to_string())
        };
        let recorded = [
            added("note", "text", "null"),
            added("region", "text", "\"eu\""),
            added("dropped", "text", "\"x\""),
        ];
        let (spec, values) = restoring(&WALLET_OUTBOX, &table, &recorded).unwrap();
        let names: Vec<&str> = spec.columns[18..].iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["region", "note"],
            "table order; gone and generated left out"
        );
        use crate::model::codec::Value;
        assert_eq!(values, [Value::Text("eu".into()), Value::Null]);
        assert!(std::ptr::eq(
            restoring(&WALLET_OUTBOX, &table, &recorded).unwrap().0,
            spec
        ));
        let (same, none) = restoring(&WALLET_OUTBOX, &table, &[]).unwrap();
        assert!(std::ptr::eq(same, &WALLET_OUTBOX) && none.is_empty());
        let e = restoring(&WALLET_OUTBOX, &table, &[added("region", "int", "7")]).unwrap_err();
        assert!(e.contains("column region held 7"), "{e}");
    }

    #[test]
    fn a_column_that_cannot_be_recorded_keeps_every_row() {
        let table = [live("rate", "time", false)];
        let unarchived = Unarchived::of(&WALLET_OUTBOX, &table);
        let decided = decide(&unarchived, &Recorded::new(), &[vec![None], vec![None]]);
        assert_eq!(decided.exact, [false, false]);
        assert!(decided.record.is_empty());
        let why: Vec<&String> = decided.kept_for.iter().collect();
        assert!(why[0].starts_with("rate (column rate is time"), "{why:?}");
    }
}
