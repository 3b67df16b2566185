//! A batch: rows in cursor order → one gzip member of NDJSON, with every fact about it computed
//! on the fly; and the reverse — an object's bytes → the same facts, recomputed from the lines.
//!
//! Memory is bounded by the batch, never by the backlog: the encoder keeps only the compressed
//! bytes (for the upload, whose key depends on the content) and the member list (for the
//! receipt). The reader keeps nothing but the members it has parsed.

use std::io::{self, Write};

use bytes::Bytes;
use flate2::write::{GzDecoder, GzEncoder};
use flate2::{Compression, GzBuilder};
use sha2::{Digest as _, Sha256};

use crate::model::codec::{self, Row, RowFacts, Value, ValueRef};
use crate::model::digest::{Crc64Nvme, DigestWriter, Digester, ObjectDigest};
use crate::model::format::{ContentFacts, Cursor, TotalValue};
use crate::model::table::{Layout, TableSpec, TotalKind};
use crate::model::timespec;

/// One archived source row, as the receipt's member list records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub event_id: String,
    pub updated_at_ms: i64,
    /// The row's archived line, fingerprinted ([`crate::model::digest::row_fingerprint`]): what purge
    /// holds the row as it is now to before deleting it. `None` for a member row recorded
    /// before fingerprints were (migration 8).
    pub fingerprint: Option<crate::model::digest::RowFingerprint>,
}

impl Member {
    /// A member known by its key and version only.
    pub fn new(event_id: impl Into<String>, updated_at_ms: i64) -> Member {
        Member {
            event_id: event_id.into(),
            updated_at_ms,
            fingerprint: None,
        }
    }
}

/// An older version of a row that a later batch archived again: the row came back delivered with
/// a different `updated_at_ms`, and its member row moved to the later batch (SPEC §5.10).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Superseded {
    pub event_id: String,
    /// The older version's.
    pub updated_at_ms: i64,
    /// The batch that archived the older version.
    pub batch_id: String,
    /// The older version's fingerprint, as its member row had it.
    #[serde(skip)]
    pub fingerprint: Option<crate::model::digest::RowFingerprint>,
}

/// When a batch is full.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_rows: u64,
    /// Uncompressed NDJSON bytes. A single row larger than this still forms a batch of its own.
    pub max_bytes: u64,
}

/// Why a row or a batch could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// A row that cannot be archived as it is: what about it (an app code of another app, a
    /// value out of its column's range).
    #[error("{0}")]
    Row(String),
    #[error("gzip: {0}")]
    Gzip(#[from] std::io::Error),
}

/// A source row ready for a batch: its NDJSON line (`\n` included) and its facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedRow {
    pub line: Vec<u8>,
    pub(crate) facts: RowFacts,
}

impl EncodedRow {
    /// Encodes a row of `app_code` whose values, in column order, `values` holds.
    pub fn of(
        spec: &TableSpec,
        layout: &Layout,
        app_code: &str,
        values: &[ValueRef<'_>],
    ) -> Result<EncodedRow, EncodeError> {
        let facts =
            codec::facts_of(spec, layout, app_code, |i| values[i]).map_err(EncodeError::Row)?;
        let mut line = Vec::with_capacity(512);
        codec::encode_values(spec, values.iter().copied(), &mut line);
        Ok(EncodedRow { line, facts })
    }

    /// [`EncodedRow::of`] a decoded row.
    pub fn of_row(spec: &TableSpec, app_code: &str, row: &Row) -> Result<EncodedRow, EncodeError> {
        let values: Vec<ValueRef<'_>> = row.iter().map(Value::as_ref).collect();
        EncodedRow::of(spec, &spec.layout(), app_code, &values)
    }

    pub fn cursor(&self) -> Cursor {
        Cursor {
            updated_at_ms: self.facts.updated_at_ms,
            event_id: self.facts.event_id.clone(),
        }
    }
}

/// Folds rows, in order, into [`ContentFacts`] and the member list.
struct Accumulator {
    spec: &'static TableSpec,
    ndjson: Sha256,
    bytes: u64,
    first: Option<Cursor>,
    min_created: i64,
    max_created: i64,
    totals: Vec<TotalSoFar>,
    members: Vec<Member>,
}

/// A control total being folded.
enum TotalSoFar {
    Sum(i128),
    Sha256(Sha256),
}

impl TotalSoFar {
    fn new(kind: TotalKind) -> TotalSoFar {
        match kind {
            TotalKind::Sum => TotalSoFar::Sum(0),
            TotalKind::Sha256 => TotalSoFar::Sha256(Sha256::new()),
        }
    }

