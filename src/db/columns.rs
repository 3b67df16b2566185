//! The SQL types the owned tables' columns share, and their `(name, type)` lists: the receipts
//! repository ([`super::receipts`]) and the other owned tables ([`super::owned`]) are made of them.

pub(super) const APP_CODE: &str = "VARCHAR(32) NOT NULL";
pub(super) const EVENT_ID: &str = "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL";
pub(super) const BATCH_ID: &str = "CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL";
pub(super) const SHA256: &str = "CHAR(64) CHARACTER SET ascii NOT NULL";
pub(super) const CRC64: &str = "VARCHAR(20) CHARACTER SET ascii NOT NULL";

/// `(name, SQL type)` pairs as owned strings.
pub(super) fn columns(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}
