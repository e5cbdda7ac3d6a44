//! GraphQL output objects over the domain types.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_graphql::{Context, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};

use super::access::access;
use super::cost::page_cost;
use super::cursor::{CursorKey, LazyCursor, ListId};
use super::error::ApiResultExt;
use super::global_id::GlobalId;
use super::page::connection;
use super::{loaders, state, viewer, AppState};
use crate::descriptor::Descriptor;
use crate::events::{ActionEvent, ActionEventKind, FeedEvent, FeedEventKind};
use crate::model::{
    Action, BumpRule, FanOutState, FeedItem, Millis, ObjectId, ReasonKind, Scope, Stamp, User,
};
use crate::store::Graph;
use crate::store::{Held, JobKind, QueuedRead};

pub use super::comments::{comments_page, CommentConnection, CommentNode};
pub use super::user_node::{user_node, UserNode};

pub fn datetime(ms: Millis) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// Something that happened, with its actor's profile when it was loaded along.
#[derive(Clone)]
pub struct ActionNode {
    pub action: Action,
    actor: Option<User>,
    /// Whether the viewer likes it, when loaded along with its page.
    liked: Option<bool>,
    /// Whether `recordAction` recorded it, on that mutation's answer.
    created: Option<bool>,
}

impl ActionNode {
    pub fn new(action: Action) -> Self {
        Self {
            action,
            actor: None,
            liked: None,
            created: None,
        }
    }

    /// `Action.created`: on `recordAction`'s answer, whether it recorded
    /// the action; `None` elsewhere.
    pub fn recorded_new(&self) -> Option<bool> {
        self.created
    }

    /// `recordAction`'s answer: the action it recorded (`created`), or the
    /// one recorded before under the same foreign id.
    pub fn recorded(action: Action, created: bool) -> Self {
        Self {
            created: Some(created),
            ..Self::new(action)
        }
    }

    /// Whether the query asks for `field` of the actions at `paths` (each a
    /// path of fields from the current one to an action).
    pub fn selected(ctx: &Context<'_>, paths: &[&[&str]], field: &str) -> bool {
        paths.iter().any(|path| {
            path.iter()
                .fold(ctx.look_ahead(), |f, name| f.field(name))
                .field(field)
                .exists()
        })
    }

    /// Wraps a page of actions for output. What the query asks of them at
    /// `paths` that needs the store (their actors, whether the viewer likes
    /// them) is loaded for the whole page in one batch each.
    pub async fn hydrate(
        ctx: &Context<'_>,
        actions: Vec<Action>,
        paths: &[&[&str]],
    ) -> async_graphql::Result<Vec<ActionNode>> {
        let needs = super::feed::Needs::of(ctx, paths);
        Self::load_along(state(ctx)?, viewer(ctx)?, actions, needs, &HashMap::new()).await
    }

    /// Wraps a page of actions for output, with what `needs` says loaded
    /// for the whole page in one store call each (not through the
    /// DataLoader, which would only add a hand-off to a task of its own).
    /// The names of some actors may be known already (from copies of the
    /// actions): only the others are loaded.
    pub async fn load_along(
        state: &super::AppState,
        viewer: &super::Viewer,
        actions: Vec<Action>,
        needs: super::feed::Needs,
        names: &HashMap<String, Option<String>>,
    ) -> async_graphql::Result<Vec<ActionNode>> {
        let mut nodes: Vec<ActionNode> = actions.into_iter().map(ActionNode::new).collect();
        if nodes.is_empty() {
            return Ok(nodes);
        }
        if needs.actor {
            let actor_ids: Vec<String> = nodes
                .iter()
                .map(|n| n.action.actor_id.clone())
                .filter(|id| !names.contains_key(id))
                .collect::<BTreeSet<String>>()
                .into_iter()
                .collect();
            let mut actors: HashMap<String, User> = names
                .iter()
                .map(|(id, name)| {
                    let user = User {
                        id: id.clone(),
                        name: name.clone(),
                    };
                    (id.clone(), user)
                })
                .collect();
            if !actor_ids.is_empty() {
                let loaded = state
                    .store
                    .get_users(&viewer.tenant, &actor_ids)
                    .await
                    .api()?;
                actors.extend(loaded.into_iter().map(|u| (u.id.clone(), u)));
            }
            for node in &mut nodes {
                node.actor = actors.get(&node.action.actor_id).cloned();
            }
        }
        if needs.liked {
            let ids: Vec<ObjectId> = nodes.iter().map(|n| n.action.id).collect();
            let liked = state
                .store
                .liked(&viewer.tenant, &viewer.user, &ids)
                .await
                .api()?;
            for node in &mut nodes {
                node.liked = Some(liked.contains(&node.action.id));
            }
        }
        Ok(nodes)
    }
}

