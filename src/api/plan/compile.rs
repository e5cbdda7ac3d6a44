//! From a validated document to a plan, the ground every kind of field
//! compiles on: the fields each concrete type is asked for, fragments and inline fragments flattened, fields of one
//! response key merged, `@skip` / `@include` decided, arguments bound to
//! literals or variables. A document with anything a plan does not cover
//! (a root field, a field or a type not planned, a mutation…) gets no plan
//! and runs on async-graphql.
//!
//! Fields are collected as async-graphql collects them: in the order their
//! response keys first appear, a key's sub-selections concatenated, and
//! `@skip` / `@include` judged by the request's variables as sent (a
//! variable's default does not count for them, as it does not there).

use std::cell::Cell;
use std::collections::HashMap;

use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::{
    Directive, DocumentOperations, ExecutableDocument, Field, FragmentDefinition,
    OperationDefinition, Selection, SelectionSet, VariableDefinition,
};
use async_graphql::{Name, Pos, Positioned, Variables};
use async_graphql_value::{ConstValue, Value};

use crate::descriptor::catalog::Catalog;

/// One field of a response: its key, where it is written (for errors) and
/// what it holds.
#[derive(Debug)]
pub struct Planned<K> {
    pub key: Name,
    pub pos: Pos,
    pub kind: K,
}

/// The fields asked of one object, in response order.
pub type Fields<K> = Vec<Planned<K>>;

/// What a plan's writers need besides its fields.
#[derive(Debug, Default)]
pub struct Scope {
    /// Whether rows below a page's (an action's comments) are read before
    /// it is written.
    pub below: bool,
    /// The operation's variables, for their defaults.
    pub variables: Vec<VariableDefinition>,
}

/// An argument: not given, written in the document, or a variable's.
#[derive(Clone, Debug)]
pub enum Arg {
    Absent,
    Literal(ConstValue),
    Variable(Name),
}

/// The interfaces and unions each planned type belongs to, besides itself.
fn belongs_to(type_name: &str) -> &'static [&'static str] {
    match type_name {
        "FeedItem" | "Action" | "User" | "Comment" | "NotificationGroup" | "Notification" => {
            &["Node"]
        }
        _ => &[],
    }
}

/// The variables a document's `@skip` / `@include` read, in a fixed order:
/// their values choose the plan.
pub fn directive_variables(document: &ExecutableDocument) -> Vec<Name> {
    fn walk(set: &SelectionSet, out: &mut Vec<Name>) {
        for selection in &set.items {
            for directive in selection.node.directives() {
                if let Some(Value::Variable(name)) =
                    directive.node.get_argument("if").map(|v| &v.node)
                {
                    if !out.contains(name) {
                        out.push(name.clone());
                    }
                }
            }
            match &selection.node {
                Selection::Field(field) => walk(&field.node.selection_set.node, out),
                Selection::InlineFragment(inline) => walk(&inline.node.selection_set.node, out),
                Selection::FragmentSpread(_) => {}
            }
        }
    }
    let mut out = Vec::new();
    match &document.operations {
        DocumentOperations::Single(op) => walk(&op.node.selection_set.node, &mut out),
        DocumentOperations::Multiple(ops) => {
            for op in ops.values() {
                walk(&op.node.selection_set.node, &mut out);
            }
        }
    }
    for fragment in document.fragments.values() {
        walk(&fragment.node.selection_set.node, &mut out);
    }
    out.sort();
    out
}

/// The values of `names` in `variables` as `@skip` / `@include` read them:
/// true only for a boolean `true`.
pub fn directive_values(names: &[Name], variables: &Variables) -> Vec<bool> {
    names
        .iter()
        .map(|n| matches!(variables.get(n), Some(ConstValue::Boolean(true))))
        .collect()
}

/// The operation async-graphql would run for `operation_name`.
pub fn operation<'d>(
    document: &'d ExecutableDocument,
    operation_name: Option<&str>,
) -> Option<&'d Positioned<OperationDefinition>> {
    match (&document.operations, operation_name) {
        (DocumentOperations::Single(op), None) => Some(op),
        (DocumentOperations::Single(_), Some(_)) => None,
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next(),
        (DocumentOperations::Multiple(_), None) => None,
    }
}

/// A document's fragments, by name.
pub(super) type Fragments = HashMap<Name, Positioned<FragmentDefinition>>;

pub(super) struct Compiler<'a> {
    fragments: &'a Fragments,
    names: &'a [Name],
    values: &'a [bool],
    catalog: &'a Catalog,
    below: Cell<bool>,
}

/// The occurrences of one response key.
pub(super) type Occurrences<'a> = Vec<&'a Positioned<Field>>;

impl<'a> Compiler<'a> {
    /// A compiler of selections with `fragments`, its `@skip` / `@include`
    /// reading the variables `names` as having `values`.
    pub(super) fn new(
        fragments: &'a Fragments,
        names: &'a [Name],
        values: &'a [bool],
        catalog: &'a Catalog,
    ) -> Self {
        Self {
            fragments,
            names,
            values,
            catalog,
            below: Cell::new(false),
        }
    }

