//! `log-key` — a new key to sign the log's checkpoints with (README, "The log of batches"):
//! written to a new file, readable by its owner only (an existing file is never replaced), and
//! its verifier printed, for auditors: alone on a terminal (or `--format table`), in the JSON
//! summary's `verifier` otherwise, as every command prints its end.

use std::path::Path;

use crate::model::command::CommandName;
use crate::model::note::Signer;
use crate::pipeline::report::details::LogKeyRun;
use crate::pipeline::report::{RunDetails, Summary};

pub(crate) fn run(name: &str, out: &Path) -> Summary {
    let command = CommandName::LogKey;
    let (signing, verifier) = match Signer::generate(name) {
        Ok(keys) => keys,
        Err(e) => return Summary::unusable(command, format!("--name: {e}")),
    };
    if let Err(e) = write_new(out, &format!("{signing}\n")) {
        return Summary::unusable(
            command,
            format!(
                "--out {}: cannot write the key there ({e}); an existing file is never replaced",
                out.display()
            ),
        );
    }
    let mut summary = Summary::new(command);
    summary.details = Some(RunDetails::LogKey(LogKeyRun {
        verifier,
        key_file: out.display().to_string(),
    }));
    summary.settle()
}

/// Writes `text` to a file that must not exist yet, readable and writable by its owner only.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(text.as_bytes())
}
