//! Secrets never appear in output (SPEC §5.8): URLs are shown with their password replaced.

/// `mysql://user:secret@host/db` → `mysql://user:***@host/db`. Everything between `//` and the
/// last `@` is the user and password however it is written — a password with an `@`, `#` or `/`
/// that was not percent-encoded included — so all of it after the user's `:` is masked. A
/// `password=` query parameter is masked too. Text without `//` that still has an `@` is read
/// the same way, whatever stands before it (`odd:secret@host/db`, a URL missing its `mysql://`,
/// is `odd:***@host/db`): a setting mistyped is no less secret.
pub(crate) fn url(text: &str) -> String {
    // A scheme is letters, digits, `+`, `-` and `.`, from a letter: `u:pa://ss@host` has none
    // (its password holds the `://`).
    let is_scheme = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    };
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) if is_scheme(scheme) => (Some(scheme), rest),
        _ => (None, text),
    };
    if let Some(at) = rest.rfind('@') {
        let (userinfo, host) = (&rest[..at], &rest[at + 1..]);
        let user = match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***"),
            None if scheme.is_none() => "***".to_string(),
            None => userinfo.to_string(),
        };
        return match scheme {
            Some(scheme) => query_masked(&format!("{scheme}://{user}@{host}")),
            None => format!("{user}@{host}"),
        };
    }
    query_masked(text)
}

/// The user and password of a URL as written (before any percent-decoding): what lies between
/// `//` and the last `@`.
pub(crate) fn userinfo(text: &str) -> Option<&str> {
    let (_, rest) = text.split_once("://")?;
    rest.rfind('@').map(|at| &rest[..at])
}

fn query_masked(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut parsed) => {
            if parsed.password().is_some_and(|p| p != "***") {
                let _ = parsed.set_password(Some("***"));
            }
            for (key, _) in parsed.query_pairs() {
                if key.to_ascii_lowercase().contains("password") {
                    parsed.set_query(Some("***"));
                    break;
                }
            }
            parsed.to_string()
        }
        Err(_) if !text.contains('@') => text.to_string(),
        Err(_) => "<unparseable URL, hidden because it may contain a password>".to_string(),
    }
}

/// Removes every occurrence of each secret from `text` (a last line of defence for messages
/// that come from libraries).
pub(crate) fn scrub<S: AsRef<str>>(text: &str, secrets: &[S]) -> String {
    let mut out = text.to_string();
    for secret in secrets.iter().map(AsRef::as_ref).filter(|s| s.len() >= 3) {
        out = out.replace(secret, "***");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn hides_passwords() {
        assert_eq!(
            super::url("mysql://u:s3cret@h:3306/db"),
            "mysql://u:***@h:3306/db"
        );
        assert_eq!(super::url("mysql://u@h/db"), "mysql://u@h/db");
        assert!(!super::url("mysql://u@h/db?password=hunter2").contains("hunter2"));
        assert!(!super::url("mysql//u:hunter2@h").contains("hunter2"));
        assert_eq!(
            super::scrub("bad key AKIA123 here", &["AKIA123"]),
            "bad key *** here"
        );
        // Passwords that were not percent-encoded: nothing of them shows.
        for (raw, shown) in [
            (
                "mysql://ux:p@ss@host:3306/db",
                "mysql://ux:***@host:3306/db",
            ),
            ("mysql://ux:pa#ss@host/db", "mysql://ux:***@host/db"),
            ("mysql://ux:pa/s@s#x@host/db", "mysql://ux:***@host/db"),
            ("mysql://ux:p%40ss@host/db", "mysql://ux:***@host/db"),
        ] {
            assert_eq!(super::url(raw), shown, "{raw}");
        }
        assert_eq!(super::userinfo("mysql://u:p#w@h/db"), Some("u:p#w"));
        // Whatever the scheme, or none: what stands before the last @ is masked.
        for (raw, shown) in [
            (
                "odd:secret@127.0.0.1:3402/wallet",
                "odd:***@127.0.0.1:3402/wallet",
            ),
            ("http://u:secret@gw:9091", "http://u:***@gw:9091/"),
            ("secret@host", "***@host"),
            ("u:se@cret@host", "u:***@host"),
            ("u:pa://ss@host", "u:***@host"),
        ] {
            assert_eq!(super::url(raw), shown, "{raw}");
        }
        assert_eq!(super::userinfo("mysql://h/db"), None);
    }
}