    /// Folds in one row's value of the column: `int` for a sum, `bytes` for a hash.
    fn add(&mut self, int: i64, bytes: Option<&Option<Vec<u8>>>) {
        match self {
            TotalSoFar::Sum(total) => *total += i128::from(int),
            TotalSoFar::Sha256(hasher) => match bytes {
                Some(Some(b)) => {
                    hasher.update((b.len() as u64).to_be_bytes());
                    hasher.update(b);
                }
                _ => hasher.update([0xFF; 8]),
            },
        }
    }

    fn finish(self) -> TotalValue {
        match self {
            TotalSoFar::Sum(total) => TotalValue::Sum(total),
            TotalSoFar::Sha256(hasher) => TotalValue::Sha256(hex::encode(hasher.finalize())),
        }
    }
}

impl Accumulator {
    fn new(spec: &'static TableSpec) -> Accumulator {
        Accumulator {
            totals: spec
                .totals
                .iter()
                .map(|t| TotalSoFar::new(t.kind))
                .collect(),
            spec,
            ndjson: Sha256::new(),
            bytes: 0,
            first: None,
            min_created: i64::MAX,
            max_created: i64::MIN,
            members: Vec::new(),
        }
    }

    /// Adds a row's facts and its encoded line (`\n` included).
    fn add(&mut self, facts: RowFacts, line: &[u8]) {
        for (k, total) in self.totals.iter_mut().enumerate() {
            total.add(facts.totals[k], facts.hashed[k].as_ref());
        }
        self.min_created = self.min_created.min(facts.created_at_ms);
        self.max_created = self.max_created.max(facts.created_at_ms);
        self.ndjson.update(line);
        self.bytes += line.len() as u64;
        if self.first.is_none() {
            self.first = Some(Cursor {
                updated_at_ms: facts.updated_at_ms,
                event_id: facts.event_id.clone(),
            });
        }
        self.members.push(Member {
            event_id: facts.event_id,
            updated_at_ms: facts.updated_at_ms,
            fingerprint: Some(crate::model::digest::row_fingerprint(line)),
        });
    }

    fn rows(&self) -> u64 {
        self.members.len() as u64
    }

    fn finish(self) -> Option<(ContentFacts, Vec<Member>)> {
        let first = self.first?;
        let last = self.members.last().map(|m| Cursor {
            updated_at_ms: m.updated_at_ms,
            event_id: m.event_id.clone(),
        })?;
        let facts = ContentFacts {
            row_count: self.members.len() as u64,
            first,
            last,
            min_created_at_ms: self.min_created,
            max_created_at_ms: self.max_created,
            totals: self
                .spec
                .totals
                .iter()
                .map(|t| t.field)
                .zip(self.totals.into_iter().map(TotalSoFar::finish))
                .collect(),
            ndjson_sha256: hex::encode(self.ndjson.finalize()),
            uncompressed_bytes: self.bytes,
        };
        Some((facts, self.members))
    }
}

/// A batch ready to upload.
#[derive(Debug, Clone)]
pub struct EncodedBatch {
    pub content: ContentFacts,
    pub members: Vec<Member>,
    pub gzip: Bytes,
    pub gzip_digest: ObjectDigest,
}

/// Streams rows into one gzip member of NDJSON (mtime 0, no file name).
pub struct BatchEncoder {
    acc: Accumulator,
    gz: GzEncoder<DigestWriter<Vec<u8>>>,
    limits: Limits,
    day: Option<i64>,
}

impl BatchEncoder {
    pub fn new(spec: &'static TableSpec, limits: Limits, gzip_level: u32) -> BatchEncoder {
        let gz = GzBuilder::new().mtime(0).operating_system(255).write(
            DigestWriter::new(Vec::with_capacity(1 << 20)),
            Compression::new(gzip_level),
        );
        BatchEncoder {
            acc: Accumulator::new(spec),
            gz,
            limits,
            day: None,
        }
    }

