//! The root of a planned query: from a validated document to a [`Plan`]
//! of its root fields (each kind of field compiled by its own module), and
//! running it: arguments bound from the request's variables, each list read
//! with one call to the timeline layer and each kind of entity loaded for
//! the whole page in one store call, then the response's `data` written as
//! JSON straight from the rows, in selection order. Every value comes from
//! the same field functions the async-graphql resolvers call.

use async_graphql::parser::types::{ExecutableDocument, OperationType, SelectionSet};
use async_graphql::{Name, PathSegment, ServerError, Variables};

use super::actions::{action_needs, ActionField, ItemField};
use super::bind::{Bind, Fallback};
use super::by_id::ById;
use super::compile::{arg, operation, Arg, Compiler, Fields, Occurrences, Scope};
use super::connection::{node_fields, Connection, Names};
use super::groups::Aggregated;
use super::markers::MarkerField;
use super::notices::Notices;
use super::out::Out;
use super::run::{Run, Write};
use super::users::UserField;
use super::webhooks::Hooks;
use super::{by_id, groups, markers, notices, webhooks};
use crate::api::error::ApiResultExt;
use crate::api::feed::{self, ListOf, Needs, Paging};
use crate::api::notifications::NotificationCounts;
use crate::api::types::{ActionConnection, FeedItemConnection, UserNode};
use crate::api::{AppState, Session};
use crate::descriptor::catalog::Catalog;

/// The connections of the home feed and of lists of actions.
pub(super) const FEED: Names = ("FeedItemConnection", "FeedItemEdge");
pub(super) const ACTIONS: Names = ("ActionConnection", "ActionEdge");

/// What an operation does, field by field.
#[derive(Debug)]
pub struct Plan {
    pub root: Fields<RootField>,
    pub scope: Scope,
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
    Notifications(Notices),
    Aggregated(Aggregated),
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
        scope: Scope {
            below: compiler.reads_rows_below(),
            variables: op
                .node
                .variable_definitions
                .iter()
                .map(|v| v.node.clone())
                .collect(),
        },
    })
}

impl<'a> Compiler<'a> {
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
            "notifications" => this.notifications(occ).map(RootField::Notifications),
            "aggregatedFeed" => this.aggregated(occ).map(RootField::Aggregated),
            "action" | "actions" | "user" | "node" | "nodes" => {
                this.by_id(name, occ).map(RootField::ById)
            }
            "webhooks" | "webhook" => this.webhooks(name, occ).map(RootField::Webhooks),
            "markers" => this
                .markers(occ)
                .map(|(feeds, fields)| RootField::Markers { feeds, fields }),
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

