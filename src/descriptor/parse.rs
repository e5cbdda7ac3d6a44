//! Reading a descriptor file: its types, enums and directives, each error
//! with the line and column it is at.

use std::collections::HashMap;

use async_graphql::parser::types::{
    BaseType, ConstDirective, FieldDefinition, Type, TypeDefinition, TypeKind, TypeSystemDefinition,
};
use async_graphql::parser::{parse_schema, Pos, Positioned};
use async_graphql::{Name, Value as ConstValue};

use super::catalog::{
    err, Catalog, CatalogError, EnumDef, FieldDef, NotifyRule, NotifyTo, Scalar, TypeDef, UNKNOWN,
};
use crate::model::limits::MAX_GRAPHQL_NAME_BYTES;
use crate::model::NoticeReason;

/// Names the file may not define: the members the schema always has.
const RESERVED: &[&str] = &[UNKNOWN, "Descriptor", "DescriptorInput"];

/// Directives the file may declare for editors' sake; their uses are read
/// here, their definitions ignored.
const DIRECTIVES: &[&str] = &[
    "descriptor",
    "notify",
    "ref",
    "text",
    "nonEmpty",
    "id",
    "doneBy",
    "slice",
    "range",
    "default",
];

impl Catalog {
    /// Reads a descriptor file.
    pub fn parse(source: &str) -> Result<Catalog, CatalogError> {
        let document = parse_schema(source).map_err(|e| {
            let pos = e.positions().next().unwrap_or(Pos { line: 1, column: 1 });
            let message = e.to_string();
            let message = message
                .lines()
                .rev()
                .find(|l| l.trim_start().starts_with('='))
                .map(|l| l.trim_start().trim_start_matches('=').trim().to_owned())
                .unwrap_or(message);
            CatalogError {
                line: pos.line,
                column: pos.column,
                message: format!("syntax error: {message}"),
            }
        })?;
        let mut objects = Vec::new();
        let mut enums = Vec::new();
        for definition in document.definitions {
            match definition {
                TypeSystemDefinition::Type(ty) => {
                    let pos = ty.pos;
                    let ty = ty.node;
                    if ty.extend {
                        return err(pos, "`extend` is not supported in a descriptor file");
                    }
                    check_length(&ty.name)?;
                    match &ty.kind {
                        TypeKind::Object(object) => {
                            for field in &object.fields {
                                check_length(&field.node.name)?;
                            }
                            objects.push((pos, ty))
                        }
                        TypeKind::Enum(e) => {
                            for value in &e.values {
                                check_length(&value.node.value)?;
                            }
                            enums.push((pos, ty))
                        }
                        _ => {
                            return err(
                                pos,
                                format!(
                                    "{}: a descriptor file defines `type … @descriptor` and `enum` only",
                                    ty.name.node
                                ),
                            )
                        }
                    }
                }
                TypeSystemDefinition::Directive(d) => {
                    if !DIRECTIVES.contains(&d.node.name.node.as_str()) {
                        return err(
                            d.pos,
                            format!("unknown directive @{} declared", d.node.name.node),
                        );
                    }
                }
                TypeSystemDefinition::Schema(s) => {
                    return err(s.pos, "a descriptor file has no `schema` definition");
                }
            }
        }
        let mut seen: HashMap<String, Pos> = HashMap::new();
        let mut check_name = |name: &Positioned<Name>| -> Result<(), CatalogError> {
            if RESERVED.contains(&name.node.as_str()) || name.node.starts_with("__") {
                return err(
                    name.pos,
                    format!("{} is a name the schema keeps", name.node),
                );
            }
            if let Some(first) = seen.insert(name.node.to_string(), name.pos) {
                return err(
                    name.pos,
                    format!(
                        "{} is defined twice (first at {}:{})",
                        name.node, first.line, first.column
                    ),
                );
            }
            Ok(())
        };
        let mut enum_defs = Vec::new();
        for (pos, ty) in &enums {
            check_name(&ty.name)?;
            if let Some(d) = ty.directives.first() {
                return err(
                    d.pos,
                    format!("@{} does not apply to an enum", d.node.name.node),
                );
            }
            let TypeKind::Enum(e) = &ty.kind else {
                unreachable!()
            };
            if e.values.is_empty() {
                return err(*pos, format!("enum {} has no values", ty.name.node));
            }
            enum_defs.push(EnumDef {
                name: ty.name.node.to_string(),
                pos: ty.name.pos,
                description: ty.description.as_ref().map(|d| d.node.clone()),
                values: e
                    .values
                    .iter()
                    .map(|v| {
                        (
                            v.node.value.node.to_string(),
                            v.node.description.as_ref().map(|d| d.node.clone()),
                        )
                    })
                    .collect(),
            });
        }
        let mut types = Vec::new();
        for (pos, ty) in &objects {
            check_name(&ty.name)?;
            types.push(read_type(*pos, ty, &enum_defs)?);
        }
        if types.is_empty() {
            return err(
                Pos { line: 1, column: 1 },
                "the file defines no `type … @descriptor`",
            );
        }
        Ok(Catalog::new(types, enum_defs))
    }
}

