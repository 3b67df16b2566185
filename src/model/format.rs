//! The archive format, schema_version 1 (SPEC §4): batch ids, object keys, the manifest and the
//! `_SUCCESS` marker, all pure functions of a batch's rows and their encoding.
//!
//! Nothing here may depend on the clock, the cutoff, the host or the program's version: a retry
//! under any settings that yields the same rows must write identical bytes.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::model::digest::{sha256_hex, ObjectDigest};
pub use crate::model::key::{Key, Prefix};
use crate::model::timespec;

pub(crate) const SCHEMA_VERSION: u32 = 1;

/// A position in an app's delivered rows: `(updated_at_ms, event_id)`, ordered by the database.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cursor {
    pub updated_at_ms: i64,
    pub event_id: String,
}

/// What a batch's NDJSON says about its rows: everything the batch id, the receipt and the
/// read-back check are built from. Recomputed from the rows when archiving and from the
/// decompressed lines when verifying; the two must be equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentFacts {
    pub row_count: u64,
    pub first: Cursor,
    pub last: Cursor,
    pub min_created_at_ms: i64,
    pub max_created_at_ms: i64,
    /// `(field, value)` in the table's order.
    pub totals: Vec<(&'static str, TotalValue)>,
    pub ndjson_sha256: String,
    pub uncompressed_bytes: u64,
}

/// What a store reported to identify an object's stored bytes when it was read back: its ETag
/// and version id. A receipt keeps them; every later HEAD is held to them (an object written
/// again has another ETag, or another version id in a versioned bucket).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub etag: Option<String>,
    pub version_id: Option<String>,
}

/// A control total's value: an exact sum, or a SHA-256 (see [`crate::model::table::TotalKind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TotalValue {
    Sum(i128),
    Sha256(String),
}

impl std::fmt::Display for TotalValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TotalValue::Sum(v) => write!(f, "{v}"),
            TotalValue::Sha256(hex) => f.write_str(hex),
        }
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {:?})", self.updated_at_ms, self.event_id)
    }
}

impl ContentFacts {
    /// The fields in which `other` differs from `self`, as `(field, expected, actual)`, in the
    /// manifest's order.
    pub(crate) fn differences(&self, other: &ContentFacts) -> Vec<(&'static str, String, String)> {
        let mut out = Vec::new();
        let mut compare = |field: &'static str, expected: String, actual: String| {
            if expected != actual {
                out.push((field, expected, actual));
            }
        };
        compare(
            "row_count",
            self.row_count.to_string(),
            other.row_count.to_string(),
        );
        compare(
            "first_cursor",
            self.first.to_string(),
            other.first.to_string(),
        );
        compare("last_cursor", self.last.to_string(), other.last.to_string());
        compare(
            "min_created_at_ms",
            self.min_created_at_ms.to_string(),
            other.min_created_at_ms.to_string(),
        );
        compare(
            "max_created_at_ms",
            self.max_created_at_ms.to_string(),
            other.max_created_at_ms.to_string(),
        );
        let total = |t: &[(&'static str, TotalValue)], i: usize| {
            t.get(i)
                .map_or("absent".to_string(), |(_, v)| v.to_string())
        };
        for (i, (field, _)) in self.totals.iter().enumerate() {
            compare(field, total(&self.totals, i), total(&other.totals, i));
        }
        compare(
            "ndjson_sha256",
            self.ndjson_sha256.clone(),
            other.ndjson_sha256.clone(),
        );
        compare(
            "uncompressed_bytes",
            self.uncompressed_bytes.to_string(),
            other.uncompressed_bytes.to_string(),
        );
        out
    }
}

/// The identity of a batch within one table and app.
pub fn batch_id(table: &str, app_code: &str, facts: &ContentFacts) -> String {
    let text = format!(
        "outbox-archive/v1\n{table}\n{app_code}\n{}\n{}\n{}\n{}\n{}\n{}\n",
        facts.first.updated_at_ms,
        facts.first.event_id,
        facts.last.updated_at_ms,
        facts.last.event_id,
        facts.row_count,
        facts.ndjson_sha256
    );
    sha256_hex(text.as_bytes())[..32].to_string()
}

/// The three object keys of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectKeys {
    pub data: Key,
    pub manifest: Key,
    pub success: Key,
}

