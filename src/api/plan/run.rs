//! Running a [`Plan`]: arguments bound from the request's variables, each
//! list read with one call to the timeline layer and each kind of entity
//! loaded for the whole page in one store call, then the response's `data`
//! written as JSON straight from the rows, in selection order. Every value
//! comes from the same field functions the async-graphql resolvers call.

use async_graphql::resolver_utils::EnumType;
use async_graphql::{Name, PathSegment, ServerError, Variables, ID};
use async_graphql_value::ConstValue;
use chrono::{DateTime, Utc};

use super::below::Below;
use super::compile::{
    ActionField, Arg, CountsField, DescriptorFields, FanOutField, FeedArgs, FeedOwn, Fields,
    ItemField, ListArg, ListArgs, Plan, ReasonField, RootField, ACTIONS, FEED,
};
use super::connection::{node_fields, Connection};
use super::{by_id, groups, markers, notices, webhooks};
use crate::api::cursor::LazyCursor;
use crate::api::error::ApiResultExt;
use crate::api::feed::{self, ListOf, Needs, Paging};
use crate::api::notifications::NotificationCounts;
use crate::api::types::{
    datetime, ActionConnection, ActionNode, ActionSlot, FeedItemConnection, FeedItemNode,
    FeedReasonNode, UserNode,
};
use crate::api::{AppState, Session, Viewer};
use crate::descriptor::graphql::Member;
use crate::events::shared::hole;

/// The plan cannot answer this request as async-graphql would (a variable
/// that does not coerce, say): async-graphql runs it instead.
#[derive(Debug)]
pub struct Fallback;

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
    let bind = Bind::new(plan, variables);
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
            RootField::Aggregated { args, fields } => {
                match groups::read(state, session, &bind, args, fields).await? {
                    Ok(read) => Ok(write
                        .of(&mut out, |run, out| run.groups(out, fields, &read))
                        .await?),
                    Err(err) => Err(err),
                }
            }
            RootField::Notifications { args, fields } => {
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

/// Writes a root field's value from what was read for it.
pub(super) struct Write<'a> {
    pub(super) state: &'a AppState,
    pub(super) session: &'a Session,
    pub(super) bind: &'a Bind<'a>,
}

impl Write<'_> {
    /// Writes with `write`; when the plan reads rows below a page's, a
    /// first pass writes nowhere and notes what it meets, that is read,
    /// and the second pass writes.
    pub(super) async fn of<R>(
        &self,
        out: &mut Out,
        write: impl Fn(&Run, &mut Out) -> R,
    ) -> Result<R, Fallback> {
        let mut below = Below::default();
        if self.bind.plan.below {
            below
                .read_with(self.state, self.session, |below| {
                    write(&self.run(below), &mut Out::default());
                })
                .await?;
        }
        let written = write(&self.run(&below), out);
        if below.fell_back() {
            return Err(Fallback);
        }
        Ok(written)
    }

    pub(super) fn run<'b>(&'b self, below: &'b Below) -> Run<'b> {
        Run {
            state: self.state,
            session: self.session,
            bind: self.bind,
            below,
        }
    }
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

/// What the fields asked of actions need loaded with them.
pub(super) fn action_needs(fields: &Fields<ActionField>, needs: &mut Needs) {
    for f in fields {
        match f.kind {
            ActionField::Actor(_) => needs.actor = true,
            ActionField::ViewerHasLiked => needs.liked = true,
            ActionField::CommentCount | ActionField::LikeCount | ActionField::FanOut(_) => {
                needs.uncopied = true
            }
            _ => {}
        }
    }
}

/// Arguments bound to the request's variables, coerced as async-graphql
/// coerces them; anything else is left to it.
pub(super) struct Bind<'a> {
    plan: &'a Plan,
    variables: &'a Variables,
}

impl<'a> Bind<'a> {
    pub(super) fn new(plan: &'a Plan, variables: &'a Variables) -> Self {
        Self { plan, variables }
    }
}

