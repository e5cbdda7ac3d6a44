//! Input values checked with the rest of validation, where async-graphql's
//! own rules let them through and only running the operation would refuse
//! them, as a field's error without the client's code: a `DateTime` that is
//! not one, an input object given something else than an object, a variable
//! of a non-null type given null or nothing. Refused here, each is a request
//! error (nothing runs): `BAD_USER_INPUT` naming the type expected and its
//! format, and 400 under `application/graphql-response+json`.

use std::sync::{Arc, Mutex};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextParseQuery, NextPrepareRequest,
    NextValidation,
};
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, OperationDefinition, OperationType, Selection,
    SelectionSet,
};
use async_graphql::registry::{MetaType, MetaTypeName, Registry};
use async_graphql::{Pos, Request, ServerError, ServerResult, ValidationResult, Variables};
use async_graphql_value::ConstValue;

use super::error::BAD_USER_INPUT;

/// How to write a `DateTime`, said where one is refused.
pub const DATETIME_FORMAT: &str = "a DateTime is an RFC 3339 date and time with its offset, \
     such as \"2026-11-28T09:30:00Z\" or \"2026-11-28T10:30:00.250+01:00\"";

/// What a value of one of the schema's own scalars must be, said where one
/// is refused; `None` for the scalars async-graphql checks itself.
fn scalar_format(scalar: &str) -> Option<&'static str> {
    match scalar {
        "DateTime" => Some(DATETIME_FORMAT),
        _ => None,
    }
}

/// Whether `value` is a value of `scalar` (one [`scalar_format`] names),
/// read as the resolvers will read it.
fn fits(scalar: &str, value: &ConstValue) -> bool {
    match (scalar, value) {
        ("DateTime", ConstValue::String(s)) => s.parse::<chrono::DateTime<chrono::Utc>>().is_ok(),
        _ => false,
    }
}

/// The extension that checks them.
pub struct InputValues;

impl ExtensionFactory for InputValues {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(InputValuesCheck::default())
    }
}

/// One per request.
#[derive(Default)]
struct InputValuesCheck {
    /// The operation the request names, to check its variables only.
    operation: Mutex<Option<String>>,
    /// What the document's check found, answered with validation's.
    refused: Mutex<Vec<ServerError>>,
}

#[async_trait::async_trait]
impl Extension for InputValuesCheck {
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        *self.operation.lock().unwrap_or_else(|e| e.into_inner()) = request.operation_name.clone();
        next.run(ctx, request).await
    }

    /// Checked where the document is at hand; answered with validation.
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next.run(ctx, query, variables).await?;
        let operation = self
            .operation
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let refused = check(
            &ctx.schema_env.registry,
            &document,
            operation.as_deref(),
            variables,
        );
        *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = refused;
        Ok(document)
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let refused = std::mem::take(&mut *self.refused.lock().unwrap_or_else(|e| e.into_inner()));
        match next.run(ctx).await {
            Ok(result) if refused.is_empty() => Ok(result),
            Ok(_) => Err(refused),
            Err(mut errors) => {
                errors.extend(refused);
                Err(errors)
            }
        }
    }
}

/// What async-graphql's validation lets through and running would refuse,
/// in every operation and fragment of `document`: their literals, and the
/// variables of the operation `operation_name` as `variables` give them.
pub fn check(
    registry: &Registry,
    document: &ExecutableDocument,
    operation_name: Option<&str>,
    variables: &Variables,
) -> Vec<ServerError> {
    let selected = match (&document.operations, operation_name) {
        (DocumentOperations::Single(op), None) => Some(op),
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next(),
        _ => None,
    };
    let mut walk = Walk {
        registry,
        variables: None,
        refused: Vec::new(),
    };
    for (_, op) in document.operations.iter() {
        let chosen = selected.is_some_and(|s| std::ptr::eq(s, op));
        walk.variables = chosen.then_some(variables);
        walk.operation(&op.node);
    }
    // A fragment's variables are those of the operations that spread it.
    walk.variables = Some(variables);
    for fragment in document.fragments.values() {
        let on = fragment.node.type_condition.node.on.node.as_str();
        walk.set(&fragment.node.selection_set.node, Some(on));
    }
    walk.refused
}

struct Walk<'a> {
    registry: &'a Registry,
    /// The request's variables where they apply (the operation it runs and
    /// the fragments), `None` in another operation.
    variables: Option<&'a Variables>,
    refused: Vec<ServerError>,
}

impl<'a> Walk<'a> {
    fn operation(&mut self, op: &OperationDefinition) {
        for definition in &op.variable_definitions {
            let definition = &definition.node;
            let name = &definition.name.node;
            let ty = definition.var_type.node.to_string();
            if let Some(default) = &definition.default_value {
                let mut path = vec![format!("${name}")];
                self.value(&ty, &default.node, default.pos, &mut path, "the default of");
            }
            let Some(variables) = self.variables else {
                continue;
            };
            if definition.var_type.node.nullable {
                continue;
            }
            let given = variables.get(name);
            let missing = match given {
                None => definition.default_value.is_none(),
                Some(value) => matches!(value, ConstValue::Null),
            };
            if missing {
                let said = if given.is_none() {
                    "was not given"
                } else {
                    "is null"
                };
                self.refuse(
                    definition.name.pos,
                    format!("Variable \"${name}\" of required type \"{ty}\" {said}"),
                );
            }
        }
        let root = match op.ty {
            OperationType::Query => Some(self.registry.query_type.as_str()),
            OperationType::Mutation => self.registry.mutation_type.as_deref(),
            OperationType::Subscription => self.registry.subscription_type.as_deref(),
        };
        self.set(&op.selection_set.node, root);
    }

