//! The log on stderr: JSON for machines (one object per line, with the run's id and the app in
//! the innermost span), or short text for people — time, level, the app, the message and the
//! event's own fields, without the run id on every line (it is in the summary) and without the
//! app said three times.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::{LogArgs, LogFormat};
use crate::output::progress;

/// Sets up logging (and progress, which has to know how the log is written) for the process.
pub(crate) fn init(format: LogFormat, log: &LogArgs, progress_every_ms: i64) {
    // Progress lines only with text logs on a terminal; log lines are written above them.
    let every = std::time::Duration::from_millis(progress_every_ms.max(0) as u64);
    progress::init(format == LogFormat::Json, every);
    let filter = tracing_subscriber::EnvFilter::try_new(&log.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(progress::LogWriter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        // Every line carries its innermost span: the run (run_id, command) or the app (run_id,
        // app) it belongs to.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init(),
        LogFormat::Text => builder.event_format(ShortText).init(),
    }
}

/// `2026-12-01T15:42:07.123Z  INFO pay-sg: batch archived batch_id=… rows=5000`
struct ShortText;

impl<S, N> FormatEvent<S, N> for ShortText
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let level = *event.metadata().level();
        match writer.has_ansi_escapes() {
            true => write!(
                writer,
                "\x1b[2m{now}\x1b[0m {}{level:>5}\x1b[0m ",
                colour(level)
            )?,
            false => write!(writer, "{now} {level:>5} ")?,
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        // The app: the event's own field, or the app span's it runs in.
        let app = fields.app.take().or_else(|| {
            ctx.event_scope()?.find_map(|span| {
                let ext = span.extensions();
                let formatted = ext.get::<FormattedFields<N>>()?;
                field_value(formatted.as_str(), "app")
            })
        });
        if let Some(app) = app {
            write!(writer, "{app}: ")?;
        }
        write!(writer, "{}{}", fields.message, fields.rest)?;
        writeln!(writer)
    }
}

fn colour(level: Level) -> &'static str {
    match level {
        Level::ERROR => "\x1b[31m",
        Level::WARN => "\x1b[33m",
        Level::INFO => "\x1b[32m",
        _ => "\x1b[34m",
    }
}

/// An event's message, its `app` field, and its other fields as ` name=value`; `run_id` is
/// left out (it is the run's, in the summary and every JSON line).
#[derive(Default)]
struct Fields {
    message: String,
    app: Option<String>,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "app" => self.app = Some(value.to_string()),
            "run_id" => {}
            name if value.is_empty() || value.contains([' ', '"', '=']) => {
                let _ = write!(self.rest, " {name}={value:?}");
            }
            name => {
                let _ = write!(self.rest, " {name}={value}");
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "app" => self.app = Some(format!("{value:?}").trim_matches('"').to_string()),
            "run_id" => {}
            name => {
                let _ = write!(self.rest, " {name}={value:?}");
            }
        }
    }
}

/// `name`'s value in a span's formatted fields (`run_id="…" app="pay-sg"`, coloured or not).
fn field_value(formatted: &str, name: &str) -> Option<String> {
    let formatted = &strip_ansi(formatted);
    let start = formatted
        .match_indices(&format!("{name}="))
        .find(|(i, _)| *i == 0 || formatted.as_bytes()[i - 1] == b' ')?
        .0
        + name.len()
        + 1;
    let value = &formatted[start..];
    let value = match value.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or_default().to_string(),
        None => value.split(' ').next().unwrap_or_default().to_string(),
    };
    Some(value)
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_app_of_a_span() {
        assert_eq!(
            field_value(r#"run_id="3f2a" app="pay-sg""#, "app").as_deref(),
            Some("pay-sg")
        );
        assert_eq!(
            field_value(
                "run_id=\"3f2a\" \x1b[3mapp\x1b[0m\x1b[2m=\x1b[0m\"pay-sg\"",
                "app"
            )
            .as_deref(),
            Some("pay-sg"),
            "the default field formatter colours names on a terminal"
        );
        assert_eq!(field_value(r#"command="archive""#, "app"), None);
        assert_eq!(
            field_value(r#"snapp="x" app="a1""#, "app").as_deref(),
            Some("a1")
        );
        assert_eq!(strip_ansi("\x1b[2mx\x1b[0m"), "x");
    }
}
