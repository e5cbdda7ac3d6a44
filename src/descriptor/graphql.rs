//! The catalog's types in the served schema: the `Descriptor` union with an
//! object per type (and `UnknownDescriptor`), and the `@oneOf`
//! `DescriptorInput` with an input object per type.
//!
//! The rest of the schema is Rust types; these two are registered by hand
//! from the catalog the schema is built with ([`with_catalog`]), so a new
//! file needs a restart, not a rebuild. A descriptor's fields are leaves, so
//! it resolves its whole selection at once from the stored fields.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use async_graphql::indexmap::{IndexMap, IndexSet};
use async_graphql::parser::types::{Field, Selection, SelectionSet};
use async_graphql::registry::{
    Deprecation, MetaEnumValue, MetaField, MetaInputValue, MetaType, MetaTypeId, Registry,
};
use async_graphql::{
    ContextSelectionSet, InputType, InputValueError, InputValueResult, Name, OutputType,
    Positioned, ServerError, ServerResult, Value,
};
use serde_json::Value as Json;

use super::catalog::{Catalog, FieldDef, Scalar, TypeDef, UNKNOWN};
use super::input::DescriptorInput;
use super::Descriptor;

thread_local! {
    static BUILDING: RefCell<Option<Arc<Catalog>>> = const { RefCell::new(None) };
}

/// Runs `build` (a schema build) with `catalog` as the types the
/// `Descriptor` union and `DescriptorInput` register. Without it they
/// register the built-in types.
pub fn with_catalog<R>(catalog: &Arc<Catalog>, build: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BUILDING.with(|b| b.borrow_mut().take());
        }
    }
    BUILDING.with(|b| *b.borrow_mut() = Some(catalog.clone()));
    let _reset = Reset;
    build()
}

fn building() -> Arc<Catalog> {
    BUILDING
        .with(|b| b.borrow().clone())
        .unwrap_or_else(Catalog::builtin)
}

pub(crate) fn meta_field(name: &str, description: Option<String>, ty: String) -> MetaField {
    MetaField {
        name: name.to_owned(),
        description,
        args: IndexMap::new(),
        ty,
        deprecation: Deprecation::NoDeprecated,
        cache_control: Default::default(),
        external: false,
        requires: None,
        provides: None,
        visible: None,
        shareable: false,
        inaccessible: false,
        tags: Vec::new(),
        override_from: None,
        compute_complexity: None,
        directive_invocations: Vec::new(),
        requires_scopes: Vec::new(),
    }
}

/// An object type for the schema's registry.
pub(crate) fn object(
    name: &str,
    description: Option<String>,
    fields: IndexMap<String, MetaField>,
) -> MetaType {
    MetaType::Object {
        name: name.to_owned(),
        description,
        fields,
        cache_control: Default::default(),
        extends: false,
        shareable: false,
        resolvable: true,
        keys: None,
        visible: None,
        inaccessible: false,
        interface_object: false,
        tags: Vec::new(),
        is_subscription: false,
        rust_typename: None,
        directive_invocations: Vec::new(),
        requires_scopes: Vec::new(),
    }
}

pub(crate) fn input_value(name: &str, description: Option<String>, ty: String) -> MetaInputValue {
    MetaInputValue {
        name: name.to_owned(),
        description,
        ty,
        deprecation: Deprecation::NoDeprecated,
        default_value: None,
        visible: None,
        inaccessible: false,
        tags: Vec::new(),
        is_secret: false,
        directive_invocations: Vec::new(),
    }
}

fn input_object(
    name: &str,
    description: Option<String>,
    input_fields: IndexMap<String, MetaInputValue>,
    oneof: bool,
) -> MetaType {
    MetaType::InputObject {
        name: name.to_owned(),
        description,
        input_fields,
        visible: None,
        inaccessible: false,
        tags: Vec::new(),
        rust_typename: None,
        oneof,
        directive_invocations: Vec::new(),
    }
}

/// The scalars and the file's enums the fields use.
fn register_leaves(registry: &mut Registry, catalog: &Catalog) {
    <String as OutputType>::create_type_info(registry);
    for ty in catalog.types() {
        for f in &ty.fields {
            match &f.scalar {
                Scalar::Int => drop(<i32 as OutputType>::create_type_info(registry)),
                Scalar::Float => drop(<f64 as OutputType>::create_type_info(registry)),
                Scalar::Boolean => drop(<bool as OutputType>::create_type_info(registry)),
                Scalar::Id => drop(<async_graphql::ID as OutputType>::create_type_info(
                    registry,
                )),
                Scalar::DateTime => {
                    drop(<chrono::DateTime<chrono::Utc> as OutputType>::create_type_info(registry))
                }
                Scalar::String | Scalar::Enum(_) => {}
            }
        }
    }
    for e in catalog.enums() {
        let enum_values = e
            .values
            .iter()
            .map(|(value, description)| {
                let meta = MetaEnumValue {
                    name: value.clone(),
                    description: description.clone(),
                    deprecation: Deprecation::NoDeprecated,
                    visible: None,
                    inaccessible: false,
                    tags: Vec::new(),
                    directive_invocations: Vec::new(),
                };
                (value.clone(), meta)
            })
            .collect();
        registry
            .types
            .entry(e.name.clone())
            .or_insert(MetaType::Enum {
                name: e.name.clone(),
                description: e.description.clone(),
                enum_values,
                visible: None,
                inaccessible: false,
                tags: Vec::new(),
                rust_typename: None,
                directive_invocations: Vec::new(),
                requires_scopes: Vec::new(),
            });
    }
}

