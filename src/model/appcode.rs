//! App codes become part of object keys and lock names, so only safe ones are accepted
//! (SPEC §4): `[A-Za-z0-9][A-Za-z0-9_.-]{0,31}`. An app whose code does not match is refused —
//! reported, never archived — so a key can never leave its prefix.

/// Why an app code is refused, for the summary and the log.
pub(crate) fn validate(code: &str) -> Result<(), String> {
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

/// Whether a row's app code `row` belongs to the app spelled `app`: equal, or equal but for
/// ASCII case and trailing spaces — what the case-insensitive, PAD SPACE collations of an app
/// code column hold equal (the database put the row in the app's pages; a relay bug wrote it in
/// another case). The row keeps its own spelling in the archive.
pub(crate) fn same_app(row: &str, app: &str) -> bool {
    row == app
        || row
            .trim_end_matches(' ')
            .eq_ignore_ascii_case(app.trim_end_matches(' '))
}

/// The apps of `apps` in groups of those whose codes differ only in ASCII case (indices into
/// `apps`, each group in the order given, groups in the order of their first app). Where app
/// codes compare case-sensitively such apps are two, but their lock names are one on a server
/// that compares lock names case-insensitively (MySQL's `GET_LOCK`): one group's apps are worked
/// one after the other, so that neither finds the other's lock held.
pub(crate) fn case_groups(apps: &[String]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, app) in apps.iter().enumerate() {
        let key = app.to_ascii_lowercase();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// The edit distance of two codes (insertions, deletions, substitutions), for "did you mean".
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::{case_groups, distance, same_app, validate};

    #[test]
    fn apps_that_differ_only_in_case_are_grouped_in_order() {
        let apps: Vec<String> = ["Pay", "a1", "pay", "PAY", "b2", "A1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(case_groups(&apps), [vec![0, 2, 3], vec![1, 5], vec![4]]);
        assert!(case_groups(&[]).is_empty());
    }

    #[test]
    fn an_app_is_its_spelling_but_for_case_and_trailing_spaces() {
        assert!(same_app("app1", "app1"));
        assert!(same_app("App1", "app1"));
        assert!(same_app("app1 ", "app1"));
        assert!(same_app("APP1  ", "app1"));
        assert!(!same_app("app2", "app1"));
        assert!(!same_app(" app1", "app1"));
        assert!(!same_app("äpp1", "app1"));
    }

    #[test]
    fn distances() {
        assert_eq!(distance("pay_sg", "pay-sg"), 1);
        assert_eq!(distance("pay-sg", "pay-sg"), 0);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

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
