//! The linear chain of an app's batches, as builds before 2026-12-03 kept it (issue 27), and
//! what the log of batches ([`crate::pipeline::log`]) still takes from it: every receipt of an
//! app, in the order receipts are recorded under the app's lock, gets a sequence number and a
//! link — a SHA-256 over the link before it and the batch's manifest hash. The seq orders the
//! app's leaves in its log; the links are what a log that carries an older build's chain on
//! recomputes from its first leaves (README, "Upgrading from the linear chain"); the
//! checkpoints are that build's anchors, read once, when an app's log starts.
//!
//! The link, in a fixed encoding (the batch id's style, SPEC §4):
//!
//! ```text
//! link(seq) = lowercase hex of SHA-256 over the UTF-8 text
//!   "outbox-archive-chain/v1\n{table}\n{app_code}\n{seq}\n{link(seq - 1)}\n{batch_id}\n{manifest_sha256}\n"
//! ```
//!
//! with `link(0)` = 64 zeros (the genesis) and `seq` counted from 1 in decimal.
//!
//! A checkpoint of that build, `{table prefix}_chain/app_code={app}/{to_seq, 20 digits}-{16 hex
//! of its link}.json`, is one compact JSON line: the links from `from_seq` to `to_seq` with what
//! each binds.

use serde::{Deserialize, Serialize};

use crate::model::digest::sha256_hex;

/// The link before the first: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The encoding's name, in every link and checkpoint.
pub(crate) const SCHEMA: &str = "outbox-archive-chain/v1";

/// The link of batch `batch_id` (manifest hash `manifest_sha256`) at `seq` of `app_code`'s chain
/// in `table`, after `prev`.
pub fn link(
    table: &str,
    app_code: &str,
    seq: u64,
    prev: &str,
    batch_id: &str,
    manifest_sha256: &str,
) -> String {
    sha256_hex(
        format!("{SCHEMA}\n{table}\n{app_code}\n{seq}\n{prev}\n{batch_id}\n{manifest_sha256}\n")
            .as_bytes(),
    )
}

/// One link of a chain: the batch it binds and its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub seq: u64,
    pub batch_id: String,
    pub manifest_sha256: String,
    pub link: String,
}

/// A stretch of an app's chain as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub schema: String,
    pub table: String,
    pub app_code: String,
    pub from_seq: u64,
    pub to_seq: u64,
    /// The link before `from_seq` ([`GENESIS`] when it is 1).
    pub prev_link: String,
    /// The links `from_seq..=to_seq`, in order.
    pub links: Vec<Link>,
}

/// Why a checkpoint's bytes are not a stretch of a chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CheckpointError {
    #[error("not a chain checkpoint: {0}")]
    Unreadable(String),
    #[error("checkpoint of {found} where {wanted} was expected")]
    Other { wanted: String, found: String },
    #[error("its links do not run from {from} to {to} one after the other")]
    Numbering { from: u64, to: u64 },
    #[error("its link at seq {seq} is not the hash of the link before it and its batch")]
    Broken { seq: u64 },
}

impl Checkpoint {
    /// The checkpoint of `links` (consecutive, of `app_code`'s chain in `table`), after `prev`.
    pub fn new(table: &str, app_code: &str, prev_link: &str, links: Vec<Link>) -> Checkpoint {
        Checkpoint {
            schema: SCHEMA.to_string(),
            table: table.to_string(),
            app_code: app_code.to_string(),
            from_seq: links.first().map_or(0, |l| l.seq),
            to_seq: links.last().map_or(0, |l| l.seq),
            prev_link: prev_link.to_string(),
            links,
        }
    }

    /// One compact JSON line (serde_json's encoding, SPEC §4), keys in the order declared.
    pub fn to_bytes(&self) -> Vec<u8> {
        json_line(self)
    }