impl OutputType for Descriptor {
    fn type_name() -> Cow<'static, str> {
        Cow::Borrowed("Descriptor")
    }

    fn create_type_info(registry: &mut Registry) -> String {
        registry.create_output_type::<Self, _>(MetaTypeId::Union, |registry| {
            let catalog = building();
            register_leaves(registry, &catalog);
            let mut possible_types = IndexSet::new();
            for ty in catalog.types() {
                let fields = ty
                    .fields
                    .iter()
                    .map(|f| {
                        let meta = meta_field(&f.name, f.description.clone(), f.graphql_type());
                        (f.name.clone(), meta)
                    })
                    .collect();
                registry.types.insert(
                    ty.name.clone(),
                    object(&ty.name, ty.description.clone(), fields),
                );
                possible_types.insert(ty.name.clone());
            }
            let unknown = [
                ("type", "The stored type name."),
                ("json", "The stored fields, as a JSON object."),
            ]
            .into_iter()
            .map(|(name, description)| {
                let meta = meta_field(name, Some(description.into()), "String!".into());
                (name.to_owned(), meta)
            })
            .collect();
            registry.types.insert(
                UNKNOWN.to_owned(),
                object(
                    UNKNOWN,
                    Some(
                        "A stored descriptor the served file no longer describes (its type \
                         was removed or a field's type changed, under \
                         `--allow-descriptor-changes`)."
                            .into(),
                    ),
                    unknown,
                ),
            );
            possible_types.insert(UNKNOWN.to_owned());
            MetaType::Union {
                name: "Descriptor".into(),
                description: Some(
                    "What happened: one of the descriptor types the served file defines \
                     (`type` names it when stored)."
                        .into(),
                ),
                possible_types,
                visible: None,
                inaccessible: false,
                tags: Vec::new(),
                rust_typename: Some(std::any::type_name::<Self>()),
                directive_invocations: Vec::new(),
            }
        })
    }

    async fn resolve(
        &self,
        ctx: &ContextSelectionSet<'_>,
        _field: &Positioned<Field>,
    ) -> ServerResult<Value> {
        let builtin;
        let catalog: &Catalog = match ctx.data_opt::<Arc<Catalog>>() {
            Some(c) => c,
            None => {
                builtin = Catalog::builtin();
                &builtin
            }
        };
        let mut out = IndexMap::new();
        let member = Member::of(catalog, self);
        let value = |name: &str| member.value(name);
        select(ctx, ctx.item, member.name(), &value, &mut out)?;
        Ok(Value::Object(out))
    }
}

/// A descriptor as a member of the `Descriptor` union: its type, judged
/// once (a stored descriptor is checked against the served catalog, which
/// reads every field), or `UnknownDescriptor` when the catalog no longer
/// describes it. Both executors write a descriptor's fields through it.
pub(crate) struct Member<'c, 'd> {
    ty: Option<&'c TypeDef>,
    d: &'d Descriptor,
}

impl<'c, 'd> Member<'c, 'd> {
    pub(crate) fn of(catalog: &'c Catalog, d: &'d Descriptor) -> Self {
        Member {
            ty: catalog.type_of(d),
            d,
        }
    }

    /// The union member's name.
    pub(crate) fn name(&self) -> &'c str {
        self.ty.map_or(UNKNOWN, |ty| ty.name.as_str())
    }

    /// The value of its field `name`.
    pub(crate) fn value(&self, name: &str) -> Value {
        let d = self.d;
        match self.ty {
            Some(ty) => field_value(ty, d, name),
            None => match name {
                "type" => Value::String(d.type_name().to_owned()),
                "json" => Value::String(serde_json::to_string(d.fields()).unwrap_or_default()),
                _ => Value::Null,
            },
        }
    }
}

/// A field's value for the response: stored, else its default, else null.
fn field_value(ty: &TypeDef, d: &Descriptor, name: &str) -> Value {
    let Some(def) = ty.field(name) else {
        return Value::Null;
    };
    match d
        .field(name)
        .filter(|v| !v.is_null())
        .or(def.default.as_ref())
    {
        Some(v) => to_value(def, v),
        None => Value::Null,
    }
}

