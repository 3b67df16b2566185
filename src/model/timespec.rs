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

/// What every time flag accepts, said in each refusal.
const FORMATS: &str = "a time is written as a UTC day such as 2026-11-01, RFC 3339 such as \
                       2026-11-01T00:00:00Z, or epoch milliseconds such as 1793491200000";

/// The range a time written as a bare number must fall in to be read as epoch milliseconds:
/// from 2001-01-01 (no outbox row is older; a smaller number is a day without dashes, epoch
/// seconds, or a typo) up to the end of the year 9999 (a larger one is micro- or nanoseconds).
const PLAUSIBLE_FROM_MS: i64 = 978_307_200_000;
const PLAUSIBLE_UNTIL_MS: i64 = 253_402_300_800_000;

/// Parses a point in time, as every time flag takes one: RFC 3339 (`2026-11-01T00:00:00Z`),
/// epoch milliseconds, or a plain UTC day (`2026-11-01`, its midnight). What cannot be meant is
/// refused with its real cause, never read as something else: a number outside 2001..9999 as
/// epoch ms (`20261101`, a day without dashes, would be 1970-01-01T05:37Z), a day that does not
/// exist (`2026-11-31`), a day in another order (`04/12/2026`), a time without its offset.
pub(crate) fn parse_time_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("no time given ({FORMATS})"));
    }
    if is_integer(text) {
        return epoch_ms(text);
    }
    if let Some(parts) = day_parts(text) {
        return written_day(text, parts).map(midnight_ms);
    }
    if let Some(day) = text.get(..10).and_then(day_parts) {
        if day.separator == '-' && day.year_first() {
            written_day(&text[..10], day)?;
        }
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| rfc3339_error(text, e))
}

fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A bare number as epoch milliseconds, refused where no one can have meant it, saying what it
/// was probably meant as.
fn epoch_ms(text: &str) -> Result<i64, String> {
    let Ok(ms) = text.parse::<i64>() else {
        return Err(format!(
            "{text} is not a time: far too large for epoch milliseconds ({FORMATS})"
        ));
    };
    let plausible = |ms: i64| (PLAUSIBLE_FROM_MS..PLAUSIBLE_UNTIL_MS).contains(&ms);
    if plausible(ms) {
        return Ok(ms);
    }
    let read_as = if ms < PLAUSIBLE_FROM_MS {
        format!("as epoch milliseconds it is {}, before 2001", rfc3339(ms))
    } else {
        "as epoch milliseconds it is after the year 9999".to_string()
    };
    let compact = (text.len() == 8)
        .then(|| NaiveDate::parse_from_str(text, "%Y%m%d").ok())
        .flatten();
    let meant = if let Some(day) = compact {
        let day = day.format("%Y-%m-%d");
        format!("; it looks like the day {day} without its dashes (write {day})")
    } else if let Some(seconds) = ms.checked_mul(1_000).filter(|&s| plausible(s)) {
        format!(
            "; it looks like epoch seconds ({}): in milliseconds that is {seconds}",
            rfc3339(seconds)
        )
    } else if plausible(ms / 1_000) {
        format!(
            "; it looks like epoch microseconds ({}): in milliseconds that is {}",
            rfc3339(ms / 1_000),
            ms / 1_000
        )
    } else if plausible(ms / 1_000_000) {
        format!(
            "; it looks like epoch nanoseconds ({}): in milliseconds that is {}",
            rfc3339(ms / 1_000_000),
            ms / 1_000_000
        )
    } else {
        String::new()
    };
    Err(format!(
        "{text} is not a plausible time: {read_as}{meant} ({FORMATS})"
    ))
}

/// The three numbers of a day written with one separator (`2026-11-01`, `04/12/2026`,
/// `1.11.2026`), before any check that it exists.
#[derive(Debug, Clone, Copy)]
struct DayParts {
    numbers: [u32; 3],
    widths: [usize; 3],
    separator: char,
}

impl DayParts {
    fn year_first(&self) -> bool {
        self.widths[0] == 4 && self.widths[1] <= 2 && self.widths[2] <= 2
    }

    fn year_last(&self) -> bool {
        self.widths[2] == 4 && self.widths[0] <= 2 && self.widths[1] <= 2
    }
}