    /// Reads a checkpoint and holds it to itself: of the chain in `table` of the app whose
    /// folder (`pipeline::log::identity`) is `folder`, numbered without a gap, every link the hash of the one
    /// before it and its batch.
    pub(crate) fn parse(
        bytes: &[u8],
        table: &str,
        folder: &str,
    ) -> Result<Checkpoint, CheckpointError> {
        let c: Checkpoint = serde_json::from_slice(bytes)
            .map_err(|e| CheckpointError::Unreadable(e.to_string()))?;
        of_chain((SCHEMA, table, folder), (&c.schema, &c.table, &c.app_code))?;
        let app_code = &chain_app(folder);
        let numbered = !c.links.is_empty()
            && c.links.first().map(|l| l.seq) == Some(c.from_seq)
            && c.links.last().map(|l| l.seq) == Some(c.to_seq)
            && c.links.windows(2).all(|w| w[1].seq == w[0].seq + 1)
            && (c.from_seq > 1 || c.prev_link == GENESIS);
        if !numbered {
            return Err(CheckpointError::Numbering {
                from: c.from_seq,
                to: c.to_seq,
            });
        }
        let mut prev = c.prev_link.as_str();
        for l in &c.links {
            if l.link
                != link(
                    table,
                    app_code,
                    l.seq,
                    prev,
                    &l.batch_id,
                    &l.manifest_sha256,
                )
            {
                return Err(CheckpointError::Broken { seq: l.seq });
            }
            prev = &l.link;
        }
        Ok(c)
    }

    /// The link at the end of the stretch.
    pub fn head(&self) -> Option<&Link> {
        self.links.last()
    }
}

/// The folder of an app's checkpoints: `{table prefix}_chain/app_code={folder}/`, beside the
/// apps' folders (a name query engines skip, and no batch's key can take: app codes start
/// with a letter or digit); `folder` is the app's folder (`pipeline::log::identity`).
pub(crate) fn checkpoint_prefix(table_prefix: &str, folder: &str) -> String {
    format!("{table_prefix}_chain/app_code={folder}/")
}

/// Where the checkpoint that ends at `head` is kept: named by its seq (20 digits, so that
/// listing the folder gives the checkpoints in chain order) and the first 16 hex digits of its
/// link, so that two branches of a forked chain never share a key.
pub fn checkpoint_key(table_prefix: &str, folder: &str, head: &Link) -> String {
    format!(
        "{}{:020}-{}.json",
        checkpoint_prefix(table_prefix, folder),
        head.seq,
        &head.link[..KEY_LINK_DIGITS]
    )
}

const KEY_LINK_DIGITS: usize = 16;

/// The seq and link prefix a checkpoint's key names; `None` for another key.
pub(crate) fn checkpoint_of_key(key: &str) -> Option<(u64, &str)> {
    let name = key.rsplit('/').next()?.strip_suffix(".json")?;
    let (digits, link) = name.split_once('-')?;
    let ok = digits.len() == 20
        && digits.bytes().all(|b| b.is_ascii_digit())
        && link.len() == KEY_LINK_DIGITS
        && link.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    ok.then(|| Some((digits.parse().ok()?, link))).flatten()
}

/// How an app is named in its links: its code in lowercase (the encoding of v1; a link also
/// binds its batch id, which holds the app's exact spelling, so two apps whose codes differ
/// only in case never share a link).
pub(crate) fn chain_app(app_code: &str) -> String {
    app_code.to_ascii_lowercase()
}

/// One compact JSON line (serde_json's encoding, SPEC §4), keys in the order declared.
fn json_line(value: &impl Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec(value).expect("a chain record always serialises");
    out.push(b'\n');
    out
}

