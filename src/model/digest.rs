//! Checksums of object bytes, computed on the fly (SPEC §4 "Checksums").
//!
//! SHA-256 as lowercase hex, CRC-64/XZ (ECMA-182 reflected — what Tencent COS reports in
//! `x-cos-hash-crc64ecma` and what `crc64fast` computes) as an unsigned decimal string, and the
//! byte count. CRC-64/NVME, which AWS S3 reports in `x-amz-checksum-crc64nvme`, is computed only
//! where a store's own checksum is checked.

use std::io::{self, Write};

use sha2::{Digest as _, Sha256};

/// The facts that identify an object's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDigest {
    pub sha256: String,
    pub crc64: u64,
    pub size: u64,
}

impl ObjectDigest {
    pub fn of(bytes: &[u8]) -> ObjectDigest {
        let mut d = Digester::new();
        d.update(bytes);
        d.finish()
    }

    /// The CRC as the contract writes it: an unsigned decimal string.
    pub(crate) fn crc64_string(&self) -> String {
        self.crc64.to_string()
    }
}

/// Incremental SHA-256 + CRC-64/XZ + length.
#[derive(Clone)]
pub(crate) struct Digester {
    sha256: Sha256,
    crc64: crc64fast::Digest,
    size: u64,
}

impl Default for Digester {
    fn default() -> Self {
        Self::new()
    }
}

impl Digester {
    pub(crate) fn new() -> Digester {
        Digester {
            sha256: Sha256::new(),
            crc64: crc64fast::Digest::new(),
            size: 0,
        }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.sha256.update(bytes);
        self.crc64.write(bytes);
        self.size += bytes.len() as u64;
    }

    pub(crate) fn finish(self) -> ObjectDigest {
        ObjectDigest {
            sha256: hex::encode(self.sha256.finalize()),
            crc64: self.crc64.sum64(),
            size: self.size,
        }
    }
}

/// A row's fingerprint: the first 16 bytes of the SHA-256 of its NDJSON line, without the
/// line's `\n` (`line` may end in one; it is left out). Recorded on each member row at archive
/// time; purge deletes a row only if the row as it is now encodes to a line with the same
/// fingerprint — exactly what was archived, every column (README, "What purge compares").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowFingerprint(pub [u8; 16]);

impl std::fmt::Debug for RowFingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", hex::encode(self.0))
    }
}

impl std::fmt::Display for RowFingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", hex::encode(self.0))
    }
}

impl RowFingerprint {
    /// From the 16 bytes a member row stores (`None` for anything else: not a fingerprint).
    pub fn from_slice(bytes: &[u8]) -> Option<RowFingerprint> {
        bytes.try_into().ok().map(RowFingerprint)
    }
}

/// The fingerprint of an NDJSON line (with or without its `\n`).
pub(crate) fn row_fingerprint(line: &[u8]) -> RowFingerprint {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let hash = Sha256::digest(body);
    let mut out = [0u8; 16];
    out.copy_from_slice(&hash[..16]);
    RowFingerprint(out)
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// CRC-64/NVME, as AWS S3 computes it for `x-amz-checksum-crc64nvme`.
pub fn crc64nvme(bytes: &[u8]) -> u64 {
    let mut d = Crc64Nvme::new();
    d.update(bytes);
    d.finish()
}

/// Incremental CRC-64/NVME.
pub(crate) struct Crc64Nvme(crc_fast::Digest);

impl Default for Crc64Nvme {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc64Nvme {
    pub(crate) fn new() -> Crc64Nvme {
        Crc64Nvme(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Nvme))
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0.finalize()
    }
}

/// A writer that digests everything written through it.
pub(crate) struct DigestWriter<W> {
    inner: W,
    digester: Digester,
}

impl<W: Write> DigestWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        DigestWriter {
            inner,
            digester: Digester::new(),
        }
    }

    pub(crate) fn finish(self) -> (W, ObjectDigest) {
        (self.inner, self.digester.finish())
    }
}

impl<W: Write> Write for DigestWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.digester.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn check_values() {
        let d = ObjectDigest::of(b"123456789");
        assert_eq!(d.crc64, 0x995D_C9BB_DF19_39FA, "CRC-64/XZ check value");
        assert_eq!(d.crc64_string(), "11051210869376104954");
        assert_eq!(
            d.sha256,
            "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225"
        );
        assert_eq!(d.size, 9);
        assert_eq!(
            crc64nvme(b"123456789"),
            0xAE8B_1486_0A79_9888,
            "CRC-64/NVME check value"
        );
        let empty = ObjectDigest::of(b"");
        assert_eq!(empty.crc64, 0);
        assert_eq!(
            empty.sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn a_row_fingerprint_is_the_lines_sha256_cut_to_16_bytes() {
        // Python: hashlib.sha256(b'{"app_code":"a1"}').hexdigest()[:32]
        let line = br#"{"app_code":"a1"}"#;
        assert_eq!(
            row_fingerprint(line).to_string(),
            "cb79e9fdee5e363c9e27b4a0bbef46d2"
        );
        let mut with_newline = line.to_vec();
        with_newline.push(b'\n');
        assert_eq!(row_fingerprint(&with_newline), row_fingerprint(line));
        assert_eq!(
            RowFingerprint::from_slice(&row_fingerprint(line).0),
            Some(row_fingerprint(line))
        );
        assert_eq!(RowFingerprint::from_slice(&[0; 15]), None);
    }

    proptest! {
        #[test]
        fn streaming_equals_one_shot(data in proptest::collection::vec(any::<u8>(), 0..4096), cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
            let mut d = Digester::new();
            let mut n = Crc64Nvme::new();
            let mut rest: &[u8] = &data;
            for cut in cuts {
                let at = if rest.is_empty() { 0 } else { cut % rest.len() };
                let (a, b) = rest.split_at(at);
                d.update(a);
                n.update(a);
                rest = b;
            }
            d.update(rest);
            n.update(rest);
            prop_assert_eq!(d.finish(), ObjectDigest::of(&data));
            prop_assert_eq!(n.finish(), crc64nvme(&data));
        }
    }
}
