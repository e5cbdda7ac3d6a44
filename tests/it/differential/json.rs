//! JSON as a response writes it, object keys in their order, and the first
//! place two bodies part.
//!
//! Members compare by key here; their order is held to the selection's on
//! its own, for each answer ([`super::order`]), so two answers in order
//! that compare the same are the same text but for the canonicalisations.
//!
//! Three canonicalisations, and nothing else is forgiven (whitespace
//! is not part of a parsed body; every key, every string and every null
//! must be the same):
//! - numbers compare by value (`4.0` and `4`, an exponent or not, are one
//!   JSON number to every client);
//! - the `errors` list compares as a set: the spec gives it no order (and
//!   async-graphql adds each as its field completes);
//! - a sealed cursor compares by what it seals ([`Json::unseal`]): each
//!   seal draws a nonce, so the same position sealed twice reads
//!   differently, within one executor as across the two.
//!
//! And one place where async-graphql leaves the spec and the planned
//! executor does not ([`spec_nulls`]): a non-null root field that fails is
//! dropped from async-graphql's `data`, its siblings kept, where the spec
//! nulls the whole `data`.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A parsed JSON value that keeps its keys' order.
#[derive(Clone, Debug)]
pub enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(bytes: &[u8]) -> Result<Json, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Every string the server's cursor key opens, replaced by what it
    /// seals.
    pub fn unseal(&mut self, key: &riverfeed::api::cursor::CursorKey) {
        match self {
            Json::String(s) => {
                if let Ok(plain) = key.open(s) {
                    let hex: String = plain.iter().map(|b| format!("{b:02x}")).collect();
                    *s = format!("(sealed cursor {hex})");
                }
            }
            Json::Array(items) => items.iter_mut().for_each(|i| i.unseal(key)),
            Json::Object(members) => members.iter_mut().for_each(|(_, v)| v.unseal(key)),
            _ => {}
        }
    }

    /// The top-level `errors` in one order (by their text).
    pub fn sort_errors(&mut self) {
        if let Json::Object(members) = self {
            for (key, value) in members.iter_mut() {
                if let (true, Json::Array(errors)) = (key == "errors", value) {
                    errors.sort_by_cached_key(Json::text);
                }
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The value as compact JSON text, keys in order.
    pub fn text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(&n.to_string()),
            Json::String(s) => out.push_str(&serde_json::Value::from(s.as_str()).to_string()),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::from(key.as_str()).to_string());
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn same_number(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => x == y,
        (_, _, Some(x), Some(y)) => x == y,
        _ => a.as_f64() == b.as_f64(),
    }
}

/// Where `a` and `b` first differ (in document order), with what each holds
/// there; `None` when they are the same.
pub fn first_difference(a: &Json, b: &Json) -> Option<String> {
    let mut path = Vec::new();
    differ(a, b, &mut path)
}

fn at(path: &[String]) -> String {
    if path.is_empty() {
        "the body".to_owned()
    } else {
        path.join("")
    }
}

fn clip(text: String) -> String {
    const MOST: usize = 400;
    if text.len() <= MOST {
        return text;
    }
    let mut end = MOST;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

fn differ(a: &Json, b: &Json, path: &mut Vec<String>) -> Option<String> {
    let show = |path: &[String], what: &str| {
        Some(format!(
            "at {}: {what}\n  planned off: {}\n  planned on:  {}",
            at(path),
            clip(a.text()),
            clip(b.text())
        ))
    };
    match (a, b) {
        (Json::Null, Json::Null) => None,
        (Json::Bool(x), Json::Bool(y)) if x == y => None,
        (Json::Number(x), Json::Number(y)) if same_number(x, y) => None,
        (Json::String(x), Json::String(y)) if x == y => None,
        (Json::Array(xs), Json::Array(ys)) => {
            for (i, (x, y)) in xs.iter().zip(ys).enumerate() {
                path.push(format!("[{i}]"));
                if let Some(found) = differ(x, y, path) {
                    return Some(found);
                }
                path.pop();
            }
            (xs.len() != ys.len()).then(|| {
                format!(
                    "at {}: {} items against {}\n  planned off: {}\n  planned on:  {}",
                    at(path),
                    xs.len(),
                    ys.len(),
                    clip(a.text()),
                    clip(b.text())
                )
            })
        }
        (Json::Object(xs), Json::Object(ys)) => {
            for (kx, x) in xs {
                let Some((_, y)) = ys.iter().find(|(ky, _)| ky == kx) else {
                    return show(path, &format!("member {kx:?} only with planned reads off"));
                };
                path.push(format!(".{kx}"));
                if let Some(found) = differ(x, y, path) {
                    return Some(found);
                }
                path.pop();
            }
            (xs.len() != ys.len()).then(|| {
                let keys =
                    |m: &[(String, Json)]| m.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
                format!(
                    "at {}: members {:?} against {:?}",
                    at(path),
                    keys(xs),
                    keys(ys)
                )
            })
        }
        (x, y) if x.kind() != y.kind() => show(path, &format!("{} against {}", x.kind(), y.kind())),
        _ => show(path, "different values"),
    }
}

/// A body as the spec has it where async-graphql drops a failed field: a
/// root field with an error that is missing from `data` was non-null (a
/// nullable one is answered `null`), and its error nulls the whole `data`
/// (every root field the plans cover is non-null, so the planned executor
/// propagates no deeper than the root).
pub fn spec_nulls(body: &Json) -> Json {
    let Some(Json::Object(data)) = body.get("data") else {
        return body.clone();
    };
    let Some(Json::Array(errors)) = body.get("errors") else {
        return body.clone();
    };
    let dropped = errors.iter().any(|e| match e.get("path") {
        Some(Json::Array(path)) => match path.first() {
            Some(Json::String(root)) => !data.iter().any(|(key, _)| key == root),
            _ => false,
        },
        _ => false,
    });
    if !dropped {
        return body.clone();
    }
    match body {
        Json::Object(members) => Json::Object(
            members
                .iter()
                .map(|(key, value)| match key.as_str() {
                    "data" => (key.clone(), Json::Null),
                    _ => (key.clone(), value.clone()),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The paths of a body's errors, written as [`first_difference`] writes
/// paths (`.data.feed.edges[3].node`).
pub fn error_paths(body: &Json) -> Vec<String> {
    let Some(Json::Array(errors)) = body.get("errors") else {
        return Vec::new();
    };
    errors
        .iter()
        .filter_map(|e| match e.get("path") {
            Some(Json::Array(segments)) => Some(segments.iter().fold(
                ".data".to_owned(),
                |path, segment| match segment {
                    Json::String(key) => format!("{path}.{key}"),
                    other => format!("{path}[{}]", other.text()),
                },
            )),
            _ => None,
        })
        .collect()
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut members = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            members.push((key, value));
        }
        Ok(Json::Object(members))
    }
}

#[test]
fn members_compare_by_key_and_numbers_by_value() {
    let parse = |text: &str| Json::parse(text.as_bytes()).expect("JSON");
    let a = parse(r#"{"data":{"a":1,"b":[1,2.0]}}"#);
    assert!(first_difference(&a, &parse(r#"{"data":{"a":1.0,"b":[1,2]}}"#)).is_none());
    let swapped = parse(r#"{"data":{"b":[1,2],"a":1}}"#);
    assert!(first_difference(&a, &swapped).is_none());
    let deeper = first_difference(&a, &parse(r#"{"data":{"a":1,"b":[1,3]}}"#));
    assert!(deeper.expect("a difference").starts_with("at .data.b[1]"));
    let longer = first_difference(&a, &parse(r#"{"data":{"a":1,"b":[1,2]},"errors":[]}"#));
    assert!(longer.expect("a difference").contains("errors"));
}
