//! The `outbox-archiver` binary: parses the command line, sets up logging and signals, runs the
//! command, prints its JSON summary on stdout and exits with the status the summary implies.

use outbox_archiver::cli;
use outbox_archiver::output;
use outbox_archiver::pipeline::report;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// mimalloc instead of glibc's malloc: a batch allocates per row (its line, its member key) and
/// per page; `cargo bench --bench archive` measured the difference (BENCHMARKS.md, "Archive, what changed").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let started = std::time::Instant::now();
    let (cli, command) = cli::parse_or_exit();
    let table = cli.common.table_output();
    cli::logs::init(
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
            cli::run(cli, shutdown).await
        }
        .instrument(span.clone()),
    );
    if let Some(error) = &summary.error {
        span.in_scope(|| tracing::error!(command = summary.command.as_str(), "{error}"));
    }
    match &summary.text {
        Some(text) => print!("{text}"),
        None if table => print!("{}", output::text::render(&summary, started.elapsed())),
        None => println!("{}", summary.to_json()),
    }
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    std::process::exit(summary.exit_code);
}

/// SIGTERM (a CronJob being stopped) or Ctrl-C (SIGINT): finish the current batch, then stop;
/// the signal is named in the stop reason.
async fn forward_signals(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    };
    outbox_archiver::pipeline::note_signal(name);
    tracing::warn!(
        signal = name,
        "shutdown requested: stopping after the current batch"
    );
    shutdown.cancel();
}
