//! Values for arguments and variables, from what the fixture holds: real
//! ids, global ids and cursors most of the time, and now and then one that
//! fails (a garbage cursor, a size past the limit, an id of nothing) so
//! that errors, and their `null`s, are compared too.

use async_graphql::parser::types::{BaseType, Type};
use riverfeed::rng::Rng;
use serde_json::{json, Value};

use super::fixture::Fixture;
use super::schema::{named, Kind, Schema};

/// Page sizes: mostly valid, some empty, some refused.
const SIZES: &[i64] = &[1, 2, 3, 5, 10, 25, 25, 26, 100, 0, -1, 101];

/// A random value for the argument `arg` of `field`, of type `ty`.
pub fn random(
    schema: &Schema,
    fx: &Fixture,
    rng: &mut Rng,
    field: &str,
    arg: &str,
    ty: &Type,
) -> Value {
    let paging = arg == "after" || arg == "before";
    if ty.nullable && rng.chance(if paging { 50 } else { 3 }) {
        return Value::Null;
    }
    match &ty.base {
        BaseType::List(inner) => {
            let n = 1 + rng.below(4);
            Value::Array(
                (0..n)
                    .map(|_| random(schema, fx, rng, field, arg, inner))
                    .collect(),
            )
        }
        BaseType::Named(name) => scalar(schema, fx, rng, field, arg, name),
    }
}

fn pick(rng: &mut Rng, pool: &[String]) -> Value {
    json!(rng.pick(pool))
}

fn scalar(
    schema: &Schema,
    fx: &Fixture,
    rng: &mut Rng,
    field: &str,
    arg: &str,
    name: &str,
) -> Value {
    let wild = rng.chance(4);
    match (name, arg) {
        ("Int", "first" | "last") => json!(if wild {
            *rng.pick(SIZES)
        } else {
            *rng.pick(&SIZES[..9])
        }),
        ("Int", _) => json!(rng.below(30)),
        ("Boolean", _) => json!(rng.chance(50)),
        ("Float", _) => json!(rng.below(50) as f64 / 10.0),
        ("String", "after" | "before") | ("ID", "after" | "before") => {
            let own: Vec<String> = (fx.cursors_of.iter())
                .filter(|(f, _)| *f == field)
                .map(|(_, c)| c.clone())
                .collect();
            if wild {
                json!(["not-a-cursor", "", "AAAA", "eyJ4Ijo1fQ"][rng.below(4)])
            } else if rng.chance(20) || own.is_empty() {
                pick(rng, &fx.cursors)
            } else {
                pick(rng, &own)
            }
        }
        (_, "refId") => pick(rng, &fx.refs),
        (_, "matching") => pick(rng, &fx.words),
        (_, "groupId") => pick(rng, &fx.groups),
        (_, "webhookId") if !wild => pick(rng, &fx.webhooks),
        (_, "userId" | "ownerId") => {
            if wild {
                pick(rng, &fx.global_ids)
            } else {
                pick(rng, &fx.users)
            }
        }
        ("ID", _) if field == "node" || field == "nodes" || wild => {
            if rng.chance(10) {
                json!(["bm9wZQ", "nope", "QWN0aW9uOjEyMw"][rng.below(3)])
            } else {
                pick(rng, &fx.global_ids)
            }
        }
        ("ID", _) if field == "user" => pick(rng, &fx.users),
        ("ID" | "String", _) => pick(rng, &fx.actions),
        ("DateTime", _) => json!(crate::common::iso(crate::common::CLOCK_START)),
        _ => match schema.kind(name) {
            Kind::Enum { values } => json!(rng.pick(values)),
            Kind::Input { fields } => {
                let mut object = serde_json::Map::new();
                for f in fields {
                    if !f.ty.nullable && !f.has_default || rng.chance(30) {
                        let value = random(schema, fx, rng, name, &f.name, &f.ty);
                        object.insert(f.name.clone(), value);
                    }
                }
                Value::Object(object)
            }
            _ => json!("x"),
        },
    }
}

/// A value for a harvested document's variable `$name`: the ordinary one
/// a client would send (a real id, the first page), guessed from its name
/// and type; `None` leaves it out (a nullable or defaulted variable).
pub fn plain(
    schema: &Schema,
    fx: &Fixture,
    name: &str,
    ty: &Type,
    has_default: bool,
) -> Option<Value> {
    let lower = name.to_ascii_lowercase();
    if (ty.nullable || has_default)
        && ["after", "before", "cursor", "upto", "last", "matching"]
            .iter()
            .any(|w| lower.contains(w))
    {
        return None;
    }
    Some(plain_value(schema, fx, &lower, ty))
}

fn plain_value(schema: &Schema, fx: &Fixture, lower: &str, ty: &Type) -> Value {
    if let BaseType::List(inner) = &ty.base {
        return json!([plain_value(schema, fx, lower, inner)]);
    }
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    match named(ty) {
        "Int" if has(&["first", "last", "size", "page"]) || lower == "n" => json!(25),
        "Int" => json!(3),
        "Float" => json!(1.5),
        "Boolean" => json!(true),
        "DateTime" => json!(crate::common::iso(crate::common::CLOCK_START)),
        "String" | "ID" => {
            if has(&["after", "before", "cursor", "upto"]) {
                json!(fx.cursors.first())
            } else if has(&["ref"]) {
                json!("job-1")
            } else if has(&["group", "team"]) || lower == "g" {
                json!("t-core")
            } else if has(&["webhook", "hook"]) {
                json!(fx.webhooks.first())
            } else if has(&["user", "owner", "actor", "follow", "friend"]) || lower == "u" {
                json!("ann")
            } else if has(&["text", "match", "word", "q"]) {
                json!("launch")
            } else if has(&["node", "global"]) {
                json!(fx.global_ids.first())
            } else {
                json!(fx.actions.first())
            }
        }
        other => match schema.types.get(other) {
            Some(Kind::Enum { values }) => json!(values.first()),
            Some(Kind::Input { fields }) => {
                let mut object = serde_json::Map::new();
                for f in fields.iter().filter(|f| !f.ty.nullable && !f.has_default) {
                    let value = plain_value(schema, fx, &f.name.to_ascii_lowercase(), &f.ty);
                    object.insert(f.name.clone(), value);
                }
                Value::Object(object)
            }
            _ => json!("x"),
        },
    }
}

/// `value` written as a GraphQL literal.
pub fn literal(value: &Value, ty: &Type, schema: &Schema) -> String {
    match (value, &ty.base) {
        (Value::Null, _) => "null".to_owned(),
        (Value::Array(items), BaseType::List(inner)) => format!(
            "[{}]",
            items
                .iter()
                .map(|v| literal(v, inner, schema))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (Value::String(s), BaseType::Named(name))
            if matches!(schema.types.get(name.as_str()), Some(Kind::Enum { .. })) =>
        {
            s.clone()
        }
        (Value::Object(members), BaseType::Named(name)) => {
            let fields = match schema.types.get(name.as_str()) {
                Some(Kind::Input { fields }) => fields,
                _ => panic!("{name} is not an input type"),
            };
            let inner = members
                .iter()
                .map(|(k, v)| {
                    let f = fields
                        .iter()
                        .find(|f| &f.name == k)
                        .expect("an input field");
                    format!("{k}: {}", literal(v, &f.ty, schema))
                })
                .collect::<Vec<_>>();
            format!("{{{}}}", inner.join(", "))
        }
        (other, _) => other.to_string(),
    }
}
