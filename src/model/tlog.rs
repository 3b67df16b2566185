//! An app's log of batches as a transparency log (README, "The log of batches"): an RFC 6962 /
//! RFC 9162 Merkle tree over one entry per batch, stored as C2SP `tlog-tiles` — the layout Go's
//! checksum database, Sunlight and Tessera keep Certificate Transparency logs in — with its head
//! in a C2SP `tlog-checkpoint` ([`super::note`]). Pure: hashing, the tiles' paths, the ranges a
//! proof is made of, and checking inclusion and consistency proofs.
//!
//! The entry of a batch, in a fixed encoding (UTF-8, every field on its own line):
//!
//! ```text
//! outbox-archive-log/v1\n{table}\n{app_code}\n{batch_id}\n{manifest_sha256}\n
//! ```
//!
//! Leaf `i` of an app's tree is the entry of the batch logged `i`-th (from 0). A leaf's hash is
//! SHA-256(0x00 ‖ entry), a node's SHA-256(0x01 ‖ left ‖ right) (RFC 6962 §2.1).
//!
//! Tiles have height 8: the tile at level `L`, index `N` holds the hashes of the complete
//! subtrees of `256^L` leaves numbered `256·N …`, 32 bytes each; a tile that is not full yet is
//! kept at `….p/{width}` beside it. Each tile is written once and never changed: a tile that
//! grows is a new object (its width in its name), so Object Lock keeps every one.

use sha2::{Digest, Sha256};

/// A SHA-256 hash of the tree.
pub type Hash = [u8; 32];

/// The tiles' height: 8 levels of the tree per tile, 256 hashes to a full tile.
pub(crate) const TILE_HEIGHT: u32 = 8;

/// The hashes in a full tile.
pub(crate) const TILE_WIDTH: u64 = 1 << TILE_HEIGHT;

/// The entries' encoding's name.
pub(crate) const ENTRY_SCHEMA: &str = "outbox-archive-log/v1";

/// The entry of batch `batch_id` (manifest hash `manifest_sha256`) of `app_code` in `table`.
pub fn entry(table: &str, app_code: &str, batch_id: &str, manifest_sha256: &str) -> Vec<u8> {
    format!("{ENTRY_SCHEMA}\n{table}\n{app_code}\n{batch_id}\n{manifest_sha256}\n").into_bytes()
}

/// An entry's fields: table, app code, batch id, manifest hash — none when it is not one.
pub(crate) fn parse_entry(entry: &[u8]) -> Option<[&str; 4]> {
    let text = std::str::from_utf8(entry).ok()?;
    let mut lines = text.strip_suffix('\n')?.split('\n');
    (lines.next()? == ENTRY_SCHEMA).then_some(())?;
    let fields = [lines.next()?, lines.next()?, lines.next()?, lines.next()?];
    lines.next().is_none().then_some(fields)
}

/// The hash of a leaf: SHA-256(0x00 ‖ entry).
pub fn leaf_hash(entry: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(entry);
    h.finalize().into()
}

/// The hash of a node: SHA-256(0x01 ‖ left ‖ right).
pub(crate) fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The tile index `n` as C2SP spells it: groups of three digits, all but the last prefixed
/// with `x` (`1234067` → `x001/x234/067`).
fn index_path(n: u64) -> String {
    let mut groups = vec![format!("{:03}", n % 1000)];
    let mut rest = n / 1000;
    while rest > 0 {
        groups.push(format!("x{:03}", rest % 1000));
        rest /= 1000;
    }
    groups.reverse();
    groups.join("/")
}

fn width_suffix(width: u64) -> String {
    match width {
        TILE_WIDTH => String::new(),
        w => format!(".p/{w}"),
    }
}

/// The path (under the log's prefix) of the hash tile at `level`, `index`, with `width` hashes.
pub(crate) fn tile_path(level: u32, index: u64, width: u64) -> String {
    format!("tile/{level}/{}{}", index_path(index), width_suffix(width))
}

/// The path of the entry bundle `index` with `width` entries.
pub(crate) fn entries_path(index: u64, width: u64) -> String {
    format!("tile/entries/{}{}", index_path(index), width_suffix(width))
}

/// The path of the tile or bundle at `full` (a full one's path) with `width` items: `full`
/// itself when full, else its partial `{full}.p/{width}`.
pub(crate) fn tile_path_of_width(full: &str, width: u64) -> String {
    format!("{full}{}", width_suffix(width))
}

/// The folder of `full`'s partial versions: `{full}.p/`.
pub(crate) fn partials_of(full: &str) -> String {
    format!("{full}.p/")
}

/// Whether a path or key is a partial tile's (which a later append replaces).
pub(crate) fn is_partial(path: &str) -> bool {
    path.contains(".p/")
}