/// `{prefix}{table}/app_code={app}/dt={YYYY-MM-DD}/{batch_id}/…`.
pub fn object_keys(
    prefix: &Prefix,
    table: &str,
    app_code: &str,
    updated_at_ms: i64,
    batch_id: &str,
) -> ObjectKeys {
    let dir = app_prefix(&table_prefix(prefix, table), app_code).folder(&format!(
        "dt={}/{batch_id}",
        timespec::utc_date(updated_at_ms)
    ));
    ObjectKeys {
        data: dir.key("data.ndjson.gz"),
        manifest: dir.key("manifest.json"),
        success: dir.key("_SUCCESS"),
    }
}

/// `{table_prefix}app_code={app}/`: every object of one app lives below it.
pub(crate) fn app_prefix(table_prefix: &Prefix, app_code: &str) -> Prefix {
    table_prefix.folder(&format!("app_code={app_code}"))
}

/// The app code and the `dt=` day of a key `{table_prefix}app_code={app}/dt={day}/…` (what
/// [`object_keys`] builds); `None` for any other key under the table's prefix.
pub(crate) fn app_and_day<'k>(table_prefix: &Prefix, key: &'k str) -> Option<(&'k str, &'k str)> {
    let rest = table_prefix.relative(key)?.strip_prefix("app_code=")?;
    let (app, rest) = rest.split_once('/')?;
    let day = rest.strip_prefix("dt=")?.split('/').next()?;
    Some((app, day))
}

/// The `dt=` day of one of [`object_keys`]' keys ("" for a key without one).
pub(crate) fn day_of_key(key: &str) -> &str {
    key.split('/')
        .find_map(|segment| segment.strip_prefix("dt="))
        .unwrap_or_default()
}

/// `{prefix}{table}/`: every object of a table lives below it.
pub fn table_prefix(prefix: &Prefix, table: &str) -> Prefix {
    prefix.folder(table)
}

/// `{table_prefix}_log/`: the folder every app's log of batches is kept under (README, "The log
/// of batches"), beside the apps' folders.
pub(crate) fn logs_prefix(table_prefix: &Prefix) -> Prefix {
    table_prefix.folder("_log")
}

/// `{table_prefix}_log/app_code={folder}/`: one app's log — its checkpoint, tiles, breaks and
/// transition record ([`LOG_CHECKPOINT`], [`crate::model::tlog::tile_path`], …) below it.
pub(crate) fn log_prefix(table_prefix: &Prefix, folder: &str) -> Prefix {
    logs_prefix(table_prefix).folder(&format!("app_code={folder}"))
}

/// The folder of the app's log a key under [`logs_prefix`] belongs to.
pub(crate) fn log_folder_of_key<'k>(logs_prefix: &Prefix, key: &'k str) -> Option<&'k str> {
    logs_prefix
        .relative(key)?
        .strip_prefix("app_code=")?
        .split('/')
        .next()
}

/// A log's origin line (its checkpoints' first line): `outbox-archive/{table}/app_code={folder}`.
pub(crate) fn log_origin(table: &str, folder: &str) -> String {
    format!("outbox-archive/{table}/app_code={folder}")
}

/// Under a log's prefix: its tree head.
pub(crate) const LOG_CHECKPOINT: &str = "checkpoint";
/// Under a log's prefix: the linear chain of an older build it carries on.
pub(crate) const LOG_TRANSITION: &str = "transition.json";
/// Under a log's prefix: the folder of its accepted breaks.
pub(crate) const LOG_BREAKS: &str = "breaks/";

/// Under a log's prefix: the folder of the tree heads it was ever published at, each kept
/// write-once (README, "What each party keeps").
pub(crate) const LOG_HEADS: &str = "heads/";

/// The largest size a head's key can name: its key is this minus its size, so that the
/// largest head is the first key a LIST returns (S3 lists in ascending order only).
const HEAD_KEY_MAX: u64 = 99_999_999_999_999_999;

/// Under a log's prefix: the write-once copy of its tree head of `size` leaves,
/// `heads/{99999999999999999 − size, 17 digits}` — the largest head lists first.
pub(crate) fn log_head_path(size: u64) -> String {
    format!("{LOG_HEADS}{:017}", HEAD_KEY_MAX - size.min(HEAD_KEY_MAX))
}

/// The size of the tree head a key made by [`log_head_path`] names.
pub(crate) fn log_head_size(key: &str) -> Option<u64> {
    let name = key.rsplit_once(LOG_HEADS)?.1;
    if name.len() != 17 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(HEAD_KEY_MAX - name.parse::<u64>().ok()?)
}

