//! A log's head as a C2SP `tlog-checkpoint` — origin, tree size, root hash, one line each —
//! optionally signed as a C2SP `signed-note` with an Ed25519 key in the text form of Go's
//! `golang.org/x/mod/sumdb/note` (`PRIVATE+KEY+name+hash+key`, verifier `name+hash+key`), so that
//! Go's `note.Open` and every other signed-note verifier checks it.
//!
//! ```text
//! outbox-archive/wallet_outbox/app_code=pay
//! 42
//! qY0RaDTa4bRR0h3lbaA9fBwCpG1Po2+CHGDsBa4K0hs=
//!
//! — archive.example.com/wallet Ab3xJg…
//! ```

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use sha2::{Digest, Sha256};

use super::tlog::Hash;

/// Ed25519's algorithm byte in signed-note keys.
const ED25519_ALG: u8 = 1;

/// A log's head: its origin (which log), size and root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
}

/// Why a checkpoint's bytes were not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoteError {
    #[error("not a checkpoint: {0}")]
    Malformed(String),
    #[error("the checkpoint is of log {found}, not {wanted}")]
    OtherLog { wanted: String, found: String },
    #[error("the checkpoint carries no valid signature by {0} (a log key is configured: a checkpoint written without it, or changed since, is not the log's)")]
    Unsigned(String),
}

impl Checkpoint {
    /// The checkpoint's body: three lines.
    pub(crate) fn body(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            B64.encode(self.root)
        )
    }

    /// Parses a checkpoint's body (the note's text before its signatures).
    pub(crate) fn parse_body(text: &str) -> Result<Checkpoint, NoteError> {
        let bad = |why: &str| NoteError::Malformed(why.to_string());
        let mut lines = text.split('\n');
        let origin = lines
            .next()
            .filter(|o| !o.is_empty())
            .ok_or_else(|| bad("no origin line"))?;
        let size: u64 = lines
            .next()
            .and_then(|s| s.parse().ok())
            .filter(|_| true)
            .ok_or_else(|| bad("no tree size line"))?;
        let root: Hash = lines
            .next()
            .and_then(|r| B64.decode(r).ok())
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| bad("no root hash line"))?;
        Ok(Checkpoint {
            origin: origin.to_string(),
            size,
            root,
        })
    }

    /// The checkpoint as a note: its body, then (with signers) a blank line and a signature line
    /// by each (a signed note may carry several: a key rotated is signed by the old and the new).
    pub(crate) fn to_note(&self, signers: &[std::sync::Arc<Signer>]) -> Vec<u8> {
        let body = self.body();
        if signers.is_empty() {
            return body.into_bytes();
        }
        let lines: String = signers
            .iter()
            .map(|s| s.signature_line(body.as_bytes()))
            .collect();
        format!("{body}\n{lines}").into_bytes()
    }

    /// The names on a note's signature lines (verified or not): empty for an unsigned note.
    pub(crate) fn signature_names(bytes: &[u8]) -> Vec<String> {
        let text = String::from_utf8_lossy(bytes);
        let Some((_, signatures)) = text.split_once("\n\n") else {
            return Vec::new();
        };
        signatures
            .lines()
            .filter_map(|l| l.strip_prefix("\u{2014} ")?.split_once(' '))
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// Reads a note: its body must be a checkpoint of `origin`; with verifiers, one of its
    /// signatures must be one of theirs over the body.
    pub(crate) fn open(
        bytes: &[u8],
        origin: &str,
        verifiers: &[Verifier],
    ) -> Result<Checkpoint, NoteError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| NoteError::Malformed("not UTF-8 text".into()))?;
        let (body, signatures) = match text.find("\n\n") {
            Some(at) => (&text[..at + 1], &text[at + 2..]),
            None => (text, ""),
        };
        let checkpoint = Checkpoint::parse_body(body)?;
        if checkpoint.origin != origin {
            return Err(NoteError::OtherLog {
                wanted: origin.to_string(),
                found: checkpoint.origin,
            });
        }
        if !verifiers.is_empty() {
            let signed = signatures
                .lines()
                .any(|line| verifiers.iter().any(|v| v.verifies(body.as_bytes(), line)));
            if !signed {
                let names: Vec<&str> = verifiers.iter().map(|v| v.name.as_str()).collect();
                return Err(NoteError::Unsigned(names.join(" or ")));
            }
        }
        Ok(checkpoint)
    }
}

/// A signed-note key's hash: the first four bytes of SHA-256(name ‖ "\n" ‖ alg ‖ public key).
fn key_hash(name: &str, public: &[u8]) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update(b"\n");
    h.update([ED25519_ALG]);
    h.update(public);
    h.finalize()[..4].try_into().expect("4 bytes")
}

/// Why a key's text was refused (never quoting the key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(String);

