//! Numbers and durations as people read them on a terminal: `1,234,567`, `12.8s`, `2m05s`,
//! `ETA 1h06m`.

use std::time::Duration;

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How long a command took: `0.4s`, `12.8s`, `2m05s`.
pub(crate) fn seconds(d: Duration) -> String {
    match d.as_secs() {
        0..=59 => format!("{:.1}s", d.as_secs_f64()),
        s => format!("{}m{:02}s", s / 60, s % 60),
    }
}

/// A time left: `28s`, `16m39s`, `1h06m`.
pub(crate) fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_durations() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(seconds(Duration::from_millis(400)), "0.4s");
        assert_eq!(seconds(Duration::from_secs(125)), "2m05s");
        assert_eq!(clock(Duration::from_secs(28)), "28s");
        assert_eq!(clock(Duration::from_secs(999)), "16m39s");
        assert_eq!(clock(Duration::from_secs(3_960)), "1h06m");
    }
}
