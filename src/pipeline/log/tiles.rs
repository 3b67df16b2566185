//! A tree head's tiles, read as the proofs of `purge`, `attest` and the check of a remembered
//! head need them, and kept for the run.

use std::collections::HashMap;

use super::{Log, LogError};
use crate::model::tlog::{self, Hash, Subtree};

/// A tree head's tiles, read as a proof needs them and kept for the run.
pub(crate) struct Tiles<'l, 'a> {
    log: &'l Log<'a>,
    pub size: u64,
    cache: HashMap<(u32, u64), Vec<Hash>>,
}

impl<'l, 'a> Tiles<'l, 'a> {
    pub(crate) fn new(log: &'l Log<'a>, size: u64) -> Self {
        Tiles {
            log,
            size,
            cache: HashMap::new(),
        }
    }

    async fn subtree(&mut self, s: Subtree) -> Result<Hash, LogError> {
        let (level, index, offset, count) = s.in_tile();
        if !self.cache.contains_key(&(level, index)) {
            let hashes = self.log.tile(level, index, self.size).await?;
            self.cache.insert((level, index), hashes);
        }
        let hashes = &self.cache[&(level, index)];
        let part = hashes
            .get(offset as usize..(offset + count) as usize)
            .ok_or_else(|| self.log.refused(format!("tile {level}/{index} is short")))?;
        Ok(tlog::subtree_of(part))
    }

    async fn range(&mut self, (lo, hi): (u64, u64)) -> Result<Hash, LogError> {
        let mut parts = Vec::new();
        for s in tlog::subtrees(lo, hi) {
            parts.push(self.subtree(s).await?);
        }
        Ok(tlog::range_hash(&parts))
    }

    /// The root of the tree of the first `n` leaves (n ≤ size).
    pub(crate) async fn root_at(&mut self, n: u64) -> Result<Hash, LogError> {
        match n {
            0 => Ok(tlog::empty_root()),
            n => self.range((0, n)).await,
        }
    }

    /// The inclusion proof of leaf `index` in the tree of the first `n` leaves.
    pub(crate) async fn inclusion(&mut self, index: u64, n: u64) -> Result<Vec<Hash>, LogError> {
        let mut out = Vec::new();
        for r in tlog::inclusion_ranges(index, n) {
            out.push(self.range(r).await?);
        }
        Ok(out)
    }

    /// The consistency proof from the tree of `old` leaves to the tree of `new`.
    pub(crate) async fn consistency(&mut self, old: u64, new: u64) -> Result<Vec<Hash>, LogError> {
        let mut out = Vec::new();
        for r in tlog::consistency_ranges(old, new) {
            out.push(self.range(r).await?);
        }
        Ok(out)
    }
}
