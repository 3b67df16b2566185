//! Durations, points in time and UTC days, as the command line writes them (SPEC §6).
//!
//! Pure functions: `now` is always an argument, never read from the clock here.

use chrono::{DateTime, NaiveDate, TimeZone, Utc};

const DAY_MS: i64 = 86_400_000;

/// Parses `30s`, `15m`, `24h`, `7d` (also `500ms` and compound forms such as `1h30m`) into
/// milliseconds.
pub(crate) fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration (write 30s, 15m, 24h or 7d)".into());
    }
    let mut total: i64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "invalid duration {text:?} (write 30s, 15m, 24h or 7d)"
            ));
        }
        let number: i64 = rest[..digits]
            .parse()
            .map_err(|_| format!("duration {text:?} is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit_ms = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => DAY_MS,
            "w" => 7 * DAY_MS,
            "" => return Err(format!("duration {text:?} needs a unit (s, m, h or d)")),
            unit => {
                return Err(format!(
                    "unknown unit {unit:?} in duration {text:?} (use s, m, h or d)"
                ))
            }
        };
        rest = &rest[unit_len..];
        total = number
            .checked_mul(unit_ms)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| format!("duration {text:?} is too large"))?;
    }
    Ok(total)
}

/// Parses a point in time, as every time flag takes one: RFC 3339 (`2026-11-01T00:00:00Z`),
/// epoch milliseconds, or a plain UTC day (`2026-11-01`, its midnight).
pub(crate) fn parse_time_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(midnight_ms(day));
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| format!("invalid time {text:?}: {e} (write a UTC day such as 2026-11-01, RFC 3339 such as 2026-11-01T00:00:00Z, or epoch milliseconds)"))
}

/// Parses the start of a whole UTC day, written as any time is ([`parse_time_ms`]): an instant
/// that is not a UTC midnight is refused, naming the day it falls in.
pub(crate) fn parse_day_start_ms(text: &str) -> Result<i64, String> {
    let ms = parse_time_ms(text)?;
    match ms.rem_euclid(DAY_MS) {
        0 => Ok(ms),
        _ => Err(format!(
            "{:?} is {}, not the start of a UTC day: a day is written 2026-11-01 (or its midnight, {}T00:00:00Z)",
            text.trim(),
            rfc3339(ms),
            utc_date(ms)
        )),
    }
}

fn midnight_ms(day: NaiveDate) -> i64 {
    day.and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc()
        .timestamp_millis()
}

/// The archive cutoff: rows with `updated_at_ms` strictly below it are old enough.
pub(crate) fn cutoff_ms(now_ms: i64, older_than_ms: i64, explicit: Option<i64>) -> i64 {
    explicit.unwrap_or(now_ms.saturating_sub(older_than_ms))
}

/// A cutoff this recent is allowed, with a warning.
const FRESH_CUTOFF_MS: i64 = 60_000;

/// Whether an archive cutoff can be right at `now_ms` (SPEC §5.10): one in the future is refused
/// (rows the relay has not finished with would be archived, and the cursor would pass rows
/// still to be delivered); one less than a minute old is allowed (tests and drains use it) with
/// the warning returned.
pub(crate) fn check_cutoff(now_ms: i64, cutoff_ms: i64) -> Result<Option<String>, String> {
    if cutoff_ms > now_ms {
        return Err(format!(
            "--cutoff / OUTBOX_ARCHIVER_CUTOFF {} is in the future (now is {}): rows still being \
             delivered would be archived and the cursor would pass them; give a time in the past, \
             or --older-than",
            rfc3339(cutoff_ms),
            rfc3339(now_ms)
        ));
    }
    if now_ms - cutoff_ms < FRESH_CUTOFF_MS {
        return Ok(Some(format!(
            "the cutoff {} is less than a minute old: rows still being delivered below it commit \
             behind the cursor and become stragglers (verify reports them, archive --stragglers \
             takes them); a cutoff of minutes or days (--older-than) avoids that",
            rfc3339(cutoff_ms)
        )));
    }
    Ok(None)
}

/// Parses a UTC day, `YYYY-MM-DD`, to the epoch milliseconds it starts at.
pub(crate) fn parse_day_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(midnight_ms)
        .map_err(|e| format!("invalid day {text:?}: {e} (write a UTC day such as 2026-11-01)"))
}

