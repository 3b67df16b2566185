//! The commands by name: what the summary's `command` field, the runs table, the metrics'
//! `command` label, progress lines and help say. One spelling per command, here.

use serde::{Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandName {
    Migrate,
    Archive,
    Verify,
    Status,
    Find,
    History,
    Purge,
    Restore,
    Compact,
    Attest,
    Doctor,
    Schema,
    Demo,
    Relocate,
    Recover,
    LogKey,
    /// A command line that names no subcommand (a usage error's summary).
    None,
}

impl CommandName {
    const ALL: [CommandName; 16] = [
        CommandName::Migrate,
        CommandName::Archive,
        CommandName::Verify,
        CommandName::Status,
        CommandName::Find,
        CommandName::History,
        CommandName::Purge,
        CommandName::Restore,
        CommandName::Compact,
        CommandName::Attest,
        CommandName::Doctor,
        CommandName::Schema,
        CommandName::Demo,
        CommandName::Relocate,
        CommandName::Recover,
        CommandName::LogKey,
    ];

    /// The commands whose runs the runs table records (what `history` lists): those that work
    /// on the archive's batches. The read-only views (status, history, schema), the preflight
    /// (doctor: no write grant) and the set-up commands are not recorded.
    pub(crate) fn is_recorded(self) -> bool {
        matches!(
            self,
            CommandName::Archive
                | CommandName::Verify
                | CommandName::Purge
                | CommandName::Restore
                | CommandName::Compact
                | CommandName::Find
                | CommandName::Attest
                | CommandName::Relocate
                | CommandName::Recover
        )
    }

    /// Every command [`CommandName::is_recorded`].
    pub fn recorded() -> impl Iterator<Item = CommandName> {
        CommandName::ALL.into_iter().filter(|c| c.is_recorded())
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CommandName::Migrate => "migrate",
            CommandName::Archive => "archive",
            CommandName::Verify => "verify",
            CommandName::Status => "status",
            CommandName::Find => "find",
            CommandName::History => "history",
            CommandName::Purge => "purge",
            CommandName::Restore => "restore",
            CommandName::Compact => "compact",
            CommandName::Attest => "attest",
            CommandName::Doctor => "doctor",
            CommandName::Schema => "schema",
            CommandName::Demo => "demo",
            CommandName::Relocate => "relocate",
            CommandName::Recover => "recover",
            CommandName::LogKey => "log-key",
            CommandName::None => "outbox-archiver",
        }
    }

    /// The command a subcommand's name on the command line names.
    pub fn parse(name: &str) -> Option<CommandName> {
        CommandName::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl std::fmt::Display for CommandName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CommandName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back() {
        for c in CommandName::ALL {
            assert_eq!(CommandName::parse(c.as_str()), Some(c));
        }
        assert_eq!(CommandName::parse("outbox-archiver"), None);
        assert_eq!(CommandName::parse("prune"), None);
        assert_eq!(
            serde_json::to_string(&CommandName::Archive).unwrap(),
            r#""archive""#
        );
    }
}