    /// True when no further row can be taken, so the caller need not fetch one.
    pub(crate) fn is_full(&self) -> bool {
        self.acc.rows() >= self.limits.max_rows
    }

    /// Whether `row` belongs in this batch: false when the batch is full (rows, bytes), or the
    /// row is of another UTC day than the batch's. A first row always fits.
    pub fn fits(&self, row: &EncodedRow) -> bool {
        if self.acc.rows() == 0 {
            return true;
        }
        let over_bytes = self.acc.bytes + row.line.len() as u64 > self.limits.max_bytes;
        let other_day = self.day != Some(timespec::utc_day(row.facts.updated_at_ms));
        !(self.is_full() || over_bytes || other_day)
    }

    /// Adds a row that [`BatchEncoder::fits`].
    pub fn push(&mut self, row: EncodedRow) -> Result<(), EncodeError> {
        debug_assert!(self.fits(&row));
        self.day = Some(timespec::utc_day(row.facts.updated_at_ms));
        self.gz.write_all(&row.line)?;
        self.acc.add(row.facts, &row.line);
        Ok(())
    }

    /// Closes the gzip member. `None` when no row was taken.
    pub fn finish(self) -> Result<Option<EncodedBatch>, EncodeError> {
        let writer = self.gz.finish()?;
        let (mut gzip, gzip_digest) = writer.finish();
        // The batch is held until it is recorded: not the buffer's growth room beside it.
        gzip.shrink_to_fit();
        Ok(self.acc.finish().map(|(content, members)| EncodedBatch {
            content,
            members,
            gzip: Bytes::from(gzip),
            gzip_digest,
        }))
    }
}

/// The rows an object's lines hold: their facts and members, or why they are not a data object.
type Content = Result<(ContentFacts, Vec<Member>), DataError>;

/// What an object's bytes turned out to be.
#[derive(Debug)]
pub(crate) struct DataRead {
    pub digest: ObjectDigest,
    /// CRC-64/NVME of the bytes, to compare with what AWS S3 reports.
    pub crc64nvme: u64,
    pub content: Content,
    /// The lines, in order, when the reader was asked to keep them and the object is a
    /// well-formed data object.
    pub lines: Option<KeptLines>,
    /// The table as the batch's lines hold it (its first line's keys: fewer columns than
    /// today's table for a batch written before columns were added).
    pub spec: &'static TableSpec,
}

/// The lines of a verified data object, kept as they were read, for a caller that loads exactly
/// the bytes it verified: one buffer of NDJSON and where each line ends — about the NDJSON's
/// size, half what the decoded rows would take — decoded a few at a time when they are loaded.
#[derive(Debug, Clone)]
pub(crate) struct KeptLines {
    /// The table as this batch holds it (fewer columns than today's table for a batch written
    /// before columns were added: [`crate::model::table::projected`]).
    spec: &'static TableSpec,
    text: Vec<u8>,
    /// The end of each line in `text` (lines are stored without their `\n`).
    ends: Vec<usize>,
}

impl PartialEq for KeptLines {
    fn eq(&self, other: &KeptLines) -> bool {
        std::ptr::eq(self.spec, other.spec) && self.text == other.text && self.ends == other.ends
    }
}

impl Eq for KeptLines {}

impl KeptLines {
    /// Room for a batch of `lines` lines and `bytes` bytes of NDJSON, as its receipt says, so
    /// that the buffer is allocated once and not grown by doubling (which left RSS at about
    /// twice the batch). What a receipt says is trusted up to [`KeptLines::RESERVE_CAP`] bytes.
    fn for_batch(spec: &'static TableSpec, bytes: u64, lines: u64) -> KeptLines {
        let bytes = bytes.min(Self::RESERVE_CAP) as usize;
        let lines = lines.min(Self::RESERVE_CAP / 64) as usize;
        KeptLines {
            spec,
            text: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(lines),
        }
    }