    /// The arguments of the fields `set` selects on an object of type
    /// `parent`, at every depth; spread fragments are checked where written.
    fn set(&mut self, set: &SelectionSet, parent: Option<&str>) {
        let registry = self.registry;
        for selection in &set.items {
            match &selection.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    let meta = parent
                        .and_then(|p| registry.types.get(p))
                        .and_then(|ty| ty.field_by_name(&field.name.node));
                    let Some(meta) = meta else {
                        // Unknown to the schema: validation says so.
                        continue;
                    };
                    for (name, value) in &field.arguments {
                        let Some(argument) = meta.args.get(name.node.as_str()) else {
                            continue;
                        };
                        let value = self.substituted(&value.node);
                        let mut path = vec![name.node.to_string()];
                        self.value(&argument.ty, &value, name.pos, &mut path, "argument");
                    }
                    let ty = MetaTypeName::concrete_typename(&meta.ty);
                    self.set(&field.selection_set.node, Some(ty));
                }
                Selection::InlineFragment(inline) => {
                    let on = inline.node.type_condition.as_ref();
                    let on = on.map(|on| on.node.on.node.as_str()).or(parent);
                    self.set(&inline.node.selection_set.node, on);
                }
                Selection::FragmentSpread(_) => {}
            }
        }
    }

    /// A written value with the variables that apply put in (null where
    /// none is given: nulls are async-graphql's to check).
    fn substituted(&self, value: &async_graphql_value::Value) -> ConstValue {
        let variables = self.variables;
        value
            .clone()
            .into_const_with(|name| {
                Ok::<_, std::convert::Infallible>(
                    variables
                        .and_then(|v| v.get(&name))
                        .cloned()
                        .unwrap_or(ConstValue::Null),
                )
            })
            .unwrap_or(ConstValue::Null)
    }

    /// Checks `value` as a value of type `ty`, at `path` (an argument and
    /// the input fields and list positions within it).
    fn value(&mut self, ty: &str, value: &ConstValue, pos: Pos, path: &mut Vec<String>, of: &str) {
        if matches!(value, ConstValue::Null) {
            return;
        }
        let registry = self.registry;
        match MetaTypeName::create(ty) {
            MetaTypeName::NonNull(inner) => self.value(inner, value, pos, path, of),
            MetaTypeName::List(inner) => match value {
                ConstValue::List(items) => {
                    for (i, item) in items.iter().enumerate() {
                        path.push(i.to_string());
                        self.value(inner, item, pos, path, of);
                        path.pop();
                    }
                }
                // One value where a list is asked is a list of one.
                _ => self.value(inner, value, pos, path, of),
            },
            MetaTypeName::Named(name) => match registry.types.get(name) {
                Some(MetaType::Scalar { .. }) => {
                    if let Some(format) = scalar_format(name) {
                        if !fits(name, value) {
                            self.refuse(
                                pos,
                                format!(
                                    "Invalid value for {of} \"{}\", expected type \"{name}\" \
                                     but found {}: {format}",
                                    path.join("."),
                                    found(value)
                                ),
                            );
                        }
                    }
                }
                Some(MetaType::InputObject { input_fields, .. }) => match value {
                    ConstValue::Object(fields) => {
                        for (key, field_value) in fields {
                            let Some(field) = input_fields.get(key.as_str()) else {
                                continue;
                            };
                            path.push(key.to_string());
                            self.value(&field.ty, field_value, pos, path, of);
                            path.pop();
                        }
                    }
                    _ => self.refuse(
                        pos,
                        format!(
                            "Invalid value for {of} \"{}\", expected type \"{name}\" \
                             (an input object, written {{ field: value }}) but found {}",
                            path.join("."),
                            found(value)
                        ),
                    ),
                },
                _ => {}
            },
        }
    }

    fn refuse(&mut self, pos: Pos, message: String) {
        let mut err = ServerError::new(message, Some(pos));
        err.extensions
            .get_or_insert_with(Default::default)
            .set("code", BAD_USER_INPUT);
        self.refused.push(err);
    }
}

/// What a refused value is, shortly.
fn found(value: &ConstValue) -> String {
    match value {
        ConstValue::Null => "null".to_owned(),
        ConstValue::Number(n) => format!("the number {n}"),
        ConstValue::Boolean(b) => format!("the boolean {b}"),
        ConstValue::String(s) if s.chars().count() <= 40 => format!("the string {s:?}"),
        ConstValue::String(_) => "a string".to_owned(),
        ConstValue::Enum(e) => format!("the enum value {e}"),
        ConstValue::Binary(_) => "binary data".to_owned(),
        ConstValue::List(_) => "a list".to_owned(),
        ConstValue::Object(_) => "an object".to_owned(),
    }
}