    fn counts(&self, sets: &[&'a SelectionSet]) -> Option<Fields<CountsField>> {
        self.object(sets, "NotificationCounts", |_, name, occ| match name {
            "__typename" => Some(CountsField::Typename),
            "unseenCount" => Self::leaf(occ, CountsField::UnseenCount),
            "unreadCount" => Self::leaf(occ, CountsField::UnreadCount),
            _ => None,
        })
    }
}

/// A planned response: its `data` as JSON, and its errors.
pub struct Written {
    pub data: Vec<u8>,
    pub errors: Vec<ServerError>,
    /// Whether any root field has a value (not null).
    pub answered: bool,
}

/// Runs `plan` for the request's session with its variables.
pub async fn run(
    plan: &Plan,
    state: &AppState,
    session: &Session,
    variables: &Variables,
) -> Result<Written, Fallback> {
    let bind = Bind::new(&plan.scope, variables);
    let mut out = Out::default();
    let mut errors = Vec::new();
    let mut answered = false;
    out.open();
    for field in &plan.root {
        out.key(&field.key);
        let write = Write {
            state,
            session,
            bind: &bind,
        };
        let answer = match &field.kind {
            RootField::Typename => {
                out.string("Query");
                Ok(())
            }
            RootField::Feed { args, fields } => {
                match home(state, session, &bind, args, fields).await? {
                    Ok(c) => Ok(write
                        .of(&mut out, |run, out| run.connection(out, fields, &c))
                        .await?),
                    Err(err) => Err(err),
                }
            }
            RootField::List { of, args, fields } => {
                match list(state, session, &bind, of, args, fields).await? {
                    Ok(c) => Ok(write
                        .of(&mut out, |run, out| run.list(out, fields, &c))
                        .await?),
                    Err(err) => Err(err),
                }
            }
            RootField::Viewer(fields) => match viewer(state, session).await {
                Ok(node) => Ok(write
                    .of(&mut out, |run, out| run.user(out, fields, &node))
                    .await?),
                Err(err) => Err(err),
            },
            RootField::Markers { feeds, fields } => markers::read(state, session, &bind, feeds)
                .await?
                .map(|found| markers::write(&mut out, fields, &found)),
            RootField::NotificationCounts(fields) => notification_counts(state, session)
                .await
                .map(|c| counts(&mut out, fields, &c)),
            RootField::ById(by_id) => {
                // Nullable, so only a value counts as an answer.
                let found = by_id::find(state, session, &bind, by_id).await?;
                if write
                    .of(&mut out, |run, out| run.found(out, by_id, &found))
                    .await?
                {
                    answered = true;
                }
                continue;
            }
            RootField::Webhooks(hooks) => {
                // `webhook` is nullable: only a value counts as an answer.
                let read = webhooks::read(state, session, &bind, hooks).await?;
                if write
                    .of(&mut out, |run, out| run.webhooks(out, hooks, &read))
                    .await?
                {
                    answered = true;
                }
                continue;
            }
            RootField::Aggregated(Aggregated { args, fields }) => {
                match groups::read(state, session, &bind, args, fields).await? {
                    Ok(read) => Ok(write
                        .of(&mut out, |run, out| run.groups(out, fields, &read))
                        .await?),
                    Err(err) => Err(err),
                }
            }
            RootField::Notifications(Notices { args, fields }) => {
                match notices::read(state, session, &bind, args, fields).await? {
                    Ok(page) => Ok(write
                        .of(&mut out, |run, out| run.notifications(out, fields, &page))
                        .await?),
                    Err(err) => Err(err),
                }
            }
        };
        match answer {
            Ok(()) => answered = true,
            Err(err) => {
                // Every planned root field that can fail is non-null: its error nulls the
                // whole data. The other root fields still run, as they run
                // side by side, and their errors count too.
                let mut err = err.into_server_error(field.pos);
                err.path = vec![PathSegment::Field(field.key.to_string())];
                errors.push(err);
                out.null();
            }
        }
    }
    out.close();
    if !errors.is_empty() {
        out.buf = b"null".to_vec();
        answered = false;
    }
    Ok(Written {
        data: out.buf,
        errors,
        answered,
    })
}

/// Reads the home-feed page a `feed` field asks for.
async fn home(
    state: &AppState,
    session: &Session,
    bind: &Bind<'_>,
    args: &FeedArgs,
    fields: &Fields<Connection<Fields<ItemField>, FeedOwn>>,
) -> Result<async_graphql::Result<FeedItemConnection>, Fallback> {
    let paging = Paging {
        first: bind.int(&args.first)?,
        after: bind.string(&args.after)?,
        last: bind.int(&args.last)?,
        before: bind.string(&args.before)?,
        matching: bind.string(&args.matching)?,
    };
    let owner_id = bind.id(&args.owner_id)?;
    let needs = needs(fields);
    Ok(async {
        let owner = feed::feed_owner(session.viewer()?, owner_id.as_ref())?;
        feed::home_page(state, &owner, paging, needs).await
    }
    .await)
}

/// Reads the page of a list of actions a root field asks for.
async fn list(
    state: &AppState,
    session: &Session,
    bind: &Bind<'_>,
    of: &ListArg,
    args: &ListArgs,
    fields: &Fields<Connection<Fields<ActionField>>>,
) -> Result<async_graphql::Result<ActionConnection>, Fallback> {
    let of = match of {
        ListArg::Slice(ref_id) => ListOf::Slice(bind.string(ref_id)?.ok_or(Fallback)?),
        ListArg::Actor(user_id) => ListOf::Actor(bind.id(user_id)?.ok_or(Fallback)?),
        ListArg::Group(group_id) => ListOf::Group(bind.id(group_id)?.ok_or(Fallback)?),
        ListArg::Discussions => ListOf::Discussions,
    };
    let (first, after, matching) = (
        bind.int(&args.first)?,
        bind.string(&args.after)?,
        bind.string(&args.matching)?,
    );
    let mut needs = Needs::default();
    for action in node_fields(fields) {
        action_needs(action, &mut needs);
    }
    Ok(async {
        let viewer = session.viewer()?;
        let paging = (first, after, matching.as_deref());
        feed::list_page(state, viewer, of, paging, needs).await
    }
    .await)
}

/// The viewer's own profile.
async fn viewer(state: &AppState, session: &Session) -> async_graphql::Result<UserNode> {
    let viewer = session.viewer()?;
    let found = state
        .store
        .get_users(&viewer.tenant, std::slice::from_ref(&viewer.user))
        .await
        .api()?;
    Ok(UserNode::found(&viewer.user, found.into_iter().next()))
}

async fn notification_counts(
    state: &AppState,
    session: &Session,
) -> async_graphql::Result<NotificationCounts> {
    Ok(crate::api::notifications::counts(state, session.viewer()?)
        .await?
        .1)
}

fn counts(out: &mut Out, fields: &Fields<CountsField>, c: &NotificationCounts) {
    out.open();
    for f in fields {
        out.key(&f.key);
        match f.kind {
            CountsField::Typename => out.string("NotificationCounts"),
            CountsField::UnseenCount => out.number(c.unseen_count),
            CountsField::UnreadCount => out.number(c.unread_count),
        }
    }
    out.close();
}

/// What a page's actions need loaded, from the plan of its connection.
fn needs(fields: &Fields<Connection<Fields<ItemField>, FeedOwn>>) -> Needs {
    let mut needs = Needs::default();
    for items in node_fields(fields) {
        for f in items {
            if let ItemField::Action(a) = &f.kind {
                action_needs(a, &mut needs);
            }
        }
    }
    needs
}

impl Run<'_> {
    fn connection(
        &self,
        out: &mut Out,
        fields: &Fields<Connection<Fields<ItemField>, FeedOwn>>,
        c: &FeedItemConnection,
    ) {
        self.connection_of(
            out,
            fields,
            FEED,
            (&c.edges, &c.page_info),
            |out, items, edge| self.item(out, items, &edge.node),
            |out, own| match own {
                FeedOwn::EventsCursor => out.string(&c.events_cursor),
            },
        );
    }

    fn list(
        &self,
        out: &mut Out,
        fields: &Fields<Connection<Fields<ActionField>>>,
        c: &ActionConnection,
    ) {
        self.plain_connection(
            out,
            fields,
            ACTIONS,
            (&c.edges, &c.page_info),
            |out, action, edge| self.action(out, action, &edge.node),
        );
    }
}
