//! The session projection of pi 1.5.2 (`buildSessionProjection`) and the planning on it
//! (`findProjectedCutPoint`, `estimateProjectedContextTokens`, the file lists).

use std::collections::{BTreeSet, HashMap};

use crate::compaction::file_ops::FileOperations;

use serde_json::Value;

use super::messages::{self, context_messages, estimate_tokens, is_cut_point, is_turn_start, role};

/// One context entry and the messages it contributes after its context edit.
#[derive(Debug, Clone)]
pub struct Projected {
    pub source: Value,
    pub messages: Vec<Value>,
}

impl Projected {
    fn kind(&self) -> &str {
        self.source["type"].as_str().unwrap_or_default()
    }

    fn is_turn_start(&self) -> bool {
        self.kind() != "compaction" && self.messages.iter().any(is_turn_start)
    }

    /// `getMessagesFromProjectedEntryForCompaction`: never a compaction's, never a system message.
    fn for_compaction(&self) -> impl Iterator<Item = &Value> {
        let keep = self.kind() != "compaction";
        self.messages
            .iter()
            .filter(move |m| keep && role(m) != "system")
    }
}

#[derive(Debug, Clone, Default)]
pub struct Projection {
    pub entries: Vec<Projected>,
}

/// Where pi 1.5 cuts, and what it summarizes.
pub struct Cut {
    pub first_kept_id: String,
    pub turn_start_id: Option<String>,
    pub is_split_turn: bool,
    pub previous_summary: Option<String>,
    /// The projected index of the compaction the summary continues.
    pub previous_compaction: Option<usize>,
    pub summarized: Vec<Value>,
    pub prefix: Vec<Value>,
}

/// An entry's edit replaces what it contributes: nothing (`replacement: null`) or new content.
fn apply_edit(messages: Vec<Value>, edit: Option<&Value>) -> Vec<Value> {
    let Some(edit) = edit else { return messages };
    let replacement = &edit["replacement"];
    if replacement.is_null() {
        return Vec::new();
    }
    let content = &replacement["content"];
    messages
        .into_iter()
        .map(|mut message| {
            let r = role(&message).to_owned();
            if !matches!(r.as_str(), "user" | "assistant" | "toolResult" | "custom") {
                return message;
            }
            message["content"] = match content {
                Value::String(text) if r == "assistant" || r == "toolResult" => {
                    serde_json::json!([{"type": "text", "text": text}])
                }
                other => other.clone(),
            };
            message
        })
        .collect()
}

impl Projection {
    /// `buildSessionProjection` of a path (root first).
    pub fn of_path(path: &[Value]) -> Projection {
        let context: Vec<&Value> = match path.iter().rposition(|e| e["type"] == "compaction") {
            None => path.iter().collect(),
            Some(at) => {
                let compaction = &path[at];
                let mut context = vec![compaction];
                let first_kept = compaction["firstKeptEntryId"].as_str();
                let mut found = false;
                for entry in &path[..at] {
                    found |= first_kept.is_some() && entry["id"].as_str() == first_kept;
                    let system = entry["type"] == "message" && entry["message"]["role"] == "system";
                    if found && !system {
                        context.push(entry);
                    }
                }
                context.extend(&path[at + 1..]);
                context
            }
        };
        let mut edits: HashMap<&str, &Value> = HashMap::new();
        for entry in &context {
            if entry["type"] == "context_edit"
                && let Some(target) = entry["targetId"].as_str()
            {
                edits.insert(target, entry);
            }
        }
        let entries = context
            .iter()
            .enumerate()
            .map(|(index, source)| {
                let messages = if source["type"] == "compaction" && index > 0 {
                    Vec::new()
                } else {
                    let id = source["id"].as_str().unwrap_or_default();
                    apply_edit(context_messages(source), edits.get(id).copied())
                };
                Projected {
                    source: (*source).clone(),
                    messages,
                }
            })
            .collect();
        Projection { entries }
    }

    /// The current system message of the whole projection.
    pub fn current_system(&self) -> Option<Value> {
        current_system(&self.messages().collect::<Vec<_>>())
    }

    /// The estimate of the messages from the entry `first_kept_id` on, system messages aside.
    pub fn kept_tokens(&self, first_kept_id: &str) -> u64 {
        let from = self
            .entries
            .iter()
            .position(|e| e.source["id"] == first_kept_id)
            .unwrap_or(self.entries.len());
        self.entries[from..]
            .iter()
            .flat_map(Projected::for_compaction)
            .map(estimate_tokens)
            .sum()
    }

    fn messages(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().flat_map(|e| e.messages.iter())
    }

