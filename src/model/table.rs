//! What an outbox table looks like to the archiver: its columns in archive order, how each is
//! read and written, and which columns play the roles the archiver relies on (tenant, event id,
//! cursor time, creation time, status, control totals).
//!
//! Everything else — the SELECT list, the NDJSON line, the manifest's totals, the names of the
//! archiver's own tables, indexes and lock — is derived from a [`TableSpec`]. A second outbox
//! table is one more `static` here, not a copy of the code: its own tables are derived from it
//! too (`db::owned`).

/// How a column is read from MySQL and written into an NDJSON line (its NULLs: [`Column::nullable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Character types → JSON string.
    Text,
    /// Integer types → JSON number.
    Int,
    /// `JSON`, selected as `CAST(col AS CHAR)` and archived verbatim as a JSON string: never
    /// parsed, never re-serialised.
    JsonText,
    /// Binary types (a protobuf envelope, say) → standard base64 in a JSON string.
    Blob,
    /// `DECIMAL` (and `BIGINT UNSIGNED`, which a JSON number read as a 64-bit integer would not
    /// hold) → its exact decimal text in a JSON string: `"-12.3400"`, every digit of the scale.
    Decimal,
    /// `DATETIME` / `DATE` → `"YYYY-MM-DDTHH:MM:SS[.f…]"` (as many fraction digits as the
    /// column's precision; `"YYYY-MM-DD"` for a `DATE`): the wall-clock value as stored, with
    /// no offset, because a `DATETIME` has none.
    DateTime,
    /// `TIMESTAMP` → `"YYYY-MM-DDTHH:MM:SS[.f…]Z"`: the instant in UTC (every archiver session
    /// runs with `time_zone = '+00:00'`), whatever the server's own time zone.
    Timestamp,
    /// `FLOAT` (IEEE-754 binary32) → a JSON number: the shortest decimal that reads back to the
    /// same bits (`0.1`, `1e-7`, `-0.0`), as ryu writes it; read from the server as its four
    /// bytes, never as text.
    Float,
    /// `DOUBLE` / `REAL` (IEEE-754 binary64) → a JSON number, the shortest decimal that reads
    /// back to the same bits, as ryu writes it.
    Double,
}

impl Kind {
    /// The SELECT expression that reads `column` as this kind.
    fn select(self, column: &str) -> String {
        match self {
            Kind::JsonText | Kind::Decimal => format!("CAST({column} AS CHAR)"),
            Kind::DateTime | Kind::Timestamp => {
                format!("REPLACE(CAST({column} AS CHAR), ' ', 'T')")
            }
            Kind::Text | Kind::Int | Kind::Blob | Kind::Float | Kind::Double => column.to_string(),
        }
    }

    /// How the archiver's own tables name this kind (`<prefix>_columns`, `<prefix>_added_values`).
    pub(crate) fn encoding(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::Text => "text",
            Kind::JsonText => "json",
            Kind::Blob => "base64",
            Kind::Decimal => "decimal",
            Kind::DateTime => "datetime",
            Kind::Timestamp => "timestamp",
            Kind::Float => "float",
            Kind::Double => "double",
        }
    }

    /// The kind [`Kind::encoding`] names.
    pub(crate) fn from_encoding(encoding: &str) -> Option<Kind> {
        const ALL: [Kind; 9] = [
            Kind::Text,
            Kind::Int,
            Kind::JsonText,
            Kind::Blob,
            Kind::Decimal,
            Kind::DateTime,
            Kind::Timestamp,
            Kind::Float,
            Kind::Double,
        ];
        ALL.into_iter().find(|k| k.encoding() == encoding)
    }

    /// Whether a value is carried as text (every kind but numbers and binary).
    pub(crate) fn is_text(self) -> bool {
        !matches!(self, Kind::Int | Kind::Blob | Kind::Float | Kind::Double)
    }

    /// An IEEE-754 kind (its values are bits, written as their shortest decimal).
    pub(crate) fn is_float(self) -> bool {
        matches!(self, Kind::Float | Kind::Double)
    }
}