/// Longest name a descriptor file may define: its type's input is named
/// with `Input` added, and documents may write no name longer than
/// [`MAX_GRAPHQL_NAME_BYTES`].
const MAX_DESCRIPTOR_NAME: usize = MAX_GRAPHQL_NAME_BYTES - "Input".len();

/// Refuses a name no document could write.
fn check_length(name: &Positioned<Name>) -> Result<(), CatalogError> {
    let len = name.node.len();
    if len > MAX_DESCRIPTOR_NAME {
        return err(
            name.pos,
            format!("a name is at most {MAX_DESCRIPTOR_NAME} bytes; this one is {len}"),
        );
    }
    Ok(())
}

fn description(d: &Option<Positioned<String>>) -> Option<String> {
    d.as_ref().map(|d| d.node.clone())
}

fn lower_first(name: &str) -> String {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn read_type(pos: Pos, ty: &TypeDefinition, enums: &[EnumDef]) -> Result<TypeDef, CatalogError> {
    let name = ty.name.node.to_string();
    let TypeKind::Object(object) = &ty.kind else {
        unreachable!()
    };
    if let Some(i) = object.implements.first() {
        return err(i.pos, "descriptor types implement no interfaces");
    }
    if !ty
        .directives
        .iter()
        .any(|d| d.node.name.node == "descriptor")
    {
        return err(
            pos,
            format!("type {name} needs @descriptor (a descriptor file defines action types)"),
        );
    }
    if object.fields.is_empty() {
        return err(pos, format!("type {name} has no fields"));
    }
    let mut fields: Vec<FieldDef> = Vec::new();
    for field in &object.fields {
        let def = read_field(&name, field, enums)?;
        if fields.iter().any(|f| f.name == def.name) {
            return err(field.pos, format!("{name}.{} is defined twice", def.name));
        }
        fields.push(def);
    }
    // What a field's directives name must be in the type.
    for (field, def) in object.fields.iter().zip(&fields) {
        if let Some(target) = &def.ref_name {
            match fields.iter().find(|f| &f.name == target) {
                Some(f) if f.scalar == Scalar::String && !f.list => {}
                Some(_) => {
                    return err(
                        field.pos,
                        format!(
                            "{name}.{}: @ref(name: \"{target}\") must name a String field",
                            def.name
                        ),
                    )
                }
                None => {
                    return err(
                        field.pos,
                        format!(
                            "{name}.{}: @ref(name: \"{target}\") names no field of {name}",
                            def.name
                        ),
                    )
                }
            }
        }
    }
    let mut notify = Vec::new();
    for directive in &ty.directives {
        match directive.node.name.node.as_str() {
            "descriptor" => no_arguments(directive)?,
            "notify" => notify.push(read_notify(&name, directive, &fields)?),
            other => {
                return err(
                    directive.pos,
                    format!(
                        "@{other} does not apply to a type (types take @descriptor and @notify)"
                    ),
                )
            }
        }
    }
    Ok(TypeDef {
        pos: ty.name.pos,
        input_key: lower_first(&name),
        name,
        description: description(&ty.description),
        fields,
        notify,
    })
}

fn no_arguments(d: &Positioned<ConstDirective>) -> Result<(), CatalogError> {
    match d.node.arguments.first() {
        Some((arg, _)) => err(
            arg.pos,
            format!("@{} takes no argument {}", d.node.name.node, arg.node),
        ),
        None => Ok(()),
    }
}

/// The directive's arguments by name, refusing any it does not take.
fn arguments<'a>(
    d: &'a Positioned<ConstDirective>,
    allowed: &[&str],
) -> Result<HashMap<&'a str, &'a Positioned<ConstValue>>, CatalogError> {
    let mut out = HashMap::new();
    for (name, value) in &d.node.arguments {
        if !allowed.contains(&name.node.as_str()) {
            return err(
                name.pos,
                format!(
                    "@{} takes {}, not {}",
                    d.node.name.node,
                    allowed.join(", "),
                    name.node
                ),
            );
        }
        out.insert(name.node.as_str(), value);
    }
    Ok(out)
}

