//! Live events from a plan: a subscription's selection of `FeedEvent`,
//! `SliceEvent`, `ActionEvent` or `NotificationEvent` compiled once, when it
//! subscribes, and each event's shared part written once per selection from
//! the event's rows by the field writers the planned queries run, as a
//! template with a hole for each value that is a subscriber's own
//! ([`crate::events::shared`]).
//!
//! An action's reaction (`ActionEvent`) is the same for every subscriber
//! who may read the action: it is written whole, once per selection. A
//! `NotificationEvent` is its subscriber's own (their groups, their counts,
//! the actions they may read): it is written for each subscriber.
//!
//! The shared part is all the selection asks but the item's `ownerId`,
//! `id` and `cursor`, the stream's `resumeCursor`, and whether the
//! subscriber may read the item's `action` (a slice event reaches only
//! those who may read its action). The action is written once too when
//! the selection asks of it only what is the same for every reader who may
//! read it: not `viewerHasLiked`, `readers` or `fanOut`, and of users (its
//! actor, its comments' authors, who reacted) their scalar fields. A
//! selection that asks more is planned all the same, its events written
//! for each subscriber with the subscriber's own values
//! ([`EventPlan::shared`]).

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::parser::types::{Field, SelectionSet};
use async_graphql::{Name, Positioned, Variables};

use super::actions::{action_needs, ActionField, ItemField};
use super::bind::Bind;
use super::comments::CommentField;
use super::compile::{directive_values, Compiler, Fields, Fragments, Scope};
use super::connection::node_fields;
use super::notices::{self, GroupField, Loaded, Wants};
use super::out::Out;
use super::run::{Run, Write};
use super::users::UserField;
use crate::api::cursor::CursorKey;
use crate::api::feed::Needs;
use crate::api::notifications::NotificationEvent;
use crate::api::types::{ActionEventNode, ActionNode, FeedEventNode};
use crate::api::{AppState, Session};
use crate::descriptor::catalog::Catalog;
use crate::events::shared::{hole, Template};
use crate::model::Action;

/// A field of a `FeedEvent`, a `SliceEvent`, an `ActionEvent` or a
/// `NotificationEvent`.
#[derive(Debug)]
pub enum EventField {
    Typename,
    Kind,
    ResumeCursor,
    Item(Fields<ItemField>),
    /// A slice event's action.
    Action(Fields<ActionField>),
    /// A reaction's.
    ActionId,
    Comment(Fields<CommentField>),
    User(Fields<UserField>),
    CommentCount,
    LikeCount,
    /// A notification event's.
    Group(Fields<GroupField>),
    GroupId,
    UnseenCount,
    UnreadCount,
}