/// The values of an action's fields, written once for both executors: the
/// resolvers below and the plans ([`super::plan`]) call these.
impl ActionNode {
    pub(crate) fn global_id(&self) -> ID {
        GlobalId::Action(self.action.id).encode()
    }

    pub(crate) fn own_id(&self) -> ID {
        ID(self.action.id.to_hex())
    }

    /// The actor as loaded with the page; `None` when it was not.
    pub(crate) fn loaded_actor(&self) -> Option<UserNode> {
        self.actor.clone().map(UserNode::from)
    }

    /// The actor with the profile loaded with the page (`actor`), or with
    /// none when the page found no profile.
    pub(crate) fn actor_as_loaded(&self) -> UserNode {
        self.loaded_actor().unwrap_or_else(|| UserNode {
            id: self.action.actor_id.clone(),
            name: None,
        })
    }

    pub(crate) fn conducted_at(&self) -> DateTime<Utc> {
        datetime(self.action.conducted)
    }

    pub(crate) fn groups_to(&self) -> Vec<ID> {
        self.action.to.iter().map(|g| ID(g.clone())).collect()
    }

    pub(crate) fn expires(&self) -> Option<DateTime<Utc>> {
        self.action.expires_at.map(datetime)
    }

    /// The readers of a `RESTRICTED` action, shown to its actor only.
    pub(crate) fn readers_for(&self, viewer: &super::Viewer) -> Option<&[String]> {
        (viewer.user == self.action.actor_id && self.action.scope == Scope::Restricted)
            .then_some(self.action.readers.as_slice())
    }

    /// Whether the viewer likes it, when that was loaded with the page.
    pub(crate) fn liked_as_loaded(&self) -> Option<bool> {
        self.liked
    }
}

#[Object(name = "Action")]
impl ActionNode {
    /// Opaque global id (`Node`): `node(id:)` finds the action by it, and
    /// every argument that takes an action id takes it too.
    pub(super) async fn id(&self) -> ID {
        self.global_id()
    }

    /// The action's own id (24 hex digits), as `FeedItem.actionId` and
    /// events give it.
    async fn action_id(&self) -> ID {
        self.own_id()
    }

    /// Who did it.
    async fn actor(&self, ctx: &Context<'_>) -> async_graphql::Result<UserNode> {
        match self.loaded_actor() {
            Some(user) => Ok(user),
            None => user_node(ctx, &self.action.actor_id).await,
        }
    }

    async fn actor_id(&self) -> &str {
        &self.action.actor_id
    }

    /// When it happened.
    async fn conducted(&self) -> DateTime<Utc> {
        self.conducted_at()
    }

    /// The groups it was posted to.
    async fn to(&self) -> Vec<ID> {
        self.groups_to()
    }

    /// When it stops being shown anywhere, if it does (set by the
    /// recorder; `--item-ttl` is not counted).
    async fn expires_at(&self) -> Option<DateTime<Utc>> {
        self.expires()
    }

    /// Hidden by its actor: out of every feed, visible to the actor only.
    async fn hidden(&self) -> bool {
        self.action.hidden
    }

    async fn scope(&self) -> Scope {
        self.action.scope
    }

    /// The readers of a `RESTRICTED` action; shown to its actor only.
    async fn readers(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<&[String]>> {
        Ok(self.readers_for(viewer(ctx)?))
    }

    /// Ids of the objects it refers to (an applicant, a position…).
    async fn ref_ids(&self) -> &[String] {
        &self.action.ref_ids
    }

    async fn tags(&self) -> &[String] {
        &self.action.tags
    }

    /// Progress of its delivery into readers' feeds.
    async fn fan_out(&self) -> FanOutNode {
        FanOutNode {
            tenant: self.action.tenant.clone(),
            id: self.action.id,
            state: self.action.fan_out.state,
            lease: tokio::sync::OnceCell::new(),
        }
    }

    /// On `recordAction`'s answer, whether it recorded this action: false
    /// when its `foreignId` named one the actor recorded before, which it
    /// answers instead (nothing is recorded or delivered again). Null
    /// elsewhere.
    async fn created(&self) -> Option<bool> {
        self.recorded_new()
    }

    /// What happened, typed.
    async fn descriptor(&self) -> &Descriptor {
        &self.action.descriptor
    }

    async fn comment_count(&self) -> u64 {
        self.action.counts.comments
    }

    async fn like_count(&self) -> u64 {
        self.action.counts.likes
    }

    /// Whether the viewer likes this action.
    async fn viewer_has_liked(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        if let Some(liked) = self.liked_as_loaded() {
            return Ok(liked);
        }
        let viewer = viewer(ctx)?;
        let liked = state(ctx)?
            .store
            .liked(&viewer.tenant, &viewer.user, &[self.action.id])
            .await
            .api()?;
        Ok(!liked.is_empty())
    }

    /// Comments, oldest first.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn comments(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<CommentConnection> {
        comments_page(state(ctx)?, viewer(ctx)?, self.action.id, first, after).await
    }
}

