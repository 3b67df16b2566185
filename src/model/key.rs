//! Where objects live in the store: a [`Key`] names one object, a [`Prefix`] is a folder — the
//! bucket's root, or segments each ending in `/` — and every key and folder below it is made by
//! [`Prefix::key`] and [`Prefix::folder`], the one place a name is joined to a folder (object_store's `Path` is the
//! model: one type with stated invariants and `child()`). The configured prefix
//! (`--store s3://bucket/a/b`) is parsed into one once ([`Prefix::parse`]); the archive's
//! folders (its table's, its apps', its logs') are built from it in [`crate::model::format`].

use std::fmt;

/// A folder of the store: `""` (the bucket's root) or `/`-separated segments each followed by
/// `/` (`outbox/wallet_outbox/`). Never a leading `/`, never an empty, `.` or `..` segment.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix(String);

impl Prefix {
    /// The bucket's root.
    pub const fn root() -> Prefix {
        Prefix(String::new())
    }

    /// A configured prefix: slashes around it are ignored (`/a/b/` is `a/b/`), an empty one is
    /// the root; an empty, `.` or `..` segment in it is refused.
    pub fn parse(text: &str) -> Result<Prefix, String> {
        let trimmed = text.trim_matches('/');
        if trimmed.is_empty() {
            return Ok(Prefix::root());
        }
        if !trimmed.split('/').all(is_segment) {
            return Err(format!(
                "key prefix {text:?} has an empty, '.' or '..' segment"
            ));
        }
        Ok(Prefix(format!("{trimmed}/")))
    }

    /// The folder `name` below this one (`name`: one or more segments, no `/` at either end).
    pub fn folder(&self, name: &str) -> Prefix {
        debug_assert!(
            !name.is_empty() && !name.starts_with('/') && !name.ends_with('/'),
            "a folder name: {name:?}"
        );
        Prefix(format!("{}{name}/", self.0))
    }

    /// The key `name` in this folder (`name` may go on below it: `dt=…/batch/data.ndjson.gz`).
    pub fn key(&self, name: &str) -> Key {
        debug_assert!(
            !name.is_empty() && !name.starts_with('/') && !name.ends_with('/'),
            "a key name: {name:?}"
        );
        Key(format!("{}{name}", self.0))
    }

    /// The folder as keys start with it (`""` or ending in `/`): what a LIST asks for.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The folder without its trailing `/`, as a URL shows it (`s3://bucket/a/b`).
    pub fn trimmed(&self) -> &str {
        self.0.strip_suffix('/').unwrap_or_default()
    }

    /// Whether this is the bucket's root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// What `key` names below this folder; `None` for a key outside it.
    pub fn relative<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(self.0.as_str())
    }
}

/// One object's key: built below a [`Prefix`] ([`Prefix::key`]), or taken as a receipt, a
/// listing or an older build holds it ([`Key::stored`]). What every method of the store that
/// reads or writes one object takes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Key(String);

impl Key {
    /// A key as it was stored: in a receipt, a record, a listing (whoever wrote it made it a
    /// key; nothing is checked).
    pub fn stored(text: impl Into<String>) -> Key {
        Key(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Key {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl From<Key> for String {
    fn from(key: Key) -> String {
        key.0
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `segment` (split at `/`) may be one segment of a folder.
fn is_segment(segment: &str) -> bool {
    !segment.is_empty() && segment != "." && segment != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_prefix_is_a_folder_or_the_root() {
        assert_eq!(Prefix::parse("/a/b/").unwrap().as_str(), "a/b/");
        assert_eq!(Prefix::parse("a").unwrap().as_str(), "a/");
        assert_eq!(Prefix::parse("").unwrap(), Prefix::root());
        assert_eq!(Prefix::parse("/").unwrap(), Prefix::root());
        assert!(Prefix::parse("a//b").is_err());
        assert!(Prefix::parse("a/../b").is_err());
        assert!(Prefix::parse("./a").is_err());
        assert_eq!(Prefix::parse("a/b").unwrap().trimmed(), "a/b");
        assert_eq!(Prefix::root().trimmed(), "");
    }

    #[test]
    fn keys_and_folders_join_with_one_slash_whatever_the_root() {
        let root = Prefix::root();
        let outbox = Prefix::parse("outbox").unwrap();
        assert_eq!(root.key("_archive.json"), "_archive.json");
        assert_eq!(outbox.key("_archive.json"), "outbox/_archive.json");
        let table = outbox.folder("wallet_outbox");
        assert_eq!(table.as_str(), "outbox/wallet_outbox/");
        assert_eq!(root.folder("wallet_outbox").as_str(), "wallet_outbox/");
        assert_eq!(
            table.folder("_log/app_code=a1").key("checkpoint"),
            "outbox/wallet_outbox/_log/app_code=a1/checkpoint"
        );
        assert_eq!(table.relative("outbox/wallet_outbox/x/y"), Some("x/y"));
        assert_eq!(table.relative("outbox/other/x"), None);
        assert_eq!(table.to_string(), "outbox/wallet_outbox/");
    }
}