/// The UTC day an epoch-millisecond instant falls in, as a day number since 1970-01-01.
pub(crate) fn utc_day(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// `YYYY-MM-DD` of the UTC day `ms` falls in (the `dt=` partition of SPEC §4).
pub fn utc_date(ms: i64) -> String {
    let days = utc_day(ms);
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date");
    epoch
        .checked_add_signed(chrono::Duration::days(days))
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| format!("day{days}"))
}

/// RFC 3339 text for epoch milliseconds, for humans.
pub(crate) fn rfc3339(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_parse_to_their_first_millisecond() {
        assert_eq!(parse_day_ms("2026-11-01"), Ok(1_793_491_200_000));
        assert_eq!(utc_date(parse_day_ms("1999-12-31").unwrap()), "1999-12-31");
        assert!(parse_day_ms("2026-13-01")
            .unwrap_err()
            .contains("2026-13-01"));
        assert!(parse_day_ms("yesterday").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("15m"), Ok(900_000));
        assert_eq!(parse_duration_ms("24h"), Ok(86_400_000));
        assert_eq!(parse_duration_ms("7d"), Ok(604_800_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert!(parse_duration_ms("").is_err());
        assert!(parse_duration_ms("7").is_err());
        assert!(parse_duration_ms("d").is_err());
        assert!(parse_duration_ms("7y").is_err());
        assert!(parse_duration_ms("-7d").is_err());
        assert!(parse_duration_ms("99999999999999999d").is_err());
    }

    #[test]
    fn times() {
        assert_eq!(parse_time_ms("1700000000000"), Ok(1_700_000_000_000));
        assert_eq!(parse_time_ms("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000));
        assert_eq!(
            parse_time_ms("2023-11-15T00:13:20+02:00"),
            Ok(1_700_000_000_000)
        );
        assert!(parse_time_ms("yesterday").is_err());
        // A plain day is its UTC midnight, as every time flag takes it.
        assert_eq!(parse_time_ms("2026-11-01"), Ok(1_793_491_200_000));
        assert_eq!(
            parse_time_ms(" 2026-11-01 "),
            parse_time_ms("2026-11-01T00:00:00Z")
        );
        assert!(parse_time_ms("2026-11-31").is_err());
    }

    #[test]
    fn days_are_written_as_any_time_and_must_start_at_midnight() {
        for text in [
            "2026-11-01",
            "2026-11-01T00:00:00Z",
            "2026-11-01T08:00:00+08:00",
            "1793491200000",
        ] {
            assert_eq!(parse_day_start_ms(text), Ok(1_793_491_200_000), "{text}");
        }
        let e = parse_day_start_ms("2026-11-01T05:00:00Z").unwrap_err();
        assert!(
            e.contains("not the start of a UTC day") && e.contains("2026-11-01"),
            "{e}"
        );
    }

    #[test]
    fn cutoff() {
        assert_eq!(cutoff_ms(1_000_000, 1_000, None), 999_000);
        assert_eq!(cutoff_ms(1_000_000, 1_000, Some(5)), 5);
    }

    #[test]
    fn cutoffs_in_the_future_are_refused_and_fresh_ones_warned_about() {
        let now = 1_700_000_000_000;
        assert!(check_cutoff(now, now + 1).unwrap_err().contains("future"));
        assert!(check_cutoff(now, now)
            .unwrap()
            .unwrap()
            .contains("stragglers"));
        assert!(check_cutoff(now, now - 59_999).unwrap().is_some());
        assert_eq!(check_cutoff(now, now - 60_000), Ok(None));
        assert_eq!(check_cutoff(now, now - 7 * DAY_MS), Ok(None));
    }

    #[test]
    fn utc_days() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(86_399_999), "1970-01-01");
        assert_eq!(utc_date(86_400_000), "1970-01-02");
        assert_eq!(utc_date(-1), "1969-12-31");
        assert_eq!(utc_date(1_700_000_000_000), "2023-11-14");
        assert_eq!(utc_day(-1), -1);
        assert_eq!(rfc3339(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
    }
}
