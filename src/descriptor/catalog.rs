//! The catalog: the descriptor types a deployment serves, read from an SDL
//! file (`--descriptors`), and the rules their directives state.
//!
//! A file holds `type … @descriptor { … }` definitions and the enums their
//! fields use. Every rule about a descriptor's fields (which are ids, which
//! are free text, which name the user who did the thing, which ids carry a
//! copied display name, who it notifies) is read from the file here and
//! applied in one place ([`super::input`]), for the built-in types as for
//! an application's own.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, OnceLock};

use async_graphql::parser::Pos;

use crate::model::NoticeReason;

/// The file the built-in types are read from when no `--descriptors` is
/// given.
pub const DEFAULT_SOURCE: &str = include_str!("default.graphql");

/// The member a stored descriptor reads as when the served file no longer
/// describes it (after `--allow-descriptor-changes`).
pub const UNKNOWN: &str = "UnknownDescriptor";

/// A scalar a descriptor field holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scalar {
    String,
    Int,
    Float,
    Boolean,
    DateTime,
    Id,
    /// An enum defined in the file, by name.
    Enum(String),
}

impl Scalar {
    /// The GraphQL name of the scalar or enum.
    pub fn graphql_name(&self) -> &str {
        match self {
            Scalar::String => "String",
            Scalar::Int => "Int",
            Scalar::Float => "Float",
            Scalar::Boolean => "Boolean",
            Scalar::DateTime => "DateTime",
            Scalar::Id => "ID",
            Scalar::Enum(name) => name,
        }
    }

    pub(super) fn is_stringy(&self) -> bool {
        matches!(self, Scalar::String | Scalar::Id)
    }
}

/// One field of a descriptor type and the rules on it.
#[derive(Clone, Debug)]
pub struct FieldDef {
    pub name: String,
    pub description: Option<String>,
    pub scalar: Scalar,
    /// `[T!]`: a list of non-null items.
    pub list: bool,
    /// `T!` (or `[T!]!`).
    pub required: bool,
    /// Held in the one form ids have (`ID`, `@id`, `@ref`, `@doneBy`,
    /// `@slice`).
    pub id: bool,
    /// `@text`: free text (up to 10 KiB), rather than a name or label.
    pub text: bool,
    /// `@nonEmpty`: must hold something besides whitespace.
    pub non_empty: bool,
    /// `@doneBy`: names the user who did the thing.
    pub done_by: bool,
    /// `@slice`: the action is in the slice of each id it holds.
    pub slice: bool,
    /// `@ref(name:)`: the field holding the display name copied beside
    /// this id.
    pub ref_name: Option<String>,
    /// `@range(min:, max:)`.
    pub range: Option<(f64, f64)>,
    /// `@default(value:)`: what an input that leaves the field out gets,
    /// as stored.
    pub default: Option<serde_json::Value>,
}

impl FieldDef {
    /// The field's GraphQL type, e.g. `[String!]!`.
    pub fn graphql_type(&self) -> String {
        let base = self.scalar.graphql_name();
        let inner = if self.list {
            format!("[{base}!]")
        } else {
            base.to_owned()
        };
        if self.required {
            format!("{inner}!")
        } else {
            inner
        }
    }
}

/// Who an action of a type notifies (`@notify`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyRule {
    pub reason: NoticeReason,
    pub to: NotifyTo,
    /// The field whose id the notice is about.
    pub ref_field: Option<String>,
}

/// The users a [`NotifyRule`] reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotifyTo {
    /// The user the field names.
    User(String),
    /// The users assigned to the id the field holds.
    AssignedTo(String),
}

/// A descriptor type.
#[derive(Clone, Debug)]
pub struct TypeDef {
    pub name: String,
    /// Where the file defines it.
    pub pos: Pos,
    pub description: Option<String>,
    /// Its field in `DescriptorInput` (`applicationRating`), and the prefix
    /// of its fields in error messages.
    pub input_key: String,
    pub fields: Vec<FieldDef>,
    pub notify: Vec<NotifyRule>,
}

impl TypeDef {
    pub fn field(&self, name: &str) -> Option<&FieldDef> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The input object's name (`ApplicationRatingInput`).
    pub fn input_name(&self) -> String {
        format!("{}Input", self.name)
    }
}

/// An enum defined in the file.
#[derive(Clone, Debug)]
pub struct EnumDef {
    pub name: String,
    pub pos: Pos,
    pub description: Option<String>,
    pub values: Vec<(String, Option<String>)>,
}

/// The descriptor types a deployment serves.
#[derive(Debug)]
pub struct Catalog {
    types: Vec<TypeDef>,
    by_name: HashMap<String, usize>,
    by_input_key: HashMap<String, usize>,
    enums: Vec<EnumDef>,
    /// Every `(id field, name field)` pair any type has, for renames.
    named_refs: Vec<(String, String)>,
}

/// A file that cannot be served, with where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for CatalogError {}

pub(super) fn err<T>(pos: Pos, message: impl Into<String>) -> Result<T, CatalogError> {
    Err(CatalogError {
        line: pos.line,
        column: pos.column,
        message: message.into(),
    })
}