/// An event written whole from a plan, with nothing of it left to each
/// subscriber to fill in.
#[derive(Clone, Copy)]
pub enum Whole<'a> {
    /// A reaction to an action: the same for each subscriber who may read
    /// the action.
    Reaction(&'a ActionEventNode),
    /// A change to the subscriber's notifications.
    Notice(&'a NotificationEvent),
}

/// A live event's selection, planned.
#[derive(Debug)]
pub struct EventPlan {
    /// `FeedEvent`, `SliceEvent`, `ActionEvent` or `NotificationEvent`.
    type_name: &'static str,
    /// The subscription field's response key.
    key: Name,
    fields: Fields<EventField>,
    /// For arguments below the actions (their comments): the operation's
    /// variables and their definitions, and whether rows below are read.
    scope: Scope,
    variables: Variables,
    /// The plan written out, with the values of the variables: two plans
    /// alike write alike, so their subscribers share their events'
    /// templates.
    shape: Arc<str>,
    /// Whether the selection asks nothing that is each reader's own.
    shared: bool,
}

impl EventPlan {
    /// The plan of the `feedEvents`, `sliceEvents`, `actionEvents` or
    /// `notificationEvents` field `field` of a subscription with
    /// `fragments` and `variables`, if a plan covers its selection.
    pub fn compile(
        field: &Positioned<Field>,
        fragments: &Fragments,
        variables: &Variables,
        variable_definitions: Vec<async_graphql::parser::types::VariableDefinition>,
        catalog: &Catalog,
    ) -> Option<Self> {
        let names: Vec<Name> = variables.keys().cloned().collect();
        let values = directive_values(&names, variables);
        let compiler = Compiler::new(fragments, &names, &values, catalog);
        let sets = [&field.node.selection_set.node];
        let (type_name, fields) = match field.node.name.node.as_str() {
            "feedEvents" => ("FeedEvent", compiler.feed_event(&sets)?),
            "sliceEvents" => ("SliceEvent", compiler.slice_event(&sets)?),
            "actionEvents" => ("ActionEvent", compiler.action_event(&sets)?),
            "notificationEvents" => ("NotificationEvent", compiler.notification_event(&sets)?),
            _ => return None,
        };
        // A notification event is written for its subscriber alone; the
        // others for every subscriber of a selection at once, unless it
        // asks what is each reader's own.
        let shared = type_name != "NotificationEvent" && alike(&fields);
        let key = field.node.response_key().node.clone();
        // With the variables' values: the arguments below the actions
        // (their comments' `first`) may read them.
        let shape = Arc::from(format!("{key}:{fields:?}:{variables:?}"));
        Some(Self {
            type_name,
            key,
            fields,
            scope: Scope {
                below: compiler.reads_rows_below(),
                variables: variable_definitions,
            },
            variables: variables.clone(),
            shape,
            shared,
        })
    }

    /// Whether an event is written once for every subscriber of the
    /// selection (who may read its action); else for each subscriber,
    /// with what is theirs.
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// The selection's shape, the key of its templates.
    pub fn shape(&self) -> &Arc<str> {
        &self.shape
    }

    /// How many actions the selection asks for (holes of kinds from
    /// [`hole::ACTION`] on).
    pub fn actions(&self) -> usize {
        actions(&self.fields).count()
    }

    /// The template of the response to a feed event (`feed`) or a slice
    /// event, its action (`None`: not found) written once into it; `None`
    /// when it cannot be written as async-graphql would answer (a read
    /// failed): its subscribers run it there, which reports the failure.
    pub async fn template(
        &self,
        state: &AppState,
        session: &Session,
        feed: Option<&FeedEventNode>,
        action: Option<&Action>,
    ) -> Option<Template> {
        let bind = Bind::new(&self.scope, &self.variables);
        let write = Write {
            state,
            session,
            bind: &bind,
        };
        let mut common = Vec::new();
        if let (Some(action), true) = (action, self.actions() > 0) {
            let mut needs = Needs::default();
            for fields in actions(&self.fields) {
                action_needs(fields, &mut needs);
            }
            let viewer = session.viewer().ok()?;
            let names = HashMap::new();
            let loaded = ActionNode::load_along(state, viewer, vec![action.clone()], needs, &names);
            let node = Box::pin(loaded).await.ok()?.pop()?;
            for (i, fields) in actions(&self.fields).enumerate() {
                let mut out = Out::default();
                write
                    .of(&mut out, |run, out| run.action(out, fields, &node))
                    .await
                    .ok()?;
                common.push((hole::ACTION + i, Some(String::from_utf8(out.buf).ok()?)));
            }
        }
        let mut out = Out::template();
        out.buf.extend_from_slice(b"{\"data\":");
        out.open();
        out.key(&self.key);
        out.open();
        for f in &self.fields {
            out.key(&f.key);
            match &f.kind {
                EventField::Typename => out.string(self.type_name),
                EventField::Kind => match feed {
                    Some(event) => out.enumerated(event.kind),
                    None => out.null(),
                },
                EventField::ResumeCursor => out.own(hole::RESUME_CURSOR, |_| {}),
                EventField::Item(fields) => match feed {
                    Some(event) => {
                        // Nothing is read below an item but for its
                        // action, written above.
                        let none = super::below::Below::default();
                        write.run(&none).item(&mut out, fields, &event.item);
                    }
                    None => out.null(),
                },
                EventField::Action(_) => out.own(hole::ACTION, |_| {}),
                // Compiled for reactions and notifications only, which
                // are written whole.
                _ => out.null(),
            }
        }
        out.close();
        out.close();
        out.buf.push(b'}');
        // The actions' holes by their order, each its own kind.
        let mut next = hole::ACTION;
        let holes: Vec<(usize, usize)> = out
            .holes()
            .iter()
            .map(|&(at, kind)| match kind {
                hole::ACTION => {
                    next += 1;
                    (at, next - 1)
                }
                kind => (at, kind),
            })
            .collect();
        let json = std::str::from_utf8(&out.buf).ok()?;
        Some(Template::split(json, &holes, common))
    }
}

impl EventPlan {
    /// The response to `event`, written whole: once for every subscriber
    /// of the selection who may read the action (a reaction), or for its
    /// subscriber (a notification event). `None` when it cannot be written
    /// as async-graphql would answer (a read failed): async-graphql runs
    /// it, which reports the failure.
    pub async fn whole(
        &self,
        state: &AppState,
        session: &Session,
        event: Whole<'_>,
    ) -> Option<String> {
        let bind = Bind::new(&self.scope, &self.variables);
        let write = Write {
            state,
            session,
            bind: &bind,
        };
        let groups = self.fields.iter().filter_map(|f| match &f.kind {
            EventField::Group(fields) => Some(fields),
            _ => None,
        });
        let loaded = match event {
            Whole::Notice(NotificationEvent {
                group: Some(group), ..
            }) if groups.clone().next().is_some() => {
                let mut wants = Wants::default();
                for fields in groups {
                    Wants::of(&bind, fields, &mut wants).ok()?;
                }
                let groups = [group];
                let loaded = notices::load(state, session, &groups, &[], &wants);
                Some(Box::pin(loaded).await.ok()?)
            }
            _ => None,
        };
        let mut out = Out::default();
        out.buf.extend_from_slice(b"{\"data\":");
        out.open();
        out.key(&self.key);
        let written = write.of(&mut out, |run, out| {
            self.write_whole(run, out, event, loaded.as_ref())
        });
        Box::pin(written).await.ok()?;
        out.close();
        out.buf.push(b'}');
        String::from_utf8(out.buf).ok()
    }

    fn write_whole(&self, run: &Run, out: &mut Out, event: Whole<'_>, loaded: Option<&Loaded>) {
        out.open();
        for f in &self.fields {
            out.key(&f.key);
            match (&f.kind, event) {
                (EventField::Typename, _) => out.string(self.type_name),
                (EventField::Kind, Whole::Reaction(e)) => out.enumerated(e.0.kind),
                (EventField::Kind, Whole::Notice(e)) => out.enumerated(e.kind),
                (EventField::ActionId, Whole::Reaction(e)) => out.id(&e.own_action_id()),
                (EventField::Comment(fields), Whole::Reaction(e)) => match e.comment_node() {
                    Some(comment) => run.comment(out, fields, &comment),
                    None => out.null(),
                },
                (EventField::User(fields), Whole::Reaction(e)) => match &e.0.user {
                    Some(id) => run.user_by_id(out, fields, id),
                    None => out.null(),
                },
                (EventField::CommentCount, Whole::Reaction(e)) => {
                    out.number(e.0.action.counts.comments)
                }
                (EventField::LikeCount, Whole::Reaction(e)) => out.number(e.0.action.counts.likes),
                (EventField::Group(fields), Whole::Notice(e)) => match (&e.group, loaded) {
                    (Some(group), Some(loaded)) => run.group(out, fields, group, loaded),
                    _ => out.null(),
                },
                (EventField::GroupId, Whole::Notice(e)) => {
                    out.opt_string(e.group_id.as_ref().map(|id| id.as_str()))
                }
                (EventField::UnseenCount, Whole::Notice(e)) => out.number(e.unseen_count),
                (EventField::UnreadCount, Whole::Notice(e)) => out.number(e.unread_count),
                // Compiled for the other kinds of event only.
                _ => out.null(),
            }
        }
        out.close();
    }
}

/// Whether what a shared event's `fields` ask is the same for every
/// subscriber who may read it (their own values aside, which are holes).
fn alike(fields: &Fields<EventField>) -> bool {
    let own = fields.iter().all(|f| match &f.kind {
        EventField::User(user) => scalar_user(user),
        EventField::Comment(comment) => alike_comment(comment),
        _ => true,
    });
    own && actions(fields).all(alike_for_readers)
}

/// Whether only a comment's own fields and its author's scalar ones are
/// asked.
fn alike_comment(fields: &Fields<CommentField>) -> bool {
    fields.iter().all(|f| match &f.kind {
        CommentField::Author(user) => scalar_user(user),
        _ => true,
    })
}

/// The actions an event's `fields` ask for, in the order they are written.
fn actions(fields: &Fields<EventField>) -> impl Iterator<Item = &Fields<ActionField>> {
    fields.iter().flat_map(|f| {
        let (item, own) = match &f.kind {
            EventField::Item(item) => (Some(item), None),
            EventField::Action(action) => (None, Some(action)),
            _ => (None, None),
        };
        let items = item.into_iter().flatten().filter_map(|f| match &f.kind {
            ItemField::Action(action) => Some(action),
            _ => None,
        });
        own.into_iter().chain(items)
    })
}

/// Whether what `fields` ask of an action is the same for every reader
/// who may read it.
fn alike_for_readers(fields: &Fields<ActionField>) -> bool {
    fields.iter().all(|f| match &f.kind {
        ActionField::ViewerHasLiked | ActionField::Readers | ActionField::FanOut(_) => false,
        ActionField::Actor(user) => scalar_user(user),
        ActionField::Comments(page) => node_fields(&page.fields).all(alike_comment),
        _ => true,
    })
}

/// Whether only a user's own scalar fields are asked.
fn scalar_user(fields: &Fields<UserField>) -> bool {
    fields.iter().all(|f| {
        matches!(
            f.kind,
            UserField::Typename | UserField::Id | UserField::UserId | UserField::Name
        )
    })
}

impl<'a> Compiler<'a> {
    fn feed_event(&self, sets: &[&'a SelectionSet]) -> Option<Fields<EventField>> {
        self.object(sets, "FeedEvent", |this, name, occ| match name {
            "__typename" => Some(EventField::Typename),
            "kind" => Self::leaf(occ, EventField::Kind),
            "resumeCursor" => Self::leaf(occ, EventField::ResumeCursor),
            "item" => Self::leaf(occ, ())
                .and_then(|()| this.item(&Self::subsets(occ)))
                .map(EventField::Item),
            _ => None,
        })
    }

    fn action_event(&self, sets: &[&'a SelectionSet]) -> Option<Fields<EventField>> {
        self.object(sets, "ActionEvent", |this, name, occ| match name {
            "__typename" => Some(EventField::Typename),
            "kind" => Self::leaf(occ, EventField::Kind),
            "actionId" => Self::leaf(occ, EventField::ActionId),
            "comment" => {
                let fields =
                    Self::leaf(occ, ()).and_then(|()| this.comment(&Self::subsets(occ)))?;
                // Its author's profile is read below.
                this.reads_below();
                Some(EventField::Comment(fields))
            }
            "user" => {
                let fields = Self::leaf(occ, ()).and_then(|()| this.user(&Self::subsets(occ)))?;
                this.reads_below();
                Some(EventField::User(fields))
            }
            "commentCount" => Self::leaf(occ, EventField::CommentCount),
            "likeCount" => Self::leaf(occ, EventField::LikeCount),
            _ => None,
        })
    }

    fn notification_event(&self, sets: &[&'a SelectionSet]) -> Option<Fields<EventField>> {
        self.object(sets, "NotificationEvent", |this, name, occ| match name {
            "__typename" => Some(EventField::Typename),
            "kind" => Self::leaf(occ, EventField::Kind),
            "group" => Self::leaf(occ, ())
                .and_then(|()| this.group(&Self::subsets(occ)))
                .map(EventField::Group),
            "groupId" => Self::leaf(occ, EventField::GroupId),
            "unseenCount" => Self::leaf(occ, EventField::UnseenCount),
            "unreadCount" => Self::leaf(occ, EventField::UnreadCount),
            _ => None,
        })
    }

    fn slice_event(&self, sets: &[&'a SelectionSet]) -> Option<Fields<EventField>> {
        self.object(sets, "SliceEvent", |this, name, occ| match name {
            "__typename" => Some(EventField::Typename),
            "action" => Self::leaf(occ, ())
                .and_then(|()| this.action(&Self::subsets(occ)))
                .map(EventField::Action),
            _ => None,
        })
    }
}

/// `template` filled with the values of a feed event (`feed`) that are
/// its subscriber's own; the actions written once where `readable` (the
/// subscriber may read the action), `null` elsewhere.
pub fn fill(
    template: &Template,
    feed: Option<&FeedEventNode>,
    cursors: &CursorKey,
    readable: bool,
) -> String {
    let own = |kind: usize, write: &dyn Fn(&mut Out, &FeedEventNode)| {
        let event = feed.filter(|_| template.uses(kind))?;
        let mut out = Out::default();
        write(&mut out, event);
        String::from_utf8(out.buf).ok()
    };
    let values: Vec<Option<String>> = vec![
        own(hole::OWNER_ID, &|out, e| out.string(&e.item.item.owner)),
        own(hole::ID, &|out, e| out.id(&e.item.global_id())),
        own(hole::CURSOR, &|out, e| {
            out.string(&e.item.cursor.seal(cursors))
        }),
        own(hole::RESUME_CURSOR, &|out, e| {
            out.string(&e.resume_cursor.seal(cursors))
        }),
    ];
    let mut values: Vec<Option<&str>> = values.iter().map(Option::as_deref).collect();
    let mut kind = hole::ACTION;
    while template.uses(kind) {
        values.push(template.common(kind).filter(|_| readable));
        kind += 1;
    }
    template.fill(&values)
}