/// One column, in archive order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Column {
    /// The column's name in MySQL.
    pub name: &'static str,
    /// The key of this column in an NDJSON line.
    pub json_key: &'static str,
    pub kind: Kind,
    /// Whether the column may hold NULL (archived as `null`).
    pub nullable: bool,
    /// An `UNSIGNED` integer column below `BIGINT`: selected as `CAST(col AS SIGNED)` (every
    /// value fits in 64 signed bits; the protocol would hand it over as unsigned).
    pub unsigned: bool,
}

impl Column {
    /// The same column, nullable.
    const fn or_null(self) -> Column {
        Column {
            nullable: true,
            ..self
        }
    }

    /// The SELECT expression that reads this column as its kind.
    pub fn select(&self) -> String {
        match self.kind {
            Kind::Int if self.unsigned => format!("CAST({} AS SIGNED)", self.name),
            kind => kind.select(self.name),
        }
    }
}

/// A control total over one column of a batch's rows, written as a string in the manifest and
/// the receipt.
#[derive(Debug, Clone, Copy)]
pub struct Total {
    pub column: &'static str,
    /// The field name in the manifest and the column name in the receipts table.
    pub field: &'static str,
    pub kind: TotalKind,
}

/// How a control total folds a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TotalKind {
    /// The exact sum of a signed 64-bit column, as a decimal string (the sum of many 64-bit
    /// values does not fit in 64 bits).
    Sum,
    /// SHA-256 (lowercase hex) over the column's values in cursor order, each as its length in
    /// 8 bytes big-endian and then its bytes (NULL: eight 0xFF bytes, nothing after): exact for
    /// values no sum can total, such as a protobuf envelope.
    Sha256,
}

impl Total {
    /// A summed total.
    pub const fn sum(column: &'static str, field: &'static str) -> Total {
        Total {
            column,
            field,
            kind: TotalKind::Sum,
        }
    }

    /// A hashed total.
    pub const fn sha256(column: &'static str, field: &'static str) -> Total {
        Total {
            column,
            field,
            kind: TotalKind::Sha256,
        }
    }
}

/// An outbox table the archiver knows.
#[derive(Debug)]
pub struct TableSpec {
    pub name: &'static str,
    pub columns: &'static [Column],
    pub app_code: &'static str,
    pub event_id: &'static str,
    pub updated_at_ms: &'static str,
    pub created_at_ms: &'static str,
    pub status: &'static str,
    pub totals: &'static [Total],
    /// The index on `(app_code, status, updated_at_ms, event_id)` every archiver scan uses.
    pub retention_index: &'static str,
    /// The reference DDL of the source table, for `migrate --with-source-table`.
    pub source_ddl: &'static str,
    /// What the names of the archiver's own tables start with (`wallet_outbox_archive` →
    /// `wallet_outbox_archive_receipts`, …).
    pub owned_prefix: &'static str,
    /// How the archiver's own tables are made.
    pub(crate) owned_by: OwnedBy,
    /// One of the tables this build knows ([`TABLES`]), or one as it is in the database (its
    /// columns after the built-in ones: [`with_added`]); `false`: a profile's table.
    pub(crate) builtin: bool,
    /// The unique index on `(app_code, event_id)` every statement purge runs on the source is
    /// held to (`FORCE INDEX`): it touches exactly the rows it names, whatever the optimizer
    /// thinks of a small table (SPEC §5.14).
    pub event_key: &'static str,
    /// Columns earlier batches archived that the table no longer has (dropped since): read in
    /// the lines of a batch that holds them and does not name its columns (layout 1), never
    /// selected or written ([`with_dropped`]).
    pub(crate) dropped: &'static [Column],
}

/// How a table's owned tables are made and kept up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwnedBy {
    /// The `migrations/` history (wallet_outbox: deployments that predate profiles upgrade
    /// through it).
    Migrations,
    /// `CREATE TABLE` statements derived from the spec (`db::owned`).
    Spec,
}

/// Positions of the role columns within a row, resolved once per table.
#[derive(Debug, Clone)]
pub struct Layout {
    pub app_code: usize,
    pub event_id: usize,
    pub updated_at_ms: usize,
    pub created_at_ms: usize,
    pub status: usize,
    pub totals: Vec<usize>,
}