/// The width of a partial tile's key (`…/x001/234.p/17` → 17).
pub(crate) fn partial_width(key: &str) -> Option<u64> {
    key.rsplit_once(".p/")?.1.parse().ok()
}

/// The width of the tile at `level`, `index` in a tree of `size` leaves (0: it has none yet).
pub(crate) fn tile_width(level: u32, index: u64, size: u64) -> u64 {
    let hashes = size >> (TILE_HEIGHT * level);
    hashes.saturating_sub(index * TILE_WIDTH).min(TILE_WIDTH)
}

/// The number of tile levels a tree of `size` leaves has (a level with at least one hash).
pub(crate) fn tile_levels(size: u64) -> u32 {
    let mut levels = 0;
    while levels < 8 && size >> (TILE_HEIGHT * levels) > 0 {
        levels += 1;
    }
    levels
}

/// An entry bundle: each entry as a big-endian 16-bit length and its bytes (C2SP tlog-tiles).
pub fn bundle(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        out.extend_from_slice(&(e.len() as u16).to_be_bytes());
        out.extend_from_slice(e);
    }
    out
}

/// The entries of a bundle, none when it is not one.
pub(crate) fn unbundle(mut bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let len = u16::from_be_bytes(bytes.get(..2)?.try_into().ok()?) as usize;
        out.push(bytes.get(2..2 + len)?.to_vec());
        bytes = &bytes[2 + len..];
    }
    Some(out)
}

/// The hashes of a tile's bytes, none when they are not whole hashes.
pub(crate) fn tile_hashes(bytes: &[u8]) -> Option<Vec<Hash>> {
    (bytes.len() % 32 == 0).then(|| {
        bytes
            .chunks(32)
            .map(|c| c.try_into().expect("32 bytes"))
            .collect()
    })
}

/// The hash of a complete subtree of `hashes.len()` (a power of two) nodes of one level.
pub(crate) fn subtree_of(hashes: &[Hash]) -> Hash {
    let mut level = hashes.to_vec();
    while level.len() > 1 {
        level = level.chunks(2).map(|p| node_hash(&p[0], &p[1])).collect();
    }
    level[0]
}

/// A complete, aligned subtree: `2^height` leaves from `index · 2^height`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Subtree {
    pub height: u32,
    pub index: u64,
}

impl Subtree {
    /// The tile that holds this subtree's hash or the hashes it is made of: (level, index),
    /// and where in the tile its first hash is and how many hashes it spans.
    pub(crate) fn in_tile(self) -> (u32, u64, u64, u64) {
        let level = self.height / TILE_HEIGHT;
        let spread = self.height % TILE_HEIGHT;
        let first = self.index << spread;
        (level, first / TILE_WIDTH, first % TILE_WIDTH, 1 << spread)
    }
}

/// The complete aligned subtrees `[lo, hi)` is made of, left to right (Go's `subTreeIndex`).
pub(crate) fn subtrees(mut lo: u64, hi: u64) -> Vec<Subtree> {
    let mut out = Vec::new();
    while lo < hi {
        // The largest aligned power of two at lo that fits.
        let mut height = if lo == 0 { 63 } else { lo.trailing_zeros() };
        while height > 0 && lo + (1u64 << height) > hi {
            height -= 1;
        }
        out.push(Subtree {
            height,
            index: lo >> height,
        });
        lo += 1 << height;
    }
    out
}

/// The hash of the range `[lo, hi)` from the hashes of its [`subtrees`], in their order.
pub(crate) fn range_hash(parts: &[Hash]) -> Hash {
    let mut iter = parts.iter().rev();
    let mut h = *iter.next().expect("a range has a subtree");
    for left in iter {
        h = node_hash(left, &h);
    }
    h
}

/// The largest power of two smaller than `n` (n > 1).
fn split(n: u64) -> u64 {
    1 << (63 - (n - 1).leading_zeros())
}

/// The ranges whose hashes make the inclusion proof of leaf `index` in a tree of `size` leaves
/// (RFC 9162 §2.1.3.1), leaf side first.
pub(crate) fn inclusion_ranges(index: u64, size: u64) -> Vec<(u64, u64)> {
    fn path(m: u64, lo: u64, hi: u64, out: &mut Vec<(u64, u64)>) {
        let n = hi - lo;
        if n <= 1 {
            return;
        }
        let k = split(n);
        if m < k {
            path(m, lo, lo + k, out);
            out.push((lo + k, hi));
        } else {
            path(m - k, lo + k, hi, out);
            out.push((lo, lo + k));
        }
    }
    let mut out = Vec::new();
    path(index, 0, size, &mut out);
    out
}