/// Refuses a record of another schema, table or app than `wanted` (schema, table, app).
fn of_chain(wanted: (&str, &str, &str), found: (&str, &str, &str)) -> Result<(), CheckpointError> {
    if wanted == found {
        return Ok(());
    }
    Err(CheckpointError::Other {
        wanted: format!("{} of {} app {}", wanted.0, wanted.1, wanted.2),
        found: format!("{} of {} app {}", found.0, found.1, found.2),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoding's test vector (computed independently: Python's hashlib over the text).
    #[test]
    fn links_follow_the_documented_encoding() {
        let first = link(
            "wallet_outbox",
            "wallet-sg",
            1,
            GENESIS,
            "03ed0706de9c85f64361c66412df1322",
            &"a".repeat(64),
        );
        assert_eq!(
            first,
            "efa1caa335a200bb3b1453575f9a21170ddffb0e2b38f9778eaa22eccdbb0b02"
        );
        let second = link(
            "wallet_outbox",
            "wallet-sg",
            2,
            &first,
            "6f1e2b7c0d9a4e3f8b5c1d2e3f4a5b6c",
            &"b".repeat(64),
        );
        assert_eq!(
            second,
            "35cacdc3360b41a92e4a0cab8228910673f14a9a4c9d87630aebae2bea7a57b7"
        );
    }

    fn chain(n: u64) -> Vec<Link> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let batch_id = format!("{seq:032x}");
                let manifest_sha256 = sha256_hex(batch_id.as_bytes());
                let l = link("t", "a1", seq, &prev, &batch_id, &manifest_sha256);
                prev = l.clone();
                Link {
                    seq,
                    batch_id,
                    manifest_sha256,
                    link: l,
                }
            })
            .collect()
    }

    #[test]
    fn a_checkpoint_round_trips_and_holds_itself_to_the_chain() {
        let links = chain(5);
        let c = Checkpoint::new("t", "a1", &links[1].link, links[2..].to_vec());
        assert_eq!((c.from_seq, c.to_seq), (3, 5));
        let bytes = c.to_bytes();
        assert!(bytes.starts_with(br#"{"schema":"outbox-archive-chain/v1","table":"t","app_code":"a1","from_seq":3,"to_seq":5,"prev_link":""#));
        assert_eq!(bytes.last(), Some(&b'\n'));
        assert_eq!(Checkpoint::parse(&bytes, "t", "a1").unwrap(), c);
        assert_eq!(c.head().unwrap().seq, 5);
        // Another app's, or another table's: refused.
        assert!(matches!(
            Checkpoint::parse(&bytes, "t", "a2"),
            Err(CheckpointError::Other { .. })
        ));
        // A link edited, a batch swapped, a link left out: refused, with the seq.
        let mut edited = c.clone();
        edited.links[1].manifest_sha256 = "f".repeat(64);
        assert_eq!(
            Checkpoint::parse(&edited.to_bytes(), "t", "a1"),
            Err(CheckpointError::Broken { seq: 4 })
        );
        let mut gap = c.clone();
        gap.links.remove(1);
        assert_eq!(
            Checkpoint::parse(&gap.to_bytes(), "t", "a1"),
            Err(CheckpointError::Numbering { from: 3, to: 5 })
        );
        // A first stretch must start from the genesis.
        let first = Checkpoint::new("t", "a1", &"1".repeat(64), chain(2));
        assert!(Checkpoint::parse(&first.to_bytes(), "t", "a1").is_err());
        let first = Checkpoint::new("t", "a1", GENESIS, chain(2));
        assert!(Checkpoint::parse(&first.to_bytes(), "t", "a1").is_ok());
        assert!(matches!(
            Checkpoint::parse(b"{}", "t", "a1"),
            Err(CheckpointError::Unreadable(_))
        ));
    }

    #[test]
    fn an_app_of_a_case_sensitive_table_names_its_checkpoints_exactly_and_links_as_ever() {
        // The links of app "Pay" are those of v1 (lowercase in the link text): the same bytes
        // for an app whatever its table; only the folder and the record's app_code keep case.
        let links = chain(3);
        assert_eq!(chain_app("A1"), "a1", "the link text is the lowercase code");
        let c = Checkpoint::new("t", "A1", GENESIS, links);
        let bytes = c.to_bytes();
        assert_eq!(Checkpoint::parse(&bytes, "t", "A1").unwrap(), c);
        assert!(matches!(
            Checkpoint::parse(&bytes, "t", "a1"),
            Err(CheckpointError::Other { .. })
        ));
    }

    #[test]
    fn checkpoint_keys_sort_in_chain_order_and_parse_back() {
        let links = chain(10);
        // The folder of app Wallet-SG where app codes compare case-insensitively.
        let folder = "wallet-sg";
        let key = checkpoint_key("outbox/wallet_outbox/", folder, &links[4]);
        assert_eq!(
            key,
            format!(
                "outbox/wallet_outbox/_chain/app_code=wallet-sg/00000000000000000005-{}.json",
                &links[4].link[..16]
            )
        );
        // Where app codes compare case-sensitively, Wallet-SG and wallet-sg are two apps.
        let exact = checkpoint_key("outbox/wallet_outbox/", "Wallet-SG", &links[4]);
        assert!(exact.contains("/_chain/app_code=Wallet-SG/"), "{exact}");
        assert_eq!(checkpoint_of_key(&key), Some((5, &links[4].link[..16])));
        assert!(checkpoint_key("p/", "a", &links[8]) < checkpoint_key("p/", "a", &links[9]));
        assert_eq!(checkpoint_of_key("outbox/x/_chain/42.json"), None);
        assert_eq!(
            checkpoint_of_key("outbox/wallet_outbox/app_code=a/dt=2026-01-01/b/_SUCCESS"),
            None
        );
        // Not a batch's key: the orphan scan and the day listing pass it by.
        assert_eq!(
            crate::model::format::app_and_day(
                &crate::model::key::Prefix::parse("outbox/wallet_outbox").unwrap(),
                &key
            ),
            None
        );
    }
}