/// Under a log's prefix: the folder of the records of its key changes.
pub(crate) const LOG_KEYS: &str = "keys/";

/// Under a log's prefix: the record of the change of keys from the checkpoint of `size` on.
pub(crate) fn log_keys_path(size: u64) -> String {
    format!("{LOG_KEYS}{size:020}.json")
}

/// Under a log's prefix: the record of a break accepting `n` leaves from leaf `first` on.
pub(crate) fn log_break_path(first: u64, n: usize) -> String {
    format!("{LOG_BREAKS}{first:020}-{n}.json")
}

/// The folder of a log's recovery records (`recover`: batches the database lost, recorded again
/// from the store).
pub(crate) const LOG_RECOVERIES: &str = "recoveries/";

/// `recoveries/{first leaf}-{n}.json`: the record of `n` batches recorded again from leaf `first`.
pub(crate) fn log_recovery_path(first: u64, n: usize) -> String {
    format!("{LOG_RECOVERIES}{first:020}-{n}.json")
}

/// `{table_prefix}_archive.json`: the archive's marker, written once when its first batch is
/// archived (SPEC §5.13). Outside every app's keys, so no batch ever uses it.
pub fn home_marker_key(table_prefix: &Prefix) -> Key {
    table_prefix.key("_archive.json")
}

/// What an archive's marker says: which table's archive the store holds, under which id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct HomeMarker {
    pub archive_id: String,
    pub table: String,
    /// The database whose archive it is (its name, as the URL gives it).
    pub database: String,
    pub created_at_ms: i64,
}

impl HomeMarker {
    /// One compact JSON line, keys in this order.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut text = serde_json::to_string(self).expect("a marker serialises");
        text.push('\n');
        text.into_bytes()
    }

    /// A marker's bytes read back; `None` for anything that is not one.
    pub(crate) fn parse(bytes: &[u8]) -> Option<HomeMarker> {
        let marker: HomeMarker = serde_json::from_slice(bytes).ok()?;
        let hex = marker.archive_id.len() == 32
            && marker
                .archive_id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        hex.then_some(marker)
    }
}

/// The key of the object a run writes to find out whether the store honours `If-None-Match: *`
/// (SPEC §5.11): under the configured prefix (so a prefix-scoped policy allows it) and outside
/// every table's keys (so `verify` never counts it as an orphan). One fixed key, so a bucket that
/// denies deletes holds at most one.
pub(crate) fn conditional_put_probe_key(prefix: &Prefix) -> Key {
    prefix.key("_outbox_archiver/conditional-put-probe")
}

/// manifest.json (SPEC §4): one compact JSON object, keys in the contract's order, then `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub table: String,
    pub app_code: String,
    pub batch_id: String,
    pub data_object_key: String,
    pub content: ContentFacts,
    /// The data object as stored: its gzip bytes' SHA-256, CRC-64 and size.
    pub data: ObjectDigest,
    /// The batch's columns, after the fixed keys (none: a manifest written before the list).
    pub columns: Option<crate::model::batch_columns::SharedColumns>,
}

impl Serialize for Manifest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = &self.content;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("schema_version", &SCHEMA_VERSION)?;
        map.serialize_entry("table", &self.table)?;
        map.serialize_entry("app_code", &self.app_code)?;
        map.serialize_entry("batch_id", &self.batch_id)?;
        map.serialize_entry("data_object_key", &self.data_object_key)?;
        map.serialize_entry("row_count", &c.row_count)?;
        map.serialize_entry("first_cursor", &c.first)?;
        map.serialize_entry("last_cursor", &c.last)?;
        map.serialize_entry("min_created_at_ms", &c.min_created_at_ms)?;
        map.serialize_entry("max_created_at_ms", &c.max_created_at_ms)?;
        for (field, total) in &c.totals {
            map.serialize_entry(field, &total.to_string())?;
        }
        map.serialize_entry("ndjson_sha256", &c.ndjson_sha256)?;
        map.serialize_entry("gzip_sha256", &self.data.sha256)?;
        map.serialize_entry("data_crc64", &self.data.crc64_string())?;
        map.serialize_entry("uncompressed_bytes", &c.uncompressed_bytes)?;
        map.serialize_entry("compressed_bytes", &self.data.size)?;
        if let Some(columns) = &self.columns {
            map.serialize_entry("columns", &columns.columns)?;
        }
        map.end()
    }
}