fn day_parts(text: &str) -> Option<DayParts> {
    let separator = ['-', '/', '.'].into_iter().find(|&s| text.contains(s))?;
    let parts: Vec<&str> = text.split(separator).collect();
    let [a, b, c] = parts[..] else { return None };
    let mut numbers = [0; 3];
    let mut widths = [0; 3];
    for (i, part) in [a, b, c].into_iter().enumerate() {
        if part.is_empty() || part.len() > 4 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        numbers[i] = part.parse().ok()?;
        widths[i] = part.len();
    }
    let parts = DayParts {
        numbers,
        widths,
        separator,
    };
    (parts.year_first() || parts.year_last()).then_some(parts)
}

/// A day as written: `YYYY-MM-DD` that exists is the day; any other order or separator is
/// refused with the day written as it must be (both readings where it is ambiguous).
fn written_day(text: &str, parts: DayParts) -> Result<NaiveDate, String> {
    let [a, b, c] = parts.numbers;
    if parts.year_first() {
        let day = real_day(text, a as i32, b, c)?;
        if parts.separator == '-' {
            return Ok(day);
        }
        return Err(format!(
            "{text}: write the day as YYYY-MM-DD ({})",
            day.format("%Y-%m-%d")
        ));
    }
    let year = c as i32;
    let day_first = real_day(text, year, b, a);
    let month_first = real_day(text, year, a, b);
    let advice = match (&day_first, &month_first) {
        (Ok(d), Ok(m)) if d != m => format!(
            "{} if it is day/month/year, {} if month/day/year",
            d.format("%Y-%m-%d"),
            m.format("%Y-%m-%d")
        ),
        (Ok(d), _) => d.format("%Y-%m-%d").to_string(),
        (Err(_), Ok(m)) => m.format("%Y-%m-%d").to_string(),
        (Err(e), Err(_)) => return Err(e.clone()),
    };
    Err(format!("{text}: write the day as YYYY-MM-DD ({advice})"))
}

/// The day `year`-`month`-`day` if it exists, else why not.
fn real_day(text: &str, year: i32, month: u32, day: u32) -> Result<NaiveDate, String> {
    if !(1..=12).contains(&month) {
        return Err(format!("{text} is not a date (there is no month {month})"));
    }
    let first = NaiveDate::from_ymd_opt(year, month, 1)
        .ok_or_else(|| format!("{text} is not a date ({FORMATS})"))?;
    let next = first
        .checked_add_months(chrono::Months::new(1))
        .ok_or_else(|| format!("{text} is not a date ({FORMATS})"))?;
    let days = (next - first).num_days() as u32;
    if day == 0 || day > days {
        let name = chrono::Month::try_from(month as u8)
            .map(|m| m.name())
            .unwrap_or("that month");
        let which = if month == 2 {
            format!("February {year}")
        } else {
            name.to_string()
        };
        return Err(format!("{text} is not a date ({which} has {days} days)"));
    }
    Ok(NaiveDate::from_ymd_opt(year, month, day).expect("checked above"))
}

/// Why text that is neither a number nor a day is not RFC 3339, in words that name the cause
/// (chrono's own say "premature end of input").
fn rfc3339_error(text: &str, e: chrono::ParseError) -> String {
    use chrono::format::ParseErrorKind;
    let starts_with_day = text.get(..10).and_then(day_parts).is_some();
    let local = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ]
    .iter()
    .any(|f| chrono::NaiveDateTime::parse_from_str(text, f).is_ok());
    let cause = match e.kind() {
        _ if !starts_with_day => format!("{text:?} is not a time"),
        _ if local => format!(
            "{text} has no UTC offset: add Z for UTC (or the offset it was written in, such as +08:00)"
        ),
        ParseErrorKind::OutOfRange => format!(
            "{text} is not a time: a field is out of range (hours 00-23, minutes and seconds 00-59, offsets within ±23:59)"
        ),
        ParseErrorKind::TooLong => format!("{text} is not a time: there is more after its offset"),
        _ => format!("{text} is not a time: after its day it is not an RFC 3339 time of day and offset (T00:00:00Z)"),
    };
    format!("{cause} ({FORMATS})")
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