    const RESERVE_CAP: u64 = 256 << 20;

    fn push(&mut self, line: &[u8]) {
        self.text.extend_from_slice(line);
        self.ends.push(self.text.len());
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The table as this batch's lines hold it: the rows [`KeptLines::decode`] gives have these
    /// columns.
    pub(crate) fn spec(&self) -> &'static TableSpec {
        self.spec
    }

    /// The lines in consecutive ranges of at most `max_rows` lines and `max_bytes` bytes each (a
    /// longer line alone): what one `INSERT` loads, so that a batch of large rows never makes a
    /// statement bigger than the server's `max_allowed_packet`.
    pub(crate) fn chunks(&self, max_rows: usize, max_bytes: usize) -> Vec<std::ops::Range<usize>> {
        let mut chunks = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for i in 0..self.ends.len() {
            let len = self.ends[i] - if i == 0 { 0 } else { self.ends[i - 1] };
            if i > start && (i - start == max_rows || bytes + len > max_bytes) {
                chunks.push(start..i);
                (start, bytes) = (i, 0);
            }
            bytes += len;
        }
        if start < self.ends.len() {
            chunks.push(start..self.ends.len());
        }
        chunks
    }

    /// Lines `range` (0-based), decoded into rows of [`KeptLines::spec`].
    pub(crate) fn decode(
        &self,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<Row>, codec::DecodeError> {
        let spec = self.spec;
        range
            .map(|i| {
                let start = if i == 0 { 0 } else { self.ends[i - 1] };
                codec::decode_line(spec, &self.text[start..self.ends[i]], i as u64 + 1)
            })
            .collect()
    }
}

/// Why an object's bytes are not a well-formed data object of this app.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DataError {
    #[error("not a valid gzip stream: {0}")]
    Gzip(String),
    #[error("bytes follow the end of the gzip member")]
    TrailingBytes,
    #[error("NDJSON {0}")]
    Line(String),
    #[error("the last NDJSON line does not end in a newline")]
    UnterminatedLine,
}

/// Splits decompressed bytes into lines and folds each into the facts.
struct LineSink {
    spec: &'static TableSpec,
    layout: Layout,
    app_code: String,
    acc: Accumulator,
    partial: Vec<u8>,
    line_no: u64,
    error: Option<DataError>,
    /// The lines read so far, when asked to keep them.
    kept: Option<KeptLines>,
}

impl LineSink {
    fn take_line(&mut self, line: &[u8]) -> Result<(), DataError> {
        self.line_no += 1;
        let body = &line[..line.len() - 1];
        let bad = |e: String| DataError::Line(e);
        if self.line_no == 1 {
            // The batch's columns are its first line's keys: a batch written before a column
            // was added to the table holds fewer, and every line of it the same ones.
            let keys = codec::line_keys(body).map_err(|e| bad(format!("line 1: {e}")))?;
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let spec = crate::model::table::projected(self.spec, &keys)
                .map_err(|e| bad(format!("line 1: {e}")))?;
            if !std::ptr::eq(spec, self.spec) {
                self.spec = spec;
                self.layout = spec.layout();
                if let Some(kept) = &mut self.kept {
                    kept.spec = spec;
                }
            }
        }
        let facts = codec::scan_line(self.spec, &self.layout, &self.app_code, body, self.line_no)
            .map_err(|e| bad(e.to_string()))?;
        if let Some(kept) = &mut self.kept {
            kept.push(body);
        }
        self.acc.add(facts, line);
        Ok(())
    }
}

impl Write for LineSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.error.is_some() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad NDJSON"));
        }
        let mut rest = buf;
        while let Some(at) = memchr(b'\n', rest) {
            let (line, tail) = rest.split_at(at + 1);
            let result = if self.partial.is_empty() {
                self.take_line(line)
            } else {
                let mut joined = std::mem::take(&mut self.partial);
                joined.extend_from_slice(line);
                let r = self.take_line(&joined);
                joined.clear();
                self.partial = joined;
                r
            };
            if let Err(e) = result {
                self.error = Some(e);
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bad NDJSON"));
            }
            rest = tail;
        }
        self.partial.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    memchr::memchr(needle, haystack)
}

