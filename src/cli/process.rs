//! The process the binary is: parse the command line, set up logging and signals, run the
//! command on a runtime of its own, print its summary on stdout and return the exit status the
//! summary implies. `src/main.rs` is this and the allocator.

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::output;
use crate::pipeline::report;

/// Runs the command line this process was started with; returns its exit status.
pub fn main() -> i32 {
    let started = std::time::Instant::now();
    let (cli, command) = super::parse_or_exit();
    let format = cli.common.output_format();
    super::logs::init(
        cli.common.log_format(),
        &cli.common.log,
        cli.command.groups().progress_every(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let span = tracing::info_span!("run", run_id = report::run_id(), command = command.as_str());
    let summary = runtime.block_on(
        async {
            let shutdown = CancellationToken::new();
            tokio::spawn(forward_signals(shutdown.clone()).in_current_span());
            super::run(cli, shutdown).await
        }
        .instrument(span.clone()),
    );
    if let Some(error) = &summary.error {
        span.in_scope(|| tracing::error!(command = summary.command.as_str(), "{error}"));
    }
    let now_ms = crate::pipeline::system_clock()();
    print!(
        "{}",
        output::render(&summary, format, started.elapsed(), now_ms)
    );
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    summary.exit_code
}

/// SIGTERM (a CronJob being stopped) or Ctrl-C (SIGINT): finish the current batch, then stop;
/// the signal is named in the stop reason.
async fn forward_signals(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    let signal = tokio::select! {
        _ = term.recv() => report::Signal::Terminate,
        _ = tokio::signal::ctrl_c() => report::Signal::Interrupt,
    };
    crate::pipeline::note_signal(signal);
    tracing::warn!(
        signal = signal.name(),
        "shutdown requested: stopping after the current batch"
    );
    shutdown.cancel();
}
