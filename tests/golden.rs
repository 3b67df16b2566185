//! Golden vectors: a fixed set of rows gives byte-exact NDJSON, gzip, manifest, `_SUCCESS` and
//! batch id, kept in `tests/golden/`; and the JSON Schemas in `schemas/` accept that output.
//! `UPDATE_GOLDEN=1 cargo test --test golden` rewrites the files that differ and fails, naming each
//! (review the diff: any change breaks reproducibility of batch ids for existing archives; then run
//! it again without the variable). Pure: no server, a binary of its own.

use std::path::PathBuf;

use outbox_archiver::format;
use outbox_archiver::BatchColumns;
use outbox_archiver::{BatchEncoder, EncodedRow, Limits};
use outbox_archiver::{Row, Value};
use outbox_archiver::{TableSpec, ROOM_OUTBOX, WALLET_OUTBOX};

#[path = "integration/support/rows.rs"]
mod rows;

use rows::{at, room_row, row};

fn golden_rows() -> Vec<Row> {
    let t = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    let mut rows = vec![
        row("app1", "evt-0001", t),
        row("app1", "evt-0002", t),
        row("app1", "evt-0000", t + 1),
    ];
    rows[0][at("available_delta")] = Value::Int(i64::MAX);
    rows[1][at("available_delta")] = Value::Int(i64::MAX);
    rows[1][at("frozen_delta")] = Value::Int(i64::MIN);
    rows[1][at("payload")] =
        Value::Text("{\"memo\": \"tab\\t nl\\n quote\\\" back\\\\ é 😀 中\", \"n\": null}".into());
    rows[1][at("lock_until_ms")] = Value::Int(1_767_225_630_000);
    rows[1][at("last_error")] = Value::Text("err\u{1}\u{1f}\n\"x\"\\".into());
    rows[2][at("next_retry_at_ms")] = Value::Null;
    rows
}

/// room_outbox's fixed rows: envelopes empty, 0x00-only, every byte value, and one whose
/// base64 has padding; a NULL lease and an error text that needs escaping.
fn golden_room_rows() -> Vec<Row> {
    let t = 1_767_225_600_000;
    let mut rows = vec![
        room_row("app1", "evt-0001", t, Vec::new()),
        room_row("app1", "evt-0002", t, vec![0; 7]),
        room_row("app1", "evt-0000", t + 1, (0..=255).collect()),
        room_row("app1", "evt-0003", t + 2, b"\x08\x01\x12\x02hi".to_vec()),
    ];
    rows[1][6] = Value::Int(1_767_225_630_000);
    rows[1][11] = Value::Text("err\u{1}\n\"x\" 😀".into());
    rows
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn check(name: &str, actual: &[u8]) {
    let path = golden_dir().join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    if std::env::var_os("UPDATE_GOLDEN").is_some()
        && std::fs::read(&path).ok().as_deref() != Some(actual)
    {
        // Never a pass: a rewritten vector is a change to review, then to check without it.
        std::fs::write(&path, actual).unwrap();
        panic!(
            "{} rewritten (UPDATE_GOLDEN): review the diff, then run the test again without UPDATE_GOLDEN",
            path.display()
        );
    }
    let expected = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert!(
        expected == actual,
        "{name} differs from {}:\n{}",
        path.display(),
        String::from_utf8_lossy(actual)
    );
}

#[test]
fn fixed_rows_give_byte_exact_objects() {
    golden_batch(&WALLET_OUTBOX, golden_rows(), "");
}

/// room_outbox's golden vectors, in `tests/golden/room_outbox/`.
#[test]
fn fixed_room_rows_give_byte_exact_objects() {
    golden_batch(&ROOM_OUTBOX, golden_room_rows(), "room_outbox/");
}

/// `rows` of app1 as one batch of `spec`, each object checked against `tests/golden/{dir}`.
fn golden_batch(spec: &'static TableSpec, rows: Vec<Row>, dir: &str) {
    let mut encoder = BatchEncoder::new(
        spec,
        Limits {
            max_rows: 100,
            max_bytes: 1 << 20,
        },
        6,
    );
    for r in rows {
        let row = EncodedRow::of_row(spec, "app1", &r).unwrap();
        assert!(encoder.fits(&row));
        encoder.push(row).unwrap();
    }
    let batch = encoder.finish().unwrap().unwrap();
    let docs = format::documents(
        &format::Prefix::parse("golden").unwrap(),
        spec.name,
        "app1",
        &batch.content,
        &batch.gzip_digest,
        None,
    );
    // The same batch as this release writes it: its manifest names its columns (the list as
    // the reference table's columns describe it, `columns.json`), `_SUCCESS` binds that one.
    let columns = std::sync::Arc::new(
        BatchColumns::parse(
            std::str::from_utf8(
                &std::fs::read(golden_dir().join(format!("{dir}columns.json"))).unwrap(),
            )
            .unwrap()
            .trim_end(),
        )
        .unwrap(),
    );
    let described = format::documents(
        &format::Prefix::parse("golden").unwrap(),
        spec.name,
        "app1",
        &batch.content,
        &batch.gzip_digest,
        Some(&columns),
    );
    assert_eq!(
        described.batch_id, docs.batch_id,
        "the columns change no key"
    );
    assert_eq!(described.keys, docs.keys);
    let mut ndjson = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&batch.gzip[..]),
        &mut ndjson,
    )
    .unwrap();
    let check = |name: &str, actual: &[u8]| check(&format!("{dir}{name}"), actual);
    check("data.ndjson", &ndjson);
    check("data.ndjson.gz", &batch.gzip);
    check("manifest.json", &docs.manifest);
    check("_SUCCESS", &docs.success);
    check("manifest.columns.json", &described.manifest);
    check("_SUCCESS.columns", &described.success);
    check("batch_id", format!("{}\n", docs.batch_id).as_bytes());
    check(
        "keys.txt",
        format!(
            "{}\n{}\n{}\n",
            docs.keys.data, docs.keys.manifest, docs.keys.success
        )
        .as_bytes(),
    );
}

