//! Progress of long runs, drawn so that it never fights the log.
//!
//! On a terminal with text logs: one line per piece of work in flight (an app), and a total line
//! when there are several, redrawn at most five times a second at the bottom of stderr. The
//! logger writes through [`LogWriter`], which lifts the lines, writes the log line and puts them
//! back, so a log line never starts in the middle of a progress line. With JSON logs (on a
//! terminal or not) and off a terminal, no progress text is drawn: a progress log line per
//! piece of work is written every `LOG_EVERY` instead, so a pod's logs show a long run moving.

use crate::model::command::CommandName;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::human::{clock, thousands};

/// Off a terminal: a progress log line per piece of work this often, unless told otherwise.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Lines at the bottom of a terminal (text logs on a terminal).
    Terminal,
    /// Progress log lines now and then (JSON logs, or not a terminal).
    Log,
}

/// How progress is shown in this process, set once by the binary with the log format; a library
/// caller that never sets it gets log lines.
static MODE: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();

/// How often progress is logged in [`Mode::Log`] (`--progress-every`); zero: never.
static LOG_INTERVAL: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// The lines drawn at the bottom of the terminal now.
static SCREEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Sets how progress is shown: drawn on a terminal only with text logs on a terminal, logged
/// `every` so often otherwise.
pub(crate) fn init(json_logs: bool, every: Duration) {
    let _ = LOG_INTERVAL.set(every);
    let mode = if !json_logs && std::io::stderr().is_terminal() {
        Mode::Terminal
    } else {
        Mode::Log
    };
    let _ = MODE.set(mode);
}

fn mode() -> Mode {
    MODE.get().copied().unwrap_or(Mode::Log)
}

/// Whether progress lines are drawn (a terminal with text logs).
fn on_terminal() -> bool {
    mode() == Mode::Terminal
}

/// Clears the drawn lines from the terminal (the cursor ends where the first one began).
fn lift(err: &mut impl Write, drawn: usize) {
    if drawn == 0 {
        return;
    }
    let _ = write!(err, "\r\x1b[2K");
    for _ in 1..drawn {
        let _ = write!(err, "\x1b[1A\x1b[2K");
    }
}

/// Writes the lines, each cut to the terminal's width: a line that wrapped would take two rows,
/// and lifting it would leave one behind.
fn draw(err: &mut impl Write, lines: &[String]) {
    let width = columns().saturating_sub(1).max(20);
    let cut: Vec<String> = lines
        .iter()
        .map(|l| l.chars().take(width).collect())
        .collect();
    let _ = write!(err, "{}", cut.join("\n"));
}

/// stderr's terminal width (80 when it cannot be told).
fn columns() -> usize {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes a winsize into the struct passed, and nothing else.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    match ok && size.ws_col > 0 {
        true => usize::from(size.ws_col),
        false => 80,
    }
}

/// Replaces the lines at the bottom of the terminal.
fn show(lines: Vec<String>) {
    let mut screen = SCREEN.lock().expect("not poisoned");
    let mut err = std::io::stderr().lock();
    lift(&mut err, screen.len());
    draw(&mut err, &lines);
    let _ = err.flush();
    *screen = lines;
}

/// Writes a line of text on stderr above the progress lines (as a log line is).
pub(crate) fn say(line: &str) {
    let _ = LogWriter.write_all(format!("{line}\n").as_bytes());
}

/// The log's writer: a log line is written above the progress lines, never into them.
pub(crate) struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let screen = SCREEN.lock().expect("not poisoned");
        let mut err = std::io::stderr().lock();
        lift(&mut err, screen.len());
        err.write_all(buf)?;
        if !buf.ends_with(b"\n") {
            err.write_all(b"\n")?;
        }
        draw(&mut err, &screen);
        err.flush()?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}

/// One piece of work in flight.
struct Task {
    unit: &'static str,
    total: Option<u64>,
    done: u64,
    started: Instant,
    note: String,
    logged: Instant,
}

/// The pipeline's [`Observer`](crate::pipeline::Observer) for one command: a line per app in
/// flight and a total line on a terminal, progress log lines elsewhere.
pub(crate) struct Progress {
    command: CommandName,
    tasks: Mutex<BTreeMap<String, Task>>,
    drawn: Mutex<Option<Instant>>,
    /// What finished tasks did, for the total line.
    finished: Mutex<(u64, Option<&'static str>)>,
    started: Instant,
}

impl Progress {
    pub(crate) fn new(command: CommandName) -> Progress {
        Progress {
            command,
            tasks: Mutex::new(BTreeMap::new()),
            drawn: Mutex::new(None),
            finished: Mutex::new((0, None)),
            started: Instant::now(),
        }
    }

