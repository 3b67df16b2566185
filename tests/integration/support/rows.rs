//! Rows as tests write them: a wallet_outbox row and a room_outbox row with plain defaults, and
//! column positions from the table description. Pure (no server): the golden tests' binary
//! includes this file too.

use outbox_archiver::{Row, Value};
use outbox_archiver::{TableSpec, WALLET_OUTBOX};

/// A delivered wallet row with plain defaults; tests change what they care about.
pub fn row(app: &str, event_id: &str, updated_at_ms: i64) -> Row {
    vec![
        Value::Text(app.into()),
        Value::Text(event_id.into()),
        Value::Text("WalletCredited".into()),
        Value::Text(format!("tx-{event_id}")),
        Value::Text(format!("cmd-{event_id}")),
        Value::Int(1001),
        Value::Text("COIN".into()),
        Value::Int(100),
        Value::Int(0),
        Value::Text(r#"{"amount": 100}"#.into()),
        Value::Text("DELIVERED".into()),
        Value::Text("relay-1".into()),
        Value::Null,
        Value::Int(0),
        Value::Int(0),
        Value::Null,
        Value::Int(updated_at_ms - 10),
        Value::Int(updated_at_ms),
    ]
}

/// The position of `column` in a wallet_outbox [`Row`], from the table description.
pub fn at(column: &str) -> usize {
    at_in(&WALLET_OUTBOX, column)
}

/// The position of `column` in a [`Row`] of `spec`'s table.
pub fn at_in(spec: &TableSpec, column: &str) -> usize {
    spec.columns
        .iter()
        .position(|c| c.name == column)
        .unwrap_or_else(|| panic!("{} has no column {column}", spec.name))
}

/// A delivered room_outbox row (the room seed's columns) with `envelope` as its protobuf bytes.
pub fn room_row(app: &str, event_id: &str, updated_at_ms: i64, envelope: Vec<u8>) -> Row {
    vec![
        Value::Text(app.into()),
        Value::Text(event_id.into()),
        Value::Text("GiftSent".into()),
        Value::Int(updated_at_ms % 9_973 - 4_000),
        Value::Text("DELIVERED".into()),
        Value::Text(String::new()),
        Value::Null,
        Value::Bytes(envelope),
        Value::Int(updated_at_ms - 10),
        Value::Int(0),
        Value::Int(0),
        Value::Null,
        Value::Int(updated_at_ms),
    ]
}
