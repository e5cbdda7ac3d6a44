//! The home feed in groups (`aggregatedFeed`, Stream's aggregated feeds):
//! items whose actions share a key (by default verb, object and day: "4
//! ratings of Mary Fanning today") come as one group.
//!
//! Groups are formed at read, over the feed as `feed` reads it (every model,
//! every backend, the same access checks): a page takes items in feed order
//! into the group of their key, opening groups in the order their newest
//! item comes, and ends just before the item that would open one group more
//! than asked for. So every item is in exactly one page; a key whose items
//! lie far apart in the feed may come as a group again on a later page.
//! Cursors are the home feed's: a group's cursor resumes right after the
//! items read before the next group opened.

use async_graphql::{Context, Object, ID};
use chrono::{DateTime, Utc};

use super::cost::{bounded_first, first_cost, page_cost};
use super::cursor::{LazyCursor, ListId};
use super::error::ApiResultExt;
use super::feed::{self, Needs, Paging};
use super::page::{connection, PageInfo};
use super::types::{datetime, user_node, ActionNode, ActionSlot, FeedItemNode, UserNode};
use super::{state, viewer, AppState, Viewer};
use crate::model::limits::{page_size, DEFAULT_PAGE, MAX_PAGE};

/// Feed items one page of groups reads at most: a page ends there even if
/// it holds fewer groups than asked for.
const MAX_SCANNED: usize = 5 * MAX_PAGE;

connection!(
    FeedItemGroupConnection,
    FeedItemGroupEdge,
    FeedItemGroupNode,
    "group of feed items",
);

/// Items of the home feed whose actions share a key.
pub struct FeedItemGroupNode {
    key: String,
    /// Newest first, as the feed has them.
    items: Vec<FeedItemNode>,
}

/// Paths from `aggregatedFeed` to the actions of its items.
const GROUP_ACTIONS: &[&[&str]] = &[
    &["edges", "node", "items", "action"],
    &["nodes", "items", "action"],
];

/// The values of a group's fields, for either executor.
impl FeedItemGroupNode {
    fn action(item: &FeedItemNode) -> Option<&ActionNode> {
        match &item.action {
            ActionSlot::Loaded(node) => Some(node),
            _ => None,
        }
    }

    /// What its items share.
    pub(crate) fn shared_key(&self) -> &str {
        &self.key
    }

    /// The descriptor type of its actions.
    pub(crate) fn descriptor_type(&self) -> Option<&str> {
        self.items
            .first()
            .and_then(Self::action)
            .map(|n| n.action.descriptor.type_name())
    }

    /// Its first `first` items (25 by default, at most 100), newest first.
    pub(crate) fn first_items(&self, first: Option<i32>) -> async_graphql::Result<&[FeedItemNode]> {
        let first = bounded_first(first, DEFAULT_PAGE, MAX_PAGE)?;
        Ok(&self.items[..first.min(self.items.len())])
    }

    pub(crate) fn size(&self) -> usize {
        self.items.len()
    }

    /// Who did its actions, the most recent first, at most `first` (at
    /// most 100).
    pub(crate) fn actor_ids(&self, first: i32) -> async_graphql::Result<Vec<&str>> {
        let first = bounded_first(Some(first), 3, MAX_PAGE)?;
        let mut ids = self.all_actor_ids();
        ids.truncate(first);
        Ok(ids)
    }

    fn all_actor_ids(&self) -> Vec<&str> {
        let mut actors: Vec<&str> = Vec::new();
        for node in self.items.iter().filter_map(Self::action) {
            if !actors.contains(&node.action.actor_id.as_str()) {
                actors.push(&node.action.actor_id);
            }
        }
        actors
    }

    pub(crate) fn actors_counted(&self) -> usize {
        self.all_actor_ids().len()
    }

    /// When its newest action happened.
    pub(crate) fn newest_time(&self) -> Option<DateTime<Utc>> {
        self.times().max().map(datetime)
    }

    /// When its oldest action happened.
    pub(crate) fn oldest_time(&self) -> Option<DateTime<Utc>> {
        self.times().min().map(datetime)
    }

    fn times(&self) -> impl Iterator<Item = crate::model::Millis> + '_ {
        self.items
            .iter()
            .filter_map(Self::action)
            .map(|n| n.action.conducted)
    }

    /// Ids of its items' actions, newest first.
    pub(crate) fn item_action_ids(&self) -> Vec<ID> {
        self.items
            .iter()
            .map(|i| ID(i.item.action_id.to_hex()))
            .collect()
    }
}

#[Object(name = "FeedItemGroup")]
impl FeedItemGroupNode {
    /// What its items share (by default verb, object and day).
    async fn key(&self) -> &str {
        self.shared_key()
    }

    /// The descriptor type of its actions (`ApplicationRating`…).
    async fn verb(&self) -> Option<&str> {
        self.descriptor_type()
    }

