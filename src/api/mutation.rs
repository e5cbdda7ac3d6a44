//! Mutation root: recording and removing actions, the social graph, profiles.

use std::collections::BTreeSet;

use async_graphql::{Context, InputObject, MergedObject, Object, ID};
use chrono::{DateTime, Utc};

use super::access::access;
use super::deletions;
use super::error::{bad_input, coded, forbidden, not_found, ApiResultExt, CONFLICT};
use super::global_id::{action_id_arg, opt_user_id_arg, renamed_arg, user_id_arg};
use super::graph_mutation::GraphMutation;
use super::minted::minter;
use super::notifications::NotificationMutation;
use super::publish::{
    publish_action_removed, publish_reaction, publish_removed, publish_to_slices,
};
use super::types::CommentNode;
use super::types::{user_node, ActionNode, UserNode};
use super::{acting_user, require_service, require_users, state, viewer, AppState, Viewer};
use crate::descriptor::DescriptorInput;
use crate::events::ActionEventKind;
use crate::model::limits::{check_name, check_text, normalize_id, normalize_ids};
use crate::model::{
    Action, Comment, Counts, EventType, FanOut, Foreign, GroupKind, ObjectId, Scope, User,
};
use crate::store::{Existing, Graph, Inserted, Reactions, Removal, Timelines};
use crate::timeline::home::pulled_item;
use crate::webhooks::outbox;
use crate::webhooks::Event;

/// How far in the future `conducted` may lie (clock skew between services).
const MAX_CLOCK_SKEW_MS: i64 = 5 * 60 * 1000;

/// Everything that changes what Riverfeed holds. Arguments that name an
/// action or a user take its own id (`actionId`, `userId`) or its global `id`.
#[derive(MergedObject, Default)]
#[graphql(name = "Mutation")]
pub struct MutationRoot(
    ActionMutation,
    GraphMutation,
    NotificationMutation,
    super::webhooks::WebhookMutation,
);

/// Actions, reactions and profiles (the social graph is
/// [`GraphMutation`]'s).
#[derive(Default)]
pub struct ActionMutation;

/// A user's display profile.
#[derive(InputObject)]
pub struct UpsertUserInput {
    /// The application's id of the user (or the user's global id).
    pub user_id: Option<ID>,
    #[graphql(deprecation = "Use `userId`.")]
    pub id: Option<ID>,
    pub name: String,
}

/// An action to record, with the viewer (or `actorId`) as its actor.
#[derive(InputObject)]
pub struct RecordActionInput {
    /// What happened: exactly one descriptor.
    pub descriptor: DescriptorInput,
    /// Who may see it; `PUBLIC` (followers and friends) by default.
    #[graphql(default_with = "Scope::Public")]
    pub scope: Scope,
    /// Readers of a `RESTRICTED` action (known users of the tenant; user ids
    /// or global ids).
    #[graphql(default)]
    pub readers: Vec<ID>,
    /// Ids of the objects it refers to, for slices; the ids its descriptor
    /// holds in `@slice` fields join them.
    #[graphql(default)]
    pub ref_ids: Vec<String>,
    #[graphql(default)]
    pub tags: Vec<String>,
    /// When it happened; now by default. After 1970, at most five minutes ahead.
    pub conducted: Option<DateTime<Utc>>,
    /// When it stops being shown anywhere (a story, a job post that
    /// closes): it leaves every feed, slice and `action(actionId)` then. After
    /// `conducted`; never by default.
    pub expires_at: Option<DateTime<Utc>>,
    /// Groups to post it to: it stands in their `groupFeed`s (a TEAM or
    /// DEPARTMENT action stands in its groups' too). The actor must be a
    /// member of each, unless recorded with the service role.
    #[graphql(default)]
    pub to: Vec<ID>,
    /// Record it for this user (a user id or global id) instead of the viewer
    /// (`service` and `admin` only).
    pub actor_id: Option<ID>,
    /// The application's own id of the action, unique per actor: recording
    /// again under it records nothing and answers the action recorded
    /// first (`created: false`), so a request retried after a timeout is
    /// safe. Other content under it is `CONFLICT`.
    pub foreign_id: Option<String>,
}

fn dedup(values: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    values
        .into_iter()
        .filter(|v| seen.insert(v.clone()))
        .collect()
}

