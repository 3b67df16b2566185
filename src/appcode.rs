//! App codes become part of object keys and lock names, so only safe ones are accepted
//! (SPEC §4): `[A-Za-z0-9][A-Za-z0-9_.-]{0,31}`. An app whose code does not match is refused —
//! reported, never archived — so a key can never leave its prefix.

/// Why an app code is refused, for the summary and the log.
pub fn validate(code: &str) -> Result<(), String> {
    let bytes = code.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 32
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "app code {code:?} is not allowed: app codes must match [A-Za-z0-9][A-Za-z0-9_.-]{{0,31}} \
             so that object keys stay under their prefix; this app is refused and nothing is archived for it"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn accepts_safe_codes() {
        for code in ["a", "A1", "app_1", "app-1.prod", "0", &"x".repeat(32)] {
            assert!(validate(code).is_ok(), "{code}");
        }
    }

    #[test]
    fn refuses_unsafe_codes() {
        for code in [
            "",
            "../x",
            "a/b",
            "a b",
            " a",
            ".",
            "..",
            "_a",
            "-a",
            "é",
            "a\n",
            &"x".repeat(33),
            "a%2f",
        ] {
            assert!(validate(code).is_err(), "{code:?}");
        }
    }
}
