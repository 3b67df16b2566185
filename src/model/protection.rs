//! How an archived object is protected and stored, and what the store says about it: Object
//! Lock retention and legal hold, storage class (and whether it can be read at once), and
//! server-side encryption. Pure values and the rules over them, no I/O: the S3 store turns them
//! into headers, the verifier compares what a HEAD reports with what a receipt recorded.
//!
//! The retain-until date is computed here from a `now` passed in ([`Retention::until_ms`]),
//! never from the clock: a batch's three objects carry the same date, and the receipt records it.

use std::fmt;

use chrono::{DateTime, Datelike, Months, TimeZone, Utc};
use serde::Serialize;

/// Object Lock retention mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LockMode {
    /// A user with `s3:BypassGovernanceRetention` can shorten or remove it.
    Governance,
    /// Nobody, root included, can shorten it or delete the object version before retain-until.
    Compliance,
}

impl LockMode {
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Governance => "GOVERNANCE",
            LockMode::Compliance => "COMPLIANCE",
        }
    }

    pub fn parse(text: &str) -> Option<LockMode> {
        match text.to_ascii_uppercase().as_str() {
            "GOVERNANCE" => Some(LockMode::Governance),
            "COMPLIANCE" => Some(LockMode::Compliance),
            _ => None,
        }
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A retention on one object version: its mode and the instant before which it cannot be
/// deleted (epoch ms, a whole second).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectLock {
    pub mode: LockMode,
    pub retain_until_ms: i64,
}

impl ObjectLock {
    /// Whether this retention is at least as strong as `wanted`: as long, and not governance
    /// where compliance was asked for.
    pub fn covers(&self, wanted: &ObjectLock) -> bool {
        self.retain_until_ms >= wanted.retain_until_ms && self.mode >= wanted.mode
    }
}

/// `--retention`: how long after a batch is written its objects stay locked. Years are calendar
/// years (7y from 2026-03-01 is 2033-03-01, never a day short for leap days); a date that does not
/// exist in the target year (29 February) becomes the day after (1 March).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    Years(u32),
    /// Any other length, in milliseconds (`30d`, `2555d`, `12h`).
    Millis(i64),
}

impl Retention {
    /// Parses `7y`, `30d`, `2555d` (also `12h`, `90m`, `30s`).
    pub fn parse(text: &str) -> Result<Retention, String> {
        let text = text.trim();
        let help = "write 7y, 30d or 2555d";
        if let Some(years) = text.strip_suffix('y') {
            let years: u32 = years
                .parse()
                .map_err(|_| format!("invalid retention {text:?} ({help})"))?;
            if years == 0 || years > 100 {
                return Err(format!(
                    "retention {text:?} must be 1 to 100 years ({help})"
                ));
            }
            return Ok(Retention::Years(years));
        }
        let ms = crate::model::timespec::parse_duration_ms(text)
            .map_err(|e| format!("invalid retention {text:?}: {e} ({help})"))?;
        if ms < 1_000 {
            return Err(format!(
                "retention {text:?} must be at least a second ({help})"
            ));
        }
        Ok(Retention::Millis(ms))
    }

    /// The retain-until instant for objects written at `now_ms`, rounded up to the whole second
    /// (the header carries seconds; rounding down would shorten the retention).
    pub fn until_ms(&self, now_ms: i64) -> i64 {
        let until = match *self {
            Retention::Millis(ms) => now_ms.saturating_add(ms),
            Retention::Years(years) => add_years(now_ms, years),
        };
        until.div_euclid(1000) * 1000 + if until % 1000 == 0 { 0 } else { 1000 }
    }
}

impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Retention::Years(y) => write!(f, "{y}y"),
            Retention::Millis(ms) if ms % 86_400_000 == 0 => write!(f, "{}d", ms / 86_400_000),
            Retention::Millis(ms) => write!(f, "{}s", ms / 1000),
        }
    }
}