    /// The lines to draw: each task's, then the total's when there are several.
    fn lines(&self) -> Vec<String> {
        let tasks = self.tasks.lock().expect("not poisoned");
        let mut lines: Vec<String> = tasks
            .iter()
            .map(|(key, t)| {
                line(
                    &format!("{} {key}", self.command),
                    t.unit,
                    t.done,
                    t.total,
                    t.started.elapsed(),
                ) + &t.note
            })
            .collect();
        let (done_before, unit) = *self.finished.lock().expect("not poisoned");
        if tasks.len() > 1 || (done_before > 0 && !tasks.is_empty()) {
            let unit = unit
                .or_else(|| tasks.values().next().map(|t| t.unit))
                .unwrap_or("");
            let done: u64 = done_before + tasks.values().map(|t| t.done).sum::<u64>();
            lines.push(line(
                &format!("{} (all)", self.command),
                unit,
                done,
                None,
                self.started.elapsed(),
            ));
        }
        lines
    }

    fn redraw(&self, force: bool) {
        if mode() != Mode::Terminal {
            return;
        }
        let mut drawn = self.drawn.lock().expect("not poisoned");
        if !force && drawn.is_some_and(|at| at.elapsed() < Duration::from_millis(200)) {
            return;
        }
        *drawn = Some(Instant::now());
        show(self.lines());
    }
}

impl crate::pipeline::Observer for Progress {
    /// Counting the work first (a scan of the backlog's range of the retention index, or of
    /// the receipts in scope — bounded by the work itself, a small share of doing it) is what
    /// gives the lines their total and ETA: on a terminal, and in the progress log lines the
    /// binary writes elsewhere (`--progress-every`, not 0). A library caller that set no
    /// interval logs none, and counts nothing.
    fn wants_totals(&self) -> bool {
        on_terminal() || LOG_INTERVAL.get().is_some_and(|every| !every.is_zero())
    }

    fn start(&self, key: &str, unit: &'static str, total: Option<u64>) {
        self.tasks.lock().expect("not poisoned").insert(
            key.to_string(),
            Task {
                unit,
                total,
                done: 0,
                started: Instant::now(),
                note: String::new(),
                logged: Instant::now(),
            },
        );
        self.redraw(true);
    }

    fn advance(&self, key: &str, n: u64, note: &str) {
        let log = {
            let mut tasks = self.tasks.lock().expect("not poisoned");
            let Some(task) = tasks.get_mut(key) else {
                return;
            };
            task.done += n;
            task.note = note.to_string();
            let every = LOG_INTERVAL.get().copied().unwrap_or(LOG_EVERY);
            if mode() == Mode::Log && !every.is_zero() && task.logged.elapsed() >= every {
                task.logged = Instant::now();
                let text = line(
                    &format!("{} {key}", self.command),
                    task.unit,
                    task.done,
                    task.total,
                    task.started.elapsed(),
                ) + note;
                Some((text, task.unit, task.done, task.total))
            } else {
                None
            }
        };
        match log {
            Some((text, unit, done, total)) => {
                tracing::info!(app = key, unit, done, total, "{text}")
            }
            None => self.redraw(false),
        }
    }

    fn finish(&self, key: &str) {
        if let Some(task) = self.tasks.lock().expect("not poisoned").remove(key) {
            let mut finished = self.finished.lock().expect("not poisoned");
            finished.0 += task.done;
            finished.1 = Some(task.unit);
        }
        self.redraw(true);
    }
}

impl Drop for Progress {
    /// The lines go with the command: what it did is in its summary.
    fn drop(&mut self) {
        if mode() == Mode::Terminal {
            show(Vec::new());
        }
    }
}

/// `archive a1: 12,345/100,000 rows (12%), 3,200 rows/s, ETA 26s`
pub(crate) fn line(
    label: &str,
    unit: &str,
    done: u64,
    total: Option<u64>,
    elapsed: Duration,
) -> String {
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

    #[test]
    fn lifting_clears_every_drawn_line() {
        let mut out = Vec::new();
        lift(&mut out, 3);
        assert_eq!(out, b"\r\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K");
        let mut out = Vec::new();
        lift(&mut out, 0);
        assert!(out.is_empty());
    }

    #[test]
    fn several_apps_have_a_line_each_and_a_total() {
        use crate::pipeline::Observer;
        let p = Progress::new(CommandName::Archive);
        p.start("a1", "rows", Some(100));
        p.start("a2", "rows", Some(50));
        p.advance("a1", 40, ", 2 batches");
        p.advance("a2", 10, "");
        let lines = p.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0].starts_with("archive a1: 40/100 rows (40%)"),
            "{lines:?}"
        );
        assert!(lines[0].ends_with(", 2 batches"), "{lines:?}");
        assert!(
            lines[1].starts_with("archive a2: 10/50 rows (20%)"),
            "{lines:?}"
        );
        assert!(lines[2].starts_with("archive (all): 50 rows"), "{lines:?}");
        p.finish("a1");
        let lines = p.lines();
        assert_eq!(
            lines.len(),
            2,
            "one app in flight, and the total: {lines:?}"
        );
        assert!(lines[1].starts_with("archive (all): 50 rows"), "{lines:?}");
    }
}
