//! From a validated document to a [`Plan`]: the fields each concrete type
//! is asked for, fragments and inline fragments flattened, fields of one
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
    OperationDefinition, OperationType, Selection, SelectionSet, VariableDefinition,
};
use async_graphql::{Name, Pos, Positioned, Variables};
use async_graphql_value::{ConstValue, Value};

use super::by_id::ById;
use super::comments::CommentField;
use super::connection::{Connection, Names};
use super::groups::{GroupsArgs, ItemGroupField};
use super::markers::MarkerField;
use super::notices::{GroupField, NoticesArgs, NoticesOwn};
use super::users::MembershipField;
use super::webhooks::Hooks;
use crate::api::user_node::UserList;
use crate::descriptor::catalog::{Catalog, UNKNOWN};

/// The connections of the home feed and of lists of actions.
pub(super) const FEED: Names = ("FeedItemConnection", "FeedItemEdge");
pub(super) const ACTIONS: Names = ("ActionConnection", "ActionEdge");

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

/// An argument: not given, written in the document, or a variable's.
#[derive(Clone, Debug)]
pub enum Arg {
    Absent,
    Literal(ConstValue),
    Variable(Name),
}

/// What an operation does, field by field.
#[derive(Debug)]
pub struct Plan {
    pub root: Fields<RootField>,
    /// Whether rows below a page's (an action's comments) are read before
    /// it is written.
    pub below: bool,
    /// The operation's variables, for their defaults.
    pub variables: Vec<VariableDefinition>,
}

#[derive(Debug)]
pub enum RootField {
    Typename,
    Feed {
        args: FeedArgs,
        fields: Fields<Connection<Fields<ItemField>, FeedOwn>>,
    },
    Viewer(Fields<UserField>),
    NotificationCounts(Fields<CountsField>),
    /// `action`, `actions` or `user`: nullable.
    ById(ById),
    Notifications {
        args: NoticesArgs,
        fields: Fields<Connection<Fields<GroupField>, NoticesOwn>>,
    },
    Aggregated {
        args: GroupsArgs,
        fields: Fields<Connection<Fields<ItemGroupField>>>,
    },
    /// `webhooks` or `webhook(webhookId:)`.
    Webhooks(Hooks),
    Markers {
        feeds: Arg,
        fields: Fields<MarkerField>,
    },
    /// `slice`, `actorFeed`, `groupFeed` or `discussions`.
    List {
        of: ListArg,
        args: ListArgs,
        fields: Fields<Connection<Fields<ActionField>>>,
    },
}

/// Which list of actions, with the argument that names it.
#[derive(Debug)]
pub enum ListArg {
    Slice(Arg),
    Actor(Arg),
    Group(Arg),
    Discussions,
}

#[derive(Debug)]
pub struct ListArgs {
    pub first: Arg,
    pub after: Arg,
    pub matching: Arg,
}

#[derive(Debug)]
pub enum CountsField {
    Typename,
    UnseenCount,
    UnreadCount,
}

#[derive(Debug)]
pub struct FeedArgs {
    pub first: Arg,
    pub after: Arg,
    pub last: Arg,
    pub before: Arg,
    pub owner_id: Arg,
    pub matching: Arg,
}

/// What a page of the home feed has of its own.
#[derive(Debug)]
pub enum FeedOwn {
    EventsCursor,
}

#[derive(Debug)]
pub enum ItemField {
    Typename,
    Id,
    OwnerId,
    Cursor,
    ActionId,
    Relevancy,
    Reason(Fields<ReasonField>),
    Action(Fields<ActionField>),
}

#[derive(Debug)]
pub enum ReasonField {
    Typename,
    Kind,
    ActorId,
    Rule,
    By,
    At,
}

#[derive(Debug)]
pub enum ActionField {
    Typename,
    Id,
    ActionId,
    Actor(Fields<UserField>),
    ActorId,
    Conducted,
    To,
    ExpiresAt,
    Created,
    Hidden,
    Scope,
    Readers,
    RefIds,
    Tags,
    Descriptor(DescriptorFields),
    CommentCount,
    LikeCount,
    ViewerHasLiked,
    FanOut(Fields<FanOutField>),
    Comments {
        first: Arg,
        after: Arg,
        fields: Fields<Connection<Fields<CommentField>>>,
    },
}

/// The fields of an action's `fanOut`: its state, which the action holds,
/// and the lease a worker holds, read below the page.
#[derive(Debug)]
pub enum FanOutField {
    Typename,
    State,
    LockedUntil,
    Worker,
}

#[derive(Debug)]
pub enum UserField {
    Typename,
    Id,
    UserId,
    Name,
    List {
        list: UserList,
        first: Arg,
        after: Arg,
        fields: Fields<Connection<Fields<UserField>>>,
    },
    Supervisor(Fields<UserField>),
    Assignments,
    Groups(Fields<MembershipField>),
}

