//! Query root: the viewer, feeds, slices, actions and users.

use std::collections::HashMap;

use async_graphql::{Context, MergedObject, Object, ID};

use super::aggregate::AggregateQuery;
use super::notifications::NotificationQuery;

use super::access::access_for;
use super::cost::page_cost;
use super::error::{bad_input, ApiResultExt};
use super::feed::{self, Paging};
use super::global_id::{action_id_arg, renamed_arg, user_id_arg};
use super::node::{self, Node};
use super::types::{user_node, ActionConnection, ActionNode, FeedItemConnection, UserNode};
use super::{state, viewer, AppState, Viewer};
use crate::model::limits::MAX_LIST_LEN;
use crate::model::ObjectId;

/// What can be read. Arguments that name an action or a user take its own
/// id or its global `id`.
#[derive(MergedObject, Default)]
#[graphql(name = "Query")]
pub struct QueryRoot(
    CoreQuery,
    AggregateQuery,
    NotificationQuery,
    super::webhooks::WebhookQuery,
    super::federation::FederationQuery,
);

/// Feeds, slices, actions, users and nodes.
#[derive(Default)]
pub struct CoreQuery;

#[Object]
impl CoreQuery {
    /// The user making the request.
    async fn viewer(&self, ctx: &Context<'_>) -> async_graphql::Result<UserNode> {
        let viewer = viewer(ctx)?;
        user_node(ctx, &viewer.user).await
    }

    /// The viewer's home feed, highest relevancy first. Page forward with
    /// `first` / `after`, backward with `last` / `before`; 25 items by default,
    /// at most 100. `ownerId` (a user id or global id) reads another user's
    /// feed, as they see it (`admin` only).
    #[graphql(complexity = "page_cost(first.or(last), child_complexity)")]
    #[allow(clippy::too_many_arguments)]
    async fn feed(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
        owner_id: Option<ID>,
        #[graphql(
            desc = "A keyword filter: only actions whose free text (their descriptor's \
                          `@text` fields) has a word beginning with each of its words, in any \
                          case. A filtered page may hold fewer items than asked; page on while \
                          `hasNextPage`."
        )]
        matching: Option<String>,
    ) -> async_graphql::Result<FeedItemConnection> {
        let owner = feed::feed_owner(viewer(ctx)?, owner_id.as_ref())?;
        feed::home(
            ctx,
            &owner,
            Paging {
                first,
                after,
                last,
                before,
                matching,
            },
        )
        .await
    }

    /// Actions that refer to `refId` (an applicant, a position…), newest first.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn slice(
        &self,
        ctx: &Context<'_>,
        ref_id: String,
        first: Option<i32>,
        after: Option<String>,
        #[graphql(
            desc = "A keyword filter: only actions whose free text (their descriptor's \
                          `@text` fields) has a word beginning with each of its words, in any \
                          case. A filtered page may hold fewer items than asked; page on while \
                          `hasNextPage`."
        )]
        matching: Option<String>,
    ) -> async_graphql::Result<ActionConnection> {
        let viewer = viewer(ctx)?;
        let paging = (first, after, matching.as_deref());
        feed::list(ctx, viewer, feed::ListOf::Slice(ref_id), paging).await
    }

    /// `userId`'s (a user id or global id) actions that you may see, newest
    /// first by when they happened: their profile page. Hidden actions show
    /// to their actor only.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn actor_feed(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        first: Option<i32>,
        after: Option<String>,
        #[graphql(
            desc = "A keyword filter: only actions whose free text (their descriptor's \
                          `@text` fields) has a word beginning with each of its words, in any \
                          case. A filtered page may hold fewer items than asked; page on while \
                          `hasNextPage`."
        )]
        matching: Option<String>,
    ) -> async_graphql::Result<ActionConnection> {
        let viewer = viewer(ctx)?;
        let paging = (first, after, matching.as_deref());
        feed::list(ctx, viewer, feed::ListOf::Actor(user_id), paging).await
    }

    /// A group's feed: what was posted to it (and its TEAM / DEPARTMENT
    /// actions), its last `--group-feed-size`, newest first by when they
    /// happened, as far as you may see them: members see the group's
    /// actions from when they joined, anyone in the tenant its public ones.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn group_feed(
        &self,
        ctx: &Context<'_>,
        group_id: ID,
        first: Option<i32>,
        after: Option<String>,
        #[graphql(
            desc = "A keyword filter: only actions whose free text (their descriptor's \
                          `@text` fields) has a word beginning with each of its words, in any \
                          case. A filtered page may hold fewer items than asked; page on while \
                          `hasNextPage`."
        )]
        matching: Option<String>,
    ) -> async_graphql::Result<ActionConnection> {
        let viewer = viewer(ctx)?;
        let paging = (first, after, matching.as_deref());
        feed::list(ctx, viewer, feed::ListOf::Group(group_id), paging).await
    }

    /// The actions you commented on that you may still see, the one with the
    /// latest comment (by anyone) first: where the conversations you are in
    /// moved last.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn discussions(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        #[graphql(
            desc = "A keyword filter: only actions whose free text (their descriptor's \
                          `@text` fields) has a word beginning with each of its words, in any \
                          case. A filtered page may hold fewer items than asked; page on while \
                          `hasNextPage`."
        )]
        matching: Option<String>,
    ) -> async_graphql::Result<ActionConnection> {
        let viewer = viewer(ctx)?;
        let paging = (first, after, matching.as_deref());
        feed::list(ctx, viewer, feed::ListOf::Discussions, paging).await
    }

    /// One action, or null if there is none you may see. `actionId` is its
    /// own id or its global `id`.
    async fn action(
        &self,
        ctx: &Context<'_>,
        action_id: Option<ID>,
        #[graphql(deprecation = "Use `actionId`.")] id: Option<ID>,
    ) -> async_graphql::Result<Option<ActionNode>> {
        let viewer = viewer(ctx)?;
        let (field, id) = renamed_arg(("actionId", action_id), ("id", id))?;
        let id = action_id_arg(field, &id)?;
        let needs = feed::Needs::of(ctx, &[&[]]);
        Ok(readable_actions(state(ctx)?, viewer, &[id], needs)
            .await?
            .pop()
            .flatten())
    }

    /// Several actions, in the order asked, null where there is none you may see.
    /// At most 100; action ids or global ids.
    #[graphql(complexity = "action_ids
        .as_ref()
        .or(ids.as_ref())
        .map_or(1, Vec::len)
        .max(1)
        * child_complexity.max(1)")]
    async fn actions(
        &self,
        ctx: &Context<'_>,
        action_ids: Option<Vec<ID>>,
        #[graphql(deprecation = "Use `actionIds`.")] ids: Option<Vec<ID>>,
    ) -> async_graphql::Result<Vec<Option<ActionNode>>> {
        let viewer = viewer(ctx)?;
        let (field, ids) = renamed_arg(("actionIds", action_ids), ("ids", ids))?;
        if ids.len() > MAX_LIST_LEN {
            return Err(bad_input(format!(
                "{field} has {} entries; at most {MAX_LIST_LEN} are allowed",
                ids.len()
            )));
        }
        let ids = ids
            .iter()
            .map(|id| action_id_arg(field, id))
            .collect::<Result<Vec<_>, _>>()?;
        readable_actions(state(ctx)?, viewer, &ids, feed::Needs::of(ctx, &[&[]])).await
    }

    /// A user of the viewer's tenant, or null if Riverfeed has never heard of
    /// them. `userId` is the application's id of the user or the user's global `id`.
    async fn user(
        &self,
        ctx: &Context<'_>,
        user_id: Option<ID>,
        #[graphql(deprecation = "Use `userId`.")] id: Option<ID>,
    ) -> async_graphql::Result<Option<UserNode>> {
        let viewer = viewer(ctx)?;
        let (field, id) = renamed_arg(("userId", user_id), ("id", id))?;
        user_by_id(state(ctx)?, viewer, &user_id_arg(field, &id)?).await
    }

    /// The object with this global id (an `Action`, `User`, `Comment` or
    /// `FeedItem`'s `id`), or null if there is none you may see: the rules
    /// of `action`, `user` and `feed` apply (a feed item shows to its owner,
    /// or `admin`).
    async fn node(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Node>> {
        Ok(node::resolve(ctx, std::slice::from_ref(&id))
            .await?
            .pop()
            .flatten())
    }

    /// The objects with these global ids, in the order asked, null where
    /// there is none you may see (as `node`). At most 100.
    #[graphql(complexity = "ids.len().max(1) * child_complexity.max(1)")]
    async fn nodes(
        &self,
        ctx: &Context<'_>,
        ids: Vec<ID>,
    ) -> async_graphql::Result<Vec<Option<Node>>> {
        node::resolve(ctx, &ids).await
    }
}