/// The action with this id in the viewer's tenant, or `NOT_FOUND`.
async fn fetch_action(
    ctx: &Context<'_>,
    viewer: &Viewer,
    id: ObjectId,
) -> async_graphql::Result<Action> {
    state(ctx)?
        .store
        .get_actions(&viewer.tenant, &[id])
        .await
        .api()?
        .pop()
        .ok_or_else(|| not_found(format!("no action {id}")))
}

/// Whether the viewer may read `action` (scope, readers, groups, hidden).
async fn may_read(
    ctx: &Context<'_>,
    viewer: &Viewer,
    action: &Action,
) -> async_graphql::Result<bool> {
    Ok(access(ctx, viewer, [action]).await?.can_read(action))
}

/// Loads an action the viewer may change (its own, or any with `service` /
/// `admin`). One the viewer may not even read answers `NOT_FOUND`, exactly as a
/// missing one, so ids cannot be probed; one it reads but may not change
/// answers `FORBIDDEN`.
async fn own_action(
    ctx: &Context<'_>,
    viewer: &Viewer,
    id: ObjectId,
) -> async_graphql::Result<Action> {
    let action = fetch_action(ctx, viewer, id).await?;
    if action.actor_id == viewer.user || viewer.acts_for_others() {
        Ok(action)
    } else if may_read(ctx, viewer, &action).await? {
        Err(forbidden(
            "only the actor (or the service or admin role) may change an action",
        ))
    } else {
        Err(not_found(format!("no action {id}")))
    }
}

/// Loads an action the viewer may read, or `NOT_FOUND` exactly as for a
/// missing one.
async fn readable_action(
    ctx: &Context<'_>,
    viewer: &Viewer,
    id: ObjectId,
) -> async_graphql::Result<Action> {
    let action = fetch_action(ctx, viewer, id).await?;
    if may_read(ctx, viewer, &action).await? {
        Ok(action)
    } else {
        Err(not_found(format!("no action {id}")))
    }
}

/// Checks a scope and its readers, and finds the groups a TEAM / DEPARTMENT
/// action reaches: the actor's groups of that kind. Returns the readers and the
/// scope groups.
async fn resolve_scope(
    state: &AppState,
    viewer: &Viewer,
    actor: &str,
    scope: Scope,
    readers: Vec<String>,
) -> async_graphql::Result<(Vec<String>, Vec<String>)> {
    let readers = dedup(normalize_ids("readers", readers).api()?);
    let groups = match scope {
        Scope::Restricted => {
            if readers.is_empty() {
                return Err(bad_input("a RESTRICTED action needs at least one reader"));
            }
            require_users(state, viewer, &readers).await?;
            Vec::new()
        }
        _ if !readers.is_empty() => {
            return Err(bad_input("readers are only for RESTRICTED actions"));
        }
        Scope::Team | Scope::Department => {
            let kind = if scope == Scope::Team {
                GroupKind::Team
            } else {
                GroupKind::Department
            };
            let groups: Vec<String> = state
                .store
                .memberships(&viewer.tenant, actor)
                .await
                .api()?
                .into_iter()
                .filter(|m| m.kind == kind)
                .map(|m| m.group_id)
                .collect();
            if groups.is_empty() {
                return Err(bad_input(format!(
                    "scope {scope:?} needs the actor to belong to a {kind:?} group; join one first"
                )));
            }
            groups
        }
        Scope::Public => Vec::new(),
    };
    Ok((readers, groups))
}

impl ActionMutation {
    async fn assignment(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        ref_id: String,
        on: bool,
    ) -> async_graphql::Result<bool> {
        let viewer = viewer(ctx)?;
        require_service(viewer, if on { "assign" } else { "unassign" })?;
        let state = state(ctx)?;
        let user = user_id_arg("userId", &user_id)?;
        let ref_id = normalize_id("refId", &ref_id).api()?;
        if on {
            require_users(state, viewer, std::slice::from_ref(&user)).await?;
        }
        // An assignment owes its notice in the same step: its job is queued
        // with it.
        let store = &state.store;
        let changed = if on {
            let now = state.clock.now();
            store
                .assign(&viewer.tenant, &user, &ref_id, &viewer.user, now)
                .await
        } else {
            store
                .set_assignment(&viewer.tenant, &user, &ref_id, false)
                .await
        }
        .api()?;
        if changed && on {
            state.wake.notify_one();
        }
        Ok(changed)
    }

