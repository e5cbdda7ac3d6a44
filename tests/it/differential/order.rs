//! The order GraphQL answers fields in: the spec's CollectFields, walked
//! over a document and an answer together. Every answer is held to it,
//! whichever executor wrote it.

use async_graphql::parser::types::{
    Directive, ExecutableDocument, OperationDefinition, Selection, SelectionSet,
};
use async_graphql::Positioned;
use serde_json::Value;

use super::json::Json;
use super::schema::{named, Schema};

struct Walk<'a> {
    schema: &'a Schema,
    doc: &'a ExecutableDocument,
    op: &'a OperationDefinition,
    variables: &'a Value,
}

/// Where `data`'s members first leave the order the operation selects
/// them in; `None` when they keep it throughout.
pub fn misordered(
    schema: &Schema,
    doc: &ExecutableDocument,
    op: &OperationDefinition,
    variables: &Value,
    data: &Json,
) -> Option<String> {
    let walk = Walk {
        schema,
        doc,
        op,
        variables,
    };
    walk.object("Query", &[&op.selection_set.node], data, ".data")
}

impl Walk<'_> {
    fn included(&self, directives: &[Positioned<Directive>]) -> bool {
        directives.iter().all(|d| {
            let name = d.node.name.node.as_str();
            if name != "skip" && name != "include" {
                return true;
            }
            let value = d
                .node
                .get_argument("if")
                .map(|v| {
                    v.node
                        .clone()
                        .into_const_with(|var| {
                            let value = self.variables.get(var.as_str()).cloned().or_else(|| {
                                self.op
                                    .variable_definitions
                                    .iter()
                                    .find(|d| d.node.name.node == var)
                                    .and_then(|d| d.node.default_value.as_ref())
                                    .map(|v| v.node.clone().into_json().unwrap_or(Value::Null))
                            });
                            Ok::<_, ()>(
                                async_graphql::Value::from_json(value.unwrap_or(Value::Null))
                                    .unwrap_or(async_graphql::Value::Null),
                            )
                        })
                        .ok()
                        == Some(async_graphql::Value::Boolean(true))
                })
                .unwrap_or(false);
            (name == "include") == value
        })
    }

    fn applies(&self, condition: Option<&str>, object: &str) -> bool {
        condition.is_none_or(|c| self.schema.possible(c).iter().any(|p| p == object))
    }

    /// The response keys of `sets` for an `object`, in order, each with its
    /// field's name and every selection set it carries.
    fn collect<'s>(
        &'s self,
        object: &str,
        sets: &[&'s SelectionSet],
        visited: &mut Vec<String>,
        out: &mut Vec<(String, String, Vec<&'s SelectionSet>)>,
    ) {
        for set in sets {
            for item in &set.items {
                match &item.node {
                    Selection::Field(f) => {
                        if !self.included(&f.node.directives) {
                            continue;
                        }
                        let key = f.node.response_key().node.to_string();
                        let sub = &f.node.selection_set.node;
                        match out.iter_mut().find(|(k, _, _)| *k == key) {
                            Some((_, _, subs)) => subs.push(sub),
                            None => out.push((key, f.node.name.node.to_string(), vec![sub])),
                        }
                    }
                    Selection::FragmentSpread(s) => {
                        let name = s.node.fragment_name.node.to_string();
                        if !self.included(&s.node.directives) || visited.contains(&name) {
                            continue;
                        }
                        visited.push(name.clone());
                        let Some(fragment) = self.doc.fragments.get(name.as_str()) else {
                            continue;
                        };
                        let on = fragment.node.type_condition.node.on.node.as_str();
                        if self.applies(Some(on), object) {
                            let set = &fragment.node.selection_set.node;
                            self.collect(object, &[set], visited, out);
                        }
                    }
                    Selection::InlineFragment(i) => {
                        if !self.included(&i.node.directives) {
                            continue;
                        }
                        let on = i
                            .node
                            .type_condition
                            .as_ref()
                            .map(|t| t.node.on.node.as_str());
                        if self.applies(on, object) {
                            self.collect(object, &[&i.node.selection_set.node], visited, out);
                        }
                    }
                }
            }
        }
    }

    fn object(&self, ty: &str, sets: &[&SelectionSet], value: &Json, path: &str) -> Option<String> {
        let Json::Object(members) = value else {
            return None;
        };
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        let typename = value.get("__typename").and_then(|t| match t {
            Json::String(s) => Some(s.clone()),
            _ => None,
        });
        let candidates = match typename {
            Some(t) => vec![t],
            None => self.schema.possible(ty),
        };
        let mut last = None;
        for object in candidates {
            let mut fields = Vec::new();
            self.collect(&object, sets, &mut Vec::new(), &mut fields);
            // A field that failed may be left out (async-graphql drops
            // one): the members there are must come in selection order,
            // and be selected; which are there is the comparison's.
            let present: Vec<_> = fields
                .iter()
                .filter(|(k, _, _)| keys.contains(&k.as_str()))
                .collect();
            let expected: Vec<&str> = present.iter().map(|(k, _, _)| k.as_str()).collect();
            if expected != keys {
                let selected: Vec<&str> = fields.iter().map(|(k, _, _)| k.as_str()).collect();
                last = Some(format!(
                    "at {path}: members {keys:?}, selected as {selected:?}"
                ));
                continue;
            }
            // Without `__typename`, another possible type may select the
            // same keys at this level and others below (an action's
            // `actor` and a notification's in one list of nodes): the
            // answer keeps the order if one of them holds all the way.
            let below =
                present
                    .into_iter()
                    .zip(members)
                    .find_map(|((key, name, subs), (_, member))| {
                        let field = self
                            .schema
                            .fields(&object)
                            .iter()
                            .find(|f| &f.name == name)?;
                        self.value(named(&field.ty), subs, member, &format!("{path}.{key}"))
                    });
            match below {
                None => return None,
                Some(wrong) => last = Some(wrong),
            }
        }
        last
    }

    fn value(&self, ty: &str, sets: &[&SelectionSet], value: &Json, path: &str) -> Option<String> {
        match value {
            Json::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, item)| self.value(ty, sets, item, &format!("{path}[{i}]"))),
            Json::Object(_) if self.schema.is_composite(ty) => self.object(ty, sets, value, path),
            _ => None,
        }
    }
}