fn string_arg(
    d: &Positioned<ConstDirective>,
    args: &HashMap<&str, &Positioned<ConstValue>>,
    name: &str,
) -> Result<Option<String>, CatalogError> {
    match args.get(name) {
        None => Ok(None),
        Some(v) => match &v.node {
            ConstValue::String(s) => Ok(Some(s.clone())),
            _ => err(
                v.pos,
                format!("@{}({name}:) takes a string", d.node.name.node),
            ),
        },
    }
}

fn read_notify(
    type_name: &str,
    d: &Positioned<ConstDirective>,
    fields: &[FieldDef],
) -> Result<NotifyRule, CatalogError> {
    let args = arguments(d, &["user", "assignedTo", "reason", "ref"])?;
    let id_field = |arg: &str| -> Result<Option<String>, CatalogError> {
        let Some(field) = string_arg(d, &args, arg)? else {
            return Ok(None);
        };
        match fields.iter().find(|f| f.name == field) {
            Some(f) if f.id && !f.list => Ok(Some(field)),
            Some(_) => err(
                args[arg].pos,
                format!("@notify({arg}: \"{field}\"): {type_name}.{field} must hold one id (ID, @id or @ref)"),
            ),
            None => err(
                args[arg].pos,
                format!("@notify({arg}: \"{field}\") names no field of {type_name}"),
            ),
        }
    };
    let to = match (id_field("user")?, id_field("assignedTo")?) {
        (Some(f), None) => NotifyTo::User(f),
        (None, Some(f)) => NotifyTo::AssignedTo(f),
        _ => return err(d.pos, "@notify takes exactly one of user: or assignedTo:"),
    };
    let ref_field = id_field("ref")?;
    let reason = match args.get("reason") {
        Some(v) => {
            let given = match &v.node {
                ConstValue::Enum(n) => n.to_string(),
                ConstValue::String(s) => s.clone(),
                _ => String::new(),
            };
            match NoticeReason::ALL
                .into_iter()
                .find(|r| r.key().eq_ignore_ascii_case(&given))
            {
                Some(r) => r,
                None => {
                    let known: Vec<String> = NoticeReason::ALL
                        .iter()
                        .map(|r| r.key().to_uppercase())
                        .collect();
                    return err(
                        v.pos,
                        format!("@notify(reason:) is one of {}", known.join(", ")),
                    );
                }
            }
        }
        None => return err(d.pos, "@notify needs reason:"),
    };
    Ok(NotifyRule {
        reason,
        to,
        ref_field,
    })
}

fn read_scalar(
    ty: &Positioned<Type>,
    enums: &[EnumDef],
) -> Result<(Scalar, bool, bool), CatalogError> {
    let required = !ty.node.nullable;
    let (name, list) = match &ty.node.base {
        BaseType::Named(name) => (name, false),
        BaseType::List(inner) => match (&inner.base, inner.nullable) {
            (BaseType::Named(name), false) => (name, true),
            (BaseType::Named(_), true) => {
                return err(ty.pos, "list items must be non-null: write [T!]");
            }
            (BaseType::List(_), _) => return err(ty.pos, "lists of lists are not supported"),
        },
    };
    let scalar = match name.as_str() {
        "String" => Scalar::String,
        "Int" => Scalar::Int,
        "Float" => Scalar::Float,
        "Boolean" => Scalar::Boolean,
        "DateTime" => Scalar::DateTime,
        "ID" => Scalar::Id,
        other if enums.iter().any(|e| e.name == other) => Scalar::Enum(other.to_owned()),
        other => {
            return err(
                ty.pos,
                format!(
                    "unknown type {other}: fields are String, Int, Float, Boolean, DateTime, ID, an enum of the file, or lists of them"
                ),
            )
        }
    };
    Ok((scalar, list, required))
}