    async fn set_like(
        &self,
        ctx: &Context<'_>,
        action_id: ID,
        on: bool,
    ) -> async_graphql::Result<ActionNode> {
        let viewer = viewer(ctx)?;
        let id = action_id_arg("actionId", &action_id)?;
        let mut action = readable_action(ctx, viewer, id).await?;
        let state = state(ctx)?;
        // A like owes its notice in the same step: its job is queued with it.
        let now = state.clock.now();
        let (changed, counts) = state
            .store
            .set_like(&viewer.tenant, id, &viewer.user, on, now)
            .await
            .api()?;
        action.counts = counts;
        if changed && on {
            state.wake.notify_one();
        }
        if changed {
            let kind = if on {
                ActionEventKind::Liked
            } else {
                ActionEventKind::Unliked
            };
            publish_reaction(state, &action, kind, None, Some(&viewer.user));
        }
        Ok(ActionNode::new(action))
    }
}

#[Object]
impl ActionMutation {
    /// Creates or updates a user's display profile.
    async fn upsert_user(
        &self,
        ctx: &Context<'_>,
        input: UpsertUserInput,
    ) -> async_graphql::Result<UserNode> {
        let viewer = viewer(ctx)?;
        let (field, id) = renamed_arg(("input.userId", input.user_id), ("input.id", input.id))?;
        let id = user_id_arg(field, &id)?;
        let id = acting_user(viewer, Some(&id))?;
        check_text("input.name", &input.name).api()?;
        let user = User {
            id,
            name: Some(input.name),
        };
        state(ctx)?
            .store
            .put_user(&viewer.tenant, &user, Existing::Replace)
            .await
            .api()?;
        Ok(user.into())
    }

    /// Records an action by the viewer. It is stored at once and delivered to its
    /// readers' feeds by the fan-out worker (`fanOut.state` tells how far it got).
    /// Under a `foreignId` the actor recorded before, it records nothing and
    /// answers that action (`created: false`).
    async fn record_action(
        &self,
        ctx: &Context<'_>,
        input: RecordActionInput,
    ) -> async_graphql::Result<ActionNode> {
        let viewer = viewer(ctx)?;
        let state = state(ctx)?;
        let actor = opt_user_id_arg("input.actorId", input.actor_id.as_ref())?;
        let actor = acting_user(viewer, actor.as_deref())?;
        let descriptor = state.descriptors.record(input.descriptor).api()?;
        // A user speaks for itself only: a rating it records is its own. The
        // application's backend (service) records for anyone.
        if !viewer.acts_for_others() {
            if let Some((field, _)) = state
                .descriptors
                .done_by(&descriptor)
                .into_iter()
                .find(|(_, id)| *id != actor)
            {
                return Err(forbidden(format!(
                    "{field} must be the actor ({actor}); recording for others needs the service role"
                )));
            }
        }
        let readers = input
            .readers
            .iter()
            .map(|id| user_id_arg("input.readers", id))
            .collect::<async_graphql::Result<Vec<String>>>()?;
        let mut ref_ids = normalize_ids("input.refIds", input.ref_ids).api()?;
        ref_ids.extend(state.descriptors.slice_ids(&descriptor));
        let ref_ids = dedup(ref_ids);
        let tags = dedup(normalize_ids("input.tags", input.tags).api()?);
        let to = input.to.into_iter().map(|id| id.0).collect();
        let to = dedup(normalize_ids("input.to", to).api()?);
        if !to.is_empty() && !viewer.acts_for_others() {
            let mine = state
                .store
                .memberships(&viewer.tenant, &actor)
                .await
                .api()?;
            if let Some(group) = to.iter().find(|g| !mine.iter().any(|m| m.group_id == **g)) {
                return Err(forbidden(format!(
                    "{actor} is not a member of group {group}; posting to a group needs its membership or the service role"
                )));
            }
        }

        let now = state.clock.now();
        let minted = minter(ctx);
        let conducted = input
            .conducted
            .map_or_else(|| minted.now(&*state.clock), |t| t.timestamp_millis());
        if conducted > now + MAX_CLOCK_SKEW_MS {
            return Err(bad_input("input.conducted lies in the future"));
        }
        if conducted <= 0 {
            return Err(bad_input(
                "input.conducted must be after 1970-01-01T00:00:00Z",
            ));
        }
        let expires_at = input.expires_at.map(|t| t.timestamp_millis());
        if input.conducted.is_none() && expires_at.is_some_and(|at| at <= now) {
            return Err(bad_input("input.expiresAt must be in the future"));
        }
        if expires_at.is_some_and(|at| at <= conducted) {
            return Err(bad_input("input.expiresAt must be after input.conducted"));
        }
        if expires_at.is_some_and(|at| at <= now) {
            return Err(bad_input("input.expiresAt has passed already"));
        }

        let (readers, scope_groups) =
            resolve_scope(state, viewer, &actor, input.scope, readers).await?;
        let foreign_id = input
            .foreign_id
            .map(|id| normalize_id("input.foreignId", &id))
            .transpose()
            .api()?;

        let mut action = Action {
            id: minted.id(),
            tenant: viewer.tenant.clone(),
            actor_id: actor,
            conducted,
            hidden: false,
            scope: input.scope,
            readers,
            scope_groups,
            ref_ids,
            tags,
            descriptor,
            fan_out: FanOut::pending(),
            counts: Counts::default(),
            expires_at,
            to,
            foreign: None,
        };
        action.foreign = foreign_id.map(|id| Foreign::of(id, &action, input.conducted.is_some()));
        // A retry of a request whose first attempt stored this action,
        // which was deleted since: the deletion stands (unless the action
        // outlived it, its removal failed).
        if minted.keyed()
            && deletions::of(state.store.as_ref(), &viewer.tenant, action.id, now)
                .await
                .api()?
                .is_some()
        {
            let ids = [action.id];
            let stored = state.store.get_actions(&viewer.tenant, &ids).await.api()?;
            return match stored.into_iter().next() {
                Some(first) => Ok(ActionNode::recorded(first, true)),
                None => Err(not_found(format!(
                    "action {}, recorded by this request, was deleted since",
                    action.id
                ))),
            };
        }
        match state.store.insert_action(&action).await.api()? {
            Inserted::New => {
                state.wake.notify_one();
                publish_to_slices(state, &action);
                Ok(ActionNode::recorded(action, true))
            }
            // This request's own action, stored by an attempt that did not
            // live to answer: answered as that attempt would have.
            Inserted::Existing(first) if first.id == action.id => {
                Ok(ActionNode::recorded(*first, true))
            }
            Inserted::Existing(first) => {
                if first.foreign != action.foreign {
                    let id = action.foreign.map(|f| f.id).unwrap_or_default();
                    return Err(coded(
                        CONFLICT,
                        format!(
                            "input.foreignId {id:?} names action {} of {}, recorded with other content; \
                             record new content under a new foreignId",
                            first.id, first.actor_id
                        ),
                    ));
                }
                Ok(ActionNode::recorded(*first, false))
            }
        }
    }

