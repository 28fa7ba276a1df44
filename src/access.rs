//! Who may call compactd, and how much: API keys (stored hashed) and their tenants, anonymous
//! access on loopback, and a per-key request rate. (The per-key cap on concurrent summarizations is
//! the pipeline's admission.)
//!
//! Keys look like `cmpd_` followed by 40 hex digits. They are random, so a plain SHA-256 is the
//! right hash: nothing to brute-force, and checking costs microseconds. Verified keys are cached
//! for a minute so that a database outage does not lock out callers that were just seen
//! (`/v1/compact` needs no storage otherwise), and so that a revocation takes effect within that.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use compactd_store::{KeyRecord, Store, StoreError};

/// Every compactd key starts with this, which tells it apart from the provider keys that
/// chat-completions clients send in the same header.
pub const KEY_PREFIX: &str = "cmpd_";

/// The header an agent may carry its compactd key in, beside its provider's credentials (which
/// on OpenAI's wires travel in `Authorization`).
pub const KEY_HEADER: &str = "x-compactd-key";

/// How long a verified key is trusted without asking the database again.
const CACHE_TTL: Duration = Duration::from_secs(60);
/// How long a key the database did not know is refused without asking it again: a client that
/// retries with a bad key costs one lookup per interval, not one per request. (A key created
/// just after such a refusal works once this has passed.)
const MISS_TTL: Duration = Duration::from_secs(10);
/// Entries kept in each in-memory table before stale ones are dropped.
const MAX_ENTRIES: usize = 10_000;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Sessions belong to tenants; `""` is the anonymous tenant.
    pub tenant: String,
    /// `None` for anonymous callers.
    pub key_id: Option<String>,
}

impl Identity {
    pub fn anonymous() -> Identity {
        Identity {
            tenant: String::new(),
            key_id: None,
        }
    }

    /// The name limits are counted under.
    fn bucket(&self) -> String {
        match &self.key_id {
            Some(id) => format!("key:{id}"),
            None => "anonymous".to_owned(),
        }
    }
}

/// `n` bytes from the operating system's CSPRNG, as lowercase hex.
fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    // The OS generator failing is not something a key can be made without.
    getrandom::fill(&mut bytes).expect("the operating system's random number generator");
    hex::encode(bytes)
}

/// A random identifier (12 hex digits) from the OS CSPRNG, for records users name by id.
pub fn random_id() -> String {
    random_hex(6)
}

/// A new key: its text (shown once) and its record (stored). Both the key (160 bits) and its id
/// come from the operating system's CSPRNG, drawn separately: the id printed beside a key says
/// nothing about it.
pub fn new_key(tenant: &str, name: Option<&str>, now_ms: i64) -> (String, KeyRecord) {
    let text = format!("{KEY_PREFIX}{}", random_hex(20));
    let record = KeyRecord {
        key_id: random_hex(6),
        tenant: tenant.to_owned(),
        name: name.map(str::to_owned),
        key_hash: hash_key(&text),
        created_at_ms: now_ms,
        revoked_at_ms: None,
    };
    (text, record)
}

/// Whether `value` (a header's bytes) holds a compactd key anywhere: `cmpd_` and 40 hex digits,
/// whatever surrounds it (`Bearer …`, a cookie, a list). Such a header never leaves compactd.
pub fn holds_key(value: &[u8]) -> bool {
    // Every header of every gateway turn is looked at: the searcher is built once.
    static PREFIX: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(KEY_PREFIX.as_bytes()));
    PREFIX.find_iter(value).any(|at| {
        let digits = &value[at + KEY_PREFIX.len()..];
        digits.len() >= 40 && digits[..40].iter().all(u8::is_ascii_hexdigit)
    })
}

