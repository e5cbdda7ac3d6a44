//! What a recorded descriptor must be, by its type's rules: ids in their one
//! form, text within its limits, numbers in their range, enums among their
//! values. Every type, built-in or an application's, is checked here.

use async_graphql::indexmap::IndexMap;
use async_graphql::{Name, Value as ConstValue};
use serde_json::Value as Json;

use super::catalog::{Catalog, EnumDef, FieldDef, Scalar, TypeDef};
use super::Descriptor;
use crate::model::limits::{check_name, check_text, normalize_id, InputError, MAX_LIST_LEN};

/// Exactly one descriptor, as a client sent it: its key in
/// `DescriptorInput` (`applicationRating`) and its fields.
#[derive(Clone, Debug)]
pub struct DescriptorInput {
    pub key: String,
    pub fields: IndexMap<Name, ConstValue>,
}

impl Catalog {
    /// The descriptor an input records, checked by its type's rules.
    pub fn record(&self, input: DescriptorInput) -> Result<Descriptor, InputError> {
        let ty = self.by_input_key(&input.key).ok_or_else(|| {
            InputError::new(format!("descriptor.{} is not a descriptor type", input.key))
        })?;
        if let Some(extra) = input.fields.keys().find(|k| ty.field(k).is_none()) {
            return Err(InputError::new(format!(
                "{}.{extra} is not a field of {}",
                ty.input_key, ty.name
            )));
        }
        let mut fields = serde_json::Map::new();
        for f in &ty.fields {
            let path = Path(&ty.input_key, &f.name);
            let given = input.fields.get(f.name.as_str());
            if let Some(v) = coerce_field(&path, f, given, self.enums())? {
                fields.insert(f.name.clone(), v);
            }
        }
        Ok(Descriptor::new(ty.name.clone(), fields))
    }

    /// The fields naming who did the thing (`@doneBy`), as `(field, user
    /// id)`: a user recording for itself must be the one named.
    pub fn done_by<'d>(&self, d: &'d Descriptor) -> Vec<(String, &'d str)> {
        let Some(ty) = self.get(d.type_name()) else {
            return Vec::new();
        };
        ty.fields
            .iter()
            .filter(|f| f.done_by)
            .filter_map(|f| {
                let id = d.str_field(&f.name)?;
                Some((format!("{}.{}", ty.input_key, f.name), id))
            })
            .collect()
    }

    /// The ids of the `@slice` fields: the slices the action is in beside
    /// its `refIds`.
    pub fn slice_ids(&self, d: &Descriptor) -> Vec<String> {
        let Some(ty) = self.get(d.type_name()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for f in ty.fields.iter().filter(|f| f.slice) {
            match d.field(&f.name) {
                Some(Json::String(s)) => out.push(s.clone()),
                Some(Json::Array(items)) => {
                    out.extend(items.iter().filter_map(|i| i.as_str().map(str::to_owned)))
                }
                _ => {}
            }
        }
        out
    }

    /// Whether a stored descriptor reads as its type: the type is served,
    /// and each field holds what the type says (or is optional, or has a
    /// default).
    pub fn conforms(&self, d: &Descriptor) -> bool {
        self.type_of(d).is_some()
    }

    /// The type a stored descriptor reads as, if it [conforms](Self::conforms).
    pub fn type_of(&self, d: &Descriptor) -> Option<&TypeDef> {
        self.get(d.type_name())
            .filter(|ty| conforms(ty, d, self.enums()))
    }
}

fn conforms(ty: &TypeDef, d: &Descriptor, enums: &[EnumDef]) -> bool {
    let holds = |f: &FieldDef, v: Option<&Json>| match v {
        None | Some(Json::Null) => !f.required || f.default.is_some(),
        Some(Json::Array(items)) if f.list => items.iter().all(|i| fits(&f.scalar, i, enums)),
        Some(_) if f.list => false,
        Some(v) => fits(&f.scalar, v, enums),
    };
    // A descriptor is stored with its fields in its type's order
    // (`record`), so one walk of both pairs them without a lookup by name
    // (every page judges each of its descriptors). One stored otherwise
    // (by an older catalog, or with a field the type no longer has) is
    // judged by name.
    let mut stored = d.fields().iter().peekable();
    let mut verdict = true;
    for f in &ty.fields {
        let v = stored.next_if(|(name, _)| **name == f.name).map(|(_, v)| v);
        verdict &= holds(f, v);
    }
    if stored.peek().is_none() {
        return verdict;
    }
    ty.fields.iter().all(|f| holds(f, d.field(&f.name)))
}

/// Whether a stored value is of a scalar.
fn fits(scalar: &Scalar, v: &Json, enums: &[EnumDef]) -> bool {
    match scalar {
        Scalar::String | Scalar::Id | Scalar::DateTime => v.is_string(),
        Scalar::Int => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        Scalar::Float => v.is_number(),
        Scalar::Boolean => v.is_boolean(),
        Scalar::Enum(name) => v.as_str().is_some_and(|s| has_value(enums, name, s)),
    }
}

/// Whether the file's enum `name` has `value`.
fn has_value(enums: &[EnumDef], name: &str, value: &str) -> bool {
    enums
        .iter()
        .find(|e| e.name == name)
        .is_some_and(|e| e.values.iter().any(|(v, _)| v == value))
}

