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
use serde::Deserialize as _;

use crate::model::table::{Column, Kind, Layout, TableSpec, TotalKind};

/// One column's value as read from MySQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
    /// A `FLOAT`'s IEEE-754 binary32 bits (compared bit for bit: `-0.0` is not `0.0`).
    Float(u32),
    /// A `DOUBLE`'s IEEE-754 binary64 bits.
    Double(u64),
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

/// A column's value borrowed from wherever the row lives: a database row (archive encodes
/// straight from the protocol buffer, without a `String` per column) or a decoded [`Row`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Bytes(&'a [u8]),
    Float(u32),
    Double(u64),
}

impl Value {
    pub(crate) fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Int(*v),
            Value::Text(s) => ValueRef::Text(s),
            Value::Bytes(b) => ValueRef::Bytes(b),
            Value::Float(bits) => ValueRef::Float(*bits),
            Value::Double(bits) => ValueRef::Double(*bits),
        }
    }
}

impl<'a> ValueRef<'a> {
    pub fn as_i64(self) -> Option<i64> {
        match self {
            ValueRef::Int(v) => Some(v),
            _ => None,
        }
    }

    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Int(v) => Value::Int(v),
            ValueRef::Text(s) => Value::Text(s.to_string()),
            ValueRef::Bytes(b) => Value::Bytes(b.to_vec()),
            ValueRef::Float(bits) => Value::Float(bits),
            ValueRef::Double(bits) => Value::Double(bits),
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        match self {
            ValueRef::Text(s) => Some(s),
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
    encode_values(spec, row.iter().map(Value::as_ref), out)
}

/// [`encode_line`] over borrowed values, in the table's column order.
pub(crate) fn encode_values<'a>(
    spec: &TableSpec,
    values: impl IntoIterator<Item = ValueRef<'a>>,
    out: &mut Vec<u8>,
) {
    out.push(b'{');
    let mut count = 0;
    for (column, value) in spec.columns.iter().zip(values) {
        if count > 0 {
            out.push(b',');
        }
        count += 1;
        out.push(b'"');
        out.extend_from_slice(column.json_key.as_bytes());
        out.extend_from_slice(b"\":");
        write_value(out, column, value);
    }
    assert_eq!(count, spec.columns.len(), "a row of {}", spec.name);
    out.extend_from_slice(b"}\n");
}

/// Appends one column's value as a line writes it.
fn write_value(out: &mut Vec<u8>, column: &Column, value: ValueRef<'_>) {
    match (column.kind, value) {
        (_, ValueRef::Null) if column.nullable => out.extend_from_slice(b"null"),
        (Kind::Int, ValueRef::Int(v)) => {
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes())
        }
        (Kind::Timestamp, ValueRef::Text(s)) => {
            // UTC, said with a `Z` (the text has nothing to escape: the closing quote is
            // the last byte).
            write_str(out, s);
            out.pop();
            out.extend_from_slice(b"Z\"");
        }
        (kind, ValueRef::Text(s)) if kind.is_text() => write_str(out, s),
        (Kind::Blob, ValueRef::Bytes(b)) => {
            write_str(out, &base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Kind::Float, ValueRef::Float(bits)) => {
            out.extend_from_slice(shortest_f32(f32::from_bits(bits)).as_bytes())
        }
        (Kind::Double, ValueRef::Double(bits)) => {
            out.extend_from_slice(shortest_f64(f64::from_bits(bits)).as_bytes())
        }
        (kind, value) => panic!("column {} of kind {kind:?} holds {value:?}", column.name),
    }
}

/// One column's value as JSON text, exactly as a line would hold it (`"eu"`, `42`, `null`): what
/// builds before layout 2 recorded of a column a batch's lines lack (the tests hold it to decode).
#[cfg(test)]
pub(crate) fn encode_value(column: &Column, value: ValueRef<'_>) -> String {
    let mut out = Vec::new();
    write_value(&mut out, column, value);
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// A value [`encode_value`] wrote, read back as `column`'s.
pub(crate) fn decode_value(column: &Column, json: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(json);
    ValueSeed(column)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|_| v))
        .map_err(|e| format!("{}: {e}", column.name))
}

/// A FLOAT's value as a line writes it: the shortest decimal that reads back to the same bits
/// (ryu's form: `0.1`, `1e-7`, `16777216.0`, `-0.0`). A server never holds NaN or an infinity.
pub(crate) fn shortest_f32(v: f32) -> String {
    ryu::Buffer::new().format_finite(v).to_string()
}

