//! Secrets never appear in output (SPEC §5.8): URLs are shown with their password replaced.

/// `mysql://user:secret@host/db` → `mysql://user:***@host/db`. Text that is not a URL is
/// replaced entirely unless it contains no `@` (then it cannot carry credentials).
pub fn url(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
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
pub fn scrub<S: AsRef<str>>(text: &str, secrets: &[S]) -> String {
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
    }
}
