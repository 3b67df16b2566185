//! Values as the command line writes them: durations, times, sizes, percents, and the store
//! settings' words.

use std::time::Duration;

use crate::model::ident;
use crate::model::protection::Retention;
use crate::model::timespec;
use crate::store::ConditionalPutSetting;

pub(super) fn parse_duration(text: &str) -> Result<i64, String> {
    timespec::parse_duration_ms(text)
}

/// A positive duration such as `500ms` or `30s`.
pub(super) fn parse_timeout(text: &str) -> Result<Duration, String> {
    match timespec::parse_duration_ms(text)? {
        0 => Err(format!("timeout {text:?} must be more than zero")),
        ms => Ok(Duration::from_millis(ms as u64)),
    }
}

pub(super) fn parse_conditional_put(text: &str) -> Result<ConditionalPutSetting, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(ConditionalPutSetting::Auto),
        "true" | "on" | "yes" => Ok(ConditionalPutSetting::On),
        "false" | "off" | "no" => Ok(ConditionalPutSetting::Off),
        _ => Err(format!(
            "--s3-conditional-put {text:?}: write auto (probe the store), true or false"
        )),
    }
}

pub(super) fn parse_retention(text: &str) -> Result<Retention, String> {
    Retention::parse(text)
}

/// A storage class as S3 spells it: upper-case letters, digits and `_` (passed to the store as
/// it is, so a class this build does not know still works).
pub(super) fn parse_storage_class(text: &str) -> Result<String, String> {
    let class = text.trim().to_ascii_uppercase();
    if class.is_empty()
        || !class
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!(
            "invalid storage class {text:?} (write STANDARD_IA, GLACIER_IR, DEEP_ARCHIVE, …)"
        ));
    }
    Ok(class)
}

/// A table name, optionally with its database (`heartbeat`, `percona.heartbeat`), each part
/// plain ([`ident`]) so that it can be put into SQL as it is.
pub(super) fn parse_table_name(text: &str) -> Result<String, String> {
    let ok = ident::is_plain;
    let text = text.trim();
    match text.split_once('.') {
        Some((db, table)) if ok(db) && ok(table) => Ok(text.to_string()),
        None if ok(text) => Ok(text.to_string()),
        _ => Err(format!(
            "invalid table name {text:?} (write heartbeat or database.heartbeat: letters, digits, _ and $)"
        )),
    }
}

pub(super) fn parse_time(text: &str) -> Result<i64, String> {
    timespec::parse_time_ms(text)
}

/// An instant as every time flag takes it, or a duration ago (`12h`, `7d`: what
/// `history --since` is mostly asked).
pub(super) fn parse_since(text: &str) -> Result<i64, String> {
    let ago =
        text.trim().ends_with(|c: char| c.is_ascii_alphabetic()) && !text.contains(['-', ':']);
    if ago {
        let ms = timespec::parse_duration_ms(text)?;
        return Ok(chrono::Utc::now().timestamp_millis() - ms);
    }
    timespec::parse_time_ms(text)
}

/// A whole UTC day, written as any time is (`2026-11-01`, its midnight in RFC 3339, or in epoch
/// ms), as the epoch ms it starts at.
pub(super) fn parse_day(text: &str) -> Result<i64, String> {
    timespec::parse_day_start_ms(text)
}

