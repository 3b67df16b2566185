//! A batch's own columns (SPEC §4, "Each batch describes itself"): each column its lines hold, in
//! line order — its name in the table, its key in the lines, its SQL type as the table had it when
//! the batch was archived, its encoding and whether it may be `null` — written into the batch's
//! manifest after the fixed keys. A reader (DuckDB, Athena) knows each field's type from it, and
//! verify, purge and restore read a batch by its own columns whatever the table became: a column
//! dropped since, or one whose type changed, is still read as it was archived. A manifest written
//! before the list was added has none; such a batch is read by today's table, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::model::table::{Column, Kind, TableSpec};

/// One column of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchColumn {
    pub name: String,
    pub key: String,
    /// The SQL type as `information_schema.columns.COLUMN_TYPE` says it, lowercase, an integer's
    /// display width left out (MariaDB says `bigint(20)`, MySQL 8 `bigint`).
    #[serde(rename = "type")]
    pub sql_type: String,
    /// How its values are written (`text`, `int`, `json`, `base64`, `decimal`, `datetime`,
    /// `timestamp`, `float`, `double`).
    pub encoding: String,
    pub nullable: bool,
}

/// A batch's columns, in line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchColumns {
    pub columns: Vec<BatchColumn>,
    /// SHA-256 of [`BatchColumns::to_json`]: how the receipts table names the set.
    pub sha256: String,
}

impl BatchColumns {
    pub fn new(columns: Vec<BatchColumn>) -> BatchColumns {
        let json = serde_json::to_string(&columns).expect("columns serialise");
        BatchColumns {
            sha256: crate::model::digest::sha256_hex(json.as_bytes()),
            columns,
        }
    }

    /// The columns of `spec` (the table as the run archives it), each with its SQL type as
    /// `sql_type` gives it by name (the table's description: `LiveColumn::batch_sql_type`).
    pub(crate) fn of(spec: &TableSpec, sql_type: impl Fn(&str) -> String) -> BatchColumns {
        let columns = spec
            .columns
            .iter()
            .map(|c| BatchColumn {
                name: c.name.to_string(),
                key: c.json_key.to_string(),
                sql_type: sql_type(c.name),
                encoding: c.kind.encoding().to_string(),
                nullable: c.nullable,
            })
            .collect();
        BatchColumns::new(columns)
    }

    /// The compact JSON array the manifest holds (keys in this order: name, key, type,
    /// encoding, nullable).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.columns).expect("columns serialise")
    }

    /// The set read back from its JSON (a manifest's, the receipts table's).
    pub fn parse(json: &str) -> Result<BatchColumns, String> {
        serde_json::from_str::<Vec<BatchColumn>>(json)
            .map(BatchColumns::new)
            .map_err(|e| format!("a batch's column list: {e}"))
    }

    /// The table as this batch holds it: its columns read by their own encodings, the roles and
    /// totals `table`'s (by name, each of which the batch must have). Built once per set and
    /// process, and kept.
    pub(crate) fn spec(&self, table: &'static TableSpec) -> Result<&'static TableSpec, String> {
        type Cache = Mutex<HashMap<(usize, String), &'static TableSpec>>;
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let key = (table as *const TableSpec as usize, self.sha256.clone());
        let mut cache = CACHE
            .get_or_init(Default::default)
            .lock()
            .expect("not poisoned");
        if let Some(found) = cache.get(&key) {
            return Ok(found);
        }
        let mut columns: Vec<Column> = Vec::with_capacity(self.columns.len());
        for c in &self.columns {
            let kind = Kind::from_encoding(&c.encoding).ok_or_else(|| {
                format!(
                    "column {} is encoded as {:?}, which this build does not read",
                    c.name, c.encoding
                )
            })?;
            // A role column keeps its name as the table spells it (`app_code`, not `APP_CODE`).
            let known = table
                .columns
                .iter()
                .find(|t| t.name.eq_ignore_ascii_case(&c.name) && t.json_key == c.key);
            columns.push(Column {
                name: known.map_or_else(|| leak(&c.name), |t| t.name),
                json_key: known.map_or_else(|| leak(&c.key), |t| t.json_key),
                kind,
                nullable: c.nullable,
                unsigned: kind == Kind::Int && c.sql_type.contains("unsigned"),
            });
        }
        let needed = [
            table.app_code,
            table.event_id,
            table.updated_at_ms,
            table.created_at_ms,
            table.status,
        ];
        for name in needed
            .into_iter()
            .chain(table.totals.iter().map(|t| t.column))
        {
            if !columns.iter().any(|c| c.name == name) {
                return Err(format!(
                    "the batch has no column {name}, which the archiver needs"
                ));
            }
        }
        let spec: &'static TableSpec = Box::leak(Box::new(TableSpec {
            columns: Box::leak(columns.into_boxed_slice()),
            ..*table
        }));
        cache.insert(key, spec);
        Ok(spec)
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// A batch's column list, shared by its receipt and its manifest.
pub type SharedColumns = Arc<BatchColumns>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::table::WALLET_OUTBOX;

    /// The list as the manifest holds it, for wallet_outbox's first columns: a fixed vector.
    #[test]
    fn a_batch_names_its_columns_types_and_encodings() {
        let table = [("app_code", "varchar(32)"), ("event_id", "varchar(64)")];
        let columns = BatchColumns::of(&WALLET_OUTBOX, |name| {
            table
                .iter()
                .find(|(n, _)| *n == name)
                .map_or_else(String::new, |(_, t)| t.to_string())
        });
        let json = columns.to_json();
        assert!(json.starts_with(
            r#"[{"name":"app_code","key":"app_code","type":"varchar(32)","encoding":"text","nullable":false},{"name":"event_id","key":"event_id","type":"varchar(64)","encoding":"text","nullable":false}"#
        ), "{json}");
        assert!(json.contains(r#"{"name":"payload","key":"payload_json","type":"","encoding":"json","nullable":false}"#));
        assert_eq!(BatchColumns::parse(&json).unwrap(), columns);
        assert_eq!(
            columns.sha256,
            crate::model::digest::sha256_hex(json.as_bytes())
        );
    }

    /// A batch read by its own columns: one the table lacks now (dropped) is read by the
    /// encoding the batch names; the roles are the table's.
    #[test]
    fn a_batch_is_read_by_its_own_columns_a_dropped_one_included() {
        let mut columns = BatchColumns::of(&WALLET_OUTBOX, |_| String::new()).columns;
        columns.push(BatchColumn {
            name: "region".into(),
            key: "region".into(),
            sql_type: "varchar(8)".into(),
            encoding: "text".into(),
            nullable: true,
        });
        let set = BatchColumns::new(columns);
        let spec = set.spec(&WALLET_OUTBOX).unwrap();
        assert_eq!(spec.columns.len(), WALLET_OUTBOX.columns.len() + 1);
        assert_eq!(spec.columns.last().unwrap().json_key, "region");
        assert!(
            std::ptr::eq(spec, set.spec(&WALLET_OUTBOX).unwrap()),
            "kept"
        );
        let mut missing = set.columns.clone();
        missing.remove(1);
        let e = BatchColumns::new(missing).spec(&WALLET_OUTBOX).unwrap_err();
        assert!(e.contains("no column event_id"), "{e}");
        let mut odd = set.columns.clone();
        odd[5].encoding = "quaternion".into();
        assert!(BatchColumns::new(odd).spec(&WALLET_OUTBOX).is_err());
    }
}
