//! One source row ⇄ one NDJSON line (SPEC §4).
//!
//! A line is a compact JSON object with exactly the table's keys in the table's order, written the
//! way `serde_json::to_string` writes strings (only `"`, `\` and U+0000–U+001F escaped, everything
//! else raw UTF-8), integers as JSON numbers, NULL as `null`. Any two correct implementations give
//! the same bytes, which is what makes batch ids reproducible. Decoding is strict: the keys must be
//! exactly the table's, in order, with the right JSON types.

use std::fmt;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

use crate::table::{Kind, TableSpec};

/// One column's value as read from MySQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Value {
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// A row in archive order.
pub type Row = Vec<Value>;

/// Appends the row's NDJSON line, `\n` included, to `out`.
///
/// Panics if a value does not fit its column's kind: rows come from [`crate::db`], which decodes
/// by kind, so a mismatch is a programming error, not bad data.
pub fn encode_line(spec: &TableSpec, row: &[Value], out: &mut Vec<u8>) {
    debug_assert_eq!(row.len(), spec.columns.len());
    out.push(b'{');
    for (i, (column, value)) in spec.columns.iter().zip(row).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(column.json_key.as_bytes());
        out.extend_from_slice(b"\":");
        match (column.kind, value) {
            (_, Value::Null) if column.kind.nullable() => out.extend_from_slice(b"null"),
            (Kind::Int | Kind::NullableInt, Value::Int(v)) => {
                out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes())
            }
            (Kind::Text | Kind::NullableText | Kind::JsonText, Value::Text(s)) => write_str(out, s),
            (Kind::Blob, Value::Bytes(b)) => {
                write_str(out, &base64::engine::general_purpose::STANDARD.encode(b))
            }
            (kind, value) => panic!("column {} of kind {kind:?} holds {value:?}", column.name),
        }
    }
    out.extend_from_slice(b"}\n");
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing JSON into a Vec cannot fail");
}

/// Why a line is not a row of this table.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct DecodeError {
    pub line: u64,
    pub message: String,
}

/// Parses one NDJSON line (without its `\n`) into a row of `spec`.
pub fn decode_line(spec: &TableSpec, line: &[u8], line_no: u64) -> Result<Row, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let row = RowSeed(spec)
        .deserialize(&mut de)
        .and_then(|row| de.end().map(|_| row))
        .map_err(|e| DecodeError {
            line: line_no,
            message: e.to_string(),
        })?;
    Ok(row)
}