/// The stored form of a key.
pub fn hash_key(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Access settings.
#[derive(Debug, Clone, Copy)]
pub struct AccessConfig {
    /// Callers without a key are served (as the anonymous tenant).
    pub anonymous_allowed: bool,
    /// Requests per minute per key (and for all anonymous callers together); 0: no limit.
    pub rate_per_minute: u32,
}

struct Cached {
    identity: Identity,
    checked: Instant,
}

struct Bucket {
    tokens: f64,
    updated: Instant,
}

pub struct Access {
    pub config: AccessConfig,
    keys: Mutex<HashMap<String, Cached>>,
    /// Hashes the database did not know, and when it said so.
    misses: Mutex<HashMap<String, Instant>>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

/// Why a key was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("invalid or revoked API key")]
    Invalid,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Access {
    pub fn new(config: AccessConfig) -> Access {
        Access {
            config,
            keys: Mutex::default(),
            misses: Mutex::default(),
            buckets: Mutex::default(),
        }
    }

    /// The identity of a presented key.
    pub async fn verify(&self, store: &dyn Store, text: &str) -> Result<Identity, KeyError> {
        let hash = hash_key(text);
        let cached = {
            let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            keys.get(&hash)
                .map(|c| (c.identity.clone(), c.checked.elapsed() < CACHE_TTL))
        };
        if let Some((identity, true)) = &cached {
            return Ok(identity.clone());
        }
        let recently_missed = {
            let misses = self.misses.lock().unwrap_or_else(|e| e.into_inner());
            misses.get(&hash).is_some_and(|at| at.elapsed() < MISS_TTL)
        };
        if recently_missed {
            return Err(KeyError::Invalid);
        }
        match store.find_key(&hash).await {
            Ok(Some(record)) => {
                let identity = Identity {
                    tenant: record.tenant,
                    key_id: Some(record.key_id),
                };
                let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
                if keys.len() >= MAX_ENTRIES {
                    keys.retain(|_, c| c.checked.elapsed() < CACHE_TTL);
                }
                keys.insert(
                    hash,
                    Cached {
                        identity: identity.clone(),
                        checked: Instant::now(),
                    },
                );
                Ok(identity)
            }
            Ok(None) => {
                self.keys
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&hash);
                let mut misses = self.misses.lock().unwrap_or_else(|e| e.into_inner());
                if misses.len() >= MAX_ENTRIES {
                    misses.retain(|_, at| at.elapsed() < MISS_TTL);
                    if misses.len() >= MAX_ENTRIES {
                        misses.clear();
                    }
                }
                misses.insert(hash, Instant::now());
                Err(KeyError::Invalid)
            }
            // The database is away: a key verified before still counts.
            Err(StoreError::Unavailable(_)) if cached.is_some() => Ok(cached.expect("checked").0),
            Err(error) => Err(error.into()),
        }
    }

    /// Takes one request from the caller's budget, or says how long to wait for the next.
    pub fn check_rate(&self, identity: &Identity) -> Result<(), Duration> {
        let per_minute = f64::from(self.config.rate_per_minute);
        if per_minute == 0.0 {
            return Ok(());
        }
        let per_second = per_minute / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_ENTRIES {
            // A bucket idle for a minute is full again: dropping it changes nothing.
            buckets.retain(|_, b| b.updated.elapsed() < Duration::from_secs(60));
        }
        let now = Instant::now();
        let bucket = buckets.entry(identity.bucket()).or_insert(Bucket {
            tokens: per_minute,
            updated: now,
        });
        bucket.tokens = (bucket.tokens
            + now.duration_since(bucket.updated).as_secs_f64() * per_second)
            .min(per_minute);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_prefixed_random_and_stored_hashed() {
        let (text, record) = new_key("team-a", Some("laptop"), 5);
        assert!(
            text.starts_with(KEY_PREFIX) && text.len() == KEY_PREFIX.len() + 40,
            "{text}"
        );
        assert_eq!(record.key_hash, hash_key(&text));
        assert!(!record.key_hash.contains(&text[KEY_PREFIX.len()..]));
        assert_ne!(new_key("team-a", None, 5).0, text);
    }

    #[test]
    fn a_key_is_found_in_any_header_value_that_holds_one() {
        let (text, _) = new_key("t", None, 1);
        for value in [
            text.clone(),
            format!("Bearer {text}"),
            format!("session=1; k={text}; x=2"),
        ] {
            assert!(holds_key(value.as_bytes()), "{value}");
        }
        for value in [
            "Bearer not-a-compactd-key",
            "cmpd_",
            "cmpd_0123456789abcdef",
            &text[..text.len() - 1],
        ] {
            assert!(!holds_key(value.as_bytes()), "{value}");
        }
    }

    #[test]
    fn keys_and_their_ids_come_from_the_os_generator_not_the_seeded_one() {
        // With the non-cryptographic generator in the same state, a key made from it repeats.
        fastrand::seed(7);
        let (first, first_record) = new_key("t", None, 1);
        fastrand::seed(7);
        let (second, second_record) = new_key("t", None, 1);
        assert_ne!(first, second);
        assert_ne!(first_record.key_id, second_record.key_id);
        assert_eq!(first_record.key_id.len(), 12);
        assert!(
            !first.contains(&first_record.key_id),
            "the id is not part of the key"
        );
    }

    #[test]
    fn the_rate_limit_refills_over_time() {
        let access = Access::new(AccessConfig {
            anonymous_allowed: true,
            rate_per_minute: 2,
        });
        let a = Identity::anonymous();
        let b = Identity {
            tenant: "t".into(),
            key_id: Some("k".into()),
        };
        assert!(access.check_rate(&a).is_ok());
        assert!(access.check_rate(&a).is_ok());
        let wait = access.check_rate(&a).unwrap_err();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert!(access.check_rate(&b).is_ok(), "each key has its own budget");
    }

    #[tokio::test]
    async fn a_bad_key_is_refused_again_without_asking_the_database() {
        let store =
            compactd_store::SqliteStore::connect_url("sqlite::memory:", Duration::from_secs(1))
                .await
                .unwrap();
        let access = Access::new(AccessConfig {
            anonymous_allowed: false,
            rate_per_minute: 0,
        });
        let (good, record) = new_key("t", None, 1);
        compactd_store::Ledger::create_key(&store, &record)
            .await
            .unwrap();
        assert!(access.verify(&store, &good).await.is_ok());
        assert!(matches!(
            access.verify(&store, "cmpd_bad").await,
            Err(KeyError::Invalid)
        ));
        store.close().await;
        // The database is gone: the bad key is still refused (from memory), the good one still
        // served (cached), and an unknown one needs the database.
        assert!(matches!(
            access.verify(&store, "cmpd_bad").await,
            Err(KeyError::Invalid)
        ));
        assert!(access.verify(&store, &good).await.is_ok());
        assert!(matches!(
            access.verify(&store, "cmpd_other").await,
            Err(KeyError::Store(_))
        ));
    }
}