    /// `estimateProjectedContextTokens`: the last usage an assistant reported plus what came
    /// after it — unless a context edit or compaction came after that usage, or none was
    /// reported: then the estimate of the current system prompt and every other message.
    pub fn context_tokens(&self, path: &[Value]) -> u64 {
        let messages: Vec<&Value> = self.messages().collect();
        let usage = messages
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, m)| usage_of(m).map(|u| (i, u)));
        if let Some((index, tokens)) = usage {
            let mut seen = 0;
            let usage_entry = self.entries.iter().find_map(|e| {
                seen += e.messages.len();
                (index < seen).then(|| e.source["id"].as_str().unwrap_or_default())
            });
            let usage_at = usage_entry.and_then(|id| path.iter().position(|e| e["id"] == id));
            let invalidated_at = path
                .iter()
                .rposition(|e| e["type"] == "context_edit" || e["type"] == "compaction");
            if usage_at.map(|u| u as i64).unwrap_or(-1)
                > invalidated_at.map(|i| i as i64).unwrap_or(-1)
            {
                let trailing: u64 = messages[index + 1..]
                    .iter()
                    .map(|m| estimate_tokens(m))
                    .sum();
                return tokens + trailing;
            }
        }
        let system = current_system(&messages).map_or(0, |s| estimate_tokens(&s));
        system
            + messages
                .iter()
                .filter(|m| role(m) != "system")
                .map(|m| estimate_tokens(m))
                .sum::<u64>()
    }

    /// `prepareCompaction` after its first checks: the cut and what it summarizes.
    pub fn prepare(&self, keep_recent_tokens: u64) -> Option<Cut> {
        let entries = &self.entries;
        let previous = entries
            .iter()
            .position(|e| e.kind() == "compaction" && !e.messages.is_empty());
        let start = previous.map_or(0, |p| p + 1);
        let end = entries.len();
        let (first_kept, turn_start, is_split_turn) =
            self.cut_point(start, end, keep_recent_tokens);
        let first_kept_id = entries.get(first_kept)?.source["id"].as_str()?.to_owned();
        let history_end = if is_split_turn {
            turn_start?
        } else {
            first_kept
        };
        let collect = |range: std::ops::Range<usize>| -> Vec<Value> {
            entries[range]
                .iter()
                .flat_map(Projected::for_compaction)
                .cloned()
                .collect()
        };
        let summarized = collect(start..history_end.max(start));
        let prefix = match is_split_turn {
            true => collect(turn_start?..first_kept),
            false => Vec::new(),
        };
        if summarized.is_empty() && prefix.is_empty() {
            return None;
        }
        Some(Cut {
            first_kept_id,
            turn_start_id: turn_start
                .filter(|_| is_split_turn)
                .and_then(|t| entries[t].source["id"].as_str().map(str::to_owned)),
            is_split_turn,
            previous_summary: previous
                .and_then(|p| entries[p].source["summary"].as_str().map(str::to_owned)),
            previous_compaction: previous,
            summarized,
            prefix,
        })
    }

    /// `findProjectedCutPoint`: (first kept index, turn start index, split turn).
    fn cut_point(&self, start: usize, end: usize, keep: u64) -> (usize, Option<usize>, bool) {
        let entries = &self.entries;
        let cut_points: Vec<usize> = (start..end)
            .filter(|&i| {
                entries[i].kind() != "compaction" && entries[i].messages.iter().any(is_cut_point)
            })
            .collect();
        let Some(&first_point) = cut_points.first() else {
            return (start, None, false);
        };
        let mut accumulated = 0;
        let mut exceeded = false;
        let mut cut = first_point;
        for i in (start..end).rev() {
            let tokens: u64 = entries[i].messages.iter().map(estimate_tokens).sum();
            if tokens == 0 {
                continue;
            }
            accumulated += tokens;
            if accumulated >= keep {
                exceeded = true;
                cut = cut_points
                    .iter()
                    .copied()
                    .find(|&c| c >= i)
                    .unwrap_or(*cut_points.last().expect("not empty"));
                break;
            }
        }
        // A recovery attempt and its omission edits after the last visible input: the cut moves
        // past a closed suffix holding an omitted assistant attempt.
        let suffix = &entries[(cut + 1).min(end)..end];
        let intrinsically_visible =
            |e: &Projected| e.kind() != "context_edit" && !context_messages(&e.source).is_empty();
        let omitted = |e: &Projected| intrinsically_visible(e) && e.messages.is_empty();
        let omitted_ids: BTreeSet<&str> = suffix
            .iter()
            .filter(|e| omitted(e))
            .filter_map(|e| e.source["id"].as_str())
            .collect();
        let external_replacement = suffix.iter().any(|e| {
            e.kind() == "context_edit"
                && !e.source["replacement"].is_null()
                && !e.source["targetId"]
                    .as_str()
                    .is_some_and(|t| omitted_ids.contains(t))
        });
        let recovery = exceeded
            && !external_replacement
            && suffix.iter().any(|e| {
                e.kind() == "message" && e.source["message"]["role"] == "assistant" && omitted(e)
            })
            && suffix
                .iter()
                .all(|e| e.kind() != "compaction" && (!intrinsically_visible(e) || omitted(e)));
        if recovery {
            cut += 1;
        }
        while cut > start {
            let previous = &entries[cut - 1];
            if previous.kind() == "compaction" || !previous.messages.is_empty() {
                break;
            }
            cut -= 1;
        }
        let starts_turn = entries.get(cut).is_some_and(Projected::is_turn_start);
        let turn_start = match starts_turn {
            true => None,
            false => (start..=cut.min(end.saturating_sub(1)))
                .rev()
                .find(|&i| entries[i].is_turn_start()),
        };
        (cut, turn_start, !starts_turn && turn_start.is_some())
    }
}

