//! Which keys an SQLite store's summary cache holds, kept in memory so that a cache miss — every
//! new conversation — does not cost a query that cannot find anything. SQLite is the embedded
//! store of one process: every row of its `summary_cache` was written through this store object
//! (loaded when it opened, added as batches commit), so a key it has not seen is not there.
//! PostgreSQL is shared by replicas, whose writes this process never sees: it has no such list.
//!
//! Bounded: past [`MAX_KEYS`] live keys the list is dropped and every lookup queries again (the
//! behaviour without it), so memory stays under ~16 MB at any rate of new conversations.

use std::collections::HashMap;
use std::sync::Mutex;

/// Most keys tracked (each ~48 bytes in the map).
pub(super) const MAX_KEYS: usize = 262_144;

#[derive(Debug, Default)]
pub(super) struct CacheKeys {
    /// Key → when its row expires (ms). `None`: too many to track; every key may be there.
    keys: Mutex<Option<HashMap<[u8; 32], i64>>>,
}

impl CacheKeys {
    /// Tracking the keys of the rows already in the table.
    pub(super) fn tracking(rows: impl IntoIterator<Item = (String, i64)>) -> CacheKeys {
        let keys = CacheKeys {
            keys: Mutex::new(Some(HashMap::new())),
        };
        keys.add(rows.into_iter());
        keys
    }

    /// Whether the table may hold an unexpired row for `key`.
    pub(super) fn may_hold(&self, key: &str, now_ms: i64) -> bool {
        let Some(id) = parse(key) else { return true };
        match &*self.keys.lock().expect("cache keys lock") {
            None => true,
            Some(keys) => keys.get(&id).is_some_and(|&expires| expires > now_ms),
        }
    }

    /// Notes rows written (key, expiry). A key that is not a summary-cache key (64 hex digits)
    /// is always looked up, so it needs no note.
    pub(super) fn add<K: AsRef<str>>(&self, rows: impl Iterator<Item = (K, i64)>) {
        let mut guard = self.keys.lock().expect("cache keys lock");
        let Some(keys) = guard.as_mut() else { return };
        for (key, expires) in rows {
            if let Some(id) = parse(key.as_ref()) {
                keys.insert(id, expires);
            }
        }
        if keys.len() > MAX_KEYS {
            // The expired go first; if the live ones are still too many, stop tracking.
            let now = super::now_ms();
            keys.retain(|_, expires| *expires > now);
            if keys.len() > MAX_KEYS {
                tracing::info!(
                    keys = keys.len(),
                    "summary cache: too many live keys to track; misses query the store"
                );
                *guard = None;
            }
        }
    }
}

/// A key of `SummaryCache::key`: a SHA-256 in hex.
fn parse(key: &str) -> Option<[u8; 32]> {
    let bytes = key.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut id = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        id[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00aa";

    #[test]
    fn a_key_is_held_until_it_expires_and_unknown_keys_are_not() {
        let keys = CacheKeys::tracking([(KEY.to_owned(), 1_000)]);
        assert!(keys.may_hold(KEY, 999));
        assert!(!keys.may_hold(KEY, 1_000), "expired");
        assert!(!keys.may_hold(&KEY.replace("aa", "ab"), 0));
        assert!(
            keys.may_hold("not-a-cache-key", 0),
            "anything else is looked up"
        );
    }

    #[test]
    fn past_the_bound_every_key_may_be_there() {
        let far = super::super::now_ms() + 60_000;
        let keys = CacheKeys::tracking([]);
        keys.add((0..=MAX_KEYS as u64).map(|n| (format!("{n:064x}"), far)));
        assert!(keys.may_hold(&format!("{:064x}", u64::MAX), 0));
    }
}
