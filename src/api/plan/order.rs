//! Responses in selection order. async-graphql runs an object's fields side
//! by side and writes each as it finishes, so a field that waits on the
//! store comes after the ones asked after it. The specification orders a
//! response's map as the selection asks (its `CollectFields`), and clients'
//! snapshot tests compare the text; a plan writes in that order already,
//! and what async-graphql answers is put in it here.

use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::{
    Directive, ExecutableDocument, Field, OperationDefinition, OperationType, Selection,
    SelectionSet,
};
use async_graphql::registry::{MetaType, MetaTypeName, Registry};
use async_graphql::{Name, Positioned, Value, Variables};
use async_graphql_value::Value as Written;

use super::compile::{operation, Fragments};

/// Puts the fields of `data`, as async-graphql answered `operation_name` of
/// `document`, in the order the selection asks for them, at every depth.
pub fn in_selection_order(
    registry: &Registry,
    document: &ExecutableDocument,
    operation_name: Option<&str>,
    variables: &Variables,
    data: &mut Value,
) {
    let Some(op) = operation(document, operation_name) else {
        return;
    };
    let root = match op.node.ty {
        OperationType::Query => Some(registry.query_type.as_str()),
        OperationType::Mutation => registry.mutation_type.as_deref(),
        OperationType::Subscription => registry.subscription_type.as_deref(),
    };
    let order = Order::new(registry, &document.fragments, &op.node, variables);
    order.object(&[&op.node.selection_set.node], root, data);
}

/// Puts the fields of `value`, as async-graphql answered `field` (of type
/// `type_name`, in `operation` with `fragments`), in the order its
/// selection asks for them: a subscription's event, which async-graphql
/// answers field by field as the events come.
pub fn field_in_selection_order(
    registry: &Registry,
    fragments: &Fragments,
    operation: &OperationDefinition,
    variables: &Variables,
    (field, type_name): (&Field, &str),
    value: &mut Value,
) {
    let order = Order::new(registry, fragments, operation, variables);
    order.object(&[&field.selection_set.node], Some(type_name), value);
}

struct Order<'a> {
    registry: &'a Registry,
    fragments: &'a Fragments,
    variables: &'a Variables,
    /// The operation's variables' defaults, for one the request leaves out.
    defaults: IndexMap<&'a Name, &'a Value>,
}

/// A response key's occurrences, in the order they are written.
type Keys<'a> = IndexMap<&'a str, Vec<&'a Field>>;

impl<'a> Order<'a> {
    fn new(
        registry: &'a Registry,
        fragments: &'a Fragments,
        op: &'a OperationDefinition,
        variables: &'a Variables,
    ) -> Self {
        let defaults = op
            .variable_definitions
            .iter()
            .filter_map(|v| Some((&v.node.name.node, v.node.default_value.as_ref()?)))
            .map(|(name, value)| (name, &value.node))
            .collect();
        Self {
            registry,
            fragments,
            variables,
            defaults,
        }
    }

    /// Orders `value`, an object (or a list of them) of static type
    /// `type_name` (`None`: not known), as `sets` select its fields.
    fn object(&self, sets: &[&'a SelectionSet], type_name: Option<&str>, value: &mut Value) {
        let fields = match value {
            Value::List(items) => {
                for item in items {
                    self.object(sets, type_name, item);
                }
                return;
            }
            Value::Object(fields) => fields,
            _ => return,
        };
        let meta = type_name.and_then(|name| self.registry.types.get(name));
        // The object's own type, which decides the fragments that apply:
        // the static one when it is an object type, else its `__typename`
        // when asked for, else the first possible type whose selection
        // holds every key answered. Unknown, every fragment counts.
        let concrete = match meta {
            Some(MetaType::Object { name, .. }) => Some(name.as_str()),
            _ => match fields.get("__typename") {
                Some(Value::String(name)) => self
                    .registry
                    .types
                    .get_key_value(name.as_str())
                    .map(|(name, _)| name.as_str()),
                _ => meta
                    .and_then(MetaType::possible_types)
                    .into_iter()
                    .flatten()
                    .map(String::as_str)
                    .find(|candidate| {
                        let mut keys = Keys::new();
                        for set in sets {
                            self.collect(set, Some(candidate), &mut keys);
                        }
                        fields.keys().all(|key| keys.contains_key(key.as_str()))
                    }),
            },
        };
        let mut keys = Keys::new();
        for set in sets {
            self.collect(set, concrete, &mut keys);
        }
        let mut answered = std::mem::take(fields);
        for (key, occurrences) in keys {
            let Some((key, mut child)) = answered.swap_remove_entry(key) else {
                continue;
            };
            let inner: Vec<&SelectionSet> = occurrences
                .iter()
                .map(|field| &field.selection_set.node)
                .filter(|set| !set.items.is_empty())
                .collect();
            if !inner.is_empty() {
                let field_type = concrete
                    .and_then(|name| self.registry.types.get(name))
                    .or(meta)
                    .and_then(|ty| ty.field_by_name(&occurrences[0].name.node))
                    .map(|field| MetaTypeName::concrete_typename(&field.ty));
                self.object(&inner, field_type, &mut child);
            }
            fields.insert(key, child);
        }
        // Nothing is left unless the answer has a key the selection does
        // not: kept, after the rest.
        fields.extend(answered);
    }

    /// The fields `set` asks of an object of type `concrete`, by response
    /// key, fragments expanded, `@skip` / `@include` decided.
    fn collect(&self, set: &'a SelectionSet, concrete: Option<&str>, keys: &mut Keys<'a>) {
        for selection in &set.items {
            if self.skipped(selection.node.directives()) {
                continue;
            }
            match &selection.node {
                Selection::Field(field) => {
                    let key = field.node.response_key().node.as_str();
                    keys.entry(key).or_default().push(&field.node);
                }
                Selection::InlineFragment(inline) => {
                    let on = inline.node.type_condition.as_ref();
                    if on.is_none_or(|on| self.applies(&on.node.on.node, concrete)) {
                        self.collect(&inline.node.selection_set.node, concrete, keys);
                    }
                }
                Selection::FragmentSpread(spread) => {
                    let Some(fragment) = self.fragments.get(&spread.node.fragment_name.node) else {
                        continue;
                    };
                    if self.applies(&fragment.node.type_condition.node.on.node, concrete) {
                        self.collect(&fragment.node.selection_set.node, concrete, keys);
                    }
                }
            }
        }
    }

    /// Whether a fragment on `on` applies to an object of type `concrete`.
    fn applies(&self, on: &str, concrete: Option<&str>) -> bool {
        let Some(concrete) = concrete else {
            return true;
        };
        on == concrete
            || self
                .registry
                .types
                .get(on)
                .is_some_and(|ty| ty.is_possible_type(concrete))
    }

    /// Whether `@skip` / `@include` leave a selection out.
    fn skipped(&self, directives: &[Positioned<Directive>]) -> bool {
        directives.iter().any(|directive| {
            let include = match directive.node.name.node.as_str() {
                "skip" => false,
                "include" => true,
                _ => return false,
            };
            let Some(condition) = directive.node.get_argument("if") else {
                return false;
            };
            let value = match &condition.node {
                Written::Boolean(b) => *b,
                Written::Variable(name) => match self.variables.get(name) {
                    Some(Value::Boolean(b)) => *b,
                    Some(_) => false,
                    None => matches!(self.defaults.get(name).copied(), Some(Value::Boolean(true))),
                },
                _ => false,
            };
            include != value
        })
    }
}

#[cfg(test)]
mod tests {
    use async_graphql::{Object, OutputType, SimpleObject, Union};