impl Bind<'_> {
    pub(super) fn value<'v>(&'v self, arg: &'v Arg) -> Result<Option<&'v ConstValue>, Fallback> {
        match arg {
            Arg::Absent => Ok(None),
            Arg::Literal(value) => Ok(Some(value)),
            Arg::Variable(name) => match self.variables.get(name) {
                Some(value) => Ok(Some(value)),
                None => self
                    .plan
                    .variables
                    .iter()
                    .find(|v| &v.name.node == name)
                    .and_then(|v| v.default_value())
                    .map(Some)
                    .ok_or(Fallback),
            },
        }
    }

    pub(super) fn int(&self, arg: &Arg) -> Result<Option<i32>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Ok(None),
            Some(ConstValue::Number(n)) => n
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(Some)
                .ok_or(Fallback),
            Some(_) => Err(Fallback),
        }
    }

    pub(super) fn string(&self, arg: &Arg) -> Result<Option<String>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Ok(None),
            Some(ConstValue::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Fallback),
        }
    }

    pub(super) fn bool(&self, arg: &Arg) -> Result<Option<bool>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Ok(None),
            Some(ConstValue::Boolean(b)) => Ok(Some(*b)),
            Some(_) => Err(Fallback),
        }
    }

    /// A list of an enum's values, `None` when not given; one value alone
    /// is a list of one, as input coercion says.
    pub(super) fn enums<E: EnumType>(&self, arg: &Arg) -> Result<Option<Vec<E>>, Fallback> {
        let values = match self.value(arg)? {
            None | Some(ConstValue::Null) => return Ok(None),
            Some(ConstValue::List(items)) => items
                .iter()
                .map(|v| enumerated(Some(v)))
                .collect::<Result<_, _>>()?,
            Some(value) => vec![enumerated(Some(value))?],
        };
        Ok(Some(values))
    }

    pub(super) fn id(&self, arg: &Arg) -> Result<Option<ID>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Ok(None),
            Some(value) => Self::one_id(value).map(Some),
        }
    }

    /// A list of ids; one id alone is a list of one, as input coercion says.
    pub(super) fn ids(&self, arg: &Arg) -> Result<Vec<ID>, Fallback> {
        match self.value(arg)? {
            None | Some(ConstValue::Null) => Err(Fallback),
            Some(ConstValue::List(items)) => items.iter().map(Self::one_id).collect(),
            Some(value) => Ok(vec![Self::one_id(value)?]),
        }
    }

    fn one_id(value: &ConstValue) -> Result<ID, Fallback> {
        match value {
            ConstValue::String(s) => Ok(ID(s.clone())),
            ConstValue::Number(n) if n.is_i64() || n.is_u64() => Ok(ID(n.to_string())),
            _ => Err(Fallback),
        }
    }
}

/// An enum argument as async-graphql takes it: its name, in the document
/// or in the variables.
pub(super) fn enumerated<E: EnumType>(value: Option<&ConstValue>) -> Result<E, Fallback> {
    let name = match value {
        Some(ConstValue::Enum(name)) => name.as_str(),
        Some(ConstValue::String(name)) => name.as_str(),
        _ => return Err(Fallback),
    };
    E::items()
        .iter()
        .find(|item| item.name == name)
        .map(|item| item.value)
        .ok_or(Fallback)
}

/// What writing a page needs besides the page.
pub(super) struct Run<'a> {
    pub(super) state: &'a AppState,
    pub(super) session: &'a Session,
    pub(super) bind: &'a Bind<'a>,
    pub(super) below: &'a Below,
}