fn add_years(ms: i64, years: u32) -> i64 {
    let Some(at) = Utc.timestamp_millis_opt(ms).single() else {
        return i64::MAX;
    };
    let target_year = at.year() + years as i32;
    // chrono clamps 29 February to 28 February in a common year; take 1 March instead.
    let clamped = at.month() == 2 && at.day() == 29 && at.with_year(target_year).is_none();
    let later: DateTime<Utc> = match at.checked_add_months(Months::new(years * 12)) {
        Some(t) if clamped => t + chrono::Duration::days(1),
        Some(t) => t,
        None => return i64::MAX,
    };
    later.timestamp_millis()
}

/// What `archive` writes each batch with: the retention and legal hold on all three objects,
/// and the data object's storage class. Encryption is the store's setting (every put carries it,
/// the conditional-put probe included, since bucket policies often require it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WritePolicy {
    pub lock: Option<(LockMode, Retention)>,
    pub legal_hold: bool,
    /// The data object's storage class; manifest.json and `_SUCCESS` stay in the bucket's
    /// default class (they are small, and every other class bills a minimum size; see README).
    pub storage_class: Option<String>,
}

impl WritePolicy {
    /// The retention a batch written at `now_ms` carries.
    pub(crate) fn lock_at(&self, now_ms: i64) -> Option<ObjectLock> {
        self.lock.map(|(mode, retention)| ObjectLock {
            mode,
            retain_until_ms: retention.until_ms(now_ms),
        })
    }

    /// Whether anything here needs an S3 store that implements it.
    pub(crate) fn is_set(&self) -> bool {
        self.lock.is_some() || self.legal_hold || self.storage_class.is_some()
    }
}

/// How one put is to be stored, beyond its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    pub storage_class: Option<String>,
    pub lock: Option<ObjectLock>,
    pub legal_hold: bool,
}

/// Server-side encryption algorithm, as S3 names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SseAlgorithm {
    /// SSE-S3: keys managed by the store.
    #[serde(rename = "AES256")]
    Aes256,
    /// SSE-KMS: a KMS key, the bucket's or the one named.
    #[serde(rename = "aws:kms")]
    Kms,
}

impl SseAlgorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            SseAlgorithm::Aes256 => "AES256",
            SseAlgorithm::Kms => "aws:kms",
        }
    }
}

/// `--sse`, `--sse-kms-key-id`, `--sse-bucket-key`: what every put asks the store to encrypt with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sse {
    pub algorithm: SseAlgorithm,
    /// A key ARN, key id or alias (SSE-KMS only); none: the account's `aws/s3` key.
    pub kms_key_id: Option<String>,
    pub bucket_key: Option<bool>,
}

impl Sse {
    /// Whether the encryption a store reports is what this asks for. A key id or ARN must match
    /// the reported key ARN (AWS reports the full ARN: a key id matches its last part); an alias
    /// cannot be compared offline, so any key satisfies it (the receipt still records which).
    pub(crate) fn reported_matches(&self, algorithm: Option<&str>, key: Option<&str>) -> bool {
        if algorithm != Some(self.algorithm.as_str()) {
            return false;
        }
        match (&self.kms_key_id, key) {
            (None, _) => true,
            (Some(wanted), _) if wanted.starts_with("alias/") || wanted.contains(":alias/") => true,
            (Some(wanted), Some(got)) => {
                got == wanted || got.rsplit_once("key/").is_some_and(|(_, id)| id == wanted)
            }
            (Some(_), None) => false,
        }
    }
}

/// Storage classes whose objects cannot be read until they are restored ("thawed"): AWS's
/// GLACIER (Flexible Retrieval) and DEEP_ARCHIVE, Tencent COS's ARCHIVE and DEEP_ARCHIVE.
/// Everything else (GLACIER_IR included) is read at once.
const COLD_CLASSES: &[&str] = &["GLACIER", "DEEP_ARCHIVE", "ARCHIVE"];

pub(crate) fn is_cold_class(class: &str) -> bool {
    COLD_CLASSES.contains(&class)
}

