//! The GraphQL `User`: a person known by the application's own id, with
//! their profile, edges, groups, supervisor and assignments.

use std::collections::HashMap;

use async_graphql::{Context, Object, ID};

use super::cost::{list_cost, page_cost};
use super::cursor::ListId;
use super::error::ApiResultExt;
use super::global_id::GlobalId;
use super::page::PageInfo;
use super::types::{UserConnection, UserEdge};
use super::{loaders, state, viewer, AppState, Viewer};
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
        self.neighbours(ctx, UserList::Followers, first, after)
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
        self.neighbours(ctx, UserList::Following, first, after)
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
        self.neighbours(ctx, UserList::Friends, first, after).await
    }

    /// Who supervises this user, if anyone.
    async fn supervisor(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        match supervisor_of(state(ctx)?, viewer(ctx)?, &self.id).await? {
            Some(id) => Ok(Some(user_node(ctx, &id).await?)),
            None => Ok(None),
        }
    }

    /// The refs (applicants, positions…) this user is assigned to; shown to the
    /// user, `service` and `admin`, empty for others.
    async fn assignments(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<String>> {
        let ids = std::slice::from_ref(&self.id);
        let mut of = assignments_of(state(ctx)?, viewer(ctx)?, ids).await?;
        Ok(of.remove(&self.id).unwrap_or_default())
    }

    /// The teams and departments this user belongs to (at most 100). Others
    /// see only the groups they share with the user; the user, `service`
    /// and `admin` see all.
    #[graphql(complexity = "list_cost(MAX_LIST_LEN, child_complexity)")]
    async fn groups(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Membership>> {
        groups_of(state(ctx)?, viewer(ctx)?, &self.id).await
    }
}

impl UserNode {
    async fn neighbours(
        &self,
        ctx: &Context<'_>,
        list: UserList,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        let page = neighbours_page(state(ctx)?, viewer(ctx)?, &self.id, list, first, after).await?;
        let ids = page.edges.iter().map(|e| e.node.id.clone());
        let users = loaders(ctx)?.users.load_many(ids).await.api()?;
        Ok(page.with_profiles(|id| users.get(id).cloned()))
    }
}

/// A user's list of other users.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum UserList {
    Followers,
    Following,
    Friends,
}

impl UserList {
    fn name(self) -> &'static str {
        match self {
            UserList::Followers => "followers",
            UserList::Following => "following",
            UserList::Friends => "friends",
        }
    }

    fn edges(self) -> (EdgeKind, Direction) {
        match self {
            UserList::Followers => (EdgeKind::Follows, Direction::In),
            UserList::Following => (EdgeKind::Follows, Direction::Out),
            UserList::Friends => (EdgeKind::Friend, Direction::Out),
        }
    }
}

/// A page of `of`'s `list`, by id: each node's profile is read after
/// (see [`UserConnection::with_profiles`]).
pub(crate) async fn neighbours_page(
    state: &AppState,
    viewer: &Viewer,
    of: &str,
    list: UserList,
    first: Option<i32>,
    after: Option<String>,
) -> async_graphql::Result<UserConnection> {
    let limit = page_size("first", first).api()?;
    let cursors = &state.cursors;
    let ids = ListId::users(cursors, &viewer.tenant, list.name(), of);
    let after = after.map(|c| ids.decode_string(&c)).transpose()?;
    let (kind, direction) = list.edges();
    let mut found = state
        .store
        .edges(
            &viewer.tenant,
            kind,
            direction,
            of,
            after.as_deref(),
            limit + 1,
        )
        .await
        .api()?;
    let has_next = found.len() > limit;
    found.truncate(limit);
    let edges: Vec<UserEdge> = found
        .into_iter()
        .map(|id| UserEdge {
            cursor: ids.lazy_string(&id),
            node: UserNode::found(&id, None),
        })
        .collect();
    Ok(UserConnection {
        page_info: PageInfo::forward(&edges, after.is_some(), has_next, cursors),
        edges,
    })
}

impl UserConnection {
    /// The page with each user's profile, as `profile` finds it.
    pub(crate) fn with_profiles(mut self, profile: impl Fn(&str) -> Option<User>) -> Self {
        for edge in &mut self.edges {
            edge.node = UserNode::found(&edge.node.id, profile(&edge.node.id));
        }
        self
    }
}

/// The id of `of`'s supervisor, if they have one.
pub(crate) async fn supervisor_of(
    state: &AppState,
    viewer: &Viewer,
    of: &str,
) -> async_graphql::Result<Option<String>> {
    Ok(state
        .store
        .supervision(&viewer.tenant, Direction::Out, of)
        .await
        .api()?
        .pop())
}

/// The refs each of `ids` is assigned to, as the viewer may see them: their
/// own, or anyone's for `service` and `admin`; none for others.
pub(crate) async fn assignments_of(
    state: &AppState,
    viewer: &Viewer,
    ids: &[String],
) -> async_graphql::Result<HashMap<String, Vec<String>>> {
    let shown: Vec<String> = ids
        .iter()
        .filter(|id| **id == viewer.user || viewer.acts_for_others())
        .cloned()
        .collect();
    let mut of: HashMap<String, Vec<String>> = HashMap::new();
    let assigned = state
        .store
        .assignment(&viewer.tenant, Direction::Out, &shown)
        .await
        .api()?;
    for (user, ref_id) in assigned {
        of.entry(user).or_default().push(ref_id);
    }
    Ok(of)
}

/// The groups `of` belongs to, as the viewer may see them (at most 100):
/// all of them for themselves, `service` and `admin`; the groups they
/// share for others.
pub(crate) async fn groups_of(
    state: &AppState,
    viewer: &Viewer,
    of: &str,
) -> async_graphql::Result<Vec<Membership>> {
    let store = &state.store;
    let groups = store.memberships(&viewer.tenant, of).await.api()?;
    if of == viewer.user || viewer.acts_for_others() {
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