impl Run<'_> {
    fn viewer(&self) -> Option<&Viewer> {
        self.session.viewer().ok()
    }

    /// A cursor, sealed; a pass that writes nowhere spends no sealing on it.
    pub(super) fn cursor(&self, out: &mut Out, cursor: &LazyCursor) {
        if self.below.noting() {
            return out.null();
        }
        out.string(&cursor.seal(&self.state.cursors));
    }

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

    pub(super) fn item(&self, out: &mut Out, fields: &Fields<ItemField>, item: &FeedItemNode) {
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                ItemField::Typename => out.string("FeedItem"),
                ItemField::Id => out.own(hole::ID, |out| out.id(&item.global_id())),
                ItemField::OwnerId => out.own(hole::OWNER_ID, |out| out.string(&item.item.owner)),
                ItemField::Cursor => out.own(hole::CURSOR, |out| self.cursor(out, &item.cursor)),
                ItemField::ActionId => out.id(&item.own_action_id()),
                ItemField::Relevancy => out.time(&item.relevancy_at()),
                ItemField::Reason(reason) => self::reason(out, reason, &item.reason_node()),
                ItemField::Action(action) => out.own(hole::ACTION, |out| match &item.action {
                    ActionSlot::Loaded(node) => self.action(out, action, node),
                    // A home page loads every action it shows.
                    ActionSlot::Shared(_) | ActionSlot::Lazy => out.null(),
                }),
            }
        }
        out.close();
    }

    pub(super) fn action(&self, out: &mut Out, fields: &Fields<ActionField>, node: &ActionNode) {
        let action = &node.action;
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                ActionField::Typename => out.string("Action"),
                ActionField::Id => out.id(&node.global_id()),
                ActionField::ActionId => out.id(&node.own_id()),
                ActionField::Actor(user) => self.user(out, user, &node.actor_as_loaded()),
                ActionField::ActorId => out.string(&action.actor_id),
                ActionField::Conducted => out.time(&node.conducted_at()),
                ActionField::To => out.list(&node.groups_to(), |out, id| out.id(id)),
                ActionField::ExpiresAt => match node.expires() {
                    Some(at) => out.time(&at),
                    None => out.null(),
                },
                ActionField::Created => match node.recorded_new() {
                    Some(created) => out.bool(created),
                    None => out.null(),
                },
                ActionField::Hidden => out.bool(action.hidden),
                ActionField::Scope => out.enumerated(action.scope),
                ActionField::Readers => match self.viewer().and_then(|v| node.readers_for(v)) {
                    Some(readers) => out.list(readers, |out, r| out.string(r)),
                    None => out.null(),
                },
                ActionField::RefIds => out.list(&action.ref_ids, |out, r| out.string(r)),
                ActionField::Tags => out.list(&action.tags, |out, t| out.string(t)),
                ActionField::Descriptor(fields) => self.descriptor(out, fields, node),
                ActionField::CommentCount => out.number(action.counts.comments),
                ActionField::LikeCount => out.number(action.counts.likes),
                ActionField::ViewerHasLiked => out.bool(node.liked_as_loaded().unwrap_or(false)),
                ActionField::Comments {
                    first,
                    after,
                    fields,
                } => self.comments(out, (first, after), fields, node),
                ActionField::FanOut(fields) => self.fan_out(out, fields, node),
            }
        }
        out.close();
    }

    fn fan_out(&self, out: &mut Out, fields: &Fields<FanOutField>, node: &ActionNode) {
        let action = &node.action;
        out.open();
        for f in fields {
            out.key(&f.key);
            match f.kind {
                FanOutField::Typename => out.string("FanOut"),
                FanOutField::State => out.enumerated(action.fan_out.state),
                FanOutField::LockedUntil => match self.below.lease(action) {
                    Some(Some(held)) => out.time(&datetime(held.until)),
                    _ => out.null(),
                },
                FanOutField::Worker => match self.below.lease(action) {
                    Some(Some(held)) => out.string(&held.worker),
                    _ => out.null(),
                },
            }
        }
        out.close();
    }

    fn descriptor(&self, out: &mut Out, fields: &DescriptorFields, node: &ActionNode) {
        let catalog = &self.state.descriptors;
        let descriptor = &node.action.descriptor;
        let member = Member::of(catalog, descriptor);
        out.open();
        for (key, name) in fields.members.get(member.name()).into_iter().flatten() {
            out.key(key);
            if name.as_str() == "__typename" {
                out.string(member.name());
            } else {
                out.value(&member.value(name));
            }
        }
        out.close_as_written();
    }
}

