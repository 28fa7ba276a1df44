//! Every response the tests receive is checked against `/openapi.json`: its status must be
//! documented for the route, its content type one the document gives, and its body valid against
//! the documented schema — strictly, with no property the schema does not name. So the document
//! cannot drift from what compactd answers, in either direction.

use std::sync::LazyLock;

use serde_json::Value;

/// compactd's document, its object schemas made strict (no undocumented properties).
static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
    let mut document = serde_json::to_value(compactd::http::openapi()).unwrap();
    // A schema that is a part of another (`#[serde(flatten)]`) is checked by the whole.
    let mut parts = Vec::new();
    collect_all_of_parts(&document, &mut parts);
    if let Some(Value::Object(schemas)) = document.pointer_mut("/components/schemas") {
        for (name, schema) in schemas.iter_mut() {
            if parts.contains(name) {
                if let Some(properties) = schema.get_mut("properties") {
                    forbid_unnamed_properties(properties);
                }
            } else {
                forbid_unnamed_properties(schema);
            }
        }
    }
    document
});

/// Marks every object schema `unevaluatedProperties: false` (JSON Schema 2020-12, which OpenAPI
/// 3.1 uses; unlike `additionalProperties` it sees the properties of `allOf` parts, which utoipa
/// writes for `#[serde(flatten)]`).
fn forbid_unnamed_properties(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let is_object_schema = map.contains_key("properties") || map.contains_key("allOf");
            for (key, child) in map.iter_mut() {
                if key == "allOf" {
                    // The parts are checked together by the schema that combines them.
                    for part in child.as_array_mut().into_iter().flatten() {
                        if let Some(properties) = part.get_mut("properties") {
                            forbid_unnamed_properties(properties);
                        }
                    }
                } else {
                    forbid_unnamed_properties(child);
                }
            }
            if is_object_schema && !map.contains_key("additionalProperties") {
                map.insert("unevaluatedProperties".into(), Value::Bool(false));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(forbid_unnamed_properties),
        _ => {}
    }
}

/// The component schemas named by a `$ref` inside an `allOf`.
fn collect_all_of_parts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for part in map
                .get("allOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = part["$ref"]
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/components/schemas/"))
                {
                    out.push(name.to_owned());
                }
            }
            map.values().for_each(|v| collect_all_of_parts(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_all_of_parts(v, out)),
        _ => {}
    }
}

/// The documented route a request path belongs to (`/k/KEY/` and a trailing slash removed).
fn route_of(path: &str) -> Option<String> {
    let path = path.split('?').next().unwrap_or_default();
    let path = match path.strip_prefix("/k/") {
        Some(rest) => rest.find('/').map_or("", |at| &rest[at..]),
        None => path,
    };
    let path = path.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').collect();
    DOCUMENT["paths"].as_object()?.keys().find_map(|route| {
        let parts: Vec<&str> = route.split('/').collect();
        let matches = parts.len() == segments.len()
            && parts.iter().zip(&segments).all(|(part, segment)| {
                part == segment || (part.starts_with('{') && !segment.is_empty())
            });
        matches.then(|| route.clone())
    })
}

/// A documented response that was checked: `(method, route, status)`.
pub type Checked = (String, String, u16);