/// A DOUBLE's value as a line writes it (see [`shortest_f32`]).
pub(crate) fn shortest_f64(v: f64) -> String {
    ryu::Buffer::new().format_finite(v).to_string()
}

/// A FLOAT or DOUBLE column's value from a line's number text: read back exactly (Rust's
/// parsing rounds correctly) and held to be the shortest form of those bits, so that one value
/// has one line.
fn float_value(column: &Column, text: &str) -> Result<Value, String> {
    let not_shortest = |shortest: String| {
        format!(
            "{}: {text} is not the shortest decimal of its {} value ({shortest})",
            column.json_key,
            column.kind.encoding()
        )
    };
    let bad = |e: std::num::ParseFloatError| format!("{}: {text}: {e}", column.json_key);
    if text.starts_with('"') {
        return Err(format!(
            "{}: {text} is a string, not a number",
            column.json_key
        ));
    }
    match column.kind {
        Kind::Float => {
            let v: f32 = text.parse().map_err(bad)?;
            let shortest = shortest_f32(v);
            match v.is_finite() && shortest == text {
                true => Ok(Value::Float(v.to_bits())),
                false => Err(not_shortest(shortest)),
            }
        }
        _ => {
            let v: f64 = text.parse().map_err(bad)?;
            let shortest = shortest_f64(v);
            match v.is_finite() && shortest == text {
                true => Ok(Value::Double(v.to_bits())),
                false => Err(not_shortest(shortest)),
            }
        }
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing JSON into a Vec cannot fail");
}

/// A text-carried column's value from its JSON string: base64 decoded, a timestamp's `Z` taken
/// off (and required).
fn text_value(column: &Column, text: String) -> Result<Value, String> {
    match column.kind {
        Kind::Blob => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map(Value::Bytes)
            .map_err(|e| format!("{}: {e}", column.json_key)),
        Kind::Timestamp => utc_text(column, &text).map(|t| Value::Text(t.to_string())),
        _ => Ok(Value::Text(text)),
    }
}

/// A timestamp's text without its `Z`.
fn utc_text<'t>(column: &Column, text: &'t str) -> Result<&'t str, String> {
    text.strip_suffix('Z').ok_or_else(|| {
        format!(
            "{}: {text:?} is not a UTC timestamp (YYYY-MM-DDTHH:MM:SS[.f…]Z)",
            column.json_key
        )
    })
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
            map.next_key_seed(KeyIs(column.json_key))?
                .ok_or_else(|| de::Error::custom(format!("missing key {:?}", column.json_key)))?;
            row.push(map.next_value_seed(ValueSeed(column))?);
        }
        if let Some(extra) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            return Err(de::Error::custom(format!("unexpected key {extra:?}")));
        }
        Ok(row)
    }
}

/// One column's value in a line, by its kind.
struct ValueSeed<'a>(&'a Column);

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        let column = self.0;
        if column.kind.is_float() {
            let raw = match column.nullable {
                true => Option::<Box<serde_json::value::RawValue>>::deserialize(deserializer)?,
                false => Some(Box::<serde_json::value::RawValue>::deserialize(
                    deserializer,
                )?),
            };
            return match raw {
                None => Ok(Value::Null),
                Some(raw) => float_value(column, raw.get()).map_err(de::Error::custom),
            };
        }
        if column.kind == Kind::Int {
            let v = match column.nullable {
                true => Option::<i64>::deserialize(deserializer)?,
                false => Some(i64::deserialize(deserializer)?),
            };
            return Ok(v.map_or(Value::Null, Value::Int));
        }
        let text = match column.nullable {
            true => Option::<String>::deserialize(deserializer)?,
            false => Some(String::deserialize(deserializer)?),
        };
        match text {
            None => Ok(Value::Null),
            Some(text) => text_value(column, text).map_err(de::Error::custom),
        }
    }
}

/// The keys of one NDJSON line (without its `\n`), in order; the values are only checked to be
/// JSON.
pub(crate) fn line_keys(line: &[u8]) -> Result<Vec<String>, String> {
    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a record object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
            let mut keys = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<de::IgnoredAny>()?;
                keys.push(key);
            }
            Ok(keys)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    de::Deserializer::deserialize_map(&mut de, Keys)
        .and_then(|keys| de.end().map(|_| keys))
        .map_err(|e| e.to_string())
}

/// At most this many control-total columns per table (checked by [`crate::model::table`]'s tests).
pub(crate) const MAX_TOTALS: usize = 4;