impl Manifest {
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).expect("a manifest always serialises");
        out.push(b'\n');
        out
    }
}

/// The column list a manifest's bytes name after the fixed keys (none: one written before it).
pub(crate) fn manifest_columns(
    bytes: &[u8],
) -> Result<Option<crate::model::batch_columns::BatchColumns>, String> {
    #[derive(Deserialize)]
    struct Columns<'a> {
        #[serde(borrow, default)]
        columns: Option<&'a serde_json::value::RawValue>,
    }
    let read: Columns<'_> =
        serde_json::from_slice(bytes).map_err(|e| format!("not a manifest: {e}"))?;
    read.columns
        .map(|raw| crate::model::batch_columns::BatchColumns::parse(raw.get()))
        .transpose()
}

/// `_SUCCESS` (SPEC §4): written last, binds the manifest by its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SuccessMarker {
    pub batch_id: String,
    pub manifest_sha256: String,
    pub row_count: u64,
}

impl SuccessMarker {
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).expect("a marker always serialises");
        out.push(b'\n');
        out
    }
}

/// Everything a batch writes, derived from its content facts and its data object's digest.
#[derive(Debug, Clone)]
pub struct BatchDocuments {
    pub batch_id: String,
    pub keys: ObjectKeys,
    pub manifest: Vec<u8>,
    pub success: Vec<u8>,
}

/// Builds the manifest and `_SUCCESS` bytes for a batch whose data object has digest `data` and
/// whose lines hold `columns` (none: a manifest as written before the list).
pub fn documents(
    prefix: &Prefix,
    table: &str,
    app_code: &str,
    content: &ContentFacts,
    data: &ObjectDigest,
    columns: Option<&crate::model::batch_columns::SharedColumns>,
) -> BatchDocuments {
    let batch_id = batch_id(table, app_code, content);
    let keys = object_keys(
        prefix,
        table,
        app_code,
        content.first.updated_at_ms,
        &batch_id,
    );
    let manifest = Manifest {
        table: table.to_string(),
        app_code: app_code.to_string(),
        batch_id: batch_id.clone(),
        data_object_key: keys.data.to_string(),
        content: content.clone(),
        data: data.clone(),
        columns: columns.cloned(),
    }
    .to_bytes();
    let success = SuccessMarker {
        batch_id: batch_id.clone(),
        manifest_sha256: sha256_hex(&manifest),
        row_count: content.row_count,
    }
    .to_bytes();
    BatchDocuments {
        batch_id,
        keys,
        manifest,
        success,
    }
}

/// What a compacted receipt keeps of its member list (README, "Compaction"): how many
/// `(event_id, updated_at_ms)` pairs, and the SHA-256 (lowercase hex) of
/// `outbox-archive/members/v1\n` followed by one line per pair, in ascending order of the event
/// id's UTF-8 bytes and then of `updated_at_ms`: the pair as a compact JSON array
/// (`["e-1",1700000000000]`, the event id escaped as the NDJSON lines escape strings) and `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembersDigest {
    pub rows: u64,
    pub sha256: String,
}