/// Parses a UTC day, `YYYY-MM-DD`, to the epoch milliseconds it starts at; a day that does not
/// exist or is written in another order is refused as [`parse_time_ms`] refuses it.
pub(crate) fn parse_day_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    match day_parts(text) {
        Some(parts) => written_day(text, parts).map(midnight_ms),
        None => Err(format!(
            "{text:?} is not a day: write a UTC day such as 2026-11-01"
        )),
    }
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
    fn numbers_that_cannot_be_epoch_milliseconds_are_refused_saying_what_they_look_like() {
        let cases = [
            // A day without its dashes is 1970-01-01T05:37Z as epoch ms.
            (
                "20261101",
                "looks like the day 2026-11-01 without its dashes",
            ),
            ("20261101", "1970-01-01T05:37:41.101Z"),
            (
                "1767225600",
                "looks like epoch seconds (2026-01-01T00:00:00.000Z)",
            ),
            ("1767225600", "in milliseconds that is 1767225600000"),
            ("1767225600000000", "looks like epoch microseconds"),
            ("1767225600000000000", "looks like epoch nanoseconds"),
            ("0", "before 2001"),
            ("-1", "1969-12-31T23:59:59.999Z"),
            ("978307199999", "before 2001"),
            ("253402300800000", "after the year 9999"),
            ("99999999999999999999", "far too large"),
            // Eight digits that are not a day: only the plain refusal.
            ("20261341", "before 2001"),
        ];
        for (text, needle) in cases {
            let e = parse_time_ms(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(e.contains("a time is written as"), "{text}: {e}");
        }
        assert!(!parse_time_ms("20261341")
            .unwrap_err()
            .contains("looks like"));
        // The edges of what is read as epoch ms.
        assert_eq!(parse_time_ms("978307200000"), Ok(978_307_200_000));
        assert_eq!(parse_time_ms("253402300799999"), Ok(253_402_300_799_999));
        assert_eq!(parse_time_ms(" 1767225600000 "), Ok(1_767_225_600_000));
    }

    #[test]
    fn days_that_do_not_exist_or_are_written_otherwise_name_the_real_cause() {
        let cases = [
            ("2026-11-31", "2026-11-31 is not a date (November has 30 days)"),
            ("2026-02-29", "2026-02-29 is not a date (February 2026 has 28 days)"),
            ("2026-04-00", "2026-04-00 is not a date (April has 30 days)"),
            ("2026-13-01", "2026-13-01 is not a date (there is no month 13)"),
            (
                "04/12/2026",
                "04/12/2026: write the day as YYYY-MM-DD (2026-12-04 if it is day/month/year, 2026-04-12 if month/day/year)",
            ),
            ("13/04/2026", "13/04/2026: write the day as YYYY-MM-DD (2026-04-13)"),
            ("04/13/2026", "04/13/2026: write the day as YYYY-MM-DD (2026-04-13)"),
            ("05/05/2026", "05/05/2026: write the day as YYYY-MM-DD (2026-05-05)"),
            ("1.11.2026", "1.11.2026: write the day as YYYY-MM-DD (2026-11-01 if"),
            ("2026/11/01", "2026/11/01: write the day as YYYY-MM-DD (2026-11-01)"),
            ("01-11-2026", "01-11-2026: write the day as YYYY-MM-DD (2026-11-01 if"),
            ("31/11/2026", "31/11/2026 is not a date (November has 30 days)"),
            (
                "2026-11-31T00:00:00Z",
                "2026-11-31 is not a date (November has 30 days)",
            ),
            ("2026-11-01T00:00:00", "2026-11-01T00:00:00 has no UTC offset: add Z"),
            ("2026-11-01T25:00:00Z", "a field is out of range"),
            ("2026-11-01T00:00", "2026-11-01T00:00 has no UTC offset"),
            ("yesterday", "\"yesterday\" is not a time"),
            ("", "no time given"),
        ];
        for (text, needle) in cases {
            let e = parse_time_ms(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(!e.contains("premature end of input"), "{text}: {e}");
        }
        // Days as attest's options carry them are refused the same way.
        assert!(parse_day_ms("2026-11-31")
            .unwrap_err()
            .contains("November has 30 days"));
        assert!(parse_day_ms("04/12/2026")
            .unwrap_err()
            .contains("write the day as YYYY-MM-DD"));
        assert_eq!(parse_time_ms("2024-02-29"), Ok(1_709_164_800_000));
        assert_eq!(parse_day_ms("2024-02-29"), Ok(1_709_164_800_000));
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
