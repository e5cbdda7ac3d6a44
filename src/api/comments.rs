//! Comments on an action: the page of them and each comment's fields,
//! which the resolvers and the planned reads both call.

use async_graphql::{Context, Object, ID};
use chrono::{DateTime, Utc};

use super::cursor::ListId;
use super::error::ApiResultExt;
use super::global_id::GlobalId;
use super::page::{connection, PageInfo};
use super::types::datetime;
use super::user_node::{user_node, UserNode};
use super::{AppState, Viewer};
use crate::model::limits::page_size;
use crate::model::{Comment, ObjectId};

/// A comment on an action.
#[derive(Clone)]
pub struct CommentNode(pub Comment);

impl CommentNode {
    pub(crate) fn global_id(&self) -> ID {
        GlobalId::Comment {
            action: self.0.action_id,
            comment: self.0.id,
        }
        .encode()
    }

    pub(crate) fn own_id(&self) -> ID {
        ID(self.0.id.to_hex())
    }

    pub(crate) fn own_action_id(&self) -> ID {
        ID(self.0.action_id.to_hex())
    }

    pub(crate) fn created_at(&self) -> DateTime<Utc> {
        datetime(self.0.created)
    }
}

#[Object(name = "Comment")]
impl CommentNode {
    /// Opaque global id (`Node`): `node(id:)` finds the comment by it.
    pub(super) async fn id(&self) -> ID {
        self.global_id()
    }

    /// The comment's own id (24 hex digits).
    async fn comment_id(&self) -> ID {
        self.own_id()
    }

    /// The id of the action commented on (24 hex digits).
    async fn action_id(&self) -> ID {
        self.own_action_id()
    }

    async fn author(&self, ctx: &Context<'_>) -> async_graphql::Result<UserNode> {
        user_node(ctx, &self.0.author_id).await
    }

    async fn author_id(&self) -> &str {
        &self.0.author_id
    }

    async fn text(&self) -> &str {
        &self.0.text
    }

    async fn created(&self) -> DateTime<Utc> {
        self.created_at()
    }
}

connection!(CommentConnection, CommentEdge, CommentNode, "comment");

/// The page of comments on `action` (which the viewer may read), oldest
/// first, as `Action.comments(first:, after:)` answers it.
pub async fn comments_page(
    state: &AppState,
    viewer: &Viewer,
    action: ObjectId,
    first: Option<i32>,
    after: Option<String>,
) -> async_graphql::Result<CommentConnection> {
    let limit = page_size("first", first).api()?;
    let id = action.to_hex();
    let cursors = &state.cursors;
    let list = ListId::comments(cursors, &viewer.tenant, &id);
    let after = after.map(|c| list.decode_id(&c)).transpose()?;
    let mut comments = state
        .store
        .comments(&viewer.tenant, action, after, limit + 1)
        .await
        .api()?;
    let has_next = comments.len() > limit;
    comments.truncate(limit);
    let edges: Vec<CommentEdge> = comments
        .into_iter()
        .map(|comment| CommentEdge {
            cursor: list.lazy_id(comment.id),
            node: CommentNode(comment),
        })
        .collect();
    Ok(CommentConnection {
        page_info: PageInfo::forward(&edges, after.is_some(), has_next, cursors),
        edges,
    })
}
