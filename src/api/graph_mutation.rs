//! The social graph as mutations change it: follows, friendships, group
//! memberships and follows of groups.

use async_graphql::{Context, Object, ID};

use super::edges::{self, EdgeChange};
use super::error::{bad_input, ApiResultExt};
use super::global_id::opt_user_id_arg;
use super::{acting_user, require_service, state, viewer};
use crate::model::limits::normalize_id;
use crate::model::{EdgeKind, Group, GroupKind, Membership, MembershipRole};
use crate::store::Graph;
use crate::store::{JoinOutcome, Unfollow};
use crate::timeline::sources::GroupSource;
use crate::timeline::{groups, unfollow};

#[derive(Default)]
pub struct GraphMutation;

#[Object]
impl GraphMutation {
    /// The viewer (or `asUserId`, for `service` and `admin`) follows `userId`.
    /// True if this changed anything. The new follow shows `userId`'s
    /// `backfill` most recent actions the follower may see at once (0 to
    /// 1000; by default the server's `--follow-backfill`, 100).
    async fn follow(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        as_user_id: Option<ID>,
        backfill: Option<i32>,
    ) -> async_graphql::Result<bool> {
        edges::change(
            ctx,
            EdgeKind::Follows,
            user_id,
            as_user_id,
            EdgeChange::On { backfill },
        )
        .await
    }

    /// The viewer (or `asUserId`) stops following `userId`. True if this
    /// changed anything. What came into the feed by the follow leaves it at
    /// once (removed from storage in the background), unless `keepHistory`.
    async fn unfollow(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        as_user_id: Option<ID>,
        #[graphql(default)] keep_history: bool,
    ) -> async_graphql::Result<bool> {
        edges::change(
            ctx,
            EdgeKind::Follows,
            user_id,
            as_user_id,
            EdgeChange::Off { keep_history },
        )
        .await
    }

    /// The viewer (or `asUserId`) and `userId` become friends. True if this
    /// changed anything. Each then sees the other's `backfill` most recent
    /// actions they may see at once, as with `follow`.
    async fn befriend(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        as_user_id: Option<ID>,
        backfill: Option<i32>,
    ) -> async_graphql::Result<bool> {
        edges::change(
            ctx,
            EdgeKind::Friend,
            user_id,
            as_user_id,
            EdgeChange::On { backfill },
        )
        .await
    }

    /// The viewer (or `asUserId`) and `userId` stop being friends. True if this
    /// changed anything. What each had in their feed by the friendship leaves
    /// it at once, unless `keepHistory`.
    async fn unfriend(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        as_user_id: Option<ID>,
        #[graphql(default)] keep_history: bool,
    ) -> async_graphql::Result<bool> {
        edges::change(
            ctx,
            EdgeKind::Friend,
            user_id,
            as_user_id,
            EdgeChange::Off { keep_history },
        )
        .await
    }

    /// Puts `userId` (the viewer by default) in a team or department, created
    /// on first join. Memberships decide who sees TEAM and DEPARTMENT actions,
    /// so the application manages them: `service` and `admin` only. A new
    /// member sees the group's actions from now on; a member who joins
    /// again keeps their membership (and takes the new role).
    async fn join_group(
        &self,
        ctx: &Context<'_>,
        group_id: ID,
        kind: GroupKind,
        #[graphql(default_with = "MembershipRole::Member")] role: MembershipRole,
        user_id: Option<ID>,
    ) -> async_graphql::Result<Membership> {
        let viewer = viewer(ctx)?;
        require_service(viewer, "joinGroup")?;
        let member = opt_user_id_arg("userId", user_id.as_ref())?;
        let member = acting_user(viewer, member.as_deref())?;
        let group_id = normalize_id("groupId", &group_id).api()?;
        let group = Group { id: group_id, kind };
        let state = state(ctx)?;
        let now = state.clock.now();
        match state
            .store
            .join_group(&viewer.tenant, &group, &member, role, now)
            .await
            .api()?
        {
            JoinOutcome::Joined(membership) => Ok(membership),
            JoinOutcome::KindMismatch(existing) => Err(bad_input(format!(
                "group {} is a {:?}, not a {kind:?}",
                existing.id, existing.kind
            ))),
        }
    }

    /// The viewer (or `userId`, for `service` and `admin`) leaves a group.
    /// True if they were a member. The group's TEAM / DEPARTMENT items they
    /// may no longer read leave their feed at once; the worker takes them
    /// out of storage.
    async fn leave_group(
        &self,
        ctx: &Context<'_>,
        group_id: ID,
        user_id: Option<ID>,
    ) -> async_graphql::Result<bool> {
        let viewer = viewer(ctx)?;
        let member = opt_user_id_arg("userId", user_id.as_ref())?;
        let member = acting_user(viewer, member.as_deref())?;
        let group_id = normalize_id("groupId", &group_id).api()?;
        let state = state(ctx)?;
        // The cleanup is queued first: should the leave not follow, it
        // finds everything still readable and takes nothing. (Nor is it
        // ended when there was nothing to leave: an earlier leave's cleanup
        // may be the one pending.)
        let cleanup = Unfollow::group(&viewer.tenant, &member, &group_id);
        let store = state.store.as_ref();
        unfollow::start(store, &cleanup, state.clock.now())
            .await
            .api()?;
        // Where readers pull, the leave announces what they pulled from the
        // group since they joined: the membership is read before it ends.
        let membership = if state.model.pushes_all() {
            None
        } else {
            store
                .memberships(&viewer.tenant, &member)
                .await
                .api()?
                .into_iter()
                .find(|m| m.group_id == group_id.as_str())
        };
        let left = store
            .leave_group(&viewer.tenant, &group_id, &member)
            .await
            .api()?;
        if let Some(membership) = membership.filter(|_| left) {
            let group = GroupSource::of(&membership);
            let expiry = state.expiry();
            groups::announce_leave(store, &state.hub, &viewer.tenant, &member, &group, expiry)
                .await
                .api()?;
        }
        state.wake.notify_one();
        Ok(left)
    }

    /// The viewer (or `asUserId`) follows the group `groupId`: the PUBLIC
    /// actions sent to it (`recordAction(input: {to})`) come into their
    /// feed, with the reason `GROUP`. True if this changed anything. The
    /// new follow shows the group's `backfill` most recent public actions
    /// at once, as with `follow`. Anyone in the tenant may follow a group
    /// that exists (someone joined it); its TEAM / DEPARTMENT actions still
    /// reach members only.
    async fn follow_group(
        &self,
        ctx: &Context<'_>,
        group_id: ID,
        as_user_id: Option<ID>,
        backfill: Option<i32>,
    ) -> async_graphql::Result<bool> {
        edges::change(
            ctx,
            EdgeKind::Group,
            group_id,
            as_user_id,
            EdgeChange::On { backfill },
        )
        .await
    }

    /// The viewer (or `asUserId`) stops following the group `groupId`. True
    /// if this changed anything. What came into the feed by the follow
    /// leaves it at once (removed from storage in the background), unless
    /// `keepHistory`; an action that another follow still brings stays.
    async fn unfollow_group(
        &self,
        ctx: &Context<'_>,
        group_id: ID,
        as_user_id: Option<ID>,
        #[graphql(default)] keep_history: bool,
    ) -> async_graphql::Result<bool> {
        edges::change(
            ctx,
            EdgeKind::Group,
            group_id,
            as_user_id,
            EdgeChange::Off { keep_history },
        )
        .await
    }
}