/// Splits `name+hash+base64` from the left (a name cannot hold `+`, base64 can; C2SP
/// signed-note).
fn key_parts(text: &str) -> Option<(&str, u32, Vec<u8>)> {
    let mut parts = text.trim().splitn(3, '+');
    let (name, hash, key) = (parts.next()?, parts.next()?, parts.next()?);
    let hash = u32::from_str_radix(hash, 16)
        .ok()
        .filter(|_| hash.len() == 8)?;
    let key = B64.decode(key).ok()?;
    (!name.is_empty() && !name.contains(char::is_whitespace)).then_some((name, hash, key))
}

/// A signing key (`PRIVATE+KEY+name+hash+key`).
pub struct Signer {
    name: String,
    hash: [u8; 4],
    pair: Ed25519KeyPair,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({}, key redacted)", self.name)
    }
}

impl Signer {
    /// Parses a signing key's text.
    pub fn parse(text: &str) -> Result<Signer, KeyError> {
        let refuse = || {
            KeyError("not a signed-note signing key (PRIVATE+KEY+name+hash+key, as `outbox-archiver log-key` or Go's note.GenerateKey writes it)".into())
        };
        let rest = text
            .trim()
            .strip_prefix("PRIVATE+KEY+")
            .ok_or_else(refuse)?;
        let (name, hash, key) = key_parts(rest).ok_or_else(refuse)?;
        let [alg, seed @ ..] = key.as_slice() else {
            return Err(refuse());
        };
        if *alg != ED25519_ALG || seed.len() != 32 {
            return Err(KeyError("the signing key is not an Ed25519 key".into()));
        }
        let pair = Ed25519KeyPair::from_seed_unchecked(seed).map_err(|_| refuse())?;
        let public = pair.public_key().as_ref().to_vec();
        if key_hash(name, &public) != hash.to_be_bytes() {
            return Err(KeyError(
                "the signing key's hash does not match its name and key (damaged?)".into(),
            ));
        }
        Ok(Signer {
            name: name.to_string(),
            hash: hash.to_be_bytes(),
            pair,
        })
    }

    /// A new key named `name`: its signing key's text and its verifier's.
    pub fn generate(name: &str) -> Result<(String, String), KeyError> {
        if name.is_empty() || name.contains(['+', ' ', '\n', '\t']) {
            return Err(KeyError(format!(
                "a key's name cannot be empty or hold '+' or white space: {name:?}"
            )));
        }
        let mut seed = [0u8; 32];
        aws_lc_rs::rand::fill(&mut seed).map_err(|_| KeyError("no random bytes".into()))?;
        let pair =
            Ed25519KeyPair::from_seed_unchecked(&seed).map_err(|_| KeyError("key".into()))?;
        let public = pair.public_key().as_ref().to_vec();
        let hash = hex::encode(key_hash(name, &public));
        let with_alg = |k: &[u8]| B64.encode([&[ED25519_ALG][..], k].concat());
        Ok((
            format!("PRIVATE+KEY+{name}+{hash}+{}", with_alg(&seed)),
            format!("{name}+{hash}+{}", with_alg(&public)),
        ))
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The verifier of this key.
    pub(crate) fn verifier(&self) -> Verifier {
        Verifier {
            name: self.name.clone(),
            hash: self.hash,
            public: self.pair.public_key().as_ref().to_vec(),
        }
    }

    /// The signature line over `body`: `— name base64(hash ‖ signature)`.
    fn signature_line(&self, body: &[u8]) -> String {
        let sig = self.pair.sign(body);
        let bytes = [&self.hash[..], sig.as_ref()].concat();
        format!("\u{2014} {} {}\n", self.name, B64.encode(bytes))
    }
}

/// A verifier key (`name+hash+key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verifier {
    pub name: String,
    hash: [u8; 4],
    public: Vec<u8>,
}

impl Verifier {
    /// Parses a verifier key's text.
    pub(crate) fn parse(text: &str) -> Result<Verifier, KeyError> {
        let refuse = || {
            KeyError("not a signed-note verifier key (name+hash+key, as `outbox-archiver log-key` prints it)".into())
        };
        if text.trim().starts_with("PRIVATE+KEY+") {
            return Err(KeyError("a signing key where a verifier key belongs: give the verifier (the line `outbox-archiver log-key` printed), and keep the signing key secret".into()));
        }
        let (name, hash, key) = key_parts(text).ok_or_else(refuse)?;
        let [alg, public @ ..] = key.as_slice() else {
            return Err(refuse());
        };
        if *alg != ED25519_ALG || public.len() != 32 {
            return Err(KeyError("the verifier key is not an Ed25519 key".into()));
        }
        if key_hash(name, public) != hash.to_be_bytes() {
            return Err(KeyError(
                "the verifier key's hash does not match its name and key (damaged?)".into(),
            ));
        }
        Ok(Verifier {
            name: name.to_string(),
            hash: hash.to_be_bytes(),
            public: public.to_vec(),
        })
    }

    /// The verifier's text, `name+hash+key`, as `log-key` prints it.
    pub(crate) fn text(&self) -> String {
        let key = B64.encode([&[ED25519_ALG][..], &self.public].concat());
        format!("{}+{}+{key}", self.name, hex::encode(self.hash))
    }