/// A descriptor's fields, per member of the `Descriptor` union: response
/// key and field name (`__typename` included).
#[derive(Debug, Default)]
pub struct DescriptorFields {
    pub members: IndexMap<String, Vec<(Name, Name)>>,
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

/// The plan of `operation_name` in `document` for the `@skip` / `@include`
/// variables `names` having the values `values`, or `None` when a plan does
/// not cover it.
pub fn compile(
    document: &ExecutableDocument,
    operation_name: Option<&str>,
    names: &[Name],
    values: &[bool],
    catalog: &Catalog,
) -> Option<Plan> {
    let op = operation(document, operation_name)?;
    if op.node.ty != OperationType::Query {
        return None;
    }
    let compiler = Compiler::new(&document.fragments, names, values, catalog);
    let root = compiler.root(&op.node.selection_set.node)?;
    Some(Plan {
        root,
        below: compiler.below.get(),
        variables: op
            .node
            .variable_definitions
            .iter()
            .map(|v| v.node.clone())
            .collect(),
    })
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

    fn root(&self, set: &'a SelectionSet) -> Option<Fields<RootField>> {
        self.object(&[set], "Query", |this, name, occ| match name {
            "__typename" => Some(RootField::Typename),
            "feed" => {
                let args = FeedArgs {
                    first: arg(occ[0], "first"),
                    after: arg(occ[0], "after"),
                    last: arg(occ[0], "last"),
                    before: arg(occ[0], "before"),
                    owner_id: arg(occ[0], "ownerId"),
                    matching: arg(occ[0], "matching"),
                };
                let known = ["first", "after", "last", "before", "ownerId", "matching"];
                if !occ[0]
                    .node
                    .arguments
                    .iter()
                    .all(|(n, _)| known.contains(&n.node.as_str()))
                {
                    return None;
                }
                let fields = this.connection(&Self::subsets(occ))?;
                Some(RootField::Feed { args, fields })
            }
            "slice" | "actorFeed" | "groupFeed" | "discussions" => {
                let (of, named) = match name {
                    "slice" => (ListArg::Slice(arg(occ[0], "refId")), Some("refId")),
                    "actorFeed" => (ListArg::Actor(arg(occ[0], "userId")), Some("userId")),
                    "groupFeed" => (ListArg::Group(arg(occ[0], "groupId")), Some("groupId")),
                    _ => (ListArg::Discussions, None),
                };
                let known = ["first", "after", "matching"];
                if !occ[0].node.arguments.iter().all(|(n, _)| {
                    known.contains(&n.node.as_str()) || Some(n.node.as_str()) == named
                }) {
                    return None;
                }
                let args = ListArgs {
                    first: arg(occ[0], "first"),
                    after: arg(occ[0], "after"),
                    matching: arg(occ[0], "matching"),
                };
                let fields = this.list(&Self::subsets(occ))?;
                Some(RootField::List { of, args, fields })
            }
            "viewer" => Self::leaf(occ, ())
                .and_then(|()| this.user(&Self::subsets(occ)))
                .map(RootField::Viewer),
            "notificationCounts" => Self::leaf(occ, ())
                .and_then(|()| this.counts(&Self::subsets(occ)))
                .map(RootField::NotificationCounts),
            "notifications" => this.notifications(occ),
            "aggregatedFeed" => this.aggregated(occ),
            "action" | "actions" | "user" | "node" | "nodes" => this.by_id(name, occ),
            "webhooks" | "webhook" => this.webhooks(name, occ),
            "markers" => this.markers(occ),
            _ => None,
        })
    }

    fn connection(
        &self,
        sets: &[&'a SelectionSet],
    ) -> Option<Fields<Connection<Fields<ItemField>, FeedOwn>>> {
        let own = |name: &str, occ: &Occurrences<'a>| match name {
            "eventsCursor" => Self::leaf(occ, FeedOwn::EventsCursor),
            _ => None,
        };
        self.connection_of(sets, FEED, |this, sets| this.item(sets), own)
    }

    fn list(&self, sets: &[&'a SelectionSet]) -> Option<Fields<Connection<Fields<ActionField>>>> {
        self.plain_connection(sets, ACTIONS, |this, sets| this.action(sets))
    }

    pub(super) fn item(&self, sets: &[&'a SelectionSet]) -> Option<Fields<ItemField>> {
        self.object(sets, "FeedItem", |this, name, occ| match name {
            "__typename" => Some(ItemField::Typename),
            "id" => Self::leaf(occ, ItemField::Id),
            "ownerId" => Self::leaf(occ, ItemField::OwnerId),
            "cursor" => Self::leaf(occ, ItemField::Cursor),
            "actionId" => Self::leaf(occ, ItemField::ActionId),
            "relevancy" => Self::leaf(occ, ItemField::Relevancy),
            "reason" => Some(ItemField::Reason(this.reason(&Self::subsets(occ))?)),
            "action" => Some(ItemField::Action(this.action(&Self::subsets(occ))?)),
            _ => None,
        })
    }

    fn reason(&self, sets: &[&'a SelectionSet]) -> Option<Fields<ReasonField>> {
        self.object(sets, "FeedReason", |_, name, occ| match name {
            "__typename" => Some(ReasonField::Typename),
            "kind" => Self::leaf(occ, ReasonField::Kind),
            "actorId" => Self::leaf(occ, ReasonField::ActorId),
            "rule" => Self::leaf(occ, ReasonField::Rule),
            "by" => Self::leaf(occ, ReasonField::By),
            "at" => Self::leaf(occ, ReasonField::At),
            _ => None,
        })
    }

    pub(super) fn action(&self, sets: &[&'a SelectionSet]) -> Option<Fields<ActionField>> {
        self.object(sets, "Action", |this, name, occ| match name {
            "__typename" => Some(ActionField::Typename),
            "id" => Self::leaf(occ, ActionField::Id),
            "actionId" => Self::leaf(occ, ActionField::ActionId),
            "actor" => Some(ActionField::Actor(this.user(&Self::subsets(occ))?)),
            "actorId" => Self::leaf(occ, ActionField::ActorId),
            "conducted" => Self::leaf(occ, ActionField::Conducted),
            "to" => Self::leaf(occ, ActionField::To),
            "expiresAt" => Self::leaf(occ, ActionField::ExpiresAt),
            "created" => Self::leaf(occ, ActionField::Created),
            "hidden" => Self::leaf(occ, ActionField::Hidden),
            "scope" => Self::leaf(occ, ActionField::Scope),
            "readers" => Self::leaf(occ, ActionField::Readers),
            "refIds" => Self::leaf(occ, ActionField::RefIds),
            "tags" => Self::leaf(occ, ActionField::Tags),
            "descriptor" => Some(ActionField::Descriptor(
                this.descriptor(&Self::subsets(occ))?,
            )),
            "commentCount" => Self::leaf(occ, ActionField::CommentCount),
            "likeCount" => Self::leaf(occ, ActionField::LikeCount),
            "viewerHasLiked" => Self::leaf(occ, ActionField::ViewerHasLiked),
            "fanOut" => Self::leaf(occ, ())
                .and_then(|()| this.fan_out(&Self::subsets(occ)))
                .map(ActionField::FanOut),
            "comments" => this.comments(occ),
            _ => None,
        })
    }

    fn fan_out(&self, sets: &[&'a SelectionSet]) -> Option<Fields<FanOutField>> {
        self.object(sets, "FanOut", |this, name, occ| match name {
            "__typename" => Some(FanOutField::Typename),
            "state" => Self::leaf(occ, FanOutField::State),
            "lockedUntil" | "worker" => {
                this.reads_below();
                match name {
                    "worker" => Self::leaf(occ, FanOutField::Worker),
                    _ => Self::leaf(occ, FanOutField::LockedUntil),
                }
            }
            _ => None,
        })
    }

    fn counts(&self, sets: &[&'a SelectionSet]) -> Option<Fields<CountsField>> {
        self.object(sets, "NotificationCounts", |_, name, occ| match name {
            "__typename" => Some(CountsField::Typename),
            "unseenCount" => Self::leaf(occ, CountsField::UnseenCount),
            "unreadCount" => Self::leaf(occ, CountsField::UnreadCount),
            _ => None,
        })
    }

    /// Each member's fields: those of its type, and `__typename`.
    fn descriptor(&self, sets: &[&'a SelectionSet]) -> Option<DescriptorFields> {
        let mut members = IndexMap::new();
        let names = self
            .catalog
            .types()
            .iter()
            .map(|t| (t.name.as_str(), Some(t)))
            .chain([(UNKNOWN, None)]);
        for (member, ty) in names {
            let mut fields = Vec::new();
            let applies_to = |on: &str| on == member || on == "Descriptor";
            for (key, occurrences) in self.collect_with(sets, &applies_to) {
                let name = occurrences[0].node.name.node.clone();
                let known = match ty {
                    _ if name.as_str() == "__typename" => true,
                    Some(ty) => ty.field(&name).is_some(),
                    None => matches!(name.as_str(), "type" | "json"),
                };
                if !known || !occurrences.iter().all(|f| f.node.arguments.is_empty()) {
                    return None;
                }
                fields.push((key, name));
            }
            members.insert(member.to_owned(), fields);
        }
        Some(DescriptorFields { members })
    }

    /// The fields `sets` ask of an object that fragments with a type
    /// condition `applies` to, by response key; depth first, in document
    /// order, so a fragment's fields stand where it is spread.
    fn collect_with(
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
