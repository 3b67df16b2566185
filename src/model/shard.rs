//! `--shard I/N`: a run takes only the apps whose stable hash falls in shard `I` of `N`, so a
//! platform team scales out with an Indexed Job (the completion index as `I`) or `N` CronJobs,
//! and the per-app locks keep any overlap safe. The hash is the first 8 bytes of the SHA-256 of
//! the app code in ASCII lowercase, big-endian, modulo `N`: the same on every machine and in
//! every release (since 2026-12-03 an app code with capitals is hashed in lowercase; lowercase
//! ones never moved).

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Whether `app` belongs to this shard.
    pub fn contains(&self, app: &str) -> bool {
        shard_of(app, self.count) == self.index
    }
}

/// The shard (`0..count`) an app code falls in: by its ASCII lowercase, so that two apps whose
/// codes differ only in case (two apps on a case-sensitive table) fall in one shard — MySQL
/// compares their lock names as one, and apart they would find each other's lock held.
fn shard_of(app: &str, count: u32) -> u32 {
    let digest = Sha256::digest(app.to_ascii_lowercase().as_bytes());
    let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    (head % u64::from(count.max(1))) as u32
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let help = "write I/N with 0 <= I < N, e.g. 0/4 (an Indexed Job's completion index as I)";
        let (index, count) = text
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("--shard {text:?}: {help}"))?;
        let index: u32 = index
            .parse()
            .map_err(|_| format!("--shard {text:?}: {help}"))?;
        let count: u32 = count
            .parse()
            .map_err(|_| format!("--shard {text:?}: {help}"))?;
        if count == 0 || index >= count {
            return Err(format!("--shard {text:?}: {help}"));
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_vectors() {
        // Computed independently (Python hashlib): sha256("wallet") starts e8d44050…, and so on.
        // They pin the hash, so no release ever moves an app to another shard.
        let apps = ["wallet", "a1", "a2", "app-0", "ü-app"];
        let got: Vec<u32> = apps.iter().map(|app| shard_of(app, 4)).collect();
        assert_eq!(got, FIXED);
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of("WALLET", 4), shard_of("wallet", 4));
    }

    const FIXED: [u32; 5] = [2, 0, 1, 1, 2];

    #[test]
    fn every_app_in_exactly_one_shard() {
        for count in 1..=7 {
            let shards: Vec<Shard> = (0..count).map(|index| Shard { index, count }).collect();
            for n in 0..500 {
                let app = format!("app-{n}");
                assert_eq!(shards.iter().filter(|s| s.contains(&app)).count(), 1);
            }
        }
    }

    #[test]
    fn shards_are_roughly_even() {
        let mut sizes = [0u32; 4];
        for n in 0..4_000 {
            sizes[shard_of(&format!("app-{n}"), 4) as usize] += 1;
        }
        assert!(
            sizes.iter().all(|&s| (800..1_200).contains(&s)),
            "{sizes:?}"
        );
    }

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            "1/4".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 4 }
        );
        assert_eq!("1/4".parse::<Shard>().unwrap().to_string(), "1/4");
        for bad in ["4/4", "0/0", "1", "a/4", "-1/4", "1/4/2", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