fn to_value(def: &FieldDef, v: &Json) -> Value {
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) if def.scalar == Scalar::Float => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Json::Number(n) => Value::Number(n.clone()),
        Json::String(s) => match &def.scalar {
            Scalar::Enum(_) => Value::Enum(Name::new(s)),
            _ => Value::String(s.clone()),
        },
        Json::Array(items) => Value::List(items.iter().map(|i| to_value(def, i)).collect()),
        Json::Object(_) => Value::Null,
    }
}

/// Writes the fields a selection asks of a member into `out`, following
/// the fragments that apply to it.
fn select<'a>(
    ctx: &ContextSelectionSet<'a>,
    set: &'a Positioned<SelectionSet>,
    type_name: &str,
    value: &dyn Fn(&str) -> Value,
    out: &mut IndexMap<Name, Value>,
) -> ServerResult<()> {
    let applies = |on: &str| on == type_name || on == "Descriptor";
    selected_fields(ctx, &set.node, &applies, &mut |field| {
        let name = field.node.name.node.as_str();
        let v = if name == "__typename" {
            Value::String(type_name.to_owned())
        } else {
            value(name)
        };
        out.insert(field.node.response_key().node.clone(), v);
    })
}

/// Calls `each` with every field a selection asks of an object, following
/// the fragments whose type condition `applies` to it.
pub(crate) fn selected_fields<'a>(
    ctx: &ContextSelectionSet<'a>,
    set: &'a SelectionSet,
    applies: &dyn Fn(&str) -> bool,
    each: &mut dyn FnMut(&'a Positioned<Field>),
) -> ServerResult<()> {
    for selection in &set.items {
        match &selection.node {
            Selection::Field(field) => each(field),
            Selection::FragmentSpread(spread) => {
                let name = &spread.node.fragment_name.node;
                let fragment = ctx.query_env.fragments.get(name).ok_or_else(|| {
                    ServerError::new(format!(r#"Unknown fragment "{name}"."#), Some(spread.pos))
                })?;
                if applies(&fragment.node.type_condition.node.on.node) {
                    selected_fields(ctx, &fragment.node.selection_set.node, applies, each)?;
                }
            }
            Selection::InlineFragment(fragment) => {
                let condition = fragment.node.type_condition.as_ref();
                if condition.is_none_or(|c| applies(&c.node.on.node)) {
                    selected_fields(ctx, &fragment.node.selection_set.node, applies, each)?;
                }
            }
        }
    }
    Ok(())
}

impl InputType for DescriptorInput {
    type RawValueType = Self;

    fn type_name() -> Cow<'static, str> {
        Cow::Borrowed("DescriptorInput")
    }

    fn create_type_info(registry: &mut Registry) -> String {
        registry.create_input_type::<Self, _>(MetaTypeId::InputObject, |registry| {
            let catalog = building();
            register_leaves(registry, &catalog);
            let mut members = IndexMap::new();
            for ty in catalog.types() {
                let input_fields = ty
                    .fields
                    .iter()
                    .map(|f| {
                        let mut meta =
                            input_value(&f.name, f.description.clone(), f.graphql_type());
                        meta.default_value = f.default.as_ref().map(|d| literal(f, d));
                        (f.name.clone(), meta)
                    })
                    .collect();
                registry.types.insert(
                    ty.input_name(),
                    input_object(
                        &ty.input_name(),
                        ty.description.clone(),
                        input_fields,
                        false,
                    ),
                );
                members.insert(
                    ty.input_key.clone(),
                    input_value(&ty.input_key, None, ty.input_name()),
                );
            }
            input_object(
                "DescriptorInput",
                Some("Exactly one descriptor to record.".into()),
                members,
                true,
            )
        })
    }

    fn parse(value: Option<Value>) -> InputValueResult<Self> {
        let Some(Value::Object(object)) = value else {
            return Err(InputValueError::expected_type(value.unwrap_or_default()));
        };
        let mut given = object.into_iter().filter(|(_, v)| *v != Value::Null);
        match (given.next(), given.next()) {
            (Some((key, Value::Object(fields))), None) => Ok(DescriptorInput {
                key: key.to_string(),
                fields,
            }),
            (Some(_), None) => Err(InputValueError::custom("a descriptor is an input object")),
            _ => Err(InputValueError::custom(
                "DescriptorInput takes exactly one descriptor",
            )),
        }
    }

    fn to_value(&self) -> Value {
        let mut out = IndexMap::new();
        out.insert(Name::new(&self.key), Value::Object(self.fields.clone()));
        Value::Object(out)
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        Some(self)
    }
}

/// A default as a GraphQL literal (`""`, `[]`, `LOW`).
fn literal(def: &FieldDef, v: &Json) -> String {
    to_value(def, v).to_string()
}
