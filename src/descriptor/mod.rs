//! Descriptors: the typed, denormalised payload of an action.
//!
//! The types are not compiled in: a deployment reads them from an SDL file
//! (`--descriptors`; `default.graphql` when none is given) into a
//! [`Catalog`], which the schema registers as the `Descriptor` union and
//! the `@oneOf` `DescriptorInput`, and whose rules check what is recorded.
//! A stored descriptor is its type's name and its fields, as JSON values:
//! `{"type": "ApplicationRating", "raterId": "u1", …}`.

pub mod catalog;
pub mod compat;
pub(crate) mod graphql;
mod input;
pub mod matching;
mod parse;

use std::fmt;
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value as Json};

pub use catalog::{Catalog, CatalogError};
pub use graphql::with_catalog;
pub(crate) use graphql::{
    input_value as meta_input, meta_field, object as meta_object, selected_fields,
};
pub use input::DescriptorInput;

/// What happened: a descriptor type's name and its fields. Shared, so that
/// the copies an action makes on its way (cache, events, fan-out) cost no
/// more than the struct they replaced; a rename copies on write.
#[derive(Clone, Debug, PartialEq)]
pub struct Descriptor {
    type_name: Arc<str>,
    fields: Arc<Map<String, Json>>,
}

impl Descriptor {
    /// A descriptor of `type_name` with `fields` (a JSON object; anything
    /// else gives no fields). Recorded descriptors come from
    /// [`Catalog::record`], which checks them.
    pub fn new(type_name: impl Into<String>, fields: impl Into<Json>) -> Self {
        let fields = match fields.into() {
            Json::Object(map) => map,
            _ => Map::new(),
        };
        Self {
            type_name: Arc::from(type_name.into()),
            fields: Arc::new(fields),
        }
    }

    /// The stored type tag, e.g. `"ApplicationRating"`.
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    pub fn fields(&self) -> &Map<String, Json> {
        &self.fields
    }

    pub fn field(&self, name: &str) -> Option<&Json> {
        self.fields.get(name)
    }

    /// A field holding a string.
    pub fn str_field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).and_then(Json::as_str)
    }

    /// Sets the copied name of `ref_id` to `name` wherever this descriptor
    /// refers to it, by the `(id field, name field)` pairs the catalog
    /// gives. Returns how many names changed.
    pub fn rename(&mut self, ref_id: &str, name: &str, pairs: &[(String, String)]) -> usize {
        let mut changed = 0;
        for (id_field, name_field) in pairs {
            if self.str_field(id_field) != Some(ref_id) {
                continue;
            }
            match Arc::make_mut(&mut self.fields).get_mut(name_field) {
                Some(Json::String(current)) if current != name => {
                    name.clone_into(current);
                    changed += 1;
                }
                _ => {}
            }
        }
        changed
    }
}

impl Serialize for Descriptor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len() + 1))?;
        map.serialize_entry("type", &*self.type_name)?;
        for (k, v) in self.fields.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Descriptor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Descriptor;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a descriptor: a map with its `type`")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Descriptor, A::Error> {
                let mut type_name = None;
                let mut fields = Map::new();
                while let Some(key) = access.next_key::<String>()? {
                    if key == "type" {
                        type_name = Some(access.next_value::<String>()?);
                    } else {
                        let value = access.next_value::<Json>()?;
                        fields.insert(key, value);
                    }
                }
                let type_name = type_name.ok_or_else(|| serde::de::Error::missing_field("type"))?;
                Ok(Descriptor::new(type_name, Json::Object(fields)))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rename_touches_only_the_matching_name() {
        let pairs = Catalog::builtin().named_refs().to_vec();
        let mut d = Descriptor::new(
            "ApplicationRating",
            json!({"raterId": "u1", "raterName": "Una", "positionId": "p1",
                   "positionName": "Engineer", "applicantId": "a1",
                   "applicantName": "Mary Fanning", "ratingScore": 4.0}),
        );
        assert_eq!(d.rename("a1", "Mary Fanning-Smith", &pairs), 1);
        assert_eq!(
            d.rename("a1", "Mary Fanning-Smith", &pairs),
            0,
            "no change the second time"
        );
        assert_eq!(d.rename("zz", "Nobody", &pairs), 0);
        assert_eq!(d.str_field("applicantName"), Some("Mary Fanning-Smith"));
        assert_eq!(d.str_field("raterName"), Some("Una"));
        assert_eq!(d.str_field("positionName"), Some("Engineer"));
    }

    #[test]
    fn a_name_no_document_could_write_is_refused() {
        let long = format!(
            "T{}",
            "x".repeat(crate::model::limits::MAX_GRAPHQL_NAME_BYTES)
        );
        for file in [
            format!("type {long} @descriptor {{ text: String! }}"),
            format!(
                "type Fine @descriptor {{ {} : String! }}",
                long.to_lowercase()
            ),
            format!(
                "enum E {{ {} }} type Fine @descriptor {{ e: E! }}",
                long.to_uppercase()
            ),
        ] {
            let err = Catalog::parse(&file).expect_err("too long");
            assert!(err.message.contains("at most 123 bytes"), "{}", err.message);
        }
        assert!(Catalog::parse("type Fine @descriptor { text: String! }").is_ok());
    }

    #[test]
    fn a_descriptor_conforms_whatever_order_its_fields_are_stored_in() {
        let catalog = Catalog::parse(
            "enum Level { LOW HIGH } \
             type Note @descriptor { a: String! b: Int c: [Level!] d: Boolean! @default(value: true) }",
        )
        .unwrap();
        let judge = |fields| catalog.conforms(&Descriptor::new("Note", fields));
        // In the type's order, as recorded, and in others, as an older
        // catalog or another writer may have stored it.
        assert!(judge(json!({"a": "x", "b": 1, "c": ["LOW"]})));
        assert!(judge(json!({"c": ["HIGH"], "a": "x"})));
        assert!(judge(json!({"b": 2, "a": "x", "d": false})));
        // A field the type no longer has is not read.
        assert!(judge(json!({"a": "x", "gone": 1})));
        assert!(judge(json!({"gone": 1, "a": "x"})));
        // A required field missing, or a value of another type, in either
        // order, does not conform.
        assert!(!judge(json!({"b": 1})));
        assert!(!judge(json!({"b": 1, "gone": "x"})));
        assert!(!judge(json!({"a": "x", "b": "one"})));
        assert!(!judge(json!({"b": "one", "a": "x"})));
        assert!(!judge(json!({"c": ["MIDDLE"], "a": "x"})));
        assert!(!judge(json!({"a": "x", "c": "LOW"})));
        // What `record` stores conforms.
        use async_graphql::{Name, Value};
        let input = input::DescriptorInput {
            key: "note".into(),
            fields: [
                ("c", Value::List(vec![Value::Enum(Name::new("LOW"))])),
                ("a", Value::String("y".into())),
            ]
            .into_iter()
            .map(|(k, v)| (Name::new(k), v))
            .collect(),
        };
        assert!(catalog.conforms(&catalog.record(input).unwrap()));
    }

    #[test]
    fn the_stored_form_is_the_type_beside_the_fields() {
        let d = Descriptor::new("StatusPost", json!({"text": "hi"}));
        let stored = rmp_serde::to_vec_named(&d).unwrap();
        let back: Descriptor = rmp_serde::from_slice(&stored).unwrap();
        assert_eq!(back, d);
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"type": "StatusPost", "text": "hi"})
        );
        let bson = bson::to_document(&d).unwrap();
        assert_eq!(bson::from_document::<Descriptor>(bson).unwrap(), d);
    }
}