/// What a batch folds in from one row besides its line: the member key, the cursor's and the
/// created-at column's values, and the control-total columns, in the table's totals order: a
/// summed column's integer in `totals`, a hashed column's bytes in `hashed` (`None` where the
/// total at that slot is not hashed; `Some(None)`: NULL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowFacts {
    pub event_id: String,
    pub updated_at_ms: i64,
    pub created_at_ms: i64,
    pub totals: [i64; MAX_TOTALS],
    pub hashed: [Option<Option<Vec<u8>>>; MAX_TOTALS],
}

/// The facts of a row of `app_code` whose values `value(i)` gives by column position.
pub(crate) fn facts_of<'a>(
    spec: &TableSpec,
    layout: &Layout,
    app_code: &str,
    value: impl Fn(usize) -> ValueRef<'a>,
) -> Result<RowFacts, String> {
    let app = value(layout.app_code).as_str();
    if !app.is_some_and(|app| crate::model::appcode::same_app(app, app_code)) {
        return Err(format!("row of app {app:?} in a batch of app {app_code:?}"));
    }
    let int = |index: usize| {
        value(index)
            .as_i64()
            .ok_or_else(|| format!("column {} is not an integer", spec.columns[index].name))
    };
    let mut totals = [0; MAX_TOTALS];
    let mut hashed: [Option<Option<Vec<u8>>>; MAX_TOTALS] = Default::default();
    for (k, (total, &index)) in spec.totals.iter().zip(&layout.totals).enumerate() {
        match total.kind {
            TotalKind::Sum => totals[k] = int(index)?,
            TotalKind::Sha256 => {
                hashed[k] = Some(match value(index) {
                    ValueRef::Null => None,
                    ValueRef::Bytes(b) => Some(b.to_vec()),
                    ValueRef::Text(s) => Some(s.as_bytes().to_vec()),
                    other => {
                        return Err(format!(
                            "column {} holds {other:?}, which a hashed total cannot take",
                            spec.columns[index].name
                        ))
                    }
                });
            }
        }
    }
    Ok(RowFacts {
        event_id: match value(layout.event_id) {
            ValueRef::Text(id) => id.to_string(),
            other => return Err(format!("event_id is {other:?}")),
        },
        updated_at_ms: int(layout.updated_at_ms)?,
        created_at_ms: int(layout.created_at_ms)?,
        totals,
        hashed,
    })
}

/// Reads one NDJSON line (without its `\n`) of `app_code` as strictly as [`decode_line`] — the
/// keys exactly the table's, in order, each value of its column's JSON type, base64 that decodes
/// — but builds no row: only the [`RowFacts`]. A string without escapes is never copied.
pub(crate) fn scan_line(
    spec: &TableSpec,
    layout: &Layout,
    app_code: &str,
    line: &[u8],
    line_no: u64,
) -> Result<RowFacts, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let error = |message: String| DecodeError {
        line: line_no,
        message,
    };
    let scanned = de::Deserializer::deserialize_map(&mut de, RowScan { spec, layout })
        .and_then(|scanned| de.end().map(|_| scanned))
        .map_err(|e| error(e.to_string()))?;
    facts_of(spec, layout, app_code, |i| scanned.value(layout, i)).map_err(error)
}

/// The values [`RowScan`] kept: the role columns only, texts borrowed from the line where
/// unescaped, integers in the slots of their roles.
#[derive(Default)]
struct Scanned<'de> {
    app_code: std::borrow::Cow<'de, str>,
    event_id: std::borrow::Cow<'de, str>,
    updated_at_ms: Option<i64>,
    created_at_ms: Option<i64>,
    totals: [Option<i64>; MAX_TOTALS],
    /// The decoded bytes of a hashed total's column (base64 in the line), by total slot.
    blobs: [Option<Vec<u8>>; MAX_TOTALS],
}

