//! Columns of the live table that a batch's lines do not hold: stored columns added to the table
//! after the batch was archived (SPEC §4, §5.14, §5.16). The archive holds the whole row as it was
//! when archived; a column that came later is, for that batch's rows, something the archive never
//! saw. Purge therefore never deletes such a row on that batch's word: it keeps it and marks it to
//! be archived again as it is now ([`crate::db::kept`]), so that the store holds every value a
//! deleted row held — nothing depends on the column's default, which can change, or on a table of
//! the database. Builds of layout 1 recorded instead one value per column per batch in
//! `<prefix>_added_values`; [`restoring`] still writes those back for the rows they deleted. A
//! generated column is derived, never lacking.

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
        assert!(Unarchived::of(&WALLET_OUTBOX, &table).columns.is_empty());
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
}