/// `schemas/room_outbox.record.schema.json` is what `outbox-archiver schema --table
/// room_outbox` prints, and it accepts room_outbox's golden lines.
#[test]
fn the_room_record_schema_is_the_commands_output_and_accepts_real_lines() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas/room_outbox.record.schema.json");
    let text = outbox_archiver::record_schema(&ROOM_OUTBOX);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "regenerate it: outbox-archiver schema --table room_outbox"
    );
    let record = validator("room_outbox.record.schema.json");
    let ndjson = std::fs::read(golden_dir().join("room_outbox/data.ndjson")).unwrap();
    for line in ndjson.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let value: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert!(record.is_valid(&value), "{value}");
    }
    let manifest = validator("manifest.schema.json");
    for name in ["manifest.json", "manifest.columns.json"] {
        let m: serde_json::Value = serde_json::from_slice(
            &std::fs::read(golden_dir().join("room_outbox").join(name)).unwrap(),
        )
        .unwrap();
        assert!(manifest.is_valid(&m), "{m}");
    }
}

fn validator(name: &str) -> jsonschema::Validator {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(name);
    let schema: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

#[test]
fn schemas_accept_real_output_and_reject_damage() {
    let record = validator("record.schema.json");
    let manifest = validator("manifest.schema.json");
    let success = validator("success.schema.json");
    let read = |name: &str| std::fs::read(golden_dir().join(name)).unwrap();
    for line in read("data.ndjson")
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
    {
        let value: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert!(record.is_valid(&value), "{value}");
    }
    // A line written after a column was added to the table holds it after the table's own.
    let first = read("data.ndjson");
    let first = first.split(|&b| b == b'\n').next().unwrap();
    let mut added: serde_json::Value = serde_json::from_slice(first).unwrap();
    added["region"] = serde_json::json!("eu");
    assert!(record.is_valid(&added), "{added}");
    added["region"] = serde_json::json!({"not": "a column's value"});
    assert!(!record.is_valid(&added), "{added}");
    let m: serde_json::Value = serde_json::from_slice(&read("manifest.json")).unwrap();
    assert!(manifest.is_valid(&m), "{m}");
    let s: serde_json::Value = serde_json::from_slice(&read("_SUCCESS")).unwrap();
    assert!(success.is_valid(&s), "{s}");

    let mut bad = m.clone();
    bad["available_delta_total"] = serde_json::json!(12);
    assert!(!manifest.is_valid(&bad), "totals are strings");
    // This release's manifest names the batch's columns; a column list not of that form is none.
    let described: serde_json::Value =
        serde_json::from_slice(&read("manifest.columns.json")).unwrap();
    assert!(manifest.is_valid(&described), "{described}");
    assert!(success.is_valid(&serde_json::from_slice(&read("_SUCCESS.columns")).unwrap()));
    let mut bad = described.clone();
    bad["columns"][0]["encoding"] = serde_json::json!("quaternion");
    assert!(!manifest.is_valid(&bad), "an encoding no build writes");
    let mut bad = described.clone();
    bad["columns"][0]["extra"] = serde_json::json!(1);
    assert!(!manifest.is_valid(&bad));
    let mut bad = s.clone();
    bad["extra"] = serde_json::json!(1);
    assert!(!success.is_valid(&bad));
}
