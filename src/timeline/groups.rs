//! Leaving a group: the reader's `TEAM` / `DEPARTMENT` items go at once on
//! every read (the access check goes by the memberships they hold now);
//! this finds the ones a cleanup takes out of storage.

use std::collections::HashMap;

use super::access::Access;
use crate::model::{FeedItem, ObjectId, Position, ReasonKind};
use crate::store::{FeedRange, Store, StoreResult};

/// Timeline items read per step.
const STEP: usize = 1_000;

/// The actions of `reader`'s group items (`TEAM` / `DEPARTMENT`) that they
/// may no longer read, by the memberships they hold now. A membership that
/// begins later never reaches them again (it shows the group's actions from
/// its start on), so they can go for good.
pub async fn unreadable(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
) -> StoreResult<Vec<ObjectId>> {
    let mut out = Vec::new();
    let mut older_than: Option<Position> = None;
    loop {
        let range = FeedRange {
            older_than,
            newer_than: None,
            limit: STEP,
            from_oldest: false,
        };
        let page = store.feed_page(tenant, reader, range).await?;
        let last_page = page.len() < STEP;
        older_than = page.last().map(FeedItem::position);
        let grouped: Vec<ObjectId> = page
            .iter()
            .filter(|i| matches!(i.reason.kind, ReasonKind::Team | ReasonKind::Department))
            .map(|i| i.action_id)
            .collect();
        if !grouped.is_empty() {
            let actions: HashMap<ObjectId, _> = store
                .get_actions(tenant, &grouped)
                .await?
                .into_iter()
                .map(|a| (a.id, a))
                .collect();
            let access = Access::load(store, tenant, reader, actions.values()).await?;
            // A deleted action's items went with it; a hidden one's too.
            out.extend(
                actions
                    .values()
                    .filter(|a| !access.can_read(a))
                    .map(|a| a.id),
            );
        }
        if last_page {
            return Ok(out);
        }
    }
}
