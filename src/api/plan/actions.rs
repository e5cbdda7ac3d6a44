//! Feed items and actions, planned: the fields of `FeedItem`, `FeedReason`,
//! `Action`, `FanOut` and every descriptor type, compiled and written
//! wherever an item or an action is (pages, lists, nodes, events). The
//! values come from the same functions the async-graphql resolvers call.

use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::SelectionSet;
use async_graphql::Name;

use super::comments::CommentPage;
use super::compile::{Compiler, Fields};
use super::out::Out;
use super::run::Run;
use super::users::UserField;
use crate::api::feed::Needs;
use crate::api::types::{datetime, ActionNode, ActionSlot, FeedItemNode, FeedReasonNode};
use crate::descriptor::catalog::UNKNOWN;
use crate::descriptor::graphql::Member;
use crate::events::shared::hole;

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
    Comments(CommentPage),
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

/// A descriptor's fields, per member of the `Descriptor` union: response
/// key and field name (`__typename` included).
#[derive(Debug, Default)]
pub struct DescriptorFields {
    pub members: IndexMap<String, Vec<(Name, Name)>>,
}

impl<'a> Compiler<'a> {
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
            "comments" => this.comments(occ).map(ActionField::Comments),
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

    /// Each member's fields: those of its type, and `__typename`.
    fn descriptor(&self, sets: &[&'a SelectionSet]) -> Option<DescriptorFields> {
        let mut members = IndexMap::new();
        let names = self
            .catalog()
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

impl Run<'_> {
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
                ActionField::Comments(page) => self.comments(out, page, node),
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
