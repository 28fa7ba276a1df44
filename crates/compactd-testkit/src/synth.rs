//! Synthetic sessions for benchmarks and load tests: a real session's entries repeated in one
//! linear v3 chain until the file reaches a given size.

use serde_json::{Map, Value};

use compactd_core::js_json;
use compactd_core::session::{EntryKind, Session};

/// A v3 session file of at least `min_bytes`, made by repeating the entries of `template` with
/// fresh, unique ids in one linear chain. Compaction, branch-summary and label entries are left
/// out: their links would point into another copy.
pub fn repeat_session(template: &Session, min_bytes: usize) -> String {
    let bodies: Vec<Map<String, Value>> = template
        .entries
        .iter()
        .filter(|e| {
            !matches!(
                e.kind,
                EntryKind::Compaction { .. }
                    | EntryKind::BranchSummary { .. }
                    | EntryKind::Label { .. }
            )
        })
        .filter_map(|e| match serde_json::from_str(&e.raw) {
            Ok(Value::Object(mut map)) => {
                map.shift_remove("id");
                map.shift_remove("parentId");
                Some(map)
            }
            _ => None,
        })
        .collect();
    let mut out = String::with_capacity(min_bytes + (1 << 20));
    out.push_str(&template.header.raw);
    out.push('\n');
    if bodies.is_empty() {
        return out;
    }
    let mut counter: u32 = 0;
    let mut parent = Value::Null;
    while out.len() < min_bytes {
        for body in &bodies {
            // Multiplying by an odd constant is a bijection on u32: unique, random-looking ids.
            let id = Value::String(format!("{:08x}", counter.wrapping_mul(0x9E37_79B1)));
            counter += 1;
            let mut line = Map::with_capacity(body.len() + 2);
            line.insert(
                "type".into(),
                body.get("type").cloned().unwrap_or(Value::Null),
            );
            line.insert("id".into(), id.clone());
            line.insert("parentId".into(), std::mem::replace(&mut parent, id));
            for (key, value) in body {
                if key != "type" {
                    line.insert(key.clone(), value.clone());
                }
            }
            js_json::write_value(&mut out, &Value::Object(line));
            out.push('\n');
        }
    }
    out
}