/// Reads a data object chunk by chunk: digests the gzip bytes and recomputes the content facts
/// and members from the decompressed lines.
pub(crate) struct DataReader {
    digester: Digester,
    nvme: Crc64Nvme,
    decoder: GzDecoder<LineSink>,
    failed: Option<DataError>,
}

impl DataReader {
    pub(crate) fn new(spec: &'static TableSpec, app_code: &str) -> DataReader {
        DataReader::reading(spec, app_code, None)
    }

    /// A reader that also keeps the lines it reads, for a caller that loads exactly the bytes it
    /// verified; `expected` (the receipt's) sizes the buffer.
    pub(crate) fn keeping_lines(
        spec: &'static TableSpec,
        app_code: &str,
        expected: &ContentFacts,
    ) -> DataReader {
        let kept = KeptLines::for_batch(spec, expected.uncompressed_bytes, expected.row_count);
        DataReader::reading(spec, app_code, Some(kept))
    }

    fn reading(spec: &'static TableSpec, app_code: &str, kept: Option<KeptLines>) -> DataReader {
        let sink = LineSink {
            spec,
            layout: spec.layout(),
            app_code: app_code.to_string(),
            acc: Accumulator::new(spec),
            partial: Vec::new(),
            line_no: 0,
            error: None,
            kept,
        };
        DataReader {
            digester: Digester::new(),
            nvme: Crc64Nvme::new(),
            decoder: GzDecoder::new(sink),
            failed: None,
        }
    }

    pub(crate) fn update(&mut self, chunk: &[u8]) {
        self.digester.update(chunk);
        self.nvme.update(chunk);
        if self.failed.is_some() {
            return; // keep digesting: the object's hashes are reported even when it is corrupt
        }
        let mut rest = chunk;
        while !rest.is_empty() {
            match self.decoder.write(rest) {
                Ok(0) => {
                    self.failed = Some(DataError::TrailingBytes);
                    return;
                }
                Ok(n) => rest = &rest[n..],
                Err(e) => {
                    self.failed = Some(
                        self.decoder
                            .get_mut()
                            .error
                            .take()
                            .unwrap_or(DataError::Gzip(e.to_string())),
                    );
                    return;
                }
            }
        }
    }

    /// The digest of the bytes, and the facts or why the bytes are not a valid data object.
    pub(crate) fn finish(mut self) -> DataRead {
        let digest = std::mem::take(&mut self.digester).finish();
        let crc64nvme = self.nvme.finish();
        let (content, lines, spec) = match self.failed.take() {
            Some(e) => (Err(e), None, self.decoder.get_ref().spec),
            None => self.finish_content(),
        };
        DataRead {
            digest,
            crc64nvme,
            content,
            lines,
            spec,
        }
    }

