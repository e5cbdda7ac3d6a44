//! A value of the wrong type is the client's mistake, wherever it is
//! written: every scalar, enum and input type the query and mutation roots
//! take is given a number, a boolean, an object, a list and a string where
//! it expects another, in the document and in a variable. Each is refused
//! before anything runs: `BAD_USER_INPUT` naming what was expected, and,
//! under `application/graphql-response+json`, 400 without `data`. The
//! schema is read by introspection, so a type added later is walked too.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::common::{Backend, TestServer};

const INTROSPECTION: &str = "{ __schema { queryType { name } mutationType { name } \
    types { kind name isOneOf inputFields { name defaultValue type { ...T } } \
    enumValues { name } fields { name type { ...T } args { name defaultValue type { ...T } } } } } } \
    fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name \
    ofType { kind name } } } } }";

/// A type as a field or an input names it: `[ID!]!`.
#[derive(Clone, Debug)]
enum Ty {
    NonNull(Box<Ty>),
    List(Box<Ty>),
    Named(String),
}

impl Ty {
    fn read(json: &Value) -> Ty {
        match json["kind"].as_str() {
            Some("NON_NULL") => Ty::NonNull(Box::new(Ty::read(&json["ofType"]))),
            Some("LIST") => Ty::List(Box::new(Ty::read(&json["ofType"]))),
            _ => Ty::Named(json["name"].as_str().expect("a named type").to_owned()),
        }
    }

    fn named(&self) -> &str {
        match self {
            Ty::NonNull(inner) | Ty::List(inner) => inner.named(),
            Ty::Named(name) => name,
        }
    }

    fn is_list(&self) -> bool {
        match self {
            Ty::NonNull(inner) => inner.is_list(),
            Ty::List(_) => true,
            Ty::Named(_) => false,
        }
    }

    fn written(&self) -> String {
        match self {
            Ty::NonNull(inner) => format!("{}!", inner.written()),
            Ty::List(inner) => format!("[{}]", inner.written()),
            Ty::Named(name) => name.clone(),
        }
    }
}

/// An argument or an input field.
#[derive(Clone, Debug)]
struct Input {
    name: String,
    ty: Ty,
    has_default: bool,
}

impl Input {
    fn required(&self) -> bool {
        matches!(self.ty, Ty::NonNull(_)) && !self.has_default
    }
}

struct Type {
    kind: String,
    one_of: bool,
    inputs: Vec<Input>,
    enum_values: Vec<String>,
    fields: Vec<(String, Vec<Input>, Ty)>,
}