impl TableSpec {
    fn position(&self, name: &str) -> usize {
        self.columns
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("table spec {}: no column {name}", self.name))
    }

    pub fn layout(&self) -> Layout {
        Layout {
            app_code: self.position(self.app_code),
            event_id: self.position(self.event_id),
            updated_at_ms: self.position(self.updated_at_ms),
            created_at_ms: self.position(self.created_at_ms),
            status: self.position(self.status),
            totals: self
                .totals
                .iter()
                .map(|t| self.position(t.column))
                .collect(),
        }
    }

    /// The expression list of the archiver's SELECT, in archive order.
    pub fn select_list(&self) -> String {
        self.columns
            .iter()
            .map(Column::select)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether this is one of the tables this build knows (not one from a profile file).
    pub(crate) fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// The built-in table this is (its fixed columns, before any the database added), for a
    /// built-in table.
    pub(crate) fn base(&self) -> Option<&'static TableSpec> {
        match self.builtin {
            true => find(self.name),
            false => None,
        }
    }

    /// Whether `column` is one of the built-in format's own columns (always archived, never
    /// recorded as added).
    pub(crate) fn is_fixed(&self, column: &str) -> bool {
        self.base().is_some_and(|b| {
            b.columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(column))
        })
    }

    /// How a command line chooses this table, for messages that say what to run.
    pub(crate) fn cli_flag(&self) -> String {
        if self.is_builtin() {
            format!("--table {}", self.name)
        } else {
            "--table-profile (the profile of this run)".into()
        }
    }

    pub fn receipts_table(&self) -> String {
        format!("{}_receipts", self.owned_prefix)
    }

    pub fn members_table(&self) -> String {
        format!("{}_members", self.owned_prefix)
    }

    /// Older versions of source rows whose member row a later batch took over.
    pub(crate) fn superseded_table(&self) -> String {
        format!("{}_superseded", self.owned_prefix)
    }

    /// The columns archived so far, and the generated ones seen (`db::owned`).
    pub(crate) fn columns_table(&self) -> String {
        format!("{}_columns", self.owned_prefix)
    }

    /// Per batch, what its deleted rows held in columns its lines lack (`db::owned`).
    pub(crate) fn added_values_table(&self) -> String {
        format!("{}_added_values", self.owned_prefix)
    }

    pub(crate) fn drills_table(&self) -> String {
        format!("{}_drills", self.owned_prefix)
    }

    pub(crate) fn runs_table(&self) -> String {
        format!("{}_runs", self.owned_prefix)
    }

    /// Rows purge kept, to be archived again as they are now (migration 21).
    pub(crate) fn kept_table(&self) -> String {
        format!("{}_kept", self.owned_prefix)
    }

    /// The batches' column lists, each once (migration 20).
    pub(crate) fn column_sets_table(&self) -> String {
        format!("{}_column_sets", self.owned_prefix)
    }

    /// The layout version of the owned tables, one row (`db::layout`, migration 19).
    pub(crate) fn layout_table(&self) -> String {
        format!("{}_layout", self.owned_prefix)
    }

    /// The archive's home: the store it is bound to, and its moves.
    pub(crate) fn home_table(&self) -> String {
        format!("{}_home", self.owned_prefix)
    }

    /// Each app's log identity: the folder its log of batches is kept under (migration 15).
    pub(crate) fn logs_table(&self) -> String {
        format!("{}_logs", self.owned_prefix)
    }

    /// The tree heads each app's log was published at (`db::log_heads`).
    pub(crate) fn log_heads_table(&self) -> String {
        format!("{}_log_heads", self.owned_prefix)
    }

    /// Objects recorded under a new identity with the archived bytes (`db::object_versions`).
    pub(crate) fn object_versions_table(&self) -> String {
        format!("{}_object_versions", self.owned_prefix)
    }

    pub(crate) fn cursor_index(&self) -> String {
        format!("idx_{}_cursor", self.owned_prefix)
    }

    /// The receipts' unique key on an app's chain seqs (migration 10).
    pub(crate) fn chain_index(&self) -> String {
        format!("idx_{}_chain", self.owned_prefix)
    }

    /// The receipts' unique key on an app's leaves in its log (migration 13).
    pub fn log_index(&self) -> String {
        format!("idx_{}_log", self.owned_prefix)
    }
}