fn read_field(
    type_name: &str,
    field: &Positioned<FieldDefinition>,
    enums: &[EnumDef],
) -> Result<FieldDef, CatalogError> {
    let f = &field.node;
    let name = f.name.node.to_string();
    let at = format!("{type_name}.{name}");
    if name == "type" || name.starts_with("__") {
        return err(
            f.name.pos,
            format!("{at}: `{name}` is a name the stored form keeps"),
        );
    }
    if let Some(arg) = f.arguments.first() {
        return err(
            arg.pos,
            format!("{at}: descriptor fields take no arguments"),
        );
    }
    let (scalar, list, required) = read_scalar(&f.ty, enums)?;
    let mut def = FieldDef {
        id: scalar == Scalar::Id,
        name,
        description: description(&f.description),
        scalar,
        list,
        required,
        text: false,
        non_empty: false,
        done_by: false,
        slice: false,
        ref_name: None,
        range: None,
        default: None,
    };
    let mut default = None;
    for d in &f.directives {
        let directive = d.node.name.node.as_str();
        let needs = |ok: bool, what: &str| -> Result<(), CatalogError> {
            if ok {
                Ok(())
            } else {
                err(d.pos, format!("{at}: @{directive} applies to {what}"))
            }
        };
        match directive {
            "text" | "nonEmpty" => {
                no_arguments(d)?;
                needs(def.scalar == Scalar::String, "String fields")?;
                if directive == "text" {
                    def.text = true;
                } else {
                    def.non_empty = true;
                }
            }
            "id" | "slice" => {
                no_arguments(d)?;
                needs(def.scalar.is_stringy(), "String and ID fields")?;
                def.id = true;
                def.slice |= directive == "slice";
            }
            "doneBy" => {
                no_arguments(d)?;
                needs(
                    def.scalar.is_stringy() && !def.list && def.required,
                    "one required String or ID",
                )?;
                def.id = true;
                def.done_by = true;
            }
            "ref" => {
                needs(def.scalar.is_stringy() && !def.list, "one String or ID")?;
                let args = arguments(d, &["name"])?;
                let target = string_arg(d, &args, "name")?;
                if target.is_none() {
                    return err(
                        d.pos,
                        format!("{at}: @ref needs name: (the field holding its display name)"),
                    );
                }
                def.id = true;
                def.ref_name = target;
            }
            "range" => {
                needs(
                    matches!(def.scalar, Scalar::Int | Scalar::Float),
                    "Int and Float fields",
                )?;
                let args = arguments(d, &["min", "max"])?;
                let number = |n: &str| -> Result<f64, CatalogError> {
                    match args.get(n).map(|v| &v.node) {
                        Some(ConstValue::Number(x)) => Ok(x.as_f64().unwrap_or(f64::NAN)),
                        Some(_) => err(args[n].pos, format!("{at}: @range({n}:) takes a number")),
                        None => Ok(if n == "min" {
                            f64::NEG_INFINITY
                        } else {
                            f64::INFINITY
                        }),
                    }
                };
                let (min, max) = (number("min")?, number("max")?);
                if min.is_nan() || max.is_nan() || min > max {
                    return err(d.pos, format!("{at}: @range needs min ≤ max"));
                }
                def.range = Some((min, max));
            }
            "default" => {
                let args = arguments(d, &["value"])?;
                let Some(value) = args.get("value") else {
                    return err(d.pos, format!("{at}: @default needs value:"));
                };
                default = Some(*value);
            }
            "descriptor" | "notify" => {
                return err(d.pos, format!("{at}: @{directive} applies to a type"))
            }
            other => return err(d.pos, format!("{at}: unknown directive @{other}")),
        }
    }
    // A default obeys the field's rules, read above in any order.
    if let Some(value) = default {
        if !def.required {
            return err(value.pos, format!("{at}: @default applies to a required field (an optional one is null when left out)"));
        }
        def.default = Some(
            super::input::coerce_default(&def, &value.node, enums)
                .or_else(|m| err(value.pos, format!("{at}: @default: {m}")))?,
        );
    }
    Ok(def)
}