struct Schema {
    types: BTreeMap<String, Type>,
    roots: Vec<(&'static str, String)>,
}

fn inputs(json: &Value) -> Vec<Input> {
    json.as_array()
        .map(|list| {
            list.iter()
                .map(|input| Input {
                    name: input["name"].as_str().expect("a name").to_owned(),
                    ty: Ty::read(&input["type"]),
                    has_default: !input["defaultValue"].is_null(),
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Schema {
    fn read(data: &Value) -> Schema {
        let schema = &data["__schema"];
        let mut types = BTreeMap::new();
        for ty in schema["types"].as_array().expect("types") {
            let fields = ty["fields"]
                .as_array()
                .map(|fields| {
                    fields
                        .iter()
                        .map(|f| {
                            let name = f["name"].as_str().expect("a name").to_owned();
                            (name, inputs(&f["args"]), Ty::read(&f["type"]))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let enum_values = ty["enumValues"]
                .as_array()
                .map(|values| {
                    values
                        .iter()
                        .map(|v| v["name"].as_str().expect("a value").to_owned())
                        .collect()
                })
                .unwrap_or_default();
            types.insert(
                ty["name"].as_str().expect("a name").to_owned(),
                Type {
                    kind: ty["kind"].as_str().expect("a kind").to_owned(),
                    one_of: ty["isOneOf"] == json!(true),
                    inputs: inputs(&ty["inputFields"]),
                    enum_values,
                    fields,
                },
            );
        }
        let mut roots = vec![(
            "query",
            schema["queryType"]["name"]
                .as_str()
                .expect("Query")
                .to_owned(),
        )];
        if let Some(mutation) = schema["mutationType"]["name"].as_str() {
            roots.push(("mutation", mutation.to_owned()));
        }
        Schema { types, roots }
    }

    fn kind(&self, name: &str) -> &str {
        &self.types[name].kind
    }

    /// A valid value of `ty`, as a GraphQL literal.
    fn valid(&self, ty: &Ty) -> String {
        match ty {
            Ty::NonNull(inner) => self.valid(inner),
            Ty::List(inner) => format!("[{}]", self.valid(inner)),
            Ty::Named(name) => match name.as_str() {
                "String" | "ID" => "\"x1\"".to_owned(),
                "Int" => "1".to_owned(),
                "Float" => "1.5".to_owned(),
                "Boolean" => "true".to_owned(),
                "DateTime" => "\"2026-01-01T00:00:00Z\"".to_owned(),
                _ => {
                    let ty = &self.types[name];
                    match ty.kind.as_str() {
                        "ENUM" => ty.enum_values[0].clone(),
                        "INPUT_OBJECT" => {
                            let fields: Vec<String> = if ty.one_of {
                                vec![format!(
                                    "{}: {}",
                                    ty.inputs[0].name,
                                    self.valid(&ty.inputs[0].ty)
                                )]
                            } else {
                                ty.inputs
                                    .iter()
                                    .filter(|f| f.required())
                                    .map(|f| format!("{}: {}", f.name, self.valid(&f.ty)))
                                    .collect()
                            };
                            format!("{{ {} }}", fields.join(", "))
                        }
                        other => panic!("no valid value of {name} ({other})"),
                    }
                }
            },
        }
    }

    /// An input object's literal with `at` (a path of field names in it)
    /// holding `hole`, its other required fields valid.
    fn around(&self, ty: &Ty, at: &[String], hole: &str) -> String {
        let Some((first, rest)) = at.split_first() else {
            return hole.to_owned();
        };
        let object = &self.types[ty.named()];
        let mut fields = Vec::new();
        for field in &object.inputs {
            if field.name == *first {
                fields.push(format!(
                    "{}: {}",
                    field.name,
                    self.around(&field.ty, rest, hole)
                ));
            } else if field.required() && !object.one_of {
                fields.push(format!("{}: {}", field.name, self.valid(&field.ty)));
            }
        }
        let literal = format!("{{ {} }}", fields.join(", "));
        if ty.is_list() {
            format!("[{literal}]")
        } else {
            literal
        }
    }
}

/// Where a type is taken: a root field's argument, and the input fields
/// within it that lead there.
#[derive(Clone, Debug)]
struct Position {
    operation: &'static str,
    field: String,
    argument: Input,
    within: Vec<String>,
    ty: Ty,
}

/// The first position of every named input type, walking each root's
/// fields' arguments and the input objects within them.
fn positions(schema: &Schema) -> BTreeMap<String, Position> {
    fn walk(
        schema: &Schema,
        position: Position,
        seen: &mut BTreeSet<String>,
        out: &mut BTreeMap<String, Position>,
    ) {
        let named = position.ty.named().to_owned();
        out.entry(named.clone()).or_insert_with(|| position.clone());
        if schema.kind(&named) != "INPUT_OBJECT" || !seen.insert(named.clone()) {
            return;
        }
        for field in &schema.types[&named].inputs {
            let mut inner = position.clone();
            inner.within.push(field.name.clone());
            inner.ty = field.ty.clone();
            walk(schema, inner, seen, out);
        }
    }
    let mut out = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (operation, root) in &schema.roots {
        for (field, args, _) in &schema.types[root].fields {
            for argument in args {
                let position = Position {
                    operation,
                    field: field.clone(),
                    argument: argument.clone(),
                    within: Vec::new(),
                    ty: argument.ty.clone(),
                };
                walk(schema, position, &mut seen, &mut out);
            }
        }
    }
    out
}

/// The document asking `position`'s field with `hole` (a variable or a
/// literal) where the type is taken.
fn document(schema: &Schema, position: &Position, hole: &str, variable: bool) -> String {
    let root = schema
        .roots
        .iter()
        .find(|(op, _)| *op == position.operation)
        .map(|(_, name)| name)
        .expect("a root");
    let (_, args, result) = schema.types[root]
        .fields
        .iter()
        .find(|(name, ..)| *name == position.field)
        .expect("the field");
    let mut written = Vec::new();
    for arg in args {
        if arg.name == position.argument.name {
            let value = schema.around(&arg.ty, &position.within, hole);
            written.push(format!("{}: {value}", arg.name));
        } else if arg.required() {
            written.push(format!("{}: {}", arg.name, schema.valid(&arg.ty)));
        }
    }
    let selection = match schema.kind(result.named()) {
        "OBJECT" | "INTERFACE" | "UNION" => " { __typename }",
        _ => "",
    };
    let definition = if variable {
        format!("($v: {})", position.ty.written())
    } else {
        String::new()
    };
    format!(
        "{}{definition} {{ {}({}){selection} }}",
        position.operation,
        position.field,
        written.join(", ")
    )
}

/// The values of the wrong JSON type for `named`, as JSON and as a
/// GraphQL literal: a number, a boolean, an object, a list and a string,
/// each left out where the type takes it.
fn wrong_values(named: &str) -> Vec<(Value, &'static str)> {
    let mut wrong = vec![
        (json!(7.5), "7.5"),
        (json!(true), "true"),
        (json!({ "nope": 1 }), "{ nope: 1 }"),
        (json!(["x"]), "[\"x\"]"),
        (json!("x"), "\"x\""),
    ];
    wrong.retain(|(value, _)| match named {
        "Float" => !value.is_number(),
        "Boolean" => !value.is_boolean(),
        "String" | "ID" => !value.is_string(),
        _ => true,
    });
    wrong
}

#[tokio::test]
async fn every_input_type_refuses_values_of_the_wrong_type_as_the_clients_mistake() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let ann = server.client("acme", "ann");
    let schema = Schema::read(&ann.data(INTROSPECTION, json!({})).await);
    let positions = positions(&schema);
    // Every input object and every scalar the roots take is walked.
    for (name, ty) in &schema.types {
        if ty.kind == "INPUT_OBJECT" && !name.starts_with("__") {
            assert!(positions.contains_key(name), "{name} is taken nowhere");
        }
    }
    for scalar in ["String", "ID", "Int", "Boolean", "DateTime"] {
        assert!(positions.contains_key(scalar), "{scalar} is taken nowhere");
    }

    let http = reqwest::Client::new();
    let mut refused = 0;
    for (named, position) in &positions {
        for (value, literal) in wrong_values(named) {
            // Where a list is taken, a list holding the wrong value.
            let (value, literal) = if position.ty.is_list() {
                (json!([value]), format!("[{literal}]"))
            } else {
                (value, literal.to_owned())
            };
            for (query, variables) in [
                (
                    document(&schema, position, "$v", true),
                    json!({ "v": value }),
                ),
                (document(&schema, position, &literal, false), json!({})),
            ] {
                let response = http
                    .post(format!("{}/graphql", server.base))
                    .header("x-riverfeed-tenant", "acme")
                    .header("x-riverfeed-user", "ann")
                    .header("accept", "application/graphql-response+json")
                    .json(&json!({ "query": query, "variables": variables }))
                    .send()
                    .await
                    .expect("sent");
                let status = response.status().as_u16();
                let body: Value = response.json().await.expect("a JSON body");
                let case = format!("{named}: {query} with {variables}\n{body:#}");
                assert_eq!(status, 400, "{case}");
                assert!(body.get("data").is_none(), "{case}");
                let errors = body["errors"].as_array().expect("errors");
                assert!(!errors.is_empty(), "{case}");
                for error in errors {
                    assert_eq!(error["extensions"]["code"], "BAD_USER_INPUT", "{case}");
                }
                let message = errors[0]["message"].as_str().unwrap_or_default();
                let names_it = message.contains(&format!("\"{named}")) || message.contains(named);
                let last = position.within.last().unwrap_or(&position.argument.name);
                let says_which = message.contains(&format!("\"{last}"))
                    || message.contains(&format!(".{last}\""));
                assert!(names_it || says_which, "no expected type named: {case}");
                if named == "DateTime" {
                    assert!(message.contains("RFC 3339"), "no format given: {case}");
                }
                refused += 1;
            }
        }
    }
    eprintln!(
        "coercion: {refused} values of the wrong type refused, over {} input types",
        positions.len()
    );
    assert!(refused > 100, "only {refused} cases");
    server.stop().await;
}

#[tokio::test]
async fn an_entity_representation_of_no_known_type_is_the_clients_mistake() {
    let (store, dir) = crate::common::store_url(Backend::Embedded).expect("embedded");
    let server = TestServer::start_with(crate::common::Stopped { store, dir }, |store| {
        let mut options = riverfeed::server::ServeOptions::new(store);
        options.federation = Some(Default::default());
        options
    })
    .await;
    let ann = server.client("acme", "ann");
    for (representation, says) in [
        ("{ __typename: \"Applicant\", id: \"a1\" }", "`Applicant`"),
        ("{ id: \"a1\" }", "`__typename`"),
        ("{ __typename: \"User\" }", "`userId`"),
    ] {
        let query =
            format!("{{ _entities(representations: [{representation}]) {{ __typename }} }}");
        let body = ann.post(&query, json!({})).await;
        let error = &body["errors"][0];
        assert_eq!(error["extensions"]["code"], "BAD_USER_INPUT", "{body:#}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{message}");
    }
    server.stop().await;
}