    /// Hides an action (the actor's, or any for `service` and `admin`): it
    /// leaves every feed and slice at once.
    async fn hide_action(
        &self,
        ctx: &Context<'_>,
        action_id: Option<ID>,
        #[graphql(deprecation = "Use `actionId`.")] id: Option<ID>,
    ) -> async_graphql::Result<ActionNode> {
        let viewer = viewer(ctx)?;
        let state = state(ctx)?;
        let (field, id) = renamed_arg(("actionId", action_id), ("id", id))?;
        let id = action_id_arg(field, &id)?;
        let mut action = own_action(ctx, viewer, id).await?;
        let hidden = Action {
            hidden: true,
            ..action.clone()
        };
        tell_action(ctx, state, &action, EventType::ActionUpdated, |now| {
            Event::action_updated(&hidden, "hidden", now)
        })
        .await?;
        let removed = state
            .store
            .remove_action(&viewer.tenant, id, Removal::Hide)
            .await
            .api()?;
        state.outbox.wake.notify_one();
        publish_action_removed(state, &action, removed).await?;
        action.hidden = true;
        Ok(ActionNode::new(action))
    }

    /// Changes who may see an action (the actor's, or any for `service` and
    /// `admin`). Readers it no longer reaches lose it at once, on every read;
    /// readers it now reaches get it delivered.
    async fn set_action_scope(
        &self,
        ctx: &Context<'_>,
        action_id: Option<ID>,
        #[graphql(deprecation = "Use `actionId`.")] id: Option<ID>,
        scope: Scope,
        #[graphql(default)] readers: Vec<ID>,
    ) -> async_graphql::Result<ActionNode> {
        let viewer = viewer(ctx)?;
        let state = state(ctx)?;
        let (field, id) = renamed_arg(("actionId", action_id), ("id", id))?;
        let id = action_id_arg(field, &id)?;
        let action = own_action(ctx, viewer, id).await?;
        let readers = readers
            .iter()
            .map(|r| user_id_arg("readers", r))
            .collect::<async_graphql::Result<Vec<String>>>()?;
        let (readers, groups) =
            resolve_scope(state, viewer, &action.actor_id, scope, readers).await?;
        let scoped = Action {
            scope,
            ..action.clone()
        };
        tell_action(ctx, state, &action, EventType::ActionUpdated, |now| {
            Event::action_updated(&scoped, "scope", now)
        })
        .await?;
        let updated = state
            .store
            .set_action_scope(&viewer.tenant, id, scope, &readers, &groups)
            .await
            .api()?;
        state.wake.notify_one();
        state.outbox.wake.notify_one();
        Ok(ActionNode::new(updated))
    }

