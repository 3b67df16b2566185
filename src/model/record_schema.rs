//! The JSON Schema of a table's NDJSON record (`outbox-archiver schema`), derived from its
//! [`TableSpec`] as the encoder writes it: for Athena, Glue or DuckDB users reading their own
//! table's archive. `schemas/room_outbox.record.schema.json` is this output for room_outbox (a
//! test holds the file to it).

use serde_json::{json, Map, Value};

use crate::model::table::{Column, Kind, TableSpec, TotalKind};

/// The record schema of `spec`'s NDJSON lines.
pub(crate) fn record_schema(spec: &TableSpec) -> Value {
    let mut properties = Map::new();
    for column in spec.columns {
        properties.insert(column.json_key.to_string(), column_property(spec, column));
    }
    // Every line holds a built-in table's own columns; one written before a column was added to
    // the table lacks it.
    let always = spec.base().map_or(spec.columns, |base| base.columns);
    let required: Vec<&str> = always.iter().map(|c| c.json_key).collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("https://outbox-archiver.dev/schemas/v1/{}.record.schema.json", spec.name),
        "title": format!("{} archive record (schema_version {})", spec.name, crate::model::format::SCHEMA_VERSION),
        "description": "One line of data.ndjson.gz: one source row, whole — every stored column, keys in exactly this order (`required` lists the table's own in order; `properties` any added to it since), then any column added to the table after these, in the table's order — compact JSON. Generated columns are derived and left out.",
        "type": "object",
        "additionalProperties": added_column(),
        "required": required,
        "properties": properties,
    })
}

/// What a key this schema does not list is: a column added to the table since, encoded by its
/// SQL type.
fn added_column() -> Value {
    json!({
        "description": "A stored column added to the table after the columns listed, in the table's column order (a line written before it was added lacks it), encoded by its SQL type as README's \"Archiving another outbox table\" says: a JSON number, a string (text, a JSON value's text, base64, an exact decimal, a date-time) or null. `outbox-archiver schema --database-url …` lists the table's.",
        "type": ["integer", "string", "null"]
    })
}

/// One column's property: its JSON type (or null, if the column is nullable), the keywords
/// that hold its value to the form the encoder writes, and what it is.
fn column_property(spec: &TableSpec, column: &Column) -> Value {
    let (ty, note) = json_type(column.kind);
    let mut property = Map::new();
    property.insert(
        "type".into(),
        if column.nullable {
            json!([ty, "null"])
        } else {
            json!(ty)
        },
    );
    insert_form(column.kind, &mut property);
    let mut said = vec![format!("Column {}.", column.name)];
    said.extend(note.map(str::to_string));
    if column.name == spec.event_id {
        said.push("The event id (with the app code, the row's key).".into());
    }
    for total in spec.totals.iter().filter(|t| t.column == column.name) {
        said.push(match total.kind {
            TotalKind::Sum => format!("Summed into the manifest's {}.", total.field),
            TotalKind::Sha256 => format!("Hashed into the manifest's {}.", total.field),
        });
    }
    property.insert("description".into(), json!(said.join(" ")));
    Value::Object(property)
}

/// The JSON type the encoder writes a kind of column as, and what a reader must know of the
/// value's text.
fn json_type(kind: Kind) -> (&'static str, Option<&'static str>) {
    match kind {
        Kind::Int => ("integer", None),
        Kind::Text => ("string", None),
        Kind::JsonText => (
            "string",
            Some("The JSON value's text, byte for byte as the database returned it."),
        ),
        Kind::Blob => ("string", Some("The column's bytes, standard base64 (RFC 4648, padded).")),
        Kind::Decimal => ("string", Some("The exact decimal text, every digit of the column's scale.")),
        Kind::DateTime => (
            "string",
            Some("YYYY-MM-DDTHH:MM:SS[.f…] (YYYY-MM-DD for a DATE): the wall-clock value as stored, no offset; as many fraction digits as the column's precision."),
        ),
        Kind::Timestamp => (
            "string",
            Some("YYYY-MM-DDTHH:MM:SS[.f…]Z: the instant in UTC; as many fraction digits as the column's precision."),
        ),
        Kind::Float => (
            "number",
            Some("IEEE-754 binary32 (FLOAT): the shortest decimal that reads back to the same bits, as ryu writes it (-0.0 kept)."),
        ),
        Kind::Double => (
            "number",
            Some("IEEE-754 binary64 (DOUBLE): the shortest decimal that reads back to the same bits, as ryu writes it (-0.0 kept)."),
        ),
    }
}

/// The keywords that hold a kind's values to their form: a 64-bit range, an encoding, a pattern.
fn insert_form(kind: Kind, property: &mut Map<String, Value>) {
    match kind {
        Kind::Int => {
            property.insert("minimum".into(), json!(i64::MIN));
            property.insert("maximum".into(), json!(i64::MAX));
        }
        Kind::Blob => {
            property.insert("contentEncoding".into(), json!("base64"));
        }
        Kind::Decimal => {
            property.insert("pattern".into(), json!("^-?[0-9]+(\\.[0-9]+)?$"));
        }
        Kind::DateTime => {
            property.insert(
                "pattern".into(),
                json!("^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?)?$"),
            );
        }
        Kind::Timestamp => {
            property.insert(
                "pattern".into(),
                json!("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?Z$"),
            );
        }
        Kind::Text | Kind::JsonText | Kind::Float | Kind::Double => {}
    }
}

/// The schema as the command prints it: pretty, with a final newline.
pub fn to_text(spec: &TableSpec) -> String {
    let mut text = serde_json::to_string_pretty(&record_schema(spec)).expect("JSON");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::codec;
    use crate::model::table::{ROOM_OUTBOX, WALLET_OUTBOX};

    #[test]
    fn schemas_say_each_column_in_order() {
        let schema = record_schema(&ROOM_OUTBOX);
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(required[7], "envelope_base64");
        assert_eq!(
            schema["properties"]["lock_until_ms"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(
            schema["properties"]["envelope_base64"]["contentEncoding"],
            "base64"
        );
        let wallet = record_schema(&WALLET_OUTBOX);
        assert_eq!(wallet["required"].as_array().unwrap().len(), 18);
        assert_eq!(wallet["properties"]["payload_json"]["type"], "string");
    }

    #[test]
    fn a_built_in_tables_lines_are_valid_under_its_schema() {
        let validator = jsonschema::validator_for(&record_schema(&ROOM_OUTBOX)).unwrap();
        for envelope in [&b""[..], &[0u8][..], &[1, 2, 255][..]] {
            let row = codec::tests::room_row("e1", -7, envelope);
            let mut line = Vec::new();
            codec::encode_line(&ROOM_OUTBOX, &row, &mut line);
            let value: Value = serde_json::from_slice(&line).unwrap();
            assert!(validator.is_valid(&value), "{value}");
            let mut damaged = value.clone();
            damaged["room_id"] = json!("7");
            assert!(!validator.is_valid(&damaged));
            // A column added to the table since: a value of a column, not anything.
            let mut added = value.clone();
            added["region"] = json!("eu");
            assert!(validator.is_valid(&added));
            added["region"] = json!([1]);
            assert!(!validator.is_valid(&added));
            let mut missing = value.clone();
            missing.as_object_mut().unwrap().remove("status");
            assert!(!validator.is_valid(&missing));
        }
    }
}