#[test]
fn selection_order_with_fragments_aliases_and_directives() {
    let schema = Schema::served();
    let text = "query($b: Boolean!) { viewer { userId ...F k: name @include(if: $b) } \
                node(id: \"x\") { ... on User { name } id } } \
                fragment F on User { name userId }";
    let doc = async_graphql::parser::parse_query(text).expect("a document");
    let op = match &doc.operations {
        async_graphql::parser::types::DocumentOperations::Single(op) => op.node.clone(),
        _ => unreachable!(),
    };
    let check = |data: &str, b: bool| {
        let data = Json::parse(data.as_bytes()).expect("JSON");
        misordered(&schema, &doc, &op, &serde_json::json!({ "b": b }), &data)
    };
    let user = r#""node":{"name":"A","id":"VXNlcjph"}"#;
    let node = format!(r#"{{"viewer":{{"userId":"a","name":"A","k":"A"}},{user}}}"#);
    assert_eq!(check(&node, true), None);
    let skipped = format!(r#"{{"viewer":{{"userId":"a","name":"A"}},{user}}}"#);
    assert_eq!(check(&skipped, false), None);
    let swapped = format!(r#"{{"viewer":{{"name":"A","userId":"a","k":"A"}},{user}}}"#);
    assert!(check(&swapped, true)
        .expect("out of order")
        .starts_with("at .data.viewer"));
    // A field left out (it failed) is the comparison's to see; one not
    // selected is out of order here.
    let missing = r#"{"viewer":{"userId":"a","name":"A","k":"A"}}"#;
    assert_eq!(check(missing, true), None);
    let extra = format!(r#"{{"viewer":{{"userId":"a","name":"A","k":"A"}},"x":1,{user}}}"#);
    assert!(check(&extra, true)
        .expect("a key not selected")
        .starts_with("at .data:"));
    let comment = r#"{"viewer":{"userId":"a","name":"A","k":"A"},"node":{"id":"Q29t"}}"#;
    assert_eq!(check(comment, true), None, "a Node that is not a User");

    // Two types of a list of nodes select one key at the top and others
    // below it: each element is held to the type it can be.
    let text = "query { nodes(ids: []) { id ... on Action { actor { userId } } \
                ... on Notification { actor { name userId } } } }";
    let doc = async_graphql::parser::parse_query(text).expect("a document");
    let op = match &doc.operations {
        async_graphql::parser::types::DocumentOperations::Single(op) => op.node.clone(),
        _ => unreachable!(),
    };
    let check = |data: &str| {
        let data = Json::parse(data.as_bytes()).expect("JSON");
        misordered(&schema, &doc, &op, &serde_json::json!({}), &data)
    };
    let mixed = r#"{"nodes":[{"id":"a","actor":{"userId":"u"}},{"id":"n","actor":{"name":"N","userId":"u"}}]}"#;
    assert_eq!(check(mixed), None);
    let swapped = r#"{"nodes":[{"id":"n","actor":{"userId":"u","name":"N"}}]}"#;
    assert!(check(swapped)
        .expect("out of order for either type")
        .starts_with("at .data.nodes[0]"));
}