/// The context tokens an assistant's usage reports, when it counts (`getAssistantUsage`).
fn usage_of(message: &Value) -> Option<u64> {
    if role(message) != "assistant" {
        return None;
    }
    let stop = message["stopReason"].as_str().unwrap_or_default();
    if stop == "aborted" || stop == "error" {
        return None;
    }
    let usage = message.get("usage").filter(|u| u.is_object())?;
    let n = |name: &str| usage[name].as_f64().unwrap_or(0.0);
    let total = match n("totalTokens") {
        t if t != 0.0 => t,
        _ => n("input") + n("output") + n("cacheRead") + n("cacheWrite"),
    };
    (total > 0.0).then_some(total as u64)
}

/// `getCurrentSystemMessage`: every system message replayed into one (content appended, sections
/// patched by name, tools added and removed).
fn current_system(messages: &[&Value]) -> Option<Value> {
    let mut content = Vec::new();
    let mut sections = serde_json::Map::new();
    let mut tools: Vec<(String, Value)> = Vec::new();
    let mut any = false;
    for message in messages.iter().filter(|m| role(m) == "system") {
        any = true;
        let text = messages::content_text(&message["content"], "\n");
        if !text.is_empty() {
            content.push(text);
        }
        if let Some(Value::Object(changes)) = message.get("sections") {
            for (name, value) in changes {
                match value {
                    Value::Null => {
                        sections.remove(name);
                    }
                    value => {
                        sections.insert(name.clone(), value.clone());
                    }
                }
            }
        }
        for removed in message["toolsRemoved"].as_array().into_iter().flatten() {
            let name = removed["name"].as_str().unwrap_or_default();
            tools.retain(|(n, _)| n != name);
        }
        for added in message["toolsAdded"].as_array().into_iter().flatten() {
            let name = added["name"].as_str().unwrap_or_default().to_owned();
            match tools.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = added.clone(),
                None => tools.push((name, added.clone())),
            }
        }
    }
    if !any && tools.is_empty() {
        return None;
    }
    let mut system = serde_json::json!({"role": "system", "content": content.join("\n\n")});
    if !sections.is_empty() {
        system["sections"] = Value::Object(sections);
    }
    if !tools.is_empty() {
        system["toolsAdded"] = Value::Array(tools.into_iter().map(|(_, t)| t).collect());
    }
    Some(system)
}

/// pi 1.5's file lists: the previous compaction's unless an extension wrote it, then the calls
/// of the summarized assistant messages and the `nestedCalls` of tool results.
pub(super) fn file_ops<'a>(
    projection: &Projection,
    previous: Option<usize>,
    messages: impl Iterator<Item = &'a Value>,
) -> FileOperations {
    let mut files = FileOperations::default();
    if let Some(source) = previous.map(|p| &projection.entries[p].source)
        && !source["fromHook"].as_bool().unwrap_or(false)
        && !source["details"].is_null()
    {
        files.carry_details(&source["details"]);
    }
    for message in messages {
        let calls: Vec<&Value> = match role(message) {
            "toolResult" => message["nestedCalls"]["calls"]
                .as_array()
                .into_iter()
                .flatten()
                .collect(),
            "assistant" => message["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|b| b["type"] == "toolCall")
                .collect(),
            _ => Vec::new(),
        };
        for call in calls {
            files.add_call(
                call["name"].as_str().unwrap_or_default(),
                call.get("arguments"),
            );
        }
    }
    files
}
