//! Reading feeds: a page of a home feed or a slice, with its actions loaded in
//! one batch and checked for access.

use std::collections::HashMap;

use async_graphql::connection::{Connection, Edge};
use async_graphql::Context;

use super::access::Access;
use super::cursor::ListId;
use super::error::{bad_input, ApiResultExt};
use super::types::{ActionNode, ActionSlot, FeedItemNode};
use super::{loaders, state, Viewer};
use crate::model::limits::{check_id, page_size};
use crate::model::{Action, ObjectId};
use crate::store::FeedRange;

pub type FeedConnection = Connection<String, FeedItemNode>;
pub type ActionConnection = Connection<String, ActionNode>;

/// Relay paging arguments.
pub struct Paging {
    pub first: Option<i32>,
    pub after: Option<String>,
    pub last: Option<i32>,
    pub before: Option<String>,
}

/// Loads actions through the request's DataLoader: one batch for the whole page.
async fn load_page(
    ctx: &Context<'_>,
    ids: impl IntoIterator<Item = ObjectId>,
) -> async_graphql::Result<HashMap<ObjectId, Action>> {
    loaders(ctx)?.actions.load_many(ids).await.api()
}

/// A page of `viewer`'s home feed, newest relevancy first.
pub async fn home(
    ctx: &Context<'_>,
    viewer: &Viewer,
    paging: Paging,
) -> async_graphql::Result<FeedConnection> {
    let list = ListId::home(&viewer.tenant, &viewer.user);
    if paging.first.is_some() && paging.last.is_some() {
        return Err(bad_input("pass `first` or `last`, not both"));
    }
    let backwards = paging.last.is_some();
    let limit = if backwards {
        page_size("last", paging.last).api()?
    } else {
        page_size("first", paging.first).api()?
    };
    let older_than = paging
        .after
        .as_deref()
        .map(|c| list.decode_position(c))
        .transpose()?;
    let newer_than = paging
        .before
        .as_deref()
        .map(|c| list.decode_position(c))
        .transpose()?;
    let mut items = state(ctx)?
        .store
        .feed_page(
            &viewer.tenant,
            &viewer.user,
            FeedRange {
                older_than,
                newer_than,
                limit: limit + 1,
                from_oldest: backwards,
            },
        )
        .await
        .api()?;
    let more = items.len() > limit;
    if more {
        if backwards {
            items.remove(0);
        } else {
            items.pop();
        }
    }
    // Paging from a cursor implies the cursor's own item lies on the other side.
    let (has_previous, has_next) = if backwards {
        (more, newer_than.is_some())
    } else {
        (older_than.is_some(), more)
    };

    let mut actions = load_page(ctx, items.iter().map(|i| i.action_id)).await?;
    let access = Access::load(ctx, viewer, actions.values()).await?;
    let (items, visible): (Vec<_>, Vec<_>) = items
        .into_iter()
        .filter_map(|item| {
            let action = actions.remove(&item.action_id)?;
            (access.can_read(&action) && !action.hidden).then_some((item, action))
        })
        .unzip();
    let look = ctx.look_ahead();
    let actors = [look.field("edges").field("node"), look.field("nodes")]
        .iter()
        .any(|item| item.field("action").field("actor").exists());
    let nodes = ActionNode::hydrate(ctx, visible, actors).await?;
    let mut connection = Connection::new(has_previous, has_next);
    connection.edges = items
        .into_iter()
        .zip(nodes)
        .map(|(item, node)| {
            let cursor = list.position_cursor(item.position());
            Edge::new(
                cursor.clone(),
                FeedItemNode {
                    item,
                    cursor,
                    action: ActionSlot::Loaded(Box::new(node)),
                },
            )
        })
        .collect();
    Ok(connection)
}

/// A page of the actions whose `refIds` contain `ref_id`, newest first.
pub async fn slice(
    ctx: &Context<'_>,
    viewer: &Viewer,
    ref_id: &str,
    first: Option<i32>,
    after: Option<String>,
) -> async_graphql::Result<ActionConnection> {
    check_id("refId", ref_id).api()?;
    let limit = page_size("first", first).api()?;
    let list = ListId::slice(&viewer.tenant, ref_id);
    let before = after.as_deref().map(|c| list.decode_id(c)).transpose()?;
    let mut ids = state(ctx)?
        .store
        .slice(&viewer.tenant, ref_id, before, limit + 1)
        .await
        .api()?;
    let has_next = ids.len() > limit;
    ids.truncate(limit);
    let mut actions = load_page(ctx, ids.iter().copied()).await?;
    let access = Access::load(ctx, viewer, actions.values()).await?;
    let visible: Vec<Action> = ids
        .into_iter()
        .filter_map(|id| actions.remove(&id))
        .filter(|action| access.can_read(action))
        .collect();
    let mut connection = Connection::new(before.is_some(), has_next);
    let look = ctx.look_ahead();
    let actors = [look.field("edges").field("node"), look.field("nodes")]
        .iter()
        .any(|action| action.field("actor").exists());
    connection.edges = ActionNode::hydrate(ctx, visible, actors)
        .await?
        .into_iter()
        .map(|node| Edge::new(list.id_cursor(node.action.id), node))
        .collect();
    Ok(connection)
}