impl Scanned<'_> {
    /// Column `index`'s value, for [`facts_of`] (which asks only for the role columns).
    fn value(&self, layout: &Layout, index: usize) -> ValueRef<'_> {
        let int = |v: Option<i64>| v.map_or(ValueRef::Null, ValueRef::Int);
        if index == layout.app_code {
            ValueRef::Text(&self.app_code)
        } else if index == layout.event_id {
            ValueRef::Text(&self.event_id)
        } else if index == layout.updated_at_ms {
            int(self.updated_at_ms)
        } else if index == layout.created_at_ms {
            int(self.created_at_ms)
        } else {
            let k = layout.totals.iter().position(|&t| t == index);
            match k.and_then(|k| self.blobs[k].as_deref()) {
                Some(bytes) => ValueRef::Bytes(bytes),
                None => int(k.and_then(|k| self.totals[k])),
            }
        }
    }

    /// Keeps an integer column's value if the column has a role.
    fn keep_int(&mut self, layout: &Layout, index: usize, value: Option<i64>) {
        if index == layout.updated_at_ms {
            self.updated_at_ms = value;
        }
        if index == layout.created_at_ms {
            self.created_at_ms = value;
        }
        for (slot, &t) in self.totals.iter_mut().zip(&layout.totals) {
            if t == index {
                *slot = value;
            }
        }
    }
}

struct RowScan<'a> {
    spec: &'a TableSpec,
    layout: &'a Layout,
}

impl<'de> Visitor<'de> for RowScan<'_> {
    type Value = Scanned<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a {} record object", self.spec.name)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scanned<'de>, A::Error> {
        let mut scanned = Scanned::default();
        for (index, column) in self.spec.columns.iter().enumerate() {
            match map.next_key_seed(KeyIs(column.json_key))? {
                Some(()) => {}
                None => {
                    return Err(de::Error::custom(format!(
                        "missing key {:?}",
                        column.json_key
                    )))
                }
            }
            if index == self.layout.app_code || index == self.layout.event_id {
                let Text(text) = map.next_value()?;
                if index == self.layout.app_code {
                    scanned.app_code = text;
                } else {
                    scanned.event_id = text;
                }
                continue;
            }
            let total = self.layout.totals.iter().position(|&t| t == index);
            if column.kind == Kind::Int {
                let v = match column.nullable {
                    true => map.next_value::<Option<i64>>()?,
                    false => Some(map.next_value::<i64>()?),
                };
                scanned.keep_int(self.layout, index, v);
                continue;
            }
            if column.kind.is_float() {
                // Never a fact (no total takes one): held to its shortest form.
                let raw = match column.nullable {
                    true => map.next_value::<Option<&serde_json::value::RawValue>>()?,
                    false => Some(map.next_value::<&serde_json::value::RawValue>()?),
                };
                if let Some(raw) = raw {
                    float_value(column, raw.get()).map_err(de::Error::custom)?;
                }
                continue;
            }
            if total.is_none() && !matches!(column.kind, Kind::Blob | Kind::Timestamp) {
                // Not a fact: only held to be a string (unescaped by the parser, not copied).
                match column.nullable {
                    true => map.next_value::<Option<AString>>().map(drop)?,
                    false => map.next_value::<AString>().map(drop)?,
                }
                continue;
            }
            let text = match column.nullable {
                true => map.next_value::<Option<Text>>()?,
                false => Some(map.next_value::<Text>()?),
            };
            let Some(Text(text)) = text else {
                continue;
            };
            match column.kind {
                Kind::Blob => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(text.as_bytes())
                        .map_err(|e| de::Error::custom(format!("{}: {e}", column.json_key)))?;
                    // A hashed total's column: kept for the total; else only checked.
                    if let Some(k) = total {
                        scanned.blobs[k] = Some(bytes);
                    }
                }
                kind => {
                    let text = match kind {
                        Kind::Timestamp => utc_text(column, &text).map_err(de::Error::custom)?,
                        _ => &text,
                    };
                    if let Some(k) = total {
                        scanned.blobs[k] = Some(text.as_bytes().to_vec());
                    }
                }
            }
        }
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!("unexpected key {extra:?}")));
        }
        Ok(scanned)
    }
}

/// A JSON string, borrowed from the line when it holds no escapes.
struct Text<'de>(std::borrow::Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Owned(v.to_string())))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// A JSON string whose value is not kept.
struct AString;

impl<'de> de::Deserialize<'de> for AString {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AStringVisitor;
        impl Visitor<'_> for AStringVisitor {
            type Value = AString;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<AString, E> {
                Ok(AString)
            }
        }
        deserializer.deserialize_str(AStringVisitor)
    }
}