fn reason(out: &mut Out, fields: &Fields<ReasonField>, reason: &FeedReasonNode) {
    out.open();
    for f in fields {
        out.key(&f.key);
        match &f.kind {
            ReasonField::Typename => out.string("FeedReason"),
            ReasonField::Kind => out.enumerated(reason.kind),
            ReasonField::ActorId => out.string(&reason.actor_id),
            ReasonField::Rule => match reason.rule {
                Some(rule) => out.enumerated(rule),
                None => out.null(),
            },
            ReasonField::By => match &reason.by {
                Some(by) => out.string(by),
                None => out.null(),
            },
            ReasonField::At => match &reason.at {
                Some(at) => out.time(at),
                None => out.null(),
            },
        }
    }
    out.close();
}

/// A JSON writer: a key writes the separator its object needs; lists
/// separate their own items.
#[derive(Default)]
pub struct Out {
    pub buf: Vec<u8>,
    /// Whether the next key is the first of its object.
    first: bool,
    /// Writing a template of live events: where each value that is a
    /// subscriber's own goes (its offset and its kind of hole), written
    /// by each subscriber instead ([`crate::events::shared`]).
    holes: Option<Vec<(usize, usize)>>,
}

impl Out {
    /// A writer of a template, with holes for what is each subscriber's own.
    pub(super) fn template() -> Self {
        Self {
            holes: Some(Vec::new()),
            ..Self::default()
        }
    }

    /// The holes written, by offset and kind.
    pub(super) fn holes(&self) -> &[(usize, usize)] {
        self.holes.as_deref().unwrap_or_default()
    }

    /// A value that is each subscriber's own (of hole `kind`): written by
    /// `write`, or a hole in a template.
    pub(super) fn own(&mut self, kind: usize, write: impl FnOnce(&mut Self)) {
        match &mut self.holes {
            Some(holes) => {
                holes.push((self.buf.len(), kind));
                self.first = false;
            }
            None => write(self),
        }
    }

    pub(super) fn open(&mut self) {
        self.buf.push(b'{');
        self.first = true;
    }

    /// Ends an object; one with no field written is `null`, as async-graphql
    /// answers an object whose every field was skipped.
    pub(super) fn close(&mut self) {
        if self.first && self.buf.last() == Some(&b'{') {
            self.buf.pop();
            self.buf.extend_from_slice(b"null");
        } else {
            self.buf.push(b'}');
        }
        self.first = false;
    }

    /// Ends an object that is `{}` when empty (a descriptor's).
    pub(super) fn close_as_written(&mut self) {
        self.buf.push(b'}');
        self.first = false;
    }

    pub(super) fn key(&mut self, key: &Name) {
        if !self.first {
            self.buf.push(b',');
        }
        self.first = false;
        // GraphQL names need no escaping.
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    pub(super) fn list<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Self, &T)) {
        self.buf.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            each(self, item);
        }
        self.buf.push(b']');
        self.first = false;
    }

    pub(super) fn string(&mut self, s: &str) {
        // serde_json escapes as async-graphql's responses are escaped.
        let _ = serde_json::to_writer(&mut self.buf, s);
    }

    pub(super) fn opt_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.null(),
        }
    }

    pub(super) fn id(&mut self, id: &ID) {
        self.string(id.as_str());
    }

    pub(super) fn null(&mut self) {
        self.buf.extend_from_slice(b"null");
    }

    pub(super) fn bool(&mut self, b: bool) {
        self.buf
            .extend_from_slice(if b { b"true" } else { b"false" });
    }

    pub(super) fn number(&mut self, n: u64) {
        let _ = serde_json::to_writer(&mut self.buf, &n);
    }

    /// A `DateTime` as its scalar writes it.
    pub(super) fn time(&mut self, at: &DateTime<Utc>) {
        self.string(&at.to_rfc3339());
    }

    /// An enum value by its GraphQL name.
    pub(super) fn enumerated<E: EnumType>(&mut self, value: E) {
        let name = E::items()
            .iter()
            .find(|item| item.value == value)
            .map_or("", |item| item.name);
        self.string(name);
    }

    pub(super) fn value(&mut self, value: &ConstValue) {
        let _ = serde_json::to_writer(&mut self.buf, value);
    }
}