/// `spec` as a batch written before columns were added to the table (or after some were
/// reordered) holds it: only the columns whose NDJSON keys are `keys`, in the batch's order —
/// each a column of `spec`, once, and never one it does not have (a column removed stops the run
/// before anything is archived; a line with a key the table does not have is not this table's)
/// and never without a role or control-total column. Each distinct projection is built once per
/// process and kept.
pub(crate) fn projected(
    spec: &'static TableSpec,
    keys: &[&str],
) -> Result<&'static TableSpec, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    if spec.columns.len() == keys.len()
        && spec.columns.iter().zip(keys).all(|(c, k)| c.json_key == *k)
    {
        return Ok(spec);
    }
    type Cache = Mutex<HashMap<(usize, Vec<String>), &'static TableSpec>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (
        spec as *const TableSpec as usize,
        keys.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
    );
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .expect("not poisoned");
    if let Some(found) = cache.get(&key) {
        return Ok(found);
    }
    let mut columns: Vec<Column> = Vec::with_capacity(keys.len());
    for k in keys {
        if columns.iter().any(|c| c.json_key == *k) {
            return Err(format!("key {k:?} twice"));
        }
        match spec
            .columns
            .iter()
            .chain(spec.dropped)
            .find(|c| c.json_key == *k)
        {
            Some(c) => columns.push(*c),
            None => {
                return Err(format!(
                    "key {k:?} is no column of {} (a column removed from the table after this batch was written: add it back to read the batch)",
                    spec.name
                ))
            }
        }
    }
    let needed = [
        spec.app_code,
        spec.event_id,
        spec.updated_at_ms,
        spec.created_at_ms,
        spec.status,
    ];
    let totals = spec.totals.iter().map(|t| t.column);
    for name in needed.into_iter().chain(totals) {
        if !columns.iter().any(|c| c.name == name) {
            return Err(format!(
                "the batch has no column {name}, which the archiver needs"
            ));
        }
    }
    let projected: &'static TableSpec = Box::leak(Box::new(TableSpec {
        columns: Box::leak(columns.into_boxed_slice()),
        ..*spec
    }));
    cache.insert(key, projected);
    Ok(projected)
}