/// Where a restore of a cold object stands, from the `x-amz-restore` header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RestoreStatus {
    /// Never asked for (or the restored copy expired).
    #[default]
    NotRequested,
    InProgress,
    /// A readable copy exists until it expires.
    Restored,
}

impl RestoreStatus {
    /// `ongoing-request="true"` → in progress; `ongoing-request="false", expiry-date="…"` →
    /// restored; no header → not requested.
    pub(crate) fn from_header(header: Option<&str>) -> RestoreStatus {
        match header {
            None => RestoreStatus::NotRequested,
            Some(h) if h.contains("ongoing-request=\"true\"") => RestoreStatus::InProgress,
            Some(h) if h.contains("ongoing-request=\"false\"") => RestoreStatus::Restored,
            Some(_) => RestoreStatus::NotRequested,
        }
    }
}

/// `--thaw DAYS` (and `--thaw-tier`): restore cold objects for this many days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thaw {
    pub days: u32,
    pub tier: ThawTier,
}

/// The retrieval tier of a thaw: how fast, at what price (see README, "Compliance and cost").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum ThawTier {
    /// GLACIER minutes, DEEP_ARCHIVE not offered.
    Expedited,
    /// GLACIER 3–5 hours, DEEP_ARCHIVE within 12 hours.
    #[default]
    Standard,
    /// GLACIER 5–12 hours, DEEP_ARCHIVE within 48 hours; the cheapest.
    Bulk,
}

impl ThawTier {
    pub fn as_str(self) -> &'static str {
        match self {
            ThawTier::Expedited => "Expedited",
            ThawTier::Standard => "Standard",
            ThawTier::Bulk => "Bulk",
        }
    }
}

/// What asking for a thaw did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThawState {
    /// Not asked for (no `--thaw`): the object was checked by its metadata only.
    NotRequested,
    /// Asked for now.
    Requested,
    /// Asked for before; the store is still restoring it.
    InProgress,
}

/// How a receipt's batch was verified before it was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifiedBy {
    /// Every object read back in full (SPEC §5.1).
    #[default]
    ReadBack,
    /// A data object in a class that cannot be read at once: the bytes as uploaded were scanned
    /// and the store's own checksum of the stored object (HEAD with checksum mode) matched them.
    StoreChecksum,
}

impl VerifiedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            VerifiedBy::ReadBack => "read_back",
            VerifiedBy::StoreChecksum => "store_checksum",
        }
    }

    pub fn parse(text: &str) -> VerifiedBy {
        match text {
            "store_checksum" => VerifiedBy::StoreChecksum,
            _ => VerifiedBy::ReadBack,
        }
    }
}

/// How a batch's objects are protected and stored, as the store reported it when the batch was
/// recorded: what its receipt records, and what `verify` holds the objects to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    /// The weakest retention of the three objects.
    pub lock: Option<ObjectLock>,
    pub legal_hold: bool,
    /// The data object's storage class (`None`: the default, STANDARD).
    pub storage_class: Option<String>,
    /// The data object's encryption and KMS key, as the store reports them.
    pub sse_algorithm: Option<String>,
    pub sse_kms_key_id: Option<String>,
    pub verified_by: VerifiedBy,
}

