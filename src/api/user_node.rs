//! The GraphQL `User`: a person known by the application's own id, with
//! their profile, edges, groups, supervisor and assignments.

use async_graphql::{Context, Object, ID};

use super::cost::{list_cost, page_cost};
use super::cursor::ListId;
use super::error::ApiResultExt;
use super::global_id::GlobalId;
use super::page::PageInfo;
use super::types::{UserConnection, UserEdge};
use super::{loaders, state, viewer};
use crate::model::limits::page_size;
use crate::model::limits::MAX_LIST_LEN;
use crate::model::{EdgeKind, Membership, User};
use crate::store::Direction;
use crate::store::Graph;

/// A person (the GraphQL `User`).
#[derive(Clone)]
pub struct UserNode {
    /// The application's id of the user.
    pub id: String,
    pub name: Option<String>,
}

impl From<User> for UserNode {
    fn from(user: User) -> Self {
        Self {
            id: user.id,
            name: user.name,
        }
    }
}

/// The user with this id; one with no profile yet has a null name.
pub async fn user_node(ctx: &Context<'_>, id: &str) -> async_graphql::Result<UserNode> {
    let user = loaders(ctx)?.users.load_one(id.to_owned()).await.api()?;
    Ok(UserNode::found(id, user))
}

impl UserNode {
    /// The user `id` as found in the store: with no profile yet, a null name.
    pub(crate) fn found(id: &str, user: Option<User>) -> Self {
        user.map(UserNode::from).unwrap_or_else(|| UserNode {
            id: id.to_owned(),
            name: None,
        })
    }
}

impl UserNode {
    pub(crate) fn global_id(&self) -> ID {
        GlobalId::User(self.id.clone()).encode()
    }
}

/// A person, known by the application's own id.
#[Object(name = "User")]
impl UserNode {
    /// Opaque global id (`Node`): `node(id:)` finds the user by it, and
    /// every argument that takes a user id takes it too.
    pub(super) async fn id(&self) -> ID {
        self.global_id()
    }

    /// The application's own id of the user, as `Action.actorId` and
    /// `FeedItem.ownerId` give it.
    async fn user_id(&self) -> &str {
        &self.id
    }

    /// Display name, as last upserted.
    async fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Who follows this user, ordered by id.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn followers(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        self.neighbours(
            ctx,
            "followers",
            EdgeKind::Follows,
            Direction::In,
            first,
            after,
        )
        .await
    }

    /// Whom this user follows, ordered by id.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn following(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        self.neighbours(
            ctx,
            "following",
            EdgeKind::Follows,
            Direction::Out,
            first,
            after,
        )
        .await
    }

    /// This user's friends, ordered by id.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn friends(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        self.neighbours(
            ctx,
            "friends",
            EdgeKind::Friend,
            Direction::Out,
            first,
            after,
        )
        .await
    }

    /// Who supervises this user, if anyone.
    async fn supervisor(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        let viewer = viewer(ctx)?;
        let supervisor = state(ctx)?
            .store
            .supervision(&viewer.tenant, Direction::Out, &self.id)
            .await
            .api()?
            .pop();
        match supervisor {
            Some(id) => Ok(Some(user_node(ctx, &id).await?)),
            None => Ok(None),
        }
    }

    /// The refs (applicants, positions…) this user is assigned to; shown to the
    /// user, `service` and `admin`, empty for others.
    async fn assignments(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<String>> {
        let viewer = viewer(ctx)?;
        if self.id != viewer.user && !viewer.acts_for_others() {
            return Ok(Vec::new());
        }
        let assigned = state(ctx)?
            .store
            .assignment(
                &viewer.tenant,
                Direction::Out,
                std::slice::from_ref(&self.id),
            )
            .await
            .api()?;
        Ok(assigned.into_iter().map(|(_, ref_id)| ref_id).collect())
    }

    /// The teams and departments this user belongs to (at most 100). Others
    /// see only the groups they share with the user; the user, `service`
    /// and `admin` see all.
    #[graphql(complexity = "list_cost(MAX_LIST_LEN, child_complexity)")]
    async fn groups(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Membership>> {
        let viewer = viewer(ctx)?;
        let store = &state(ctx)?.store;
        let groups = store.memberships(&viewer.tenant, &self.id).await.api()?;
        if self.id == viewer.user || viewer.acts_for_others() {
            return Ok(groups.into_iter().take(MAX_LIST_LEN).collect());
        }
        let mine: Vec<String> = store
            .memberships(&viewer.tenant, &viewer.user)
            .await
            .api()?
            .into_iter()
            .map(|m| m.group_id)
            .collect();
        Ok(groups
            .into_iter()
            .filter(|m| mine.contains(&m.group_id))
            .take(MAX_LIST_LEN)
            .collect())
    }
}

impl UserNode {
    async fn neighbours(
        &self,
        ctx: &Context<'_>,
        relation: &str,
        kind: EdgeKind,
        direction: Direction,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        let viewer = viewer(ctx)?;
        let limit = page_size("first", first).api()?;
        let cursors = &state(ctx)?.cursors;
        let list = ListId::users(cursors, &viewer.tenant, relation, &self.id);
        let after = after.map(|c| list.decode_string(&c)).transpose()?;
        let mut ids = state(ctx)?
            .store
            .edges(
                &viewer.tenant,
                kind,
                direction,
                &self.id,
                after.as_deref(),
                limit + 1,
            )
            .await
            .api()?;
        let has_next = ids.len() > limit;
        ids.truncate(limit);
        let users = loaders(ctx)?
            .users
            .load_many(ids.iter().cloned())
            .await
            .api()?;
        let edges: Vec<UserEdge> = ids
            .into_iter()
            .map(|id| {
                let node = users
                    .get(&id)
                    .cloned()
                    .map(UserNode::from)
                    .unwrap_or(UserNode {
                        id: id.clone(),
                        name: None,
                    });
                UserEdge {
                    cursor: list.lazy_string(&id),
                    node,
                }
            })
            .collect();
        Ok(UserConnection {
            page_info: PageInfo::forward(&edges, after.is_some(), has_next, cursors),
            edges,
        })
    }
}