/// Delivery progress of an action.
pub struct FanOutNode {
    tenant: String,
    id: ObjectId,
    state: FanOutState,
    /// The job's lease, once read.
    lease: tokio::sync::OnceCell<Option<Held>>,
}

impl FanOutNode {
    /// The lease of the fan-out's job, while a worker holds one: read only
    /// when asked for (the state is the action's own), and once for both
    /// fields that show it.
    async fn lease(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Held>> {
        let held = self
            .lease
            .get_or_try_init(|| async {
                fan_out_lease(state(ctx)?, &self.tenant, self.id, self.state).await
            })
            .await?;
        Ok(held.clone())
    }
}

/// The lease of `action`'s fan-out job, while a worker holds one (none once
/// the fan-out is done), for both executors.
pub(crate) async fn fan_out_lease(
    state: &AppState,
    tenant: &str,
    action: ObjectId,
    fan_out: FanOutState,
) -> async_graphql::Result<Option<Held>> {
    if fan_out == FanOutState::Done {
        return Ok(None);
    }
    let key = action.to_hex();
    let queued = state
        .store
        .queued(JobKind::FanOut, tenant, QueuedRead::under(&key))
        .await
        .api()?;
    Ok(queued
        .into_iter()
        .find(|q| q.job.key == key)
        .and_then(|q| q.held))
}

/// Delivery progress of an action.
#[Object(name = "FanOut")]
impl FanOutNode {
    async fn state(&self) -> FanOutState {
        self.state
    }