    use super::*;

    #[derive(SimpleObject)]
    struct Item {
        a: i32,
        b: i32,
        c: i32,
    }

    #[derive(SimpleObject)]
    struct Other {
        x: i32,
        y: i32,
        z: i32,
    }

    #[derive(Union)]
    enum Thing {
        Item(Item),
        Other(Other),
    }

    struct Root;

    #[Object]
    impl Root {
        async fn item(&self) -> Item {
            Item { a: 1, b: 2, c: 3 }
        }
        async fn items(&self) -> Vec<Item> {
            vec![Item { a: 1, b: 2, c: 3 }]
        }
        async fn n(&self) -> i32 {
            0
        }
        async fn thing(&self) -> Thing {
            Thing::Other(Other { x: 1, y: 2, z: 3 })
        }
    }

    /// The keys of `value`'s objects, depth first, as written.
    fn keys(value: &Value) -> Vec<String> {
        let mut out = Vec::new();
        fn walk(value: &Value, out: &mut Vec<String>) {
            match value {
                Value::Object(fields) => {
                    for (key, value) in fields {
                        out.push(key.to_string());
                        walk(value, out);
                    }
                }
                Value::List(items) => items.iter().for_each(|item| walk(item, out)),
                _ => {}
            }
        }
        walk(value, &mut out);
        out
    }

    /// Orders `written` (fields in any order) as `query` selects them.
    fn ordered(query: &str, variables: Variables, written: Value) -> Vec<String> {
        let mut registry = Registry::default();
        <Root as OutputType>::create_type_info(&mut registry);
        registry.query_type = "Root".to_owned();
        let document = async_graphql::parser::parse_query(query).expect("parses");
        let mut data = written;
        in_selection_order(&registry, &document, None, &variables, &mut data);
        keys(&data)
    }

    fn value(json: serde_json::Value) -> Value {
        Value::from_json(json).expect("a value")
    }

    #[test]
    fn fields_follow_the_selection_through_aliases_fragments_and_lists() {
        let written = value(serde_json::json!({
            "n": 0,
            "items": [{ "c": 3, "b": 2, "a": 1 }],
            "x": { "b": 2, "a": 1 },
        }));
        let query = "query($hide: Boolean = true) { x: item { a ...F } items { ... on Item { c } \
            a b @skip(if: $hide) b } n } fragment F on Item { b }";
        assert_eq!(
            ordered(query, Variables::default(), written),
            ["x", "a", "b", "items", "c", "a", "b", "n"]
        );
    }

    #[test]
    fn a_member_of_an_abstract_type_is_ordered_by_its_own_fragments() {
        // No `__typename`: the type whose selection holds every key.
        let written = value(serde_json::json!({ "thing": { "x": 1, "y": 2, "z": 3 } }));
        let query = "{ thing { ... on Item { x: a y: b } ... on Other { y x z } } }";
        assert_eq!(
            ordered(query, Variables::default(), written),
            ["thing", "y", "x", "z"]
        );
    }
}