/// Checks one response; the message says what does not match. `Ok(None)`: the path or method is
/// not a route (a JSON 404 or 405).
pub fn check(
    method: &str,
    path: &str,
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Option<Checked>, String> {
    let method = method.to_ascii_lowercase();
    let what = format!("{} {path} → {status}", method.to_uppercase());
    let Some(route) = route_of(path) else {
        // No such route: the JSON 404 every unknown path gets.
        return match status {
            404 => validate(&schema_ref("ErrorBody"), body)
                .map(|()| None)
                .map_err(|e| format!("{what}: {e}")),
            _ => Err(format!("{what}: the path is not documented")),
        };
    };
    let Some(operation) = DOCUMENT["paths"][&route].get(&method) else {
        return match status {
            405 => validate(&schema_ref("ErrorBody"), body)
                .map(|()| None)
                .map_err(|e| format!("{what}: {e}")),
            _ => Err(format!("{what}: {method} is not documented for {route}")),
        };
    };
    let Some(response) = operation["responses"].get(status.to_string()) else {
        return Err(format!(
            "{what}: status {status} is not documented for {method} {route} (body: {})",
            String::from_utf8_lossy(body)
        ));
    };
    let checked = Some((method.clone(), route.clone(), status));
    let Some(content) = response.get("content").and_then(Value::as_object) else {
        return if body.is_empty() {
            Ok(checked)
        } else {
            Err(format!("{what}: documented without a body, but has one"))
        };
    };
    let media = content_type
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    let Some(documented) = content.get(media) else {
        return Err(format!(
            "{what}: content type {media:?} is not among {:?}",
            content.keys().collect::<Vec<_>>()
        ));
    };
    match documented.get("schema") {
        Some(schema) if media == "application/json" => validate(schema, body)
            .map(|()| checked)
            .map_err(|e| format!("{what}: {e}")),
        _ => Ok(checked),
    }
}

fn schema_ref(name: &str) -> Value {
    serde_json::json!({"$ref": format!("#/components/schemas/{name}")})
}

/// Validates a JSON body against a schema of the document (its `$ref`s resolved in it).
fn validate(schema: &Value, body: &[u8]) -> Result<(), String> {
    let instance: Value = serde_json::from_slice(body)
        .map_err(|e| format!("not JSON ({e}): {}", String::from_utf8_lossy(body)))?;
    let mut root = schema.clone();
    if let Value::Object(map) = &mut root {
        map.insert("components".into(), DOCUMENT["components"].clone());
    }
    let validator = jsonschema::validator_for(&root).map_err(|e| format!("bad schema: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{} in {instance}", errors.join("; ")))
    }
}

/// The documented responses: `(method, route, status)`.
pub fn documented() -> Vec<Checked> {
    let mut all = Vec::new();
    for (route, item) in DOCUMENT["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for status in operation["responses"].as_object().unwrap().keys() {
                all.push((method.clone(), route.clone(), status.parse().unwrap()));
            }
        }
    }
    all
}

#[test]
fn the_checker_catches_every_kind_of_drift() {
    let error = br#"{"error": {"message": "m", "type": "invalid_request_error", "code": "not_found", "param": null}}"#;
    let json = Some("application/json");
    assert!(
        check("GET", "/v1/sessions/x", 404, json, error)
            .unwrap()
            .is_some()
    );
    assert!(
        check("GET", "/nowhere", 404, json, error)
            .unwrap()
            .is_none()
    );
    // An undocumented status, path or method.
    assert!(check("GET", "/v1/sessions/x", 418, json, error).is_err());
    assert!(check("GET", "/nowhere", 200, json, b"{}").is_err());
    assert!(check("PUT", "/v1/sessions/x", 200, json, b"{}").is_err());
    // A property the schema does not name, a missing one, a wrong type, a wrong content type.
    let extra =
        br#"{"error": {"message": "m", "type": "t", "code": "c", "param": null, "secret": 1}}"#;
    assert!(
        check("GET", "/v1/sessions/x", 404, json, extra)
            .unwrap_err()
            .contains("secret")
    );
    assert!(
        check(
            "GET",
            "/v1/sessions/x",
            404,
            json,
            br#"{"error": {"message": "m"}}"#
        )
        .is_err()
    );
    assert!(check("GET", "/healthz", 200, json, br#"{"status": 1}"#).is_err());
    assert!(
        check(
            "GET",
            "/healthz",
            200,
            Some("text/html"),
            br#"{"status": "ok"}"#
        )
        .is_err()
    );
    // Flattened parts (`allOf`) still see each other's properties, and only those.
    let session = br#"{"id":"i","headerId":"h","leafId":null,"entryCount":0,"version":3,"sourceVersion":3,"contextTokens":0,"compactions":0,"bytes":0,"createdAt":"c","updatedAt":"u","skippedLines":[],"repairedLines":[]}"#;
    assert!(
        check("POST", "/v1/sessions", 201, json, session).is_ok(),
        "{:?}",
        check("POST", "/v1/sessions", 201, json, session)
    );
    let mut with_extra: Value = serde_json::from_slice(session).unwrap();
    with_extra["surprise"] = Value::Bool(true);
    let with_extra = serde_json::to_vec(&with_extra).unwrap();
    assert!(check("POST", "/v1/sessions", 201, json, &with_extra).is_err());
    // Key paths and trailing slashes are the routes they stand for.
    assert!(
        check("POST", "/k/ck_x/v1/compact/", 404, json, error)
            .unwrap()
            .is_some()
    );
}