    /// Its items, newest first: at most `first` (25 by default, at most
    /// 100); `count` says how many it holds.
    #[graphql(complexity = "first_cost(first, DEFAULT_PAGE, MAX_PAGE, child_complexity)")]
    async fn items(&self, first: Option<i32>) -> async_graphql::Result<&[FeedItemNode]> {
        self.first_items(first)
    }

    async fn count(&self) -> usize {
        self.size()
    }

    /// Who did its actions, the most recent first: at most `first` (3 by
    /// default, at most 100).
    #[graphql(complexity = "first_cost(Some(first), 3, MAX_PAGE, child_complexity)")]
    async fn actors(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 3)] first: i32,
    ) -> async_graphql::Result<Vec<UserNode>> {
        let mut users = Vec::new();
        for actor in self.actor_ids(first)? {
            users.push(user_node(ctx, actor).await?);
        }
        Ok(users)
    }

    async fn actor_count(&self) -> usize {
        self.actors_counted()
    }

    /// When its newest action happened.
    async fn last_at(&self) -> Option<DateTime<Utc>> {
        self.newest_time()
    }

    /// When its oldest action happened.
    async fn first_at(&self) -> Option<DateTime<Utc>> {
        self.oldest_time()
    }

    /// Ids of its items' actions, newest first.
    async fn action_ids(&self) -> Vec<ID> {
        self.item_action_ids()
    }
}

#[derive(Default)]
pub struct AggregateQuery;

#[Object]
impl AggregateQuery {
    /// The viewer's home feed in groups of items whose actions share a key
    /// (`--feed-group-by`, by default verb, object and day), in feed order
    /// of each group's newest item: `first` groups (25 by default, at most
    /// 100) after the home-feed cursor `after`.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn aggregated_feed(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<FeedItemGroupConnection> {
        let needs = Needs::of(ctx, GROUP_ACTIONS);
        aggregated_page(state(ctx)?, viewer(ctx)?, first, after, needs).await
    }
}

/// The page of groups `aggregatedFeed(first:, after:)` reads for `viewer`,
/// its items' actions loaded with what `needs` says: for either executor.
pub(crate) async fn aggregated_page(
    state: &AppState,
    viewer: &Viewer,
    first: Option<i32>,
    after: Option<String>,
    needs: Needs,
) -> async_graphql::Result<FeedItemGroupConnection> {
    let wanted = page_size("first", first).api()?;
    let list = ListId::home(&state.cursors, &viewer.tenant, &viewer.user);
    let rules = state.notice_rules.clone();
    let started = after.is_some();

    let mut groups: Vec<(FeedItemGroupNode, Option<LazyCursor>)> = Vec::new();
    // Where the items read so far end: a cursor of the home feed.
    let mut end: Option<LazyCursor> = None;
    let mut end_text: Option<String> = None;
    let mut next = after;
    let mut scanned = 0usize;
    let mut more = false;
    'pages: loop {
        let paging = Paging {
            first: Some(MAX_PAGE as i32),
            after: next.clone(),
            last: None,
            before: None,
            matching: None,
        };
        let page = feed::home_page(state, viewer, paging, needs).await?;
        for edge in page.edges {
            let Some(node) = FeedItemGroupNode::action(&edge.node) else {
                continue;
            };
            let key = rules.feed_key(&node.action);
            let position = edge.node.item.position();
            let open = groups.iter().position(|(g, _)| g.key == key);
            match open {
                Some(n) => groups[n].0.items.push(edge.node),
                None if groups.len() == wanted => {
                    more = true;
                    break 'pages;
                }
                None => {
                    // The group before this one ends where the items read so far end.
                    if let Some((_, cursor)) = groups.last_mut() {
                        *cursor = end.clone();
                    }
                    groups.push((
                        FeedItemGroupNode {
                            key,
                            items: vec![edge.node],
                        },
                        None,
                    ));
                }
            }
            end = Some(list.lazy_position(position));
            end_text = Some(list.position_cursor(position));
            scanned += 1;
        }
        if !page.page_info.has_next_page {
            break;
        }
        // Past items it could not show, too: the page's own end.
        next = page.page_info.end_cursor;
        if let Some(cursor) = &next {
            end = Some(list.lazy_position(list.decode_position(cursor)?));
            end_text = Some(cursor.clone());
        }
        if scanned >= MAX_SCANNED {
            more = true;
            break;
        }
    }
    let last = groups.len().saturating_sub(1);
    let edges = groups
        .into_iter()
        .enumerate()
        .filter_map(|(n, (node, cursor))| {
            let cursor = if n == last { end.clone() } else { cursor };
            Some(FeedItemGroupEdge {
                cursor: cursor?,
                node,
            })
        })
        .collect::<Vec<_>>();
    let start_cursor = edges.first().map(|e| e.cursor.seal(&state.cursors));
    Ok(FeedItemGroupConnection {
        edges,
        page_info: PageInfo {
            has_previous_page: started,
            has_next_page: more,
            start_cursor,
            end_cursor: end_text,
        },
    })
}
