//! Version migration v1 → v2 → v3 (spec §1.6), on the parsed objects of a file, header first.
//!
//! The objects are order-preserving JSON maps, so a migrated line prints exactly as pi's rewrite
//! of the file would: keys that the migration adds (`id`, `parentId`, `firstKeptEntryId`, the v1
//! header's `version`) land at the end, and a removed key leaves the others in place.

use std::collections::HashSet;

use serde_json::Value;

/// The current session format version.
pub const CURRENT_VERSION: u32 = 3;

/// Migrates `objects` (index 0 is the header, the rest are entries in file order) in place, from
/// `version` to [`CURRENT_VERSION`]. Does nothing for `version >= 3`.
///
/// One deliberate difference from the reference: ids made for v1 entries are checked against the
/// ids made so far, so a migrated file never holds duplicates (pi checks against an empty set).
pub(super) fn migrate(objects: &mut [Value], version: u32) {
    if version < 2 {
        v1_to_v2(objects);
    }
    if version < 3 {
        v2_to_v3(objects);
    }
}

fn v1_to_v2(objects: &mut [Value]) {
    let mut used = HashSet::with_capacity(objects.len());
    // ids[i] is the id given to object i, once it has one.
    let mut ids: Vec<Option<String>> = vec![None; objects.len()];
    let mut previous: Option<String> = None;
    for index in 0..objects.len() {
        let Some(map) = objects[index].as_object_mut() else {
            continue;
        };
        if map.get("type").and_then(Value::as_str) == Some("session") {
            map.insert("version".into(), Value::from(2));
            continue;
        }
        let id = new_entry_id(&used);
        used.insert(id.clone());
        map.insert("id".into(), Value::String(id.clone()));
        map.insert(
            "parentId".into(),
            previous.map_or(Value::Null, Value::String),
        );
        previous = Some(id.clone());
        ids[index] = Some(id);

        if map.get("type").and_then(Value::as_str) != Some("compaction") {
            continue;
        }
        let Some(target) = map.get("firstKeptEntryIndex").and_then(Value::as_f64) else {
            continue;
        };
        // The index counts parsed objects with the header at 0. Like the reference, resolve it
        // now: a target at the header, past the end, or not yet given an id (a forward reference)
        // leaves `firstKeptEntryId` missing.
        let resolved = (target >= 0.0 && target.fract() == 0.0)
            .then(|| ids.get(target as usize).cloned().flatten())
            .flatten();
        if let Some(id) = resolved {
            map.insert("firstKeptEntryId".into(), Value::String(id));
        }
        map.shift_remove("firstKeptEntryIndex");
    }
}

fn v2_to_v3(objects: &mut [Value]) {
    for object in objects.iter_mut() {
        let Some(map) = object.as_object_mut() else {
            continue;
        };
        match map.get("type").and_then(Value::as_str) {
            Some("session") => {
                map.insert("version".into(), Value::from(CURRENT_VERSION));
            }
            Some("message") => {
                if let Some(message) = map.get_mut("message").and_then(Value::as_object_mut)
                    && message.get("role").and_then(Value::as_str) == Some("hookMessage")
                {
                    message.insert("role".into(), Value::from("custom"));
                }
            }
            _ => {}
        }
    }
}

/// A new entry id: 8 lowercase hex digits (the first 8 characters of a v4 UUID in pi), unique
/// among `taken`. After 100 collisions it falls back to a 32-digit id, as pi falls back to a full
/// UUID.
pub fn new_entry_id(taken: &(impl IdSet + ?Sized)) -> String {
    for _ in 0..100 {
        let id = format!("{:08x}", fastrand::u32(..));
        if !taken.contains_id(&id) {
            return id;
        }
    }
    format!("{:032x}", fastrand::u128(..))
}

/// Anything that can say whether an id is taken.
pub trait IdSet {
    fn contains_id(&self, id: &str) -> bool;
}

impl IdSet for HashSet<String> {
    fn contains_id(&self, id: &str) -> bool {
        self.contains(id)
    }
}

impl<V> IdSet for std::collections::HashMap<String, V> {
    fn contains_id(&self, id: &str) -> bool {
        self.contains_key(id)
    }
}
