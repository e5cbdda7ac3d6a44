//! Live events from a plan: a subscription's selection of `FeedEvent` or
//! `SliceEvent` compiled once, when it subscribes, and each event's shared
//! part written once per selection from the event's rows by the field
//! writers the planned queries run, as a template with a hole for each
//! value that is a subscriber's own ([`crate::events::shared`]).
//!
//! The shared part is all the selection asks but the item's `ownerId`,
//! `id` and `cursor`, the stream's `resumeCursor`, and whether the
//! subscriber may read the item's `action` (a slice event reaches only
//! those who may read its action). The action is written once
//! too, so a plan covers only what of an action is the same for every
//! reader who may read it: not `viewerHasLiked`, `readers` or `fanOut`,
//! and of users (its actor, its comments' authors) their scalar fields.
//! Anything else, and the event runs as it did before plans.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::parser::types::{Field, SelectionSet};
use async_graphql::{Name, Positioned, Variables};

use super::comments::CommentField;
use super::compile::{
    directive_values, ActionField, Compiler, Fields, Fragments, ItemField, Plan, UserField,
};
use super::connection::node_fields;
use super::run::{action_needs, Bind, Out, Write};
use crate::api::cursor::CursorKey;
use crate::api::feed::Needs;
use crate::api::types::{ActionNode, FeedEventNode};
use crate::api::{AppState, Session};
use crate::descriptor::catalog::Catalog;
use crate::events::shared::{hole, Template};
use crate::model::Action;

/// A field of a `FeedEvent` or a `SliceEvent`.
#[derive(Debug)]
pub enum EventField {
    Typename,
    Kind,
    ResumeCursor,
    Item(Fields<ItemField>),
    /// A slice event's action.
    Action(Fields<ActionField>),
}

/// A `feedEvents` or `sliceEvents` selection, planned.
#[derive(Debug)]
pub struct EventPlan {
    /// `FeedEvent` or `SliceEvent`.
    type_name: &'static str,
    /// The subscription field's response key.
    key: Name,
    fields: Fields<EventField>,
    /// For arguments below the actions (their comments): the operation's
    /// variables and their definitions, and whether rows below are read.
    plan: Plan,
    variables: Variables,
    /// The plan written out, with the values of the variables: two plans
    /// alike write alike, so their subscribers share their events'
    /// templates.
    shape: Arc<str>,
}

impl EventPlan {
    /// The plan of the `feedEvents` or `sliceEvents` field `field` of a
    /// subscription with `fragments` and `variables`, if a plan covers its
    /// selection.
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
            _ => return None,
        };
        if !actions(&fields).all(alike_for_readers) {
            tracing::debug!("an event's action asks what is the reader's own");
            return None;
        }
        let key = field.node.response_key().node.clone();
        // With the variables' values: the arguments below the actions
        // (their comments' `first`) may read them.
        let shape = Arc::from(format!("{key}:{fields:?}:{variables:?}"));
        Some(Self {
            type_name,
            key,
            fields,
            plan: Plan {
                root: Vec::new(),
                below: compiler.reads_rows_below(),
                variables: variable_definitions,
            },
            variables: variables.clone(),
            shape,
        })
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
        let bind = Bind::new(&self.plan, &self.variables);
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
        ActionField::Comments { fields, .. } => node_fields(fields).all(|comment| {
            comment.iter().all(|f| match &f.kind {
                CommentField::Author(user) => scalar_user(user),
                _ => true,
            })
        }),
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