/// A `@default` value as it is stored, checked by the field's rules.
pub(super) fn coerce_default(
    def: &FieldDef,
    value: &ConstValue,
    enums: &[EnumDef],
) -> Result<Json, String> {
    match coerce_field(&Path("", &def.name), def, Some(value), enums) {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err("the default may not be null".into()),
        Err(e) => Err(e.0),
    }
}

/// Where a value is in the input (`applicationRating.ratingScore`): written
/// out only when an error names it.
struct Path<'a>(&'a str, &'a str);

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str(self.1)
        } else {
            write!(f, "{}.{}", self.0, self.1)
        }
    }
}

/// Runs a check that names its field, naming it only when it fails.
fn named<T>(
    path: &Path<'_>,
    check: impl Fn(&str) -> Result<T, InputError>,
) -> Result<T, InputError> {
    check("").or_else(|_| check(&path.to_string()))
}

/// A field's value as stored, or `None` to leave it out.
fn coerce_field(
    path: &Path<'_>,
    def: &FieldDef,
    value: Option<&ConstValue>,
    enums: &[EnumDef],
) -> Result<Option<Json>, InputError> {
    let value = match value {
        None | Some(ConstValue::Null) => {
            return match (&def.default, def.required) {
                (Some(default), _) => Ok(Some(default.clone())),
                (None, true) => Err(InputError::new(format!("{path} is required"))),
                (None, false) => Ok(None),
            };
        }
        Some(v) => v,
    };
    if !def.list {
        return coerce_scalar(path, def, value, enums).map(Some);
    }
    // A single value stands for a list of one, as GraphQL coerces inputs.
    let items = match value {
        ConstValue::List(items) => items.as_slice(),
        single => std::slice::from_ref(single),
    };
    if items.len() > MAX_LIST_LEN {
        return Err(InputError::new(format!(
            "{path} has {} entries; at most {MAX_LIST_LEN} are allowed",
            items.len()
        )));
    }
    items
        .iter()
        .map(|item| coerce_scalar(path, def, item, enums))
        .collect::<Result<Vec<_>, _>>()
        .map(|items| Some(Json::Array(items)))
}

fn coerce_scalar(
    path: &Path<'_>,
    def: &FieldDef,
    value: &ConstValue,
    enums: &[EnumDef],
) -> Result<Json, InputError> {
    let wrong = || {
        InputError::new(format!(
            "{path} must be {}",
            match &def.scalar {
                Scalar::Int => "an Int".to_owned(),
                Scalar::Enum(name) => format!("one of {name}'s values"),
                other => format!("a {}", other.graphql_name()),
            }
        ))
    };
    let in_range = |n: f64| -> Result<(), InputError> {
        match def.range {
            Some((min, max)) if !(min..=max).contains(&n) => Err(InputError::new(format!(
                "{path} must be between {min} and {max}, got {n}"
            ))),
            _ => Ok(()),
        }
    };
    match &def.scalar {
        Scalar::String | Scalar::Id => {
            let s = match value {
                ConstValue::String(s) => s.clone(),
                ConstValue::Number(n) if def.scalar == Scalar::Id && n.is_i64() => n.to_string(),
                _ => return Err(wrong()),
            };
            if def.id {
                return named(path, |p| normalize_id(p, &s)).map(Json::String);
            }
            if def.non_empty && s.trim().is_empty() {
                return Err(InputError::new(format!("{path} must not be empty")));
            }
            if def.text {
                named(path, |p| check_text(p, &s))?;
            } else {
                named(path, |p| check_name(p, &s))?;
            }
            Ok(Json::String(s))
        }
        Scalar::Int => {
            let n = match value {
                ConstValue::Number(n) => n.as_i64().filter(|n| i32::try_from(*n).is_ok()),
                _ => None,
            }
            .ok_or_else(wrong)?;
            in_range(n as f64)?;
            Ok(Json::from(n))
        }
        Scalar::Float => {
            let n = match value {
                ConstValue::Number(n) => n.as_f64(),
                _ => None,
            }
            .filter(|n| n.is_finite())
            .ok_or_else(wrong)?;
            in_range(n)?;
            serde_json::Number::from_f64(n)
                .map(Json::Number)
                .ok_or_else(wrong)
        }
        Scalar::Boolean => match value {
            ConstValue::Boolean(b) => Ok(Json::Bool(*b)),
            _ => Err(wrong()),
        },
        Scalar::DateTime => match value {
            ConstValue::String(s) => chrono::DateTime::parse_from_rfc3339(s)
                .map(|t| {
                    Json::String(
                        t.with_timezone(&chrono::Utc)
                            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    )
                })
                .map_err(|_| {
                    InputError::new(format!(
                        "{path} must be an RFC 3339 time, e.g. 2026-11-28T09:30:00Z"
                    ))
                }),
            _ => Err(wrong()),
        },
        Scalar::Enum(name) => {
            let given = match value {
                ConstValue::Enum(n) => n.as_str(),
                ConstValue::String(s) => s.as_str(),
                _ => return Err(wrong()),
            };
            if has_value(enums, name, given) {
                Ok(Json::String(given.to_owned()))
            } else {
                Err(wrong())
            }
        }
    }
}
