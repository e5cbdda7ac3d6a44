//! Leaving a group: the reader's `TEAM` / `DEPARTMENT` items go at once on
//! every read (the access check goes by the memberships they hold now);
//! this finds the ones a cleanup takes out of storage (and those of a
//! group no longer followed), and tells a live reader about the ones they
//! pulled.

use std::collections::HashMap;

use super::access::{Access, Expiry};
use super::sources::GroupSource;
use crate::events::{FeedEventKind, Hub, Signal};
use crate::model::{FeedItem, ObjectId, Position, Reason};
use crate::store::{Ended, FeedRange, Outbox, Store, StoreResult, Timelines, Unfollow};

/// Timeline items read per step.
const STEP: usize = 1_000;

/// What a cleanup takes out of the reader's feed, whichever reason the
/// item shows now (a bump's included). For a group left, the reader's
/// group items (`TEAM` / `DEPARTMENT`) they may no longer read, by the
/// memberships they hold now (or because they expired): a membership that
/// begins later never reaches them again (it shows the group's actions
/// from its start on), so they can go for good. For an ended follow,
/// friendship or group follow, the items that came by it
/// ([`Unfollow::covers`]; the cleanup's caller puts back what another
/// source still gives).
pub async fn named_items(
    store: &dyn Store,
    ended: &Unfollow,
    expiry: Expiry,
) -> StoreResult<Vec<ObjectId>> {
    let (tenant, reader) = (ended.tenant.as_str(), ended.reader.as_str());
    let reasons = ended.kind.reasons();
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
        let named: Vec<ObjectId> = page
            .iter()
            .filter(|i| match ended.kind {
                Ended::Group => reasons.contains(&i.reason.kind),
                Ended::Edge(_) => ended.covers(i, None) || ended.needs_action(i),
            })
            .map(|i| i.action_id)
            .collect();
        if !named.is_empty() {
            // A deleted action's items went with it; a hidden one's too.
            let actions = store.get_actions(tenant, &named).await?;
            match ended.kind {
                Ended::Group => {
                    let access =
                        Access::load(store, tenant, reader, actions.iter(), expiry).await?;
                    out.extend(actions.iter().filter(|a| !access.can_read(a)).map(|a| a.id));
                }
                Ended::Edge(_) => {
                    let items: HashMap<ObjectId, &FeedItem> =
                        page.iter().map(|i| (i.action_id, i)).collect();
                    let access =
                        Access::load(store, tenant, reader, actions.iter(), expiry).await?;
                    let covered = |a: &crate::model::Action| {
                        items.get(&a.id).is_some_and(|i| {
                            ended.covers(i, Some(a))
                                || (ended.covers_narrowed(i, a) && !access.can_read(a))
                        })
                    };
                    out.extend(actions.iter().filter(|a| covered(a)).map(|a| a.id));
                }
            }
        }
        if last_page {
            return Ok(out);
        }
    }
}

/// Most pulled items a group left announces as removed to a live reader:
/// the newest, which are the ones on their screen.
const MAX_ANNOUNCED: usize = 1_000;

/// `reader` left `group` (a member since `since`): tells them, if online,
/// that the group items they pulled and may no longer read are gone (the
/// materialised ones are announced by the cleanup that removes them).
/// Call after the membership ended.
pub async fn announce_leave(
    store: &dyn Store,
    hub: &Hub,
    tenant: &str,
    reader: &str,
    group: &GroupSource,
    expiry: Expiry,
) -> StoreResult<()> {
    hub.forward(Signal::Left {
        tenant: tenant.to_owned(),
        reader: reader.to_owned(),
        group: group.group.clone(),
        reason: group.reason,
        since: group.since.into(),
    });
    tell_left(store, hub, tenant, reader, group, expiry).await
}

/// As [`announce_leave`], for a reader online in this process.
pub async fn tell_left(
    store: &dyn Store,
    hub: &Hub,
    tenant: &str,
    reader: &str,
    group: &GroupSource,
    expiry: Expiry,
) -> StoreResult<()> {
    if !hub.is_online(tenant, reader) {
        return Ok(());
    }
    let range = FeedRange {
        older_than: None,
        newer_than: Some(group.since),
        limit: MAX_ANNOUNCED,
        from_oldest: false,
    };
    let read = [(Outbox::Group(group.group.clone()), range)];
    let posted = store
        .outboxes(tenant, &read)
        .await?
        .pop()
        .unwrap_or_default();
    let ids: Vec<ObjectId> = posted.iter().map(|p| p.position.action_id).collect();
    let held = store.materialised(tenant, reader, &ids).await?;
    let actions = store.get_actions(tenant, &ids).await?;
    let access = Access::load(store, tenant, reader, actions.iter(), expiry).await?;
    let gone: HashMap<ObjectId, _> = actions
        .iter()
        .filter(|a| !access.can_read(a) && !held.contains(&a.id))
        .map(|a| (a.id, a))
        .collect();
    let items = posted
        .into_iter()
        .filter(|p| gone.contains_key(&p.position.action_id))
        .map(|p| FeedItem {
            owner: reader.to_owned(),
            action_id: p.position.action_id,
            relevancy: p.position.relevancy,
            reason: Reason::new(group.reason, &p.actor),
            changed: p.position.relevancy,
            copy: None,
        });
    hub.deliver_feed_items(FeedEventKind::Removed, tenant, None, items);
    Ok(())
}