    /// The facts, the lines kept and the table as the lines hold it (after the last of the
    /// gzip stream has been decoded).
    fn finish_content(mut self) -> (Content, Option<KeptLines>, &'static TableSpec) {
        let spec = self.decoder.get_ref().spec;
        if let Err(e) = self.decoder.try_finish() {
            let error = self.decoder.get_mut().error.take();
            return (
                Err(error.unwrap_or(DataError::Gzip(e.to_string()))),
                None,
                spec,
            );
        }
        let mut sink = match self.decoder.finish() {
            Ok(sink) => sink,
            Err(e) => return (Err(DataError::Gzip(e.to_string())), None, spec),
        };
        let spec = sink.spec;
        if !sink.partial.is_empty() {
            return (Err(DataError::UnterminatedLine), None, spec);
        }
        let kept = sink.kept.take();
        match sink.acc.finish() {
            Some(facts) => (Ok(facts), kept, spec),
            None => (
                Err(DataError::Line("data object holds no rows".into())),
                None,
                spec,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::table::WALLET_OUTBOX;
    use proptest::prelude::*;

    fn row(event_id: &str, updated_at_ms: i64, delta: i64) -> Row {
        vec![
            Value::Text("app1".into()),
            Value::Text(event_id.into()),
            Value::Text("T".into()),
            Value::Text("tx".into()),
            Value::Text("cmd".into()),
            Value::Int(1),
            Value::Text("COIN".into()),
            Value::Int(delta),
            Value::Int(-delta),
            Value::Text("{}".into()),
            Value::Text("DELIVERED".into()),
            Value::Text(String::new()),
            Value::Null,
            Value::Int(0),
            Value::Null,
            Value::Null,
            Value::Int(updated_at_ms - 5),
            Value::Int(updated_at_ms),
        ]
    }

    const DAY: i64 = 86_400_000;
    const BIG: Limits = Limits {
        max_rows: 1_000,
        max_bytes: 1 << 30,
    };

    fn encode(rows: &[Row], limits: Limits) -> (EncodedBatch, usize) {
        let mut enc = BatchEncoder::new(&WALLET_OUTBOX, limits, 6);
        let mut taken = 0;
        for r in rows {
            let row = EncodedRow::of_row(&WALLET_OUTBOX, "app1", r).unwrap();
            if !enc.fits(&row) {
                break;
            }
            enc.push(row).unwrap();
            taken += 1;
        }
        (enc.finish().unwrap().unwrap(), taken)
    }

    fn read(
        bytes: &[u8],
        chunk: usize,
    ) -> (ObjectDigest, Result<(ContentFacts, Vec<Member>), DataError>) {
        let mut reader = DataReader::new(&WALLET_OUTBOX, "app1");
        for c in bytes.chunks(chunk.max(1)) {
            reader.update(c);
        }
        let read = reader.finish();
        (read.digest, read.content)
    }

    #[test]
    fn kept_lines_decode_back_to_the_rows_in_any_range() {
        let rows: Vec<Row> = (0..7)
            .map(|i| row(&format!("e{i}"), 10 * DAY + i, i - 3))
            .collect();
        let (batch, _) = encode(&rows, BIG);
        let mut reader = DataReader::keeping_lines(&WALLET_OUTBOX, "app1", &batch.content);
        for c in batch.gzip.chunks(5) {
            reader.update(c);
        }
        let lines = reader
            .finish()
            .lines
            .expect("a well-formed object keeps its lines");
        assert_eq!(lines.len(), 7);
        assert_eq!(lines.decode(0..7).unwrap(), rows);
        assert_eq!(lines.chunks(3, usize::MAX), [0..3, 3..6, 6..7]);
        assert_eq!(
            lines.chunks(500, 1),
            (0..7).map(|i| i..i + 1).collect::<Vec<_>>()
        );
        let two = lines.ends[1];
        assert_eq!(lines.chunks(500, two)[0], 0..2);
        assert_eq!(lines.decode(3..5).unwrap(), rows[3..5]);
        assert!(lines.decode(7..7).unwrap().is_empty());

        let mut corrupt = batch.gzip.to_vec();
        let at = corrupt.len() / 2;
        corrupt[at] ^= 0x55;
        let mut reader = DataReader::keeping_lines(&WALLET_OUTBOX, "app1", &batch.content);
        reader.update(&corrupt);
        assert_eq!(
            reader.finish().lines,
            None,
            "nothing kept of a corrupt object"
        );
    }

    #[test]
    fn limits_rows_bytes_and_days() {
        let rows: Vec<Row> = (0..10)
            .map(|i| row(&format!("e{i}"), 10 * DAY + i, i))
            .collect();
        assert_eq!(
            encode(
                &rows,
                Limits {
                    max_rows: 4,
                    max_bytes: 1 << 30
                }
            )
            .1,
            4
        );
        let line_len = |r: &Row| {
            let mut v = Vec::new();
            codec::encode_line(&WALLET_OUTBOX, r, &mut v);
            v.len() as u64
        };
        let three: u64 = rows[..3].iter().map(line_len).sum();
        assert_eq!(
            encode(
                &rows,
                Limits {
                    max_rows: 100,
                    max_bytes: three
                }
            )
            .1,
            3,
            "exactly full"
        );
        assert_eq!(
            encode(
                &rows,
                Limits {
                    max_rows: 100,
                    max_bytes: three - 1
                }
            )
            .1,
            2,
            "one byte short"
        );
        // A row larger than the byte limit still goes, alone.
        assert_eq!(
            encode(
                &rows,
                Limits {
                    max_rows: 100,
                    max_bytes: 1
                }
            )
            .1,
            1
        );
        let mut days = rows.clone();
        days[2] = row("e2", 11 * DAY, 2);
        assert_eq!(encode(&days, BIG).1, 2, "a batch never spans two UTC dates");
    }

    #[test]
    fn facts_are_exact() {
        let rows = vec![
            row("b", 100, i64::MAX),
            row("a", 200, i64::MAX),
            row("c", 200, 5),
        ];
        let (batch, _) = encode(&rows, BIG);
        let c = &batch.content;
        assert_eq!(c.row_count, 3);
        assert_eq!(
            c.first,
            Cursor {
                updated_at_ms: 100,
                event_id: "b".into()
            }
        );
        assert_eq!(
            c.last,
            Cursor {
                updated_at_ms: 200,
                event_id: "c".into()
            }
        );
        assert_eq!((c.min_created_at_ms, c.max_created_at_ms), (95, 195));
        assert_eq!(
            c.totals[0],
            (
                "available_delta_total",
                TotalValue::Sum(2 * i128::from(i64::MAX) + 5)
            )
        );
        assert_eq!(
            c.totals[1],
            (
                "frozen_delta_total",
                TotalValue::Sum(-(2 * i128::from(i64::MAX) + 5))
            )
        );
        let members: Vec<_> = batch.members.iter().map(|m| m.event_id.as_str()).collect();
        assert_eq!(
            members,
            ["b", "a", "c"],
            "kept in the database's order, never re-sorted"
        );
        assert_eq!(batch.gzip_digest, ObjectDigest::of(&batch.gzip));
        // gzip header: magic, deflate, no flags, mtime 0.
        assert_eq!(&batch.gzip[..8], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0]);
    }

    /// room_outbox's totals: the rooms' ids summed and the envelopes hashed in cursor order (the
    /// vector is Python's `hashlib` over each envelope's 8-byte big-endian length and bytes), the
    /// same from the encoder and from reading the object back.
    #[test]
    fn hashed_totals_fold_envelopes_in_order() {
        use crate::model::codec::tests::room_row;
        use crate::model::table::ROOM_OUTBOX;
        let rows = [
            room_row("r1", 5, b""),
            room_row("r2", -2, b"\x00"),
            room_row("r3", 40, b"\x01\x02\x03"),
        ];
        let mut enc = BatchEncoder::new(&ROOM_OUTBOX, BIG, 6);
        for r in &rows {
            enc.push(EncodedRow::of_row(&ROOM_OUTBOX, "a", r).unwrap())
                .unwrap();
        }
        let batch = enc.finish().unwrap().unwrap();
        assert_eq!(
            batch.content.totals,
            [
                ("room_id_total", TotalValue::Sum(43)),
                (
                    "envelope_sha256",
                    TotalValue::Sha256(
                        "91bd19adca9b2bc88494c835973f71823e02652fdeed0e0467b2a10c3aaad5a8".into()
                    )
                ),
            ]
        );
        let mut reader = DataReader::new(&ROOM_OUTBOX, "a");
        for c in batch.gzip.chunks(3) {
            reader.update(c);
        }
        let (content, _) = reader.finish().content.unwrap();
        assert_eq!(content, batch.content);
        // Another order is another total: the hash is over cursor order, not a set.
        let mut enc = BatchEncoder::new(&ROOM_OUTBOX, BIG, 6);
        for r in rows.iter().rev() {
            enc.push(EncodedRow::of_row(&ROOM_OUTBOX, "a", r).unwrap())
                .unwrap();
        }
        let reversed = enc.finish().unwrap().unwrap();
        assert_ne!(reversed.content.totals[1], batch.content.totals[1]);
        assert_eq!(reversed.content.totals[0], batch.content.totals[0]);
    }

    #[test]
    fn reader_recomputes_what_the_encoder_computed() {
        let rows: Vec<Row> = (0..300)
            .map(|i| row(&format!("e{i:04}"), 1000 + i / 7, i * 1_000_003))
            .collect();
        let (batch, _) = encode(&rows, BIG);
        for chunk in [1, 7, 4096, 1 << 20] {
            let (digest, result) = read(&batch.gzip, chunk);
            assert_eq!(digest, batch.gzip_digest);
            let (content, members) = result.unwrap();
            assert_eq!(content, batch.content);
            assert_eq!(members, batch.members);
        }
    }

    #[test]
    fn reader_rejects_damage() {
        let rows: Vec<Row> = (0..50)
            .map(|i| row(&format!("e{i}"), 1000 + i, i))
            .collect();
        let (batch, _) = encode(&rows, BIG);
        let gz = batch.gzip.to_vec();
        assert!(
            matches!(read(&gz[..gz.len() - 4], 64).1, Err(DataError::Gzip(_))),
            "truncated"
        );
        let mut flipped = gz.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x01;
        assert!(read(&flipped, 64).1.is_err(), "flipped byte");
        let mut trailing = gz.clone();
        trailing.extend_from_slice(b"junk");
        assert!(matches!(
            read(&trailing, 64).1,
            Err(DataError::TrailingBytes)
        ));
        // A well-formed gzip of lines that are not this table's records.
        let mut enc = GzBuilder::new().write(Vec::new(), Compression::fast());
        enc.write_all(b"{\"app_code\":\"app1\"}\n").unwrap();
        assert!(matches!(
            read(&enc.finish().unwrap(), 64).1,
            Err(DataError::Line(_))
        ));
        let mut enc = GzBuilder::new().write(Vec::new(), Compression::fast());
        let mut line = Vec::new();
        codec::encode_line(&WALLET_OUTBOX, &rows[0], &mut line);
        enc.write_all(&line[..line.len() - 1]).unwrap();
        assert!(matches!(
            read(&enc.finish().unwrap(), 64).1,
            Err(DataError::UnterminatedLine)
        ));
    }

    #[test]
    fn reader_refuses_rows_of_another_app() {
        let mut other = row("x", 5, 1);
        other[0] = Value::Text("app2".into());
        let mut enc = BatchEncoder::new(&WALLET_OUTBOX, BIG, 1);
        enc.push(EncodedRow::of_row(&WALLET_OUTBOX, "app2", &other).unwrap())
            .unwrap();
        let batch = enc.finish().unwrap().unwrap();
        assert!(read(&batch.gzip, 64).1.is_err());
    }

    proptest! {
        #[test]
        fn any_rows_round_trip(ids in proptest::collection::vec("[a-z\\\\\"\\n\u{e9}\u{1f600} ]{1,12}", 1..40), deltas in proptest::collection::vec(any::<i64>(), 40)) {
            let rows: Vec<Row> = ids.iter().enumerate().map(|(i, id)| {
                let mut r = row(&format!("{i}{id}"), 1000 + i as i64, deltas[i]);
                r[9] = Value::Text(id.clone());
                r
            }).collect();
            let (batch, taken) = encode(&rows, BIG);
            prop_assert_eq!(taken, rows.len());
            let (_, result) = read(&batch.gzip, 13);
            let (content, members) = result.unwrap();
            prop_assert_eq!(content, batch.content);
            prop_assert_eq!(members, batch.members);
        }
    }
}
