//! Relay connections whose page boundaries come from the items *scanned*, not
//! only the items shown: a page whose items the viewer may no longer read still
//! moves the cursor on, so paging never stalls.

use async_graphql::{Context, Object, SimpleObject};

use super::aggregate::FeedItemGroupNode;
use super::cursor::LazyCursor;
use super::notifications::NotificationGroupNode;
use super::state;
use super::types::{ActionNode, CommentNode, FeedItemNode, UserNode};

/// Where a page starts and ends, and whether there is more on either side.
#[derive(Clone, Debug, Default, SimpleObject)]
pub struct PageInfo {
    /// More items lie before (newer than) this page.
    pub has_previous_page: bool,
    /// More items lie after (older than) this page.
    pub has_next_page: bool,
    /// Pass as `before` to page backwards.
    pub start_cursor: Option<String>,
    /// Pass as `after` to page forwards.
    pub end_cursor: Option<String>,
}

macro_rules! connection {
    ($connection:ident, $edge:ident, $node:ty, $what:literal
     $(, $(#[doc = $doc:literal])* $field:ident: $ty:ty)* $(,)?) => {
        #[doc = concat!("One ", $what, " of a page, with its cursor.")]
        pub struct $edge {
            pub cursor: LazyCursor,
            pub node: $node,
        }

        #[Object]
        impl $edge {
            /// Where this item stands; pass it as `after` or `before`.
            async fn cursor(&self, ctx: &Context<'_>) -> async_graphql::Result<String> {
                Ok(self.cursor.seal(&state(ctx)?.cursors))
            }

            async fn node(&self) -> &$node {
                &self.node
            }
        }

        #[doc = concat!("A page of ", $what, "s.")]
        pub struct $connection {
            pub edges: Vec<$edge>,
            pub page_info: PageInfo,
            $(pub $field: $ty,)*
        }

        #[Object]
        impl $connection {
            async fn edges(&self) -> &[$edge] {
                &self.edges
            }

            /// The nodes of `edges`, for clients that need no cursors.
            async fn nodes(&self) -> Vec<&$node> {
                self.edges.iter().map(|e| &e.node).collect()
            }

            async fn page_info(&self) -> &PageInfo {
                &self.page_info
            }

            $(
                $(#[doc = $doc])*
                async fn $field(&self) -> &$ty {
                    &self.$field
                }
            )*
        }
    };
}

connection!(
    FeedItemGroupConnection,
    FeedItemGroupEdge,
    FeedItemGroupNode,
    "group of feed items",
);

connection!(
    NotificationGroupConnection,
    NotificationGroupEdge,
    NotificationGroupNode,
    "notification group",
    /// Groups with something newer than what the viewer saw.
    unseen_count: u64,
    /// Groups with an unread notification.
    unread_count: u64,
);

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
connection!(CommentConnection, CommentEdge, CommentNode, "comment");