    /// End of the current worker's lease, while one holds the fan-out.
    async fn locked_until(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<DateTime<Utc>>> {
        Ok(self.lease(ctx).await?.map(|held| datetime(held.until)))
    }

    /// The worker holding the lease, while one holds the fan-out.
    async fn worker(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<String>> {
        Ok(self.lease(ctx).await?.map(|held| held.worker))
    }
}

/// Why an item stands where it is in a feed: how it came (`FOLLOWS`, `TEAM`…),
/// or, once a comment raised it, `BUMPED` with the rule that matched the reader.
#[derive(SimpleObject)]
#[graphql(name = "FeedReason")]
pub struct FeedReasonNode {
    pub kind: ReasonKind,
    /// The actor whose action brought the item.
    pub actor_id: String,
    /// For `BUMPED`: the rule that raised the item for this reader.
    pub rule: Option<BumpRule>,
    /// For `BUMPED`: the commenter.
    pub by: Option<String>,
    /// For `BUMPED`: when the comment was made.
    pub at: Option<DateTime<Utc>>,
}

/// How the item's action is resolved: already loaded with its page, shared by
/// the event that carries it, or on demand.
pub enum ActionSlot {
    Loaded(Box<ActionNode>),
    Shared(Arc<Action>),
    Lazy,
}

/// One item of a reader's feed.
pub struct FeedItemNode {
    pub item: FeedItem,
    pub cursor: LazyCursor,
    pub action: ActionSlot,
}

/// The values of a feed item's fields, for both executors.
impl FeedItemNode {
    pub(crate) fn global_id(&self) -> ID {
        GlobalId::FeedItem {
            action: self.item.action_id,
            owner: self.item.owner.clone(),
        }
        .encode()
    }

    pub(crate) fn own_action_id(&self) -> ID {
        ID(self.item.action_id.to_hex())
    }

    pub(crate) fn relevancy_at(&self) -> DateTime<Utc> {
        datetime(self.item.relevancy)
    }

    pub(crate) fn reason_node(&self) -> FeedReasonNode {
        let reason = &self.item.reason;
        let bump = reason.bump.as_ref();
        FeedReasonNode {
            kind: reason.kind,
            actor_id: reason.actor_id.clone(),
            rule: bump.map(|b| b.rule),
            by: bump.map(|b| b.by.clone()),
            at: bump.map(|b| datetime(b.at)),
        }
    }
}

#[Object(name = "FeedItem")]
impl FeedItemNode {
    /// Opaque global id (`Node`) of this action in this reader's feed:
    /// `node(id:)` finds the item by it, for its owner (or `admin`).
    pub(super) async fn id(&self) -> ID {
        self.global_id()
    }

    /// The user whose feed holds the item.
    async fn owner_id(&self) -> &str {
        &self.item.owner
    }

    /// Where the item stands in its feed; pass it as `after` / `before`.
    async fn cursor(&self, ctx: &Context<'_>) -> async_graphql::Result<String> {
        Ok(self.cursor.seal(&state(ctx)?.cursors))
    }

    /// The action's own id (24 hex digits), as `Action.actionId`.
    async fn action_id(&self) -> ID {
        self.own_action_id()
    }

    /// The item's rank: a time that starts as the action's `conducted`.
    async fn relevancy(&self) -> DateTime<Utc> {
        self.relevancy_at()
    }

    async fn reason(&self) -> FeedReasonNode {
        self.reason_node()
    }

    /// The action; null when it was deleted or hidden, or you may no longer see
    /// it (as in `REMOVED` events).
    async fn action(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<ActionNode>> {
        let action = match &self.action {
            ActionSlot::Loaded(node) => return Ok(Some(node.as_ref().clone())),
            ActionSlot::Shared(action) => Some(action.as_ref().clone()),
            ActionSlot::Lazy => loaders(ctx)?
                .actions
                .load_one(self.item.action_id)
                .await
                .api()?,
        };
        let Some(action) = action else {
            return Ok(None);
        };
        let viewer = viewer(ctx)?;
        let access = access(ctx, viewer, [&action]).await?;
        Ok(access.can_read(&action).then(|| ActionNode::new(action)))
    }
}

/// A change to the viewer's feed.
pub struct FeedEventNode {
    pub kind: FeedEventKind,
    pub item: FeedItemNode,
    pub resume_cursor: LazyCursor,
}

impl FeedEventNode {
    /// `resume` is the newest change the stream has passed on.
    pub fn new(event: &FeedEvent, resume: Stamp, cursors: &CursorKey) -> Self {
        let (tenant, owner) = (event.tenant.as_str(), event.item.owner.as_str());
        let list = ListId::home(cursors, tenant, owner);
        Self {
            kind: event.kind,
            item: FeedItemNode {
                cursor: list.lazy_position(event.item.position()),
                item: event.item.clone(),
                action: match &event.action {
                    Some(action) => ActionSlot::Shared(action.clone()),
                    None => ActionSlot::Lazy,
                },
            },
            resume_cursor: ListId::feed_changes(cursors, tenant, owner).lazy_stamp(resume),
        }
    }
}

#[Object(name = "FeedEvent")]
impl FeedEventNode {
    async fn kind(&self) -> FeedEventKind {
        self.kind
    }

    /// The item as it stands now; `REMOVED` items as they stood.
    async fn item(&self) -> &FeedItemNode {
        &self.item
    }

    /// Pass to `feedEvents(after:)` to resume after this event.
    async fn resume_cursor(&self, ctx: &Context<'_>) -> async_graphql::Result<String> {
        Ok(self.resume_cursor.seal(&state(ctx)?.cursors))
    }
}

/// An action that joined a slice.
pub struct SliceEventNode(pub ActionNode);

#[Object(name = "SliceEvent")]
impl SliceEventNode {
    async fn action(&self) -> &ActionNode {
        &self.0
    }
}

/// A reaction to an action.
pub struct ActionEventNode(pub Arc<ActionEvent>);

impl ActionEventNode {
    pub(crate) fn own_action_id(&self) -> ID {
        ID(self.0.action.id.to_hex())
    }

    pub(crate) fn comment_node(&self) -> Option<CommentNode> {
        self.0.comment.clone().map(CommentNode)
    }
}

#[Object(name = "ActionEvent")]
impl ActionEventNode {
    async fn kind(&self) -> ActionEventKind {
        self.0.kind
    }

    async fn action_id(&self) -> ID {
        self.own_action_id()
    }

    /// The new comment, for `COMMENTED`.
    async fn comment(&self) -> Option<CommentNode> {
        self.comment_node()
    }

    /// Who liked or unliked, for `LIKED` / `UNLIKED`.
    async fn user(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        match &self.0.user {
            Some(id) => user_node(ctx, id).await.map(Some),
            None => Ok(None),
        }
    }

    /// The action's comments after this event.
    async fn comment_count(&self) -> u64 {
        self.0.action.counts.comments
    }

    /// The action's likes after this event.
    async fn like_count(&self) -> u64 {
        self.0.action.counts.likes
    }
}

connection!(
    FeedItemConnection,
    FeedItemEdge,
    FeedItemNode,
    "feed item",
    /// Pass to `feedEvents(after:)` to receive every change since this page was
    /// read. It reaches a few seconds back, so an item changed just before the
    /// read may come again: key items by `actionId`.
    events_cursor: String,
);
connection!(ActionConnection, ActionEdge, ActionNode, "action");
connection!(UserConnection, UserEdge, UserNode, "user");
