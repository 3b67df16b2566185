//! The one rule for a SQL identifier the archiver puts into SQL as it is, unquoted: a table, a
//! column or a database name of ASCII letters, digits, `_` and `$`, 1 to 64 bytes — MySQL's own
//! unquoted identifiers, without the non-ASCII ones. Every name that reaches SQL text from a
//! setting, a profile or the live schema is held to it first (restore's `--into`, a profile's
//! table and columns, replicas' `--heartbeat-table`, demo's database).

/// The rule, as error messages say it.
pub(crate) const RULE: &str = "letters, digits, _ and $, at most 64";

/// Whether `name` may go into SQL unquoted.
pub(crate) fn is_plain(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_only() {
        for ok in ["wallet_outbox", "t", "T$1", &"a".repeat(64)] {
            assert!(is_plain(ok), "{ok}");
        }
        for bad in [
            "",
            &"a".repeat(65),
            "a-b",
            "a.b",
            "a b",
            "a`b",
            "a;DROP",
            "é",
            "a'b",
        ] {
            assert!(!is_plain(bad), "{bad}");
        }
    }
}