/// `spec` with `added` after its columns: a built-in table as the database holds it, with the
/// stored columns added to it since (SPEC §4: the archive holds the whole row), or a batch with
/// the values recorded for columns its lines lack. Each distinct one is built once per process
/// and kept.
pub(crate) fn with_added(spec: &'static TableSpec, added: Vec<Column>) -> &'static TableSpec {
    static CACHE: std::sync::OnceLock<VariantCache> = std::sync::OnceLock::new();
    variant(&CACHE, spec, added, |spec, added| {
        let columns: Vec<Column> = spec.columns.iter().chain(added).copied().collect();
        TableSpec {
            columns: Box::leak(columns.into_boxed_slice()),
            ..*spec
        }
    })
}

/// `spec` with the columns earlier batches archived and the table no longer has
/// ([`TableSpec::dropped`]). Each distinct one is built once per process and kept.
pub(crate) fn with_dropped(spec: &'static TableSpec, dropped: Vec<Column>) -> &'static TableSpec {
    static CACHE: std::sync::OnceLock<VariantCache> = std::sync::OnceLock::new();
    variant(&CACHE, spec, dropped, |spec, dropped| TableSpec {
        dropped: Box::leak(dropped.to_vec().into_boxed_slice()),
        ..*spec
    })
}

/// The variants of specs one kind of [`variant`] made, by spec and columns.
type VariantCache =
    std::sync::Mutex<std::collections::HashMap<(usize, Vec<Column>), &'static TableSpec>>;

/// `spec` itself without `columns`; else the variant `make` builds of it with them, built once
/// per process (`cache`: one per kind of variant) and kept.
fn variant(
    cache: &'static std::sync::OnceLock<VariantCache>,
    spec: &'static TableSpec,
    columns: Vec<Column>,
    make: impl FnOnce(&'static TableSpec, &[Column]) -> TableSpec,
) -> &'static TableSpec {
    if columns.is_empty() {
        return spec;
    }
    let mut cache = cache
        .get_or_init(Default::default)
        .lock()
        .expect("not poisoned");
    let key = (spec as *const TableSpec as usize, columns);
    if let Some(found) = cache.get(&key) {
        return found;
    }
    let made: &'static TableSpec = Box::leak(Box::new(make(spec, &key.1)));
    cache.insert(key, made);
    made
}

/// A `NOT NULL` column archived under its own name.
pub(crate) const fn col(name: &'static str, kind: Kind) -> Column {
    col_as(name, name, kind)
}

/// A `NOT NULL` column archived under another key (`payload` → `payload_json`).
const fn col_as(name: &'static str, json_key: &'static str, kind: Kind) -> Column {
    Column {
        name,
        json_key,
        kind,
        nullable: false,
        unsigned: false,
    }
}

/// The wallet service's outbox (SPEC §2).
pub static WALLET_OUTBOX: TableSpec = TableSpec {
    name: "wallet_outbox",
    columns: &[
        col("app_code", Kind::Text),
        col("event_id", Kind::Text),
        col("event_type", Kind::Text),
        col("transaction_id", Kind::Text),
        col("command_id", Kind::Text),
        col("user_id", Kind::Int),
        col("asset_type", Kind::Text),
        col("available_delta", Kind::Int),
        col("frozen_delta", Kind::Int),
        col_as("payload", "payload_json", Kind::JsonText),
        col("status", Kind::Text),
        col("worker_id", Kind::Text),
        col("lock_until_ms", Kind::Int).or_null(),
        col("retry_count", Kind::Int),
        col("next_retry_at_ms", Kind::Int).or_null(),
        col("last_error", Kind::Text).or_null(),
        col("created_at_ms", Kind::Int),
        col("updated_at_ms", Kind::Int),
    ],
    app_code: "app_code",
    event_id: "event_id",
    updated_at_ms: "updated_at_ms",
    created_at_ms: "created_at_ms",
    status: "status",
    totals: &[
        Total::sum("available_delta", "available_delta_total"),
        Total::sum("frozen_delta", "frozen_delta_total"),
    ],
    retention_index: "idx_wallet_outbox_retention",
    event_key: "PRIMARY",
    dropped: &[],
    source_ddl: include_str!("../../migrations/reference/wallet_outbox.sql"),
    owned_prefix: "wallet_outbox_archive",
    owned_by: OwnedBy::Migrations,
    builtin: true,
};

/// room-service's outbox (the room seed): a protobuf envelope in a BLOB, archived as base64;
/// no money columns, so its exact totals are the rooms' ids summed and the envelopes hashed.
pub static ROOM_OUTBOX: TableSpec = TableSpec {
    name: "room_outbox",
    columns: &[
        col("app_code", Kind::Text),
        col("event_id", Kind::Text),
        col("event_type", Kind::Text),
        col("room_id", Kind::Int),
        col("status", Kind::Text),
        col("worker_id", Kind::Text),
        col("lock_until_ms", Kind::Int).or_null(),
        col_as("envelope", "envelope_base64", Kind::Blob),
        col("created_at_ms", Kind::Int),
        col("retry_count", Kind::Int),
        col("next_retry_at_ms", Kind::Int),
        col("last_error", Kind::Text).or_null(),
        col("updated_at_ms", Kind::Int),
    ],
    app_code: "app_code",
    event_id: "event_id",
    updated_at_ms: "updated_at_ms",
    created_at_ms: "created_at_ms",
    status: "status",
    totals: &[
        Total::sum("room_id", "room_id_total"),
        Total::sha256("envelope", "envelope_sha256"),
    ],
    retention_index: "idx_room_outbox_retention",
    event_key: "PRIMARY",
    dropped: &[],
    source_ddl: include_str!("../../migrations/reference/room_outbox.sql"),
    owned_prefix: "room_outbox_archive",
    owned_by: OwnedBy::Spec,
    builtin: true,
};

/// Every table this build can archive.
pub(crate) static TABLES: &[&TableSpec] = &[&WALLET_OUTBOX, &ROOM_OUTBOX];

/// Looks up `--table`.
pub(crate) fn find(name: &str) -> Option<&'static TableSpec> {
    TABLES.iter().copied().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wallet_layout_points_at_the_role_columns() {
        let layout = WALLET_OUTBOX.layout();
        let name = |i: usize| WALLET_OUTBOX.columns[i].name;
        assert_eq!(name(layout.app_code), "app_code");
        assert_eq!(name(layout.event_id), "event_id");
        assert_eq!(name(layout.updated_at_ms), "updated_at_ms");
        assert_eq!(name(layout.created_at_ms), "created_at_ms");
        assert_eq!(name(layout.status), "status");
        let totals: Vec<_> = layout.totals.iter().map(|&i| name(i)).collect();
        assert_eq!(totals, ["available_delta", "frozen_delta"]);
    }

    #[test]
    fn select_list_casts_json_to_text() {
        let list = WALLET_OUTBOX.select_list();
        assert!(list.contains("CAST(payload AS CHAR)"), "{list}");
        assert!(list.starts_with("app_code, event_id, event_type,"));
        assert!(list.ends_with("created_at_ms, updated_at_ms"));
    }

    #[test]
    fn json_keys_need_no_escaping() {
        for t in TABLES {
            for c in t.columns {
                assert!(
                    crate::model::profile::snake_name(c.json_key),
                    "{}",
                    c.json_key
                );
            }
        }
    }

    #[test]
    fn a_batch_with_fewer_columns_reads_as_a_projection() {
        let keys: Vec<&str> = ROOM_OUTBOX.columns.iter().map(|c| c.json_key).collect();
        assert!(std::ptr::eq(
            projected(&ROOM_OUTBOX, &keys).unwrap(),
            &ROOM_OUTBOX
        ));
        let fewer: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| *k != "last_error")
            .collect();
        let p = projected(&ROOM_OUTBOX, &fewer).unwrap();
        assert_eq!(p.columns.len(), 12);
        assert_eq!(p.columns[p.layout().updated_at_ms].name, "updated_at_ms");
        assert!(
            std::ptr::eq(projected(&ROOM_OUTBOX, &fewer).unwrap(), p),
            "built once"
        );
        let mut unknown = keys.clone();
        unknown.push("region");
        let e = projected(&ROOM_OUTBOX, &unknown).unwrap_err();
        assert!(e.contains("\"region\" is no column of room_outbox"), "{e}");
        // A column dropped from the table since the batch was written: read by what the table
        // recorded of it, and only in the batches that hold it.
        let region = Column {
            nullable: true,
            ..col("region", Kind::Text)
        };
        let dropped = with_dropped(&ROOM_OUTBOX, vec![region]);
        assert!(std::ptr::eq(
            with_dropped(&ROOM_OUTBOX, vec![region]),
            dropped
        ));
        let p = projected(dropped, &unknown).unwrap();
        assert_eq!(p.columns.last(), Some(&region));
        assert_eq!(
            projected(dropped, &keys).unwrap().columns,
            ROOM_OUTBOX.columns
        );
        assert!(std::ptr::eq(
            with_dropped(&ROOM_OUTBOX, Vec::new()),
            &ROOM_OUTBOX
        ));
        // Columns reordered in the table since: the batch's own order reads it.
        let mut swapped = keys.clone();
        swapped.swap(2, 3);
        let p = projected(&ROOM_OUTBOX, &swapped).unwrap();
        assert_eq!(p.columns[2].name, "room_id");
        assert_eq!(p.columns[p.layout().status].name, "status");
        let mut twice = keys.clone();
        twice[3] = twice[2];
        assert!(projected(&ROOM_OUTBOX, &twice)
            .unwrap_err()
            .contains("twice"));
        let no_total: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| *k != "envelope_base64")
            .collect();
        let e = projected(&ROOM_OUTBOX, &no_total).unwrap_err();
        assert!(e.contains("no column envelope"), "{e}");
    }

    #[test]
    fn derived_names() {
        assert_eq!(
            WALLET_OUTBOX.receipts_table(),
            "wallet_outbox_archive_receipts"
        );
        assert_eq!(
            WALLET_OUTBOX.members_table(),
            "wallet_outbox_archive_members"
        );
        assert_eq!(
            WALLET_OUTBOX.cursor_index(),
            "idx_wallet_outbox_archive_cursor"
        );
        assert!(find("wallet_outbox").is_some());
        assert!(find("nope").is_none());
    }
}
