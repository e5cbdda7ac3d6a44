//! Relay connections whose page boundaries come from the items *scanned*, not
//! only the items shown: a page whose items the viewer may no longer read still
//! moves the cursor on, so paging never stalls.
//!
//! [`PageInfo`] and the [`connection!`] macro; each node's module declares its
//! connection with it, so this module depends on no node type.

use async_graphql::SimpleObject;

use super::cursor::{CursorKey, LazyCursor};

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

impl PageInfo {
    /// A page read forwards (from the start, or after a cursor when
    /// `from_cursor`) of `edges`, with `more` past it.
    pub fn forward(
        edges: &[impl Cursored],
        from_cursor: bool,
        more: bool,
        key: &CursorKey,
    ) -> PageInfo {
        PageInfo {
            has_previous_page: from_cursor,
            has_next_page: more,
            start_cursor: edges.first().map(|e| e.cursor().seal(key)),
            end_cursor: edges.last().map(|e| e.cursor().seal(key)),
        }
    }
}

/// An edge of a connection: it holds its cursor.
pub trait Cursored {
    fn cursor(&self) -> &LazyCursor;
}

/// Declares a Relay connection of `$node` and its edge, with any fields of
/// its own after the node's description.
macro_rules! connection {
    ($connection:ident, $edge:ident, $node:ty, $what:literal
     $(, $(#[doc = $doc:literal])* $field:ident: $ty:ty)* $(,)?) => {
        #[doc = concat!("One ", $what, " of a page, with its cursor.")]
        pub struct $edge {
            pub cursor: $crate::api::cursor::LazyCursor,
            pub node: $node,
        }

        impl $crate::api::page::Cursored for $edge {
            fn cursor(&self) -> &$crate::api::cursor::LazyCursor {
                &self.cursor
            }
        }

        #[async_graphql::Object]
        impl $edge {
            /// Where this item stands; pass it as `after` or `before`.
            async fn cursor(
                &self,
                ctx: &async_graphql::Context<'_>,
            ) -> async_graphql::Result<String> {
                Ok(self.cursor.seal(&$crate::api::state(ctx)?.cursors))
            }

            async fn node(&self) -> &$node {
                &self.node
            }
        }

        #[doc = concat!("A page of ", $what, "s.")]
        pub struct $connection {
            pub edges: Vec<$edge>,
            pub page_info: $crate::api::page::PageInfo,
            $(pub $field: $ty,)*
        }

        #[async_graphql::Object]
        impl $connection {
            async fn edges(&self) -> &[$edge] {
                &self.edges
            }

            /// The nodes of `edges`, for clients that need no cursors.
            async fn nodes(&self) -> Vec<&$node> {
                self.edges.iter().map(|e| &e.node).collect()
            }

            async fn page_info(&self) -> &$crate::api::page::PageInfo {
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

pub(super) use connection;