/// The digest of a batch's `(event_id, updated_at_ms)` pairs, in any order.
pub fn members_digest<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>) -> MembersDigest {
    use sha2::Digest as _;
    let mut pairs: Vec<(&str, i64)> = pairs.into_iter().collect();
    pairs.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()).then(a.1.cmp(&b.1)));
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"outbox-archive/members/v1\n");
    let mut line = Vec::with_capacity(96);
    for (event_id, updated_at_ms) in &pairs {
        line.clear();
        serde_json::to_writer(&mut line, &(event_id, updated_at_ms)).expect("in memory");
        line.push(b'\n');
        hasher.update(&line);
    }
    MembersDigest {
        rows: pairs.len() as u64,
        sha256: hex::encode(hasher.finalize()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configured prefix.
    fn p(text: &str) -> Prefix {
        Prefix::parse(text).unwrap()
    }

    #[test]
    fn the_members_digest_is_a_fixed_function_of_the_pairs() {
        let pairs = [("e-2", 5_i64), ("e-1", 7), ("e-1", 3), ("é\n\"x", 1)];
        let digest = members_digest(pairs);
        assert_eq!(digest.rows, 4);
        // The same bytes by hand: sorted by event id bytes, then updated_at_ms.
        let text =
            "outbox-archive/members/v1\n[\"e-1\",3]\n[\"e-1\",7]\n[\"e-2\",5]\n[\"é\\n\\\"x\",1]\n";
        assert_eq!(digest.sha256, sha256_hex(text.as_bytes()));
        let mut reversed = pairs;
        reversed.reverse();
        assert_eq!(members_digest(reversed), digest, "any order");
        assert_eq!(
            members_digest([]).sha256,
            sha256_hex(b"outbox-archive/members/v1\n")
        );
        // A fixed vector, for other implementations.
        assert_eq!(
            members_digest([("e-1", 1)]).sha256,
            "910cb8773a9c4e962236761fab9e72c9a98dd519c655eba155e73315d86b4848"
        );
    }

    fn facts() -> ContentFacts {
        ContentFacts {
            row_count: 3,
            first: Cursor {
                updated_at_ms: 1_700_000_000_000,
                event_id: "e-1".into(),
            },
            last: Cursor {
                updated_at_ms: 1_700_000_000_500,
                event_id: "e-3".into(),
            },
            min_created_at_ms: 1_699_999_999_000,
            max_created_at_ms: 1_700_000_000_400,
            totals: vec![
                (
                    "available_delta_total",
                    TotalValue::Sum(i128::from(i64::MAX) * 3),
                ),
                ("frozen_delta_total", TotalValue::Sum(-7)),
            ],
            ndjson_sha256: "ab".repeat(32),
            uncompressed_bytes: 1234,
        }
    }

    #[test]
    fn differences_name_every_field_that_differs() {
        let a = facts();
        assert!(a.differences(&a).is_empty());
        let mut b = facts();
        b.row_count = 4;
        b.totals[1].1 = TotalValue::Sum(8);
        b.last.event_id = "e-4".into();
        let fields: Vec<_> = a.differences(&b).into_iter().map(|d| d.0).collect();
        assert_eq!(fields, ["row_count", "last_cursor", "frozen_delta_total"]);
    }

    #[test]
    fn batch_id_is_the_spec_hash() {
        // sha256("outbox-archive/v1\nwallet_outbox\napp1\n1700000000000\ne-1\n1700000000500\ne-3\n3\nabab…\n")
        let text = format!(
            "outbox-archive/v1\nwallet_outbox\napp1\n1700000000000\ne-1\n1700000000500\ne-3\n3\n{}\n",
            "ab".repeat(32)
        );
        let id = batch_id("wallet_outbox", "app1", &facts());
        assert_eq!(id, sha256_hex(text.as_bytes())[..32]);
        assert_eq!(id.len(), 32);
        assert_ne!(id, batch_id("wallet_outbox", "app2", &facts()));
    }

    #[test]
    fn keys_name_their_app_and_day() {
        let t = table_prefix(&p("p"), "wallet_outbox");
        let key = "p/wallet_outbox/app_code=a1/dt=2026-01-02/b/data.ndjson.gz";
        assert_eq!(app_and_day(&t, key), Some(("a1", "2026-01-02")));
        assert_eq!(day_of_key(key), "2026-01-02");
        assert!(key.starts_with(app_prefix(&t, "a1").as_str()));
        assert_eq!(app_and_day(&t, "p/wallet_outbox/app_code=a1/README"), None);
        assert_eq!(app_and_day(&t, "p/wallet_outbox/stray.txt"), None);
        assert_eq!(day_of_key("p/wallet_outbox/stray.txt"), "");
    }

    #[test]
    fn keys_follow_the_layout() {
        let keys = object_keys(
            &p("archive/prod"),
            "wallet_outbox",
            "app1",
            1_700_000_000_000,
            "0123",
        );
        assert_eq!(
            keys.data,
            "archive/prod/wallet_outbox/app_code=app1/dt=2023-11-14/0123/data.ndjson.gz"
        );
        assert_eq!(
            keys.manifest,
            "archive/prod/wallet_outbox/app_code=app1/dt=2023-11-14/0123/manifest.json"
        );
        assert_eq!(
            keys.success,
            "archive/prod/wallet_outbox/app_code=app1/dt=2023-11-14/0123/_SUCCESS"
        );
        let root = object_keys(&Prefix::root(), "wallet_outbox", "a", 0, "b");
        assert_eq!(
            root.data,
            "wallet_outbox/app_code=a/dt=1970-01-01/b/data.ndjson.gz"
        );
    }

    #[test]
    fn the_home_marker_is_one_json_line_under_the_tables_prefix() {
        let table = table_prefix(&p("outbox"), "wallet_outbox");
        assert_eq!(
            home_marker_key(&table),
            "outbox/wallet_outbox/_archive.json"
        );
        assert_eq!(app_and_day(&table, home_marker_key(&table).as_str()), None);
        let marker = HomeMarker {
            archive_id: "0123456789abcdef0123456789abcdef".into(),
            table: "wallet_outbox".into(),
            database: "wallet".into(),
            created_at_ms: 1_767_225_600_000,
        };
        let bytes = marker.to_bytes();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            "{\"archive_id\":\"0123456789abcdef0123456789abcdef\",\"table\":\"wallet_outbox\",\"database\":\"wallet\",\"created_at_ms\":1767225600000}\n"
        );
        assert_eq!(HomeMarker::parse(&bytes), Some(marker));
        assert_eq!(HomeMarker::parse(b"{\"archive_id\":\"xyz\"}"), None);
        assert_eq!(HomeMarker::parse(b"not json"), None);
    }

    #[test]
    fn manifest_has_the_contract_order_and_exact_totals() {
        let data = ObjectDigest {
            sha256: "cd".repeat(32),
            crc64: u64::MAX,
            size: 99,
        };
        let docs = documents(&p("p"), "wallet_outbox", "app1", &facts(), &data, None);
        let text = String::from_utf8(docs.manifest.clone()).unwrap();
        let expected = format!(
            concat!(
                r#"{{"schema_version":1,"table":"wallet_outbox","app_code":"app1","batch_id":"{id}","#,
                r#""data_object_key":"p/wallet_outbox/app_code=app1/dt=2023-11-14/{id}/data.ndjson.gz","#,
                r#""row_count":3,"first_cursor":{{"updated_at_ms":1700000000000,"event_id":"e-1"}},"#,
                r#""last_cursor":{{"updated_at_ms":1700000000500,"event_id":"e-3"}},"#,
                r#""min_created_at_ms":1699999999000,"max_created_at_ms":1700000000400,"#,
                r#""available_delta_total":"27670116110564327421","frozen_delta_total":"-7","#,
                r#""ndjson_sha256":"{ab}","gzip_sha256":"{cd}","data_crc64":"18446744073709551615","#,
                r#""uncompressed_bytes":1234,"compressed_bytes":99}}"#,
                "\n"
            ),
            id = docs.batch_id,
            ab = "ab".repeat(32),
            cd = "cd".repeat(32)
        );
        assert_eq!(text, expected);
        let success = String::from_utf8(docs.success).unwrap();
        assert_eq!(
            success,
            format!(
                "{{\"batch_id\":\"{}\",\"manifest_sha256\":\"{}\",\"row_count\":3}}\n",
                docs.batch_id,
                sha256_hex(&docs.manifest)
            )
        );
    }

    #[test]
    fn a_logs_keys_are_built_and_parsed_here() {
        let logs = logs_prefix(&p("outbox/wallet_outbox"));
        assert_eq!(logs.as_str(), "outbox/wallet_outbox/_log/");
        let log = log_prefix(&p("outbox/wallet_outbox"), "Pay");
        assert_eq!(log.as_str(), "outbox/wallet_outbox/_log/app_code=Pay/");
        let key = format!("{log}{LOG_CHECKPOINT}");
        assert_eq!(log_folder_of_key(&logs, &key), Some("Pay"));
        assert_eq!(
            log_folder_of_key(&logs, "outbox/wallet_outbox/app_code=x/dt=1/a"),
            None
        );
        assert_eq!(log_break_path(2, 3), "breaks/00000000000000000002-3.json");
        assert_eq!(log_head_path(5), "heads/99999999999999994");
        assert_eq!(
            log_head_size(&format!("{log}heads/99999999999999994")),
            Some(5)
        );
        assert_eq!(log_head_size("heads/00000000000000000"), Some(HEAD_KEY_MAX));
        assert_eq!(log_head_size("heads/9999"), None);
        assert!(
            log_head_path(300) < log_head_path(299),
            "the largest head lists first"
        );
        assert_eq!(
            log_origin("wallet_outbox", "Pay"),
            "outbox-archive/wallet_outbox/app_code=Pay"
        );
    }
}