    /// Whether what was compiled reads rows below a page's.
    pub(super) fn reads_rows_below(&self) -> bool {
        self.below.get()
    }

    /// The descriptor types the compiled fields may meet.
    pub(super) fn catalog(&self) -> &'a Catalog {
        self.catalog
    }

    /// Notes that the plan reads rows below a page's.
    pub(super) fn reads_below(&self) {
        self.below.set(true);
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
                Value::Boolean(b) => *b,
                Value::Variable(name) => self
                    .names
                    .iter()
                    .position(|n| n == name)
                    .is_some_and(|i| self.values[i]),
                _ => false,
            };
            include != value
        })
    }

    /// The fields `sets` ask of an object of `type_name`, by response key.
    fn collect(
        &self,
        sets: &[&'a SelectionSet],
        type_name: &str,
    ) -> IndexMap<Name, Occurrences<'a>> {
        let applies = |on: &str| on == type_name || belongs_to(type_name).contains(&on);
        self.collect_with(sets, &applies)
    }

    /// Plans the fields of an object of `type_name` with `field`, which
    /// plans one response key from its occurrences (`None`: not covered).
    pub(super) fn object<K>(
        &self,
        sets: &[&'a SelectionSet],
        type_name: &str,
        field: impl Fn(&Self, &str, &Occurrences<'a>) -> Option<K>,
    ) -> Option<Fields<K>> {
        self.collect(sets, type_name)
            .into_iter()
            .map(|(key, occurrences)| {
                let first = occurrences[0];
                let name = first.node.name.node.as_str();
                let Some(kind) = field(self, name, &occurrences) else {
                    tracing::debug!(r#type = type_name, field = name, "no plan covers the field");
                    return None;
                };
                Some(Planned {
                    key,
                    pos: first.pos,
                    kind,
                })
            })
            .collect()
    }

    /// The sub-selections of a key's occurrences, concatenated.
    pub(super) fn subsets(occurrences: &Occurrences<'a>) -> Vec<&'a SelectionSet> {
        occurrences
            .iter()
            .map(|f| &f.node.selection_set.node)
            .collect()
    }

    /// A leaf field: no arguments.
    pub(super) fn leaf<K>(occurrences: &Occurrences<'a>, kind: K) -> Option<K> {
        occurrences
            .iter()
            .all(|f| f.node.arguments.is_empty())
            .then_some(kind)
    }

    /// The fields `sets` ask of an object that fragments with a type
    /// condition `applies` to, by response key; depth first, in document
    /// order, so a fragment's fields stand where it is spread.
    pub(super) fn collect_with(
        &self,
        sets: &[&'a SelectionSet],
        applies: &dyn Fn(&str) -> bool,
    ) -> IndexMap<Name, Occurrences<'a>> {
        let mut out: IndexMap<Name, Occurrences<'a>> = IndexMap::new();
        for set in sets {
            self.visit_with(set, applies, &mut out);
        }
        out
    }

    fn visit_with(
        &self,
        set: &'a SelectionSet,
        applies: &dyn Fn(&str) -> bool,
        out: &mut IndexMap<Name, Occurrences<'a>>,
    ) {
        for selection in &set.items {
            if self.skipped(selection.node.directives()) {
                continue;
            }
            match &selection.node {
                Selection::Field(field) => out
                    .entry(field.node.response_key().node.clone())
                    .or_default()
                    .push(field),
                Selection::FragmentSpread(spread) => {
                    if let Some(fragment) = self.fragments.get(&spread.node.fragment_name.node) {
                        if applies(&fragment.node.type_condition.node.on.node) {
                            self.visit_with(&fragment.node.selection_set.node, applies, out);
                        }
                    }
                }
                Selection::InlineFragment(inline) => {
                    let condition = inline.node.type_condition.as_ref();
                    if condition.is_none_or(|c| applies(&c.node.on.node)) {
                        self.visit_with(&inline.node.selection_set.node, applies, out);
                    }
                }
            }
        }
    }
}

/// Whether every argument of a key's occurrences is one of `known`.
pub(super) fn only(occ: &Occurrences<'_>, known: &[&str]) -> bool {
    occ[0]
        .node
        .arguments
        .iter()
        .all(|(n, _)| known.contains(&n.node.as_str()))
}

/// The argument `name` of a field, as written.
pub(super) fn arg(field: &Positioned<Field>, name: &str) -> Arg {
    match field.node.get_argument(name).map(|v| &v.node) {
        None => Arg::Absent,
        Some(Value::Variable(var)) => Arg::Variable(var.clone()),
        Some(value) => match value.clone().into_const() {
            Some(value) => Arg::Literal(value),
            // A list or object holding a variable: not planned here.
            None => Arg::Variable(Name::new("")),
        },
    }
}
