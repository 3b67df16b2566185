//! Columns of the live table that a batch's lines do not hold (SPEC §5.14): a column added to the
//! table after the batch was written, or — on a built-in table, whose format is fixed — a column
//! the format has no key for. Such a column is no change to an archived row exactly when it holds
//! what `restore` would put back into it: restore leaves it out of its `INSERT`, so the server
//! writes the column's default. Purge deletes a row only then; archive of a built-in table
//! archives a row only then (anything else would be lost by a purge).
//!
//! What restore would put back is the server's own `DEFAULT(column)`, compared byte for byte
//! (`CAST(… AS BINARY)`: a case-insensitive collation would take `'EU'` for the default `'eu'`).
//! Where restore could not write the column at all, or would write something new, the row is
//! never taken for unchanged: a `NOT NULL` column without a default (the row holds the value the
//! `ALTER` filled in, which an `INSERT` without the column is refused), a default that is an
//! expression MySQL evaluates anew (`DEFAULT_GENERATED`: `CURRENT_TIMESTAMP`, `(UUID())`), and a
//! column whose name this archiver would have to quote.

use crate::model::ident;
use crate::model::profile::LiveColumn;
use crate::model::table::TableSpec;

/// What `restore` puts into a column a batch's lines lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restores {
    /// The column's default, as the server computes `DEFAULT(column)`.
    Default,
    /// Nothing the row could be held to: why.
    Never(&'static str),
}

/// One column a batch's lines lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnarchivedColumn {
    pub name: String,
    pub restores: Restores,
}

/// The columns of the live table that a batch's lines lack, in table order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unarchived {
    pub columns: Vec<UnarchivedColumn>,
}

impl Unarchived {
    /// The columns of `live` that `batch` (the table as the batch's lines hold it) has no key
    /// for.
    pub fn of(batch: &TableSpec, live: &[LiveColumn]) -> Unarchived {
        let columns = live
            .iter()
            .filter(|l| {
                !batch
                    .columns
                    .iter()
                    .any(|c| c.name.eq_ignore_ascii_case(&l.name))
            })
            .map(|l| UnarchivedColumn {
                name: l.name.clone(),
                restores: restores(l),
            })
            .collect();
        Unarchived { columns }
    }

    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// What to append to a SELECT list of the batch's columns: per column, `1` where the row
    /// holds what restore would put back, else `0` (`BIGINT`, never NULL).
    pub fn select_items(&self) -> String {
        self.columns
            .iter()
            .map(|c| match c.restores {
                Restores::Default => format!(
                    ", CAST((CAST({n} AS BINARY) <=> CAST(DEFAULT({n}) AS BINARY)) AS SIGNED)",
                    n = c.name
                ),
                Restores::Never(_) => ", CAST(0 AS SIGNED)".to_string(),
            })
            .collect()
    }

    /// The columns of a row that hold something restore would not put back, from the values
    /// [`Unarchived::select_items`] selected (in their order).
    pub fn differing<'a>(&'a self, held: &[i64]) -> Vec<&'a UnarchivedColumn> {
        self.columns
            .iter()
            .zip(held)
            .filter(|(_, &ok)| ok != 1)
            .map(|(c, _)| c)
            .collect()
    }
}

/// What restore puts into `column` when a line lacks it.
fn restores(column: &LiveColumn) -> Restores {
    if !ident::is_plain(&column.name) {
        return Restores::Never("its name would need quoting");
    }
    if column.default_expression {
        return Restores::Never("its default is an expression a restore would evaluate anew");
    }
    if column.default_value.is_none() && !column.nullable {
        return Restores::Never(
            "it is NOT NULL without a default: a restore could not write it back",
        );
    }
    Restores::Default
}

/// Why each of `columns` keeps a row, for a person: `region (holds other than its default)`.
pub fn why(columns: &[&UnarchivedColumn]) -> String {
    columns
        .iter()
        .map(|c| match c.restores {
            Restores::Default => format!("{} (holds other than its default)", c.name),
            Restores::Never(why) => format!("{} ({why})", c.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::table::WALLET_OUTBOX;

    fn live(name: &str, nullable: bool, default: Option<&str>, expression: bool) -> LiveColumn {
        LiveColumn {
            name: name.into(),
            data_type: "varchar".into(),
            column_type: "varchar(8)".into(),
            nullable,
            collation: Some("utf8mb4_unicode_ci".into()),
            max_chars: Some(8),
            generated: false,
            default_value: default.map(str::to_string),
            default_expression: expression,
        }
    }

    #[test]
    fn the_columns_a_batch_lacks_are_held_to_what_restore_writes() {
        let mut table: Vec<LiveColumn> = WALLET_OUTBOX
            .columns
            .iter()
            .map(|c| live(&c.name.to_uppercase(), c.nullable, None, false))
            .collect();
        assert!(Unarchived::of(&WALLET_OUTBOX, &table).is_empty());
        table.push(live("region", true, Some("eu"), false));
        table.push(live("note", true, None, false));
        table.push(live("flag", false, None, false));
        table.push(live("stamp", false, Some("current_timestamp()"), true));
        table.push(live("odd-name", true, None, false));
        let unarchived = Unarchived::of(&WALLET_OUTBOX, &table);
        let restores: Vec<(&str, &Restores)> = unarchived
            .columns
            .iter()
            .map(|c| (c.name.as_str(), &c.restores))
            .collect();
        assert!(matches!(
            restores[..],
            [
                ("region", Restores::Default),
                ("note", Restores::Default),
                ("flag", Restores::Never(_)),
                ("stamp", Restores::Never(_)),
                ("odd-name", Restores::Never(_)),
            ]
        ));
        assert_eq!(
            unarchived.select_items(),
            ", CAST((CAST(region AS BINARY) <=> CAST(DEFAULT(region) AS BINARY)) AS SIGNED)\
             , CAST((CAST(note AS BINARY) <=> CAST(DEFAULT(note) AS BINARY)) AS SIGNED)\
             , CAST(0 AS SIGNED), CAST(0 AS SIGNED), CAST(0 AS SIGNED)"
        );
        let differing = unarchived.differing(&[1, 0, 0, 0, 0]);
        assert_eq!(
            why(&differing[..2]),
            "note (holds other than its default), flag (it is NOT NULL without a default: a restore could not write it back)"
        );
        assert_eq!(differing.len(), 4);
        assert!(unarchived
            .differing(&[1, 1, 0, 0, 0])
            .iter()
            .all(|c| c.restores != Restores::Default));
    }
}