/// An epoch-ms instant as the S3 header writes it (`2033-03-01T00:00:00Z`).
pub(crate) fn header_time(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn retention_is_parsed_in_years_and_days() {
        assert_eq!(Retention::parse("7y").unwrap(), Retention::Years(7));
        assert_eq!(
            Retention::parse("30d").unwrap(),
            Retention::Millis(30 * 86_400_000)
        );
        assert_eq!(
            Retention::parse("2555d").unwrap(),
            Retention::Millis(2555 * 86_400_000)
        );
        assert_eq!(Retention::parse("7y").unwrap().to_string(), "7y");
        assert_eq!(Retention::parse("30d").unwrap().to_string(), "30d");
        for bad in ["", "y", "0y", "101y", "7 years", "-1d", "500ms", "7x"] {
            assert!(Retention::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn years_are_calendar_years_and_never_a_day_short() {
        let seven = Retention::Years(7);
        assert_eq!(
            seven.until_ms(ms("2026-03-01T10:00:00Z")),
            ms("2033-03-01T10:00:00Z")
        );
        // 7 × 365 days would end on 2033-11-29: two leap days short.
        assert_eq!(
            seven.until_ms(ms("2026-12-01T00:00:00Z")),
            ms("2033-12-01T00:00:00Z")
        );
        // 29 February has no twin in 2035: the day after, not the day before.
        assert_eq!(
            seven.until_ms(ms("2028-02-29T12:00:00Z")),
            ms("2035-03-01T12:00:00Z")
        );
        assert_eq!(
            Retention::Years(4).until_ms(ms("2028-02-29T12:00:00Z")),
            ms("2032-02-29T12:00:00Z")
        );
    }

    #[test]
    fn retain_until_is_rounded_up_to_the_second() {
        let day = Retention::Millis(86_400_000);
        let now = ms("2026-12-01T00:00:00Z");
        assert_eq!(day.until_ms(now), now + 86_400_000);
        assert_eq!(day.until_ms(now + 1), now + 86_401_000);
        assert_eq!(day.until_ms(now + 999), now + 86_401_000);
        assert_eq!(header_time(now + 86_401_000), "2026-12-02T00:00:01Z");
    }

    #[test]
    fn a_retention_covers_another_only_if_as_long_and_as_strict() {
        let at = |mode, s: i64| ObjectLock {
            mode,
            retain_until_ms: s * 1000,
        };
        let wanted = at(LockMode::Compliance, 100);
        assert!(at(LockMode::Compliance, 100).covers(&wanted));
        assert!(at(LockMode::Compliance, 101).covers(&wanted));
        assert!(!at(LockMode::Compliance, 99).covers(&wanted));
        assert!(!at(LockMode::Governance, 200).covers(&wanted));
        assert!(at(LockMode::Compliance, 100).covers(&at(LockMode::Governance, 100)));
    }

    #[test]
    fn reported_encryption_is_matched_by_key_arn_or_id() {
        let arn = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab";
        let kms = |key: Option<&str>| Sse {
            algorithm: SseAlgorithm::Kms,
            kms_key_id: key.map(str::to_string),
            bucket_key: None,
        };
        assert!(kms(Some(arn)).reported_matches(Some("aws:kms"), Some(arn)));
        assert!(kms(Some("1234abcd-12ab-34cd-56ef-1234567890ab"))
            .reported_matches(Some("aws:kms"), Some(arn)));
        assert!(!kms(Some("other-id")).reported_matches(Some("aws:kms"), Some(arn)));
        assert!(!kms(Some(arn)).reported_matches(Some("AES256"), None));
        assert!(!kms(Some(arn)).reported_matches(Some("aws:kms"), None));
        assert!(kms(Some("alias/wallet-archive")).reported_matches(Some("aws:kms"), Some(arn)));
        assert!(kms(None).reported_matches(Some("aws:kms"), Some(arn)));
        assert!(!kms(None).reported_matches(None, None));
    }

    #[test]
    fn restore_status_is_read_from_the_header() {
        assert_eq!(
            RestoreStatus::from_header(None),
            RestoreStatus::NotRequested
        );
        assert_eq!(
            RestoreStatus::from_header(Some("ongoing-request=\"true\"")),
            RestoreStatus::InProgress
        );
        assert_eq!(
            RestoreStatus::from_header(Some(
                "ongoing-request=\"false\", expiry-date=\"Fri, 21 Dec 2012 00:00:00 GMT\""
            )),
            RestoreStatus::Restored
        );
        assert!(is_cold_class("DEEP_ARCHIVE") && is_cold_class("GLACIER"));
        assert!(!is_cold_class("GLACIER_IR") && !is_cold_class("STANDARD_IA"));
    }
}
