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
//! never taken for unchanged: a column whose `DEFAULT()` the server refuses (`NOT NULL` without
//! a default — the row holds what the `ALTER` filled in, which an `INSERT` without the column is
//! refused — or, on MySQL, a default that is an expression evaluated anew), found by the
//! database layer's probe, and a column whose name this archiver would have to quote. A default
//! the server evaluates anew on MariaDB (`CURRENT_TIMESTAMP`) differs from what the row holds,
//! and keeps it too.

use crate::model::ident;
use crate::model::profile::LiveColumn;
use crate::model::table::TableSpec;

/// What `restore` puts into a column a batch's lines lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Restores {
    /// The column's default, as the server computes `DEFAULT(column)`.
    Default,
    /// Nothing the row could be held to: why.
    Never(String),
}

/// One column a batch's lines lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnarchivedColumn {
    pub name: String,
    pub(crate) restores: Restores,
}

/// The columns of the live table that a batch's lines lack, in table order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unarchived {
    pub columns: Vec<UnarchivedColumn>,
}

impl Unarchived {
    /// The columns of `live` that `batch` (the table as the batch's lines hold it) has no key
    /// for: held to their defaults, but for one whose name would need quoting (the database
    /// layer then probes each default the server may refuse).
    pub(crate) fn of(batch: &TableSpec, live: &[LiveColumn]) -> Unarchived {
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
                restores: match ident::is_plain(&l.name) {
                    true => Restores::Default,
                    false => Restores::Never("its name would need quoting".into()),
                },
            })
            .collect();
        Unarchived { columns }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// What to append to a SELECT list of the batch's columns: per column, `1` where the row
    /// holds what restore would put back, else `0` (`BIGINT`, never NULL).
    pub(crate) fn select_items(&self) -> String {
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
    pub(crate) fn differing<'a>(&'a self, held: &[i64]) -> Vec<&'a UnarchivedColumn> {
        self.columns
            .iter()
            .zip(held)
            .filter(|(_, &ok)| ok != 1)
            .map(|(c, _)| c)
            .collect()
    }
}

/// Why each of `columns` keeps a row, for a person: `region (holds other than its default)`.
pub(crate) fn why(columns: &[&UnarchivedColumn]) -> String {
    columns
        .iter()
        .map(|c| match &c.restores {
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

    fn live(name: &str, nullable: bool) -> LiveColumn {
        LiveColumn {
            name: name.into(),
            data_type: "varchar".into(),
            column_type: "varchar(8)".into(),
            nullable,
            collation: Some("utf8mb4_unicode_ci".into()),
            max_chars: Some(8),
            generated: false,
        }
    }

    #[test]
    fn the_columns_a_batch_lacks_are_held_to_what_restore_writes() {
        let mut table: Vec<LiveColumn> = WALLET_OUTBOX
            .columns
            .iter()
            .map(|c| live(&c.name.to_uppercase(), c.nullable))
            .collect();
        assert!(Unarchived::of(&WALLET_OUTBOX, &table).is_empty());
        table.push(live("region", true));
        table.push(live("note", true));
        table.push(live("odd-name", true));
        let mut unarchived = Unarchived::of(&WALLET_OUTBOX, &table);
        let names: Vec<&str> = unarchived.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["region", "note", "odd-name"]);
        assert_eq!(unarchived.columns[0].restores, Restores::Default);
        assert!(matches!(unarchived.columns[2].restores, Restores::Never(_)));
        // What the database layer's probe found: the server refuses note's DEFAULT().
        unarchived.columns[1].restores = Restores::Never("no default".into());
        assert_eq!(
            unarchived.select_items(),
            ", CAST((CAST(region AS BINARY) <=> CAST(DEFAULT(region) AS BINARY)) AS SIGNED)\
             , CAST(0 AS SIGNED), CAST(0 AS SIGNED)"
        );
        assert!(unarchived.differing(&[1, 0, 0]).len() == 2);
        let differing = unarchived.differing(&[0, 0, 0]);
        assert_eq!(
            why(&differing[..2]),
            "region (holds other than its default), note (no default)"
        );
    }
}
