//! The served schema, read from its SDL (`riverfeed::api::sdl` with the
//! built-in descriptor file): types, fields, arguments and who implements
//! what, so the generator and the variable filler follow the schema as it
//! is, new fields included.

use std::collections::BTreeMap;

use async_graphql::parser::types::{BaseType, Type, TypeKind, TypeSystemDefinition};

pub struct Arg {
    pub name: String,
    pub ty: Type,
    pub has_default: bool,
}

pub struct Field {
    pub name: String,
    pub args: Vec<Arg>,
    pub ty: Type,
}

pub enum Kind {
    Object {
        fields: Vec<Field>,
        interfaces: Vec<String>,
    },
    Interface {
        fields: Vec<Field>,
    },
    Union {
        members: Vec<String>,
    },
    Enum {
        values: Vec<String>,
    },
    Scalar,
    Input {
        fields: Vec<Arg>,
    },
}

pub struct Schema {
    pub types: BTreeMap<String, Kind>,
}

/// The named type at the bottom of `ty`'s lists.
pub fn named(ty: &Type) -> &str {
    match &ty.base {
        BaseType::Named(name) => name.as_str(),
        BaseType::List(inner) => named(inner),
    }
}

impl Schema {
    pub fn served() -> Schema {
        let sdl = riverfeed::api::sdl(&riverfeed::descriptor::Catalog::builtin());
        let document = async_graphql::parser::parse_schema(&sdl).expect("the served SDL parses");
        let mut types = BTreeMap::new();
        let args = |list: &[async_graphql::Positioned<
            async_graphql::parser::types::InputValueDefinition,
        >]| {
            list.iter()
                .map(|a| Arg {
                    name: a.node.name.node.to_string(),
                    ty: a.node.ty.node.clone(),
                    has_default: a.node.default_value.is_some(),
                })
                .collect::<Vec<_>>()
        };
        let fields = |list: &[async_graphql::Positioned<
            async_graphql::parser::types::FieldDefinition,
        >]| {
            list.iter()
                .map(|f| Field {
                    name: f.node.name.node.to_string(),
                    args: args(&f.node.arguments),
                    ty: f.node.ty.node.clone(),
                })
                .collect::<Vec<_>>()
        };
        for definition in &document.definitions {
            let TypeSystemDefinition::Type(t) = definition else {
                continue;
            };
            let kind = match &t.node.kind {
                TypeKind::Object(o) => Kind::Object {
                    fields: fields(&o.fields),
                    interfaces: o.implements.iter().map(|i| i.node.to_string()).collect(),
                },
                TypeKind::Interface(i) => Kind::Interface {
                    fields: fields(&i.fields),
                },
                TypeKind::Union(u) => Kind::Union {
                    members: u.members.iter().map(|m| m.node.to_string()).collect(),
                },
                TypeKind::Enum(e) => Kind::Enum {
                    values: e
                        .values
                        .iter()
                        .map(|v| v.node.value.node.to_string())
                        .collect(),
                },
                TypeKind::Scalar => Kind::Scalar,
                TypeKind::InputObject(i) => Kind::Input {
                    fields: args(&i.fields),
                },
            };
            types.insert(t.node.name.node.to_string(), kind);
        }
        for scalar in ["Int", "Float", "String", "Boolean", "ID"] {
            types.insert(scalar.to_owned(), Kind::Scalar);
        }
        Schema { types }
    }

    pub fn kind(&self, name: &str) -> &Kind {
        self.types
            .get(name)
            .unwrap_or_else(|| panic!("no type {name} in the served schema"))
    }

    pub fn fields(&self, name: &str) -> &[Field] {
        match self.kind(name) {
            Kind::Object { fields, .. } | Kind::Interface { fields } => fields,
            _ => &[],
        }
    }

    /// Whether selections of `name` need a selection set.
    pub fn is_composite(&self, name: &str) -> bool {
        matches!(
            self.kind(name),
            Kind::Object { .. } | Kind::Interface { .. } | Kind::Union { .. }
        )
    }

    /// The object types a value of `name` may be.
    pub fn possible(&self, name: &str) -> Vec<String> {
        match self.kind(name) {
            Kind::Object { .. } => vec![name.to_owned()],
            Kind::Union { members } => members.clone(),
            Kind::Interface { .. } => self
                .types
                .iter()
                .filter(|(_, k)| {
                    matches!(k, Kind::Object { interfaces, .. } if interfaces.iter().any(|i| i == name))
                })
                .map(|(n, _)| n.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Interfaces and unions an object type belongs to.
    pub fn abstracts_of(&self, object: &str) -> Vec<String> {
        self.types
            .iter()
            .filter(|(n, k)| {
                matches!(k, Kind::Interface { .. } | Kind::Union { .. })
                    && self.possible(n).iter().any(|p| p == object)
            })
            .map(|(n, _)| n.clone())
            .collect()
    }
}