    /// Deletes an action (the actor's, or any for `service` and `admin`) with all
    /// its feed items. Returns its id.
    async fn delete_action(
        &self,
        ctx: &Context<'_>,
        action_id: Option<ID>,
        #[graphql(deprecation = "Use `actionId`.")] id: Option<ID>,
    ) -> async_graphql::Result<ID> {
        let viewer = viewer(ctx)?;
        let state = state(ctx)?;
        let (field, id) = renamed_arg(("actionId", action_id), ("id", id))?;
        let oid = action_id_arg(field, &id)?;
        let store = state.store.as_ref();
        let minted = minter(ctx);
        let deletion = minted.id();
        let now = state.clock.now();
        let deleted_before = minted.keyed()
            && deletions::of(store, &viewer.tenant, oid, now).await.api()? == Some(deletion);
        let action = match own_action(ctx, viewer, oid).await {
            Ok(action) => action,
            // Deleted by this request already, in an attempt that did not
            // live to answer: answered as that attempt would have.
            Err(_) if deleted_before => return Ok(ID(oid.to_hex())),
            Err(err) => return Err(err),
        };
        let expires = state.kept_for_retries(now);
        deletions::keep(store, &viewer.tenant, oid, deletion, now, expires)
            .await
            .api()?;
        tell_action(ctx, state, &action, EventType::ActionDeleted, |now| {
            Event::action_deleted(&action, now)
        })
        .await?;
        let removed = state
            .store
            .remove_action(&viewer.tenant, oid, Removal::Delete)
            .await
            .api()?;
        #[cfg(debug_assertions)]
        crate::http::idempotency::crash_point(
            std::env::var_os("RIVERFEED_CRASH_AFTER_CHANGE").is_some(),
        );
        state.outbox.wake.notify_one();
        publish_action_removed(state, &action, removed).await?;
        Ok(ID(oid.to_hex()))
    }

    /// Sets the display name copied next to `refId` (an applicant's name beside
    /// its `applicantId`, a position's…) in every action that refers to it.
    /// Returns how many copied names changed. The name is at most 1 KiB, as
    /// every copied name. `service` and `admin` only.
    async fn rename_ref(
        &self,
        ctx: &Context<'_>,
        ref_id: String,
        name: String,
    ) -> async_graphql::Result<u64> {
        let viewer = viewer(ctx)?;
        require_service(viewer, "renameRef")?;
        let ref_id = normalize_id("refId", &ref_id).api()?;
        if name.trim().is_empty() {
            return Err(bad_input("name must not be empty"));
        }
        // The name is copied into descriptors' name fields, which
        // `recordAction` caps at 1 KiB: the same cap here.
        check_name("name", &name).api()?;
        let state = state(ctx)?;
        let pairs = state.descriptors.named_refs();
        state
            .store
            .rename_ref(&viewer.tenant, &ref_id, &name, pairs)
            .await
            .api()
    }

    /// Assigns `userId` to `refId` (a recruiter to an applicant…). True if this
    /// changed anything. `service` and `admin` only.
    async fn assign(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        ref_id: String,
    ) -> async_graphql::Result<bool> {
        self.assignment(ctx, user_id, ref_id, true).await
    }

    /// Takes `userId` off `refId`. True if this changed anything.
    /// `service` and `admin` only.
    async fn unassign(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        ref_id: String,
    ) -> async_graphql::Result<bool> {
        self.assignment(ctx, user_id, ref_id, false).await
    }