/// The actions `ids` as the viewer may read them, in the order asked (one
/// asked twice shows twice), null where there is none they may see: the
/// rule of `action` and `actions`, for either executor.
pub(crate) async fn readable_actions(
    state: &AppState,
    viewer: &Viewer,
    ids: &[ObjectId],
    needs: feed::Needs,
) -> async_graphql::Result<Vec<Option<ActionNode>>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut unique = ids.to_vec();
    unique.sort_unstable();
    unique.dedup();
    let found = state
        .store
        .get_actions(&viewer.tenant, &unique)
        .await
        .api()?;
    let access = access_for(state, viewer, &found).await?;
    let readable: Vec<_> = found.into_iter().filter(|a| access.can_read(a)).collect();
    let nodes: HashMap<ObjectId, ActionNode> =
        ActionNode::load_along(state, viewer, readable, needs, &HashMap::new())
            .await?
            .into_iter()
            .map(|node| (node.action.id, node))
            .collect();
    Ok(ids.iter().map(|id| nodes.get(id).cloned()).collect())
}

/// The user `id` of the viewer's tenant, if Riverfeed has heard of them:
/// `user`'s rule, for either executor.
pub(crate) async fn user_by_id(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
) -> async_graphql::Result<Option<UserNode>> {
    Ok(users_by_id(state, viewer, &[id.to_owned()])
        .await?
        .remove(id))
}

/// The users `ids` of the viewer's tenant Riverfeed has heard of, by id:
/// `user`'s rule for many, in one read.
pub(crate) async fn users_by_id(
    state: &AppState,
    viewer: &Viewer,
    ids: &[String],
) -> async_graphql::Result<HashMap<String, UserNode>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let found = state.store.get_users(&viewer.tenant, ids).await.api()?;
    Ok(found
        .into_iter()
        .map(|user| (user.id.clone(), UserNode::from(user)))
        .collect())
}