    /// Whether `line` is this key's valid signature over `body`.
    fn verifies(&self, body: &[u8], line: &str) -> bool {
        let Some(rest) = line.strip_prefix("\u{2014} ") else {
            return false;
        };
        let Some((name, sig)) = rest.split_once(' ') else {
            return false;
        };
        let Ok(sig) = B64.decode(sig) else {
            return false;
        };
        name == self.name
            && sig.len() == 68
            && sig[..4] == self.hash
            && UnparsedPublicKey::new(&ED25519, &self.public)
                .verify(body, &sig[4..])
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint() -> Checkpoint {
        Checkpoint {
            origin: "outbox-archive/wallet_outbox/app_code=pay".into(),
            size: 42,
            root: [7; 32],
        }
    }

    #[test]
    fn a_checkpoint_is_three_lines() {
        let c = checkpoint();
        let note = c.to_note(&[]);
        assert_eq!(
            String::from_utf8(note.clone()).unwrap(),
            "outbox-archive/wallet_outbox/app_code=pay\n42\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n"
        );
        assert_eq!(Checkpoint::open(&note, &c.origin, &[]), Ok(c.clone()));
        assert!(matches!(
            Checkpoint::open(&note, "outbox-archive/wallet_outbox/app_code=other", &[]),
            Err(NoteError::OtherLog { .. })
        ));
        assert!(Checkpoint::open(b"x\ny\n", &c.origin, &[]).is_err());
    }

    /// A key of Go's own `note.GenerateKey` (golang.org/x/mod/sumdb/note's test vector):
    /// parsed, and its verifier's text derived from it.
    #[test]
    fn gos_key_texts_parse() {
        let signer = Signer::parse(
            "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz",
        )
        .unwrap();
        let verifier =
            Verifier::parse("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")
                .unwrap();
        assert_eq!(signer.verifier(), verifier);
        assert_eq!(
            verifier.text(),
            "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
        );
        // Go's signature of its test note "If you think cryptography is the answer to your
        // problem,\nthen you don't know what your problem is.\n" by this key.
        let body = b"If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
        let line = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=";
        assert!(verifier.verifies(body, line));
        assert!(!verifier.verifies(b"another text\n", line));
    }

    #[test]
    fn a_signed_checkpoint_opens_only_with_its_key() {
        let (signing, verifying) = Signer::generate("archive.example.com/wallet").unwrap();
        let signer = std::sync::Arc::new(Signer::parse(&signing).unwrap());
        let verifier = Verifier::parse(&verifying).unwrap();
        let c = checkpoint();
        let note = c.to_note(std::slice::from_ref(&signer));
        assert_eq!(
            Checkpoint::open(&note, &c.origin, std::slice::from_ref(&verifier)),
            Ok(c.clone())
        );
        assert!(matches!(
            Checkpoint::open(&c.to_note(&[]), &c.origin, std::slice::from_ref(&verifier)),
            Err(NoteError::Unsigned(_))
        ));
        let (_, other) = Signer::generate("archive.example.com/wallet").unwrap();
        let other = Verifier::parse(&other).unwrap();
        assert!(Checkpoint::open(&note, &c.origin, std::slice::from_ref(&other)).is_err());
        let forged = String::from_utf8(note).unwrap().replace("\n42\n", "\n41\n");
        assert!(Checkpoint::open(
            forged.as_bytes(),
            &c.origin,
            std::slice::from_ref(&verifier)
        )
        .is_err());
        assert!(Verifier::parse(&signing)
            .unwrap_err()
            .0
            .contains("signing key where a verifier"));
        assert!(Signer::generate("a b").is_err());
    }

    /// A note signed by two keys (a rotation) opens with either verifier, or both; the names on
    /// its signature lines are read without a key.
    #[test]
    fn a_note_signed_by_two_keys_opens_with_either() {
        let key = |name: &str| {
            let (s, v) = Signer::generate(name).unwrap();
            (
                std::sync::Arc::new(Signer::parse(&s).unwrap()),
                Verifier::parse(&v).unwrap(),
            )
        };
        let ((old, old_v), (new, new_v)) = (key("old.example"), key("new.example"));
        let c = checkpoint();
        let both = c.to_note(&[old.clone(), new.clone()]);
        for verifiers in [
            vec![old_v.clone()],
            vec![new_v.clone()],
            vec![old_v.clone(), new_v.clone()],
        ] {
            assert_eq!(
                Checkpoint::open(&both, &c.origin, &verifiers),
                Ok(c.clone())
            );
        }
        assert_eq!(
            Checkpoint::signature_names(&both),
            ["old.example", "new.example"]
        );
        assert!(Checkpoint::signature_names(&c.to_note(&[])).is_empty());
        let only_new = c.to_note(&[new]);
        match Checkpoint::open(&only_new, &c.origin, std::slice::from_ref(&old_v)) {
            Err(NoteError::Unsigned(names)) => assert_eq!(names, "old.example"),
            other => panic!("{other:?}"),
        }
    }
}