impl Catalog {
    /// The built-in types (`default.graphql`).
    pub fn builtin() -> Arc<Catalog> {
        static BUILTIN: OnceLock<Arc<Catalog>> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                Arc::new(Catalog::parse(DEFAULT_SOURCE).expect("the built-in descriptors parse"))
            })
            .clone()
    }

    /// These types with a file's own beside them (`--descriptors`): a
    /// file's type, input field or enum may not take a name these hold.
    pub fn beside(&self, file: Catalog) -> Result<Catalog, CatalogError> {
        let replace = "pass --descriptors-replace to serve the file's types alone";
        for ty in &file.types {
            if self.by_name.contains_key(&ty.name) || self.enum_named(&ty.name) {
                return err(
                    ty.pos,
                    format!(
                        "`{}` is a built-in name: rename the type, or {replace}",
                        ty.name
                    ),
                );
            }
            if self.by_input_key.contains_key(&ty.input_key) {
                return err(
                    ty.pos,
                    format!(
                        "`{}` would take the built-in input field `{}`: rename the type, or {replace}",
                        ty.name, ty.input_key
                    ),
                );
            }
        }
        for e in &file.enums {
            if self.by_name.contains_key(&e.name) || self.enum_named(&e.name) {
                return err(
                    e.pos,
                    format!(
                        "`{}` is a built-in name: rename the enum, or {replace}",
                        e.name
                    ),
                );
            }
        }
        let types = self.types.iter().cloned().chain(file.types).collect();
        let enums = self.enums.iter().cloned().chain(file.enums).collect();
        Ok(Catalog::new(types, enums))
    }

    /// A selection of every field of every type served, one inline
    /// fragment a line (`... on StatusPost { text }`): what a client that
    /// shows any action selects inside `descriptor`.
    pub fn selection(&self) -> String {
        self.types
            .iter()
            .map(|ty| {
                let fields: Vec<&str> = ty.fields.iter().map(|f| f.name.as_str()).collect();
                format!("... on {} {{ {} }}", ty.name, fields.join(" "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn enum_named(&self, name: &str) -> bool {
        self.enums.iter().any(|e| e.name == name)
    }

    pub(super) fn new(types: Vec<TypeDef>, enums: Vec<EnumDef>) -> Catalog {
        let by_name = types
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let by_input_key = types
            .iter()
            .enumerate()
            .map(|(i, t)| (t.input_key.clone(), i))
            .collect();
        let mut named_refs: Vec<(String, String)> = types
            .iter()
            .flat_map(|t| t.fields.iter())
            .filter_map(|f| f.ref_name.clone().map(|n| (f.name.clone(), n)))
            .collect();
        named_refs.sort();
        named_refs.dedup();
        Catalog {
            types,
            by_name,
            by_input_key,
            enums,
            named_refs,
        }
    }

    /// Refuses a type or enum whose name (or whose input object's name)
    /// the rest of the schema, or the file itself, already holds.
    pub fn check_names(
        &self,
        schema: &std::collections::HashSet<String>,
    ) -> Result<(), CatalogError> {
        let defined: Vec<(&str, Pos)> = self
            .types
            .iter()
            .map(|t| (t.name.as_str(), t.pos))
            .chain(self.enums.iter().map(|e| (e.name.as_str(), e.pos)))
            .collect();
        for (name, pos) in &defined {
            if schema.contains(*name) {
                return err(
                    *pos,
                    format!("{name} is a type of Riverfeed's schema; pick another name"),
                );
            }
        }
        for ty in &self.types {
            let input = ty.input_name();
            if schema.contains(&input) || defined.iter().any(|(n, _)| *n == input) {
                return err(
                    ty.pos,
                    format!(
                        "{}'s input object would be named {input}, which is taken",
                        ty.name
                    ),
                );
            }
        }
        Ok(())
    }

    pub fn types(&self) -> &[TypeDef] {
        &self.types
    }

    pub fn enums(&self) -> &[EnumDef] {
        &self.enums
    }

    pub fn get(&self, name: &str) -> Option<&TypeDef> {
        self.by_name.get(name).map(|&i| &self.types[i])
    }

    pub fn by_input_key(&self, key: &str) -> Option<&TypeDef> {
        self.by_input_key.get(key).map(|&i| &self.types[i])
    }

    /// Every `(id field, name field)` pair any type has: what a rename
    /// rewrites.
    pub fn named_refs(&self) -> &[(String, String)] {
        &self.named_refs
    }

    /// What stored data depends on, by type and field: each field's
    /// GraphQL type and whether it has a default. A deployment keeps the
    /// one it last started with, to judge the next file against.
    pub fn signature(&self) -> Signature {
        Signature(
            self.types
                .iter()
                .map(|t| {
                    let fields = t
                        .fields
                        .iter()
                        .map(|f| (f.name.clone(), f.graphql_type()))
                        .collect();
                    (t.name.clone(), fields)
                })
                .collect(),
        )
    }
}

/// Types and their fields' GraphQL types, as [`Catalog::signature`] gives
/// them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Signature(pub BTreeMap<String, BTreeMap<String, String>>);