/// `history --command`: a command whose runs are recorded.
pub(super) fn parse_recorded_command(text: &str) -> Result<String, String> {
    use crate::model::command::CommandName;
    match CommandName::parse(text.trim()) {
        Some(c) if c.is_recorded() => Ok(c.as_str().to_string()),
        _ => Err(format!(
            "{text:?} is not a command whose runs are recorded ({})",
            CommandName::recorded()
                .map(CommandName::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

pub(super) fn parse_percent(text: &str) -> Result<f64, String> {
    let p: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("invalid percent {text:?}"))?;
    if (0.0..=100.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("percent {text:?} is not between 0 and 100"))
    }
}

pub(super) fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let number: u64 = text[..digits]
        .parse()
        .map_err(|_| format!("invalid size {text:?} (write 64MiB, 500KB or a byte count)"))?;
    let unit: u64 = match text[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "kib" | "k" => 1 << 10,
        "mb" => 1_000_000,
        "mib" | "m" => 1 << 20,
        "gb" => 1_000_000_000,
        "gib" | "g" => 1 << 30,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    number
        .checked_mul(unit)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("size {text:?} out of range"))
}

/// A non-negative count of milliseconds as a duration.
/// `--parallel-apps` of archive: a number of apps, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParallelApps {
    /// One app per CPU core this process may use (its cgroup's quota, where it has one), at
    /// most [`ParallelApps::AUTO_MAX`].
    Auto,
    Fixed(u32),
}

impl ParallelApps {
    /// The most apps `auto` works at once: beyond four, the database's inserts are the bound.
    pub(crate) const AUTO_MAX: usize = 4;
    pub(crate) const MAX: u32 = 8;

    /// How many apps at once, on a machine where this process may use `cores` cores.
    pub(crate) fn resolve(self, cores: usize) -> usize {
        match self {
            ParallelApps::Auto => cores.clamp(1, Self::AUTO_MAX),
            ParallelApps::Fixed(n) => n as usize,
        }
    }
}

pub(super) fn parse_parallel_apps(text: &str) -> Result<ParallelApps, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("auto") {
        return Ok(ParallelApps::Auto);
    }
    match text.parse::<u32>() {
        Ok(n) if (1..=ParallelApps::MAX).contains(&n) => Ok(ParallelApps::Fixed(n)),
        _ => Err(format!(
            "{text:?} is not auto or a number of apps from 1 to {}",
            ParallelApps::MAX
        )),
    }
}

/// The CPU cores this process may use (`std::thread::available_parallelism`: the affinity mask
/// and the cgroup's CPU quota, as a Kubernetes CPU limit sets it).
pub(super) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub(super) fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("500KB"), Ok(500_000));
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("12 parsecs").is_err());
    }

    #[test]
    fn parallel_apps_auto_follows_the_cores_within_bounds() {
        assert_eq!(parse_parallel_apps("auto"), Ok(ParallelApps::Auto));
        assert_eq!(parse_parallel_apps(" AUTO "), Ok(ParallelApps::Auto));
        assert_eq!(parse_parallel_apps("3"), Ok(ParallelApps::Fixed(3)));
        for bad in ["0", "9", "-1", "two", ""] {
            assert!(parse_parallel_apps(bad).is_err(), "{bad:?}");
        }
        assert_eq!(ParallelApps::Auto.resolve(1), 1);
        assert_eq!(ParallelApps::Auto.resolve(2), 2);
        assert_eq!(ParallelApps::Auto.resolve(64), 4);
        assert_eq!(ParallelApps::Auto.resolve(0), 1);
        assert_eq!(ParallelApps::Fixed(8).resolve(2), 8);
    }

    #[test]
    fn table_names_are_only_what_sql_can_take_as_is() {
        assert_eq!(parse_table_name("heartbeat").unwrap(), "heartbeat");
        assert_eq!(
            parse_table_name(" percona.heartbeat ").unwrap(),
            "percona.heartbeat"
        );
        for bad in ["", "a.b.c", "hb; DROP TABLE x", "`hb`", "db.", ".hb", "h b"] {
            assert!(parse_table_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn words() {
        assert_eq!(
            parse_conditional_put("auto"),
            Ok(ConditionalPutSetting::Auto)
        );
        assert_eq!(parse_conditional_put("TRUE"), Ok(ConditionalPutSetting::On));
        assert_eq!(parse_conditional_put("off"), Ok(ConditionalPutSetting::Off));
        assert!(parse_conditional_put("maybe").is_err());
        assert_eq!(parse_percent("5%"), Ok(5.0));
        assert!(parse_percent("101").is_err());
        assert!(parse_timeout("0s").is_err());
    }
}