struct RowSeed<'a>(&'a TableSpec);

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = Row;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Row, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = Row;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a {} record object", self.0.name)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Row, A::Error> {
        let mut row = Vec::with_capacity(self.0.columns.len());
        for column in self.0.columns {
            let key: std::borrow::Cow<'de, str> = map
                .next_key()?
                .ok_or_else(|| de::Error::custom(format!("missing key {:?}", column.json_key)))?;
            if key != column.json_key {
                return Err(de::Error::custom(format!(
                    "expected key {:?}, found {key:?}",
                    column.json_key
                )));
            }
            let value = match column.kind {
                Kind::Int => Value::Int(map.next_value()?),
                Kind::NullableInt => map
                    .next_value::<Option<i64>>()?
                    .map_or(Value::Null, Value::Int),
                Kind::Text | Kind::JsonText => Value::Text(map.next_value()?),
                Kind::NullableText => map
                    .next_value::<Option<String>>()?
                    .map_or(Value::Null, Value::Text),
                Kind::Blob => {
                    let text: String = map.next_value()?;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .map_err(|e| de::Error::custom(format!("{}: {e}", column.json_key)))?;
                    Value::Bytes(bytes)
                }
            };
            row.push(value);
        }
        if let Some(extra) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            return Err(de::Error::custom(format!("unexpected key {extra:?}")));
        }
        Ok(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{col, col_as, Total, WALLET_OUTBOX};

    pub(crate) fn wallet_row(event_id: &str, payload: &str) -> Row {
        vec![
            Value::Text("app1".into()),
            Value::Text(event_id.into()),
            Value::Text("WalletCredited".into()),
            Value::Text("tx-1".into()),
            Value::Text("cmd-1".into()),
            Value::Int(42),
            Value::Text("COIN".into()),
            Value::Int(i64::MAX),
            Value::Int(i64::MIN),
            Value::Text(payload.into()),
            Value::Text("DELIVERED".into()),
            Value::Text(String::new()),
            Value::Null,
            Value::Int(0),
            Value::Null,
            Value::Text("boom\n\"quoted\"\\".into()),
            Value::Int(1_700_000_000_000),
            Value::Int(1_700_000_000_123),
        ]
    }

    #[test]
    fn encodes_the_fixed_vector() {
        let mut out = Vec::new();
        encode_line(
            &WALLET_OUTBOX,
            &wallet_row("e-1", r#"{"a": "é\u0001"}"#),
            &mut out,
        );
        let expected = concat!(
            r#"{"app_code":"app1","event_id":"e-1","event_type":"WalletCredited","#,
            r#""transaction_id":"tx-1","command_id":"cmd-1","user_id":42,"asset_type":"COIN","#,
            r#""available_delta":9223372036854775807,"frozen_delta":-9223372036854775808,"#,
            r#""payload_json":"{\"a\": \"é\\u0001\"}","status":"DELIVERED","worker_id":"","#,
            r#""lock_until_ms":null,"retry_count":0,"next_retry_at_ms":null,"#,
            r#""last_error":"boom\n\"quoted\"\\","created_at_ms":1700000000000,"#,
            r#""updated_at_ms":1700000000123}"#,
            "\n"
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn escapes_control_characters_like_serde_json() {
        let mut out = Vec::new();
        let text: String = (0u8..0x20)
            .map(char::from)
            .chain("\u{7f}€😀".chars())
            .collect();
        write_str(&mut out, &text);
        assert_eq!(out, serde_json::to_string(&text).unwrap().into_bytes());
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("\\b\\t\\n\\u000b\\f\\r"));
    }

    #[test]
    fn decode_round_trips() {
        let row = wallet_row("e-2", "[1,2,{\"k\":null}]");
        let mut out = Vec::new();
        encode_line(&WALLET_OUTBOX, &row, &mut out);
        let decoded = decode_line(&WALLET_OUTBOX, &out[..out.len() - 1], 1).unwrap();
        assert_eq!(decoded, row);
    }

    #[test]
    fn decode_rejects_reordered_missing_extra_and_mistyped_keys() {
        let mut out = Vec::new();
        encode_line(&WALLET_OUTBOX, &wallet_row("e-3", "{}"), &mut out);
        let line = String::from_utf8(out).unwrap();
        let line = line.trim_end();
        let swapped = line.replacen(
            r#""app_code":"app1","event_id":"e-3""#,
            r#""event_id":"e-3","app_code":"app1""#,
            1,
        );
        assert!(decode_line(&WALLET_OUTBOX, swapped.as_bytes(), 1).is_err());
        let extra = format!("{},\"x\":1}}", &line[..line.len() - 1]);
        assert!(decode_line(&WALLET_OUTBOX, extra.as_bytes(), 1).is_err());
        let missing = line.replace(r#","updated_at_ms":1700000000123"#, "");
        assert!(decode_line(&WALLET_OUTBOX, missing.as_bytes(), 1).is_err());
        let mistyped = line.replace(r#""user_id":42"#, r#""user_id":"42""#);
        let err = decode_line(&WALLET_OUTBOX, mistyped.as_bytes(), 7).unwrap_err();
        assert_eq!(err.line, 7);
        let not_null = line.replace(r#""user_id":42"#, r#""user_id":null"#);
        assert!(decode_line(&WALLET_OUTBOX, not_null.as_bytes(), 1).is_err());
        assert!(decode_line(&WALLET_OUTBOX, format!("{line} x").as_bytes(), 1).is_err());
    }

    /// A second outbox table is a description, not new code: a room_outbox whose envelope is a
    /// protobuf BLOB round-trips through the same codec.
    #[test]
    fn a_blob_table_is_just_another_spec() {
        static ROOM: TableSpec = TableSpec {
            name: "room_outbox",
            columns: &[
                col("app_code", Kind::Text),
                col("event_id", Kind::Text),
                col_as("envelope", "envelope_base64", Kind::Blob),
                col("status", Kind::Text),
                col("created_at_ms", Kind::Int),
                col("updated_at_ms", Kind::Int),
            ],
            app_code: "app_code",
            event_id: "event_id",
            updated_at_ms: "updated_at_ms",
            created_at_ms: "created_at_ms",
            status: "status",
            totals: &[] as &[Total],
            retention_index: "idx_room_outbox_retention",
            source_ddl: "",
        };
        let row = vec![
            Value::Text("a".into()),
            Value::Text("r-1".into()),
            Value::Bytes(vec![0, 159, 146, 150, 255]),
            Value::Text("DELIVERED".into()),
            Value::Int(1),
            Value::Int(2),
        ];
        let mut out = Vec::new();
        encode_line(&ROOM, &row, &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "{\"app_code\":\"a\",\"event_id\":\"r-1\",\"envelope_base64\":\"AJ+Slv8=\",\"status\":\"DELIVERED\",\"created_at_ms\":1,\"updated_at_ms\":2}\n"
        );
        assert_eq!(decode_line(&ROOM, &out[..out.len() - 1], 1).unwrap(), row);
        assert_eq!(ROOM.layout().totals.len(), 0);
    }
}