/// The ranges whose hashes make the consistency proof from a tree of `old` leaves to one of
/// `new` (RFC 9162 §2.1.4.1), 0 < old ≤ new.
pub(crate) fn consistency_ranges(old: u64, new: u64) -> Vec<(u64, u64)> {
    fn sub(m: u64, lo: u64, hi: u64, whole: bool, out: &mut Vec<(u64, u64)>) {
        let n = hi - lo;
        if m == n {
            if !whole {
                out.push((lo, hi));
            }
            return;
        }
        let k = split(n);
        if m <= k {
            sub(m, lo, lo + k, whole, out);
            out.push((lo + k, hi));
        } else {
            sub(m - k, lo + k, hi, false, out);
            out.push((lo, lo + k));
        }
    }
    let mut out = Vec::new();
    if old > 0 && old < new {
        sub(old, 0, new, true, &mut out);
    }
    out
}

/// Whether `proof` proves leaf `index` (hash `leaf`) in the tree of `size` leaves with root
/// `root` (RFC 9162 §2.1.3.2).
pub(crate) fn check_inclusion(
    proof: &[Hash],
    index: u64,
    size: u64,
    leaf: &Hash,
    root: &Hash,
) -> bool {
    if index >= size {
        return false;
    }
    let (mut f_n, mut s_n) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s_n == 0 {
            return false;
        }
        if f_n & 1 == 1 || f_n == s_n {
            r = node_hash(p, &r);
            if f_n & 1 == 0 {
                while f_n & 1 == 0 && f_n != 0 {
                    f_n >>= 1;
                    s_n >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    s_n == 0 && r == *root
}

/// Whether `proof` proves the tree of `old` leaves (root `old_root`) a prefix of the tree of
/// `new` leaves (root `new_root`) (RFC 9162 §2.1.4.2).
pub(crate) fn check_consistency(
    proof: &[Hash],
    old: u64,
    old_root: &Hash,
    new: u64,
    new_root: &Hash,
) -> bool {
    if old == new {
        return proof.is_empty() && old_root == new_root;
    }
    if old == 0 || old > new {
        return false;
    }
    let mut path: Vec<Hash> = proof.to_vec();
    if old.is_power_of_two() {
        path.insert(0, *old_root);
    }
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let (mut f_n, mut s_n) = (old - 1, new - 1);
    while f_n & 1 == 1 {
        f_n >>= 1;
        s_n >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if s_n == 0 {
            return false;
        }
        if f_n & 1 == 1 || f_n == s_n {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if f_n & 1 == 0 {
                while f_n & 1 == 0 && f_n != 0 {
                    f_n >>= 1;
                    s_n >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    s_n == 0 && fr == *old_root && sr == *new_root
}

/// The right edge of a tree being built a leaf at a time: the roots of its complete subtrees,
/// largest first — O(log n) hashes for a tree of any size.
#[derive(Debug, Clone, Default)]
pub(crate) struct Frontier {
    stack: Vec<(u32, Hash)>,
    size: u64,
}

impl Frontier {
    /// Adds the next leaf's hash.
    pub(crate) fn push(&mut self, leaf: Hash) {
        let mut node = (0, leaf);
        while let Some(&(h, left)) = self.stack.last() {
            if h != node.0 {
                break;
            }
            self.stack.pop();
            node = (h + 1, node_hash(&left, &node.1));
        }
        self.stack.push(node);
        self.size += 1;
    }

    /// The root of the tree of the leaves pushed (the hash of the empty string for none).
    pub(crate) fn root(&self) -> Hash {
        match self.stack.last() {
            None => Sha256::digest(b"").into(),
            Some(_) => {
                let parts: Vec<Hash> = self.stack.iter().map(|(_, h)| *h).collect();
                range_hash(&parts)
            }
        }
    }
}

/// The root of the empty tree: SHA-256 of the empty string.
pub(crate) fn empty_root() -> Hash {
    Sha256::digest(b"").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree's hash the slow way (RFC 6962 MTH), to hold the fast ones to.
    fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = split(n as u64) as usize;
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(format!("{i}").as_bytes()))
            .collect()
    }

    fn range(leaves: &[Hash], (lo, hi): (u64, u64)) -> Hash {
        let parts: Vec<Hash> = subtrees(lo, hi)
            .iter()
            .map(|s| {
                let from = (s.index << s.height) as usize;
                mth(&leaves[from..from + (1usize << s.height)])
            })
            .collect();
        range_hash(&parts)
    }

    #[test]
    fn hashes_are_rfc_6962s() {
        // The empty tree and a one-leaf tree of the empty entry: RFC 6962's test vectors
        // (Go's sumdb/tlog and Certificate Transparency agree).
        assert_eq!(
            hex::encode(empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex::encode(leaf_hash(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
        let e = entry("wallet_outbox", "pay", "b1", &"0".repeat(64));
        assert_eq!(
            String::from_utf8(e.clone()).unwrap(),
            format!(
                "outbox-archive-log/v1\nwallet_outbox\npay\nb1\n{}\n",
                "0".repeat(64)
            )
        );
        assert_eq!(
            parse_entry(&e),
            Some(["wallet_outbox", "pay", "b1", &"0".repeat(64)])
        );
        assert_eq!(parse_entry(b"other\n"), None);
    }

    #[test]
    fn tile_paths_are_c2sps() {
        assert_eq!(tile_path(0, 0, 256), "tile/0/000");
        assert_eq!(tile_path(1, 1234067, 7), "tile/1/x001/x234/067.p/7");
        assert_eq!(entries_path(5, 256), "tile/entries/005");
        assert_eq!(entries_path(1000, 3), "tile/entries/x001/000.p/3");
        assert_eq!(tile_width(0, 1, 300), 44);
        assert_eq!(tile_width(0, 0, 300), 256);
        assert_eq!(tile_width(1, 0, 300), 1);
        assert_eq!(tile_width(0, 2, 300), 0);
        assert_eq!(tile_levels(0), 0);
        assert_eq!(tile_levels(255), 1);
        assert_eq!(tile_levels(256), 2);
        assert_eq!(tile_levels(65536), 3);
        let entries = vec![b"a".to_vec(), Vec::new(), b"xyz".to_vec()];
        assert_eq!(unbundle(&bundle(&entries)), Some(entries));
        assert_eq!(unbundle(&[0, 5, 1]), None);
    }

    #[test]
    fn ranges_frontiers_and_proofs_agree_with_the_slow_tree() {
        for n in 1..=70u64 {
            let ls = leaves(n);
            let root = mth(&ls);
            let mut f = Frontier::default();
            ls.iter().for_each(|l| f.push(*l));
            assert_eq!(f.root(), root, "frontier of {n}");
            assert_eq!(range(&ls, (0, n)), root, "range of {n}");
            for i in 0..n {
                let proof: Vec<Hash> = inclusion_ranges(i, n)
                    .into_iter()
                    .map(|r| range(&ls, r))
                    .collect();
                assert!(
                    check_inclusion(&proof, i, n, &ls[i as usize], &root),
                    "leaf {i} of {n}"
                );
                assert!(!check_inclusion(&proof, i, n, &leaf_hash(b"other"), &root));
                if n > 1 {
                    assert!(!check_inclusion(
                        &proof,
                        (i + 1) % n,
                        n,
                        &ls[i as usize],
                        &root
                    ));
                }
            }
            for m in 1..=n {
                let old = mth(&ls[..m as usize]);
                let proof: Vec<Hash> = consistency_ranges(m, n)
                    .into_iter()
                    .map(|r| range(&ls, r))
                    .collect();
                assert!(check_consistency(&proof, m, &old, n, &root), "{m} to {n}");
                if m < n {
                    let forged = mth(&leaves(m + 1)[1..]);
                    assert!(
                        !check_consistency(&proof, m, &forged, n, &root),
                        "forged {m} to {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_subtree_is_found_in_its_tile() {
        assert_eq!(
            Subtree {
                height: 0,
                index: 300
            }
            .in_tile(),
            (0, 1, 44, 1)
        );
        assert_eq!(
            Subtree {
                height: 3,
                index: 33
            }
            .in_tile(),
            (0, 1, 8, 8)
        );
        assert_eq!(
            Subtree {
                height: 8,
                index: 2
            }
            .in_tile(),
            (1, 0, 2, 1)
        );
        assert_eq!(
            Subtree {
                height: 17,
                index: 1
            }
            .in_tile(),
            (2, 0, 2, 2)
        );
        assert_eq!(
            subtrees(0, 300),
            vec![
                Subtree {
                    height: 8,
                    index: 0
                },
                Subtree {
                    height: 5,
                    index: 8
                },
                Subtree {
                    height: 3,
                    index: 36
                },
                Subtree {
                    height: 2,
                    index: 74
                },
            ]
        );
    }

    #[test]
    fn partial_tiles_are_named_and_read_back() {
        let full = tile_path(1, 1234, TILE_WIDTH);
        let partial = tile_path_of_width(&full, 17);
        assert_eq!(partial, tile_path(1, 1234, 17));
        assert!(partial.starts_with(&partials_of(&full)));
        assert!(is_partial(&partial) && !is_partial(&full));
        assert_eq!(
            partial_width(&format!("p/_log/app_code=a/{partial}")),
            Some(17)
        );
        assert_eq!(partial_width(&full), None);
    }
}