/// A map key that must be exactly this one (compared without copying it).
struct KeyIs(&'static str);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "the key {:?}", self.0)
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<(), E> {
        if key == self.0 {
            Ok(())
        } else {
            Err(E::custom(format!(
                "expected key {:?}, found {key:?}",
                self.0
            )))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::table::{ROOM_OUTBOX, WALLET_OUTBOX};

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

    fn float_column(kind: Kind) -> Column {
        Column {
            name: "rate",
            json_key: "rate",
            kind,
            nullable: true,
            unsigned: false,
        }
    }

    /// The shortest decimal that reads back to the same bits, as a line writes it: fixed
    /// vectors at the edges (the smallest subnormal, the largest finite, a negative zero,
    /// exponents, a FLOAT's 2^24), each read back to its bits.
    #[test]
    fn a_float_is_its_shortest_decimal_and_reads_back_bit_for_bit() {
        let doubles: [(f64, &str); 9] = [
            (0.1, "0.1"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e308"),
            (1e21, "1e21"),
            (123_456.789, "123456.789"),
            (-2.5e-10, "-2.5e-10"),
            (0.30000000000000004, "0.30000000000000004"),
        ];
        let double = float_column(Kind::Double);
        for (v, text) in doubles {
            assert_eq!(shortest_f64(v), text);
            assert_eq!(encode_value(&double, ValueRef::Double(v.to_bits())), text);
            assert_eq!(decode_value(&double, text), Ok(Value::Double(v.to_bits())));
        }
        let floats: [(f32, &str); 6] = [
            (0.1, "0.1"),
            (16_777_216.0, "16777216.0"),
            (f32::MAX, "3.4028235e38"),
            (1e-7, "1e-7"),
            (-0.0, "-0.0"),
            (f32::from_bits(1), "1e-45"),
        ];
        let float = float_column(Kind::Float);
        for (v, text) in floats {
            assert_eq!(shortest_f32(v), text);
            assert_eq!(encode_value(&float, ValueRef::Float(v.to_bits())), text);
            assert_eq!(decode_value(&float, text), Ok(Value::Float(v.to_bits())));
        }
        assert_eq!(decode_value(&float, "null"), Ok(Value::Null));
        assert_ne!(
            Value::Double((-0.0f64).to_bits()),
            Value::Double(0.0f64.to_bits())
        );
    }

    /// One value, one line: any other spelling of a number (trailing zeros, no fraction, an
    /// upper-case exponent, a FLOAT written with a DOUBLE's digits) or a string is refused.
    #[test]
    fn a_float_in_another_spelling_is_refused() {
        let double = float_column(Kind::Double);
        for text in ["0.10", "1", "1E21", "\"0.1\"", "1e400", "00.1"] {
            assert!(decode_value(&double, text).is_err(), "{text}");
        }
        let float = float_column(Kind::Float);
        let widened = shortest_f64(f64::from(0.1f32));
        assert_eq!(widened, "0.10000000149011612");
        assert!(decode_value(&float, &widened).is_err());
    }

    proptest::proptest! {
        #[test]
        fn every_finite_double_and_float_reads_back_to_its_bits(bits: u64, bits32: u32) {
            let v = f64::from_bits(bits);
            if v.is_finite() {
                let text = shortest_f64(v);
                proptest::prop_assert_eq!(
                    decode_value(&float_column(Kind::Double), &text),
                    Ok(Value::Double(bits))
                );
            }
            let v = f32::from_bits(bits32);
            if v.is_finite() {
                let text = shortest_f32(v);
                proptest::prop_assert_eq!(
                    decode_value(&float_column(Kind::Float), &text),
                    Ok(Value::Float(bits32))
                );
            }
        }
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
    fn one_value_is_written_as_a_line_writes_it_and_read_back() {
        let column = |kind, nullable| Column {
            name: "c",
            json_key: "c",
            kind,
            nullable,
            unsigned: false,
        };
        let cases = [
            (
                column(Kind::Text, true),
                ValueRef::Text("é \"q\"\n"),
                "\"é \\\"q\\\"\\n\"",
            ),
            (column(Kind::Text, true), ValueRef::Null, "null"),
            (column(Kind::Int, false), ValueRef::Int(-42), "-42"),
            (
                column(Kind::Blob, false),
                ValueRef::Bytes(&[0, 1, 2]),
                "\"AAEC\"",
            ),
            (
                column(Kind::Timestamp, false),
                ValueRef::Text("2026-01-02T03:04:05.678"),
                "\"2026-01-02T03:04:05.678Z\"",
            ),
        ];
        for (c, value, json) in cases {
            assert_eq!(encode_value(&c, value), json);
            assert_eq!(decode_value(&c, json).unwrap(), value.to_value(), "{json}");
        }
        assert!(decode_value(&column(Kind::Int, false), "null").is_err());
        assert!(decode_value(&column(Kind::Int, true), "\"7\"").is_err());
        assert!(decode_value(&column(Kind::Text, true), "\"a\" 1").is_err());
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
        // The scanner that archive's read-back and verify use is exactly as strict.
        let layout = WALLET_OUTBOX.layout();
        let scan = |l: &str| scan_line(&WALLET_OUTBOX, &layout, "app1", l.as_bytes(), 1);
        assert!(scan(line).is_ok());
        let mistyped_text = line.replace(r#""asset_type":"COIN""#, r#""asset_type":7"#);
        let null_text = line.replace(r#""asset_type":"COIN""#, r#""asset_type":null"#);
        for bad in [
            swapped,
            extra,
            missing,
            mistyped,
            not_null,
            mistyped_text,
            null_text,
            format!("{line} x"),
        ] {
            assert!(
                decode_line(&WALLET_OUTBOX, bad.as_bytes(), 1).is_err(),
                "{bad}"
            );
            assert!(scan(&bad).is_err(), "{bad}");
        }
        let other_app = scan_line(&WALLET_OUTBOX, &layout, "app2", line.as_bytes(), 1);
        assert!(other_app.unwrap_err().message.contains("row of app"));
    }

    /// The scanner's facts are those of the decoded row, escapes or not.
    #[test]
    fn scan_finds_what_decoding_finds() {
        let layout = WALLET_OUTBOX.layout();
        for id in ["e-1", "e\\\"quoted\"\n", "é😀\u{1}"] {
            let row = wallet_row(id, "{\"k\": \"v\\n\"}");
            let mut out = Vec::new();
            encode_line(&WALLET_OUTBOX, &row, &mut out);
            let body = &out[..out.len() - 1];
            let scanned = scan_line(&WALLET_OUTBOX, &layout, "app1", body, 1).unwrap();
            let decoded = decode_line(&WALLET_OUTBOX, body, 1).unwrap();
            let facts = facts_of(&WALLET_OUTBOX, &layout, "app1", |i| decoded[i].as_ref());
            assert_eq!(scanned, facts.unwrap());
            assert_eq!(scanned.event_id, id);
            assert_eq!(scanned.totals[..2], [i64::MAX, i64::MIN]);
        }
    }

    pub(crate) fn room_row(event_id: &str, room_id: i64, envelope: &[u8]) -> Row {
        vec![
            Value::Text("a".into()),
            Value::Text(event_id.into()),
            Value::Text("GiftSent".into()),
            Value::Int(room_id),
            Value::Text("DELIVERED".into()),
            Value::Text(String::new()),
            Value::Null,
            Value::Bytes(envelope.to_vec()),
            Value::Int(1),
            Value::Int(0),
            Value::Int(0),
            Value::Null,
            Value::Int(2),
        ]
    }

    /// A second outbox table is a description, not new code: room_outbox, whose envelope is a
    /// protobuf BLOB, round-trips through the same codec.
    #[test]
    fn a_blob_table_is_just_another_spec() {
        const ROOM: &TableSpec = &ROOM_OUTBOX;
        let row = room_row("r-1", 7, &[0, 159, 146, 150, 255]);
        // The hashed total's column is kept, decoded, by the scanner as by the encoder.
        let layout = ROOM.layout();
        let mut line = Vec::new();
        encode_line(ROOM, &row, &mut line);
        let scanned = scan_line(ROOM, &layout, "a", &line[..line.len() - 1], 1).unwrap();
        let encoded = facts_of(ROOM, &layout, "a", |i| row[i].as_ref()).unwrap();
        assert_eq!(scanned, encoded);
        assert_eq!(scanned.totals[0], 7);
        assert_eq!(scanned.hashed[1], Some(Some(vec![0, 159, 146, 150, 255])));
        let mut out = Vec::new();
        encode_line(ROOM, &row, &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            concat!(
                r#"{"app_code":"a","event_id":"r-1","event_type":"GiftSent","room_id":7,"status":"DELIVERED","#,
                r#""worker_id":"","lock_until_ms":null,"envelope_base64":"AJ+Slv8=","created_at_ms":1,"#,
                r#""retry_count":0,"next_retry_at_ms":0,"last_error":null,"updated_at_ms":2}"#,
                "\n"
            )
        );
        assert_eq!(decode_line(ROOM, &out[..out.len() - 1], 1).unwrap(), row);
        assert_eq!(ROOM.layout().totals.len(), 2);
    }
}
