//! A one-line progress display with rate and ETA, for long manual runs: drawn on stderr only when
//! stderr is a terminal (never in a pod's logs), at most five times a second.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    label: String,
    unit: &'static str,
    total: Option<u64>,
    done: u64,
    started: Instant,
    drawn: Option<Instant>,
    enabled: bool,
}

impl Progress {
    /// A display of `label` counting `unit`s towards `total` (if known), on a terminal only.
    pub fn new(label: impl Into<String>, unit: &'static str, total: Option<u64>) -> Progress {
        Progress {
            label: label.into(),
            unit,
            total,
            done: 0,
            started: Instant::now(),
            drawn: None,
            enabled: Progress::on_terminal(),
        }
    }

    /// Whether a progress line would be drawn (stderr is a terminal).
    pub fn on_terminal() -> bool {
        std::io::stderr().is_terminal()
    }

    pub fn advance(&mut self, n: u64, note: &str) {
        self.done += n;
        if !self.enabled
            || self
                .drawn
                .is_some_and(|at| at.elapsed() < Duration::from_millis(200))
        {
            return;
        }
        let text = line(
            &self.label,
            self.unit,
            self.done,
            self.total,
            self.started.elapsed(),
        );
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{text}{note}\x1b[K");
        let _ = err.flush();
        self.drawn = Some(Instant::now());
    }

    /// Ends the line, if one was drawn.
    pub fn finish(&mut self) {
        if self.drawn.take().is_some() {
            eprintln!();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn thousands(n: u64) -> String {
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

fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// `archive a1: 12,345/100,000 rows (12%), 3,200 rows/s, ETA 26s`
pub fn line(label: &str, unit: &str, done: u64, total: Option<u64>, elapsed: Duration) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(0.001);
    let mut text = format!("{label}: {}", thousands(done));
    if let Some(total) = total.filter(|&t| t > 0) {
        let percent = (done as f64 * 100.0 / total as f64).min(100.0);
        text += &format!("/{} {unit} ({percent:.0}%)", thousands(total));
    } else {
        text += &format!(" {unit}");
    }
    text += &format!(", {} {unit}/s", thousands(rate as u64));
    if let Some(total) = total {
        if rate > 0.0 && total > done {
            text += &format!(
                ", ETA {}",
                clock(Duration::from_secs_f64((total - done) as f64 / rate))
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_lines() {
        assert_eq!(
            line(
                "archive a1",
                "rows",
                12_345,
                Some(100_000),
                Duration::from_secs(4)
            ),
            "archive a1: 12,345/100,000 rows (12%), 3,086 rows/s, ETA 28s"
        );
        assert_eq!(
            line("verify", "batches", 7, None, Duration::from_secs(2)),
            "verify: 7 batches, 3 batches/s"
        );
        assert_eq!(
            line(
                "archive a1",
                "rows",
                1_000,
                Some(1_000_000),
                Duration::from_secs(1)
            ),
            "archive a1: 1,000/1,000,000 rows (0%), 1,000 rows/s, ETA 16m39s"
        );
        assert_eq!(
            line("x", "rows", 10, Some(40_000), Duration::from_secs(1)),
            "x: 10/40,000 rows (0%), 10 rows/s, ETA 1h06m"
        );
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}

/// The pipeline's [`Observer`](crate::pipeline::Observer) as a terminal progress line: one line
/// per stretch of work (an app), drawn only when stderr is a terminal.
#[derive(Default)]
pub struct TerminalProgress(std::sync::Mutex<Option<Progress>>);

impl crate::pipeline::Observer for TerminalProgress {
    fn wants_totals(&self) -> bool {
        Progress::on_terminal()
    }

    fn start(&self, label: &str, unit: &'static str, total: Option<u64>) {
        *self.0.lock().expect("not poisoned") = Some(Progress::new(label, unit, total));
    }

    fn advance(&self, n: u64, note: &str) {
        if let Some(progress) = self.0.lock().expect("not poisoned").as_mut() {
            progress.advance(n, note);
        }
    }

    fn finish(&self) {
        if let Some(mut progress) = self.0.lock().expect("not poisoned").take() {
            progress.finish();
        }
    }
}