    /// Sets `userId`'s supervisor, or clears it when `supervisorId` is null.
    /// `service` and `admin` only.
    async fn set_supervisor(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        supervisor_id: Option<ID>,
    ) -> async_graphql::Result<UserNode> {
        let viewer = viewer(ctx)?;
        require_service(viewer, "setSupervisor")?;
        let state = state(ctx)?;
        let user = user_id_arg("userId", &user_id)?;
        let supervisor = opt_user_id_arg("supervisorId", supervisor_id.as_ref())?;
        if supervisor.as_deref() == Some(user.as_str()) {
            return Err(bad_input("a user cannot supervise themselves"));
        }
        let mut known = vec![user.clone()];
        known.extend(supervisor.clone());
        require_users(state, viewer, &known).await?;
        state
            .store
            .set_supervisor(&viewer.tenant, &user, supervisor.as_deref())
            .await
            .api()?;
        user_node(ctx, &user).await
    }

    /// Comments on an action the viewer may see.
    async fn comment(
        &self,
        ctx: &Context<'_>,
        action_id: ID,
        text: String,
    ) -> async_graphql::Result<CommentNode> {
        let viewer = viewer(ctx)?;
        let state = state(ctx)?;
        let id = action_id_arg("actionId", &action_id)?;
        if text.trim().is_empty() {
            return Err(bad_input("text must not be empty"));
        }
        check_text("text", &text).api()?;
        let mut action = readable_action(ctx, viewer, id).await?;
        let minted = minter(ctx);
        let comment = Comment {
            id: minted.id(),
            action_id: id,
            author_id: viewer.user.clone(),
            text,
            created: minted.now(&*state.clock),
        };
        let counts = state
            .store
            .add_comment(&viewer.tenant, &comment)
            .await
            .api()?;
        // The worker bumps the action for the readers the rules pick.
        state.wake.notify_one();
        action.counts = counts;
        publish_reaction(
            state,
            &action,
            ActionEventKind::Commented,
            Some(&comment),
            None,
        );
        Ok(CommentNode(comment))
    }

    /// The viewer likes an action it may see (once; liking again changes nothing).
    async fn like(&self, ctx: &Context<'_>, action_id: ID) -> async_graphql::Result<ActionNode> {
        self.set_like(ctx, action_id, true).await
    }

    /// The viewer takes back its like.
    async fn unlike(&self, ctx: &Context<'_>, action_id: ID) -> async_graphql::Result<ActionNode> {
        self.set_like(ctx, action_id, false).await
    }

    /// Removes an action from the viewer's own feed only, for good. True if it
    /// was there.
    async fn hide_feed_item(
        &self,
        ctx: &Context<'_>,
        action_id: ID,
    ) -> async_graphql::Result<bool> {
        let viewer = viewer(ctx)?;
        let state = state(ctx)?;
        let id = action_id_arg("actionId", &action_id)?;
        let store = state.store.as_ref();
        let (tenant, reader) = (viewer.tenant.as_str(), viewer.user.as_str());
        // Held before (an item or a tombstone): hiding says what the item said.
        let held = state.model.pushes_all()
            || !store
                .materialised(tenant, reader, &[id])
                .await
                .api()?
                .is_empty();
        let mut item = store.hide_feed_item(tenant, reader, id).await.api()?;
        if !held {
            item = match store.get_actions(tenant, &[id]).await.api()?.pop() {
                Some(action) => pulled_item(store, reader, &action).await.api()?,
                None => None,
            };
        }
        let removed = item.is_some();
        publish_removed(state, &viewer.tenant, item.into_iter().collect());
        Ok(removed)
    }
}

/// Queues the webhook event of a change to `action` the mutation is about
/// to make, before it makes it: a process killed between the change and
/// its answer has queued the event already. The sender sends it once the
/// store shows the change, and drops it if the store never does (the
/// process died before making it; see [`outbox::change_made`]); the
/// mutation wakes the sender once the change is made. Stamped with the
/// request's time, which a retry under its `Idempotency-Key` repeats: the
/// retry's event is the same message.
async fn tell_action(
    ctx: &Context<'_>,
    state: &AppState,
    action: &Action,
    kind: EventType,
    event: impl FnOnce(crate::model::Millis) -> Event,
) -> async_graphql::Result<()> {
    let now = minter(ctx).now(&*state.clock);
    state
        .outbox
        .tell_before(&action.tenant, |l| outbox::one(l, kind, || event(now)))
        .await
        .api()?;
    Ok(())
}
