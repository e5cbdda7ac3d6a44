//! What a user does with their notifications: reads them (one member, a
//! group, all), archives them, sees them (the bell opened), and keeps
//! preferences and markers. Each is a compare-and-set loop over the group
//! or inbox it changes, so a worker adding a member meanwhile, or another
//! device doing the same, loses nothing.

use crate::events::NoticeEvent;
use crate::model::{Inbox, Millis, NoticeGroup, NoticeRange, ObjectId};
use crate::store::{NoticeSelect, Notices, Records, Store, StoreResult};

use super::{contended, RETRIES};

/// What to mark or archive: a whole group, or one member of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Group(ObjectId),
    Member { group: ObjectId, member: ObjectId },
}

impl Target {
    /// The group the target is, or is in.
    pub fn group(self) -> ObjectId {
        match self {
            Target::Group(g) | Target::Member { group: g, .. } => g,
        }
    }
}

/// Marks the targets read. Returns the groups that changed (those archived
/// through as removed).
pub async fn mark_read(
    store: &dyn Store,
    tenant: &str,
    owner: &str,
    targets: &[Target],
) -> StoreResult<NoticeEvent> {
    change(store, tenant, owner, targets, |g, members| {
        g.mark_read(members)
    })
    .await
}

/// Archives the targets: they are no longer listed or counted.
pub async fn archive(
    store: &dyn Store,
    tenant: &str,
    owner: &str,
    targets: &[Target],
) -> StoreResult<NoticeEvent> {
    change(store, tenant, owner, targets, |g, members| {
        g.archive(members)
    })
    .await
}

/// Marks every group read. Returns the groups that changed.
pub async fn mark_all_read(
    store: &dyn Store,
    tenant: &str,
    owner: &str,
) -> StoreResult<NoticeEvent> {
    let mut changed = NoticeEvent::default();
    let mut before = None;
    loop {
        let range = NoticeRange {
            before,
            limit: 100,
            unread_only: true,
        };
        let page = store
            .notice_groups(tenant, owner, NoticeSelect::Page(range))
            .await?;
        let Some(last) = page.last() else {
            break;
        };
        before = Some(last.position());
        let targets: Vec<Target> = page.iter().map(|g| Target::Group(g.id)).collect();
        let done = mark_read(store, tenant, owner, &targets).await?;
        changed.updated.extend(done.updated);
        if page.len() < range.limit {
            break;
        }
    }
    Ok(changed)
}

async fn change(
    store: &dyn Store,
    tenant: &str,
    owner: &str,
    targets: &[Target],
    apply: impl Fn(&mut NoticeGroup, Option<&[ObjectId]>) -> bool,
) -> StoreResult<NoticeEvent> {
    let mut ids: Vec<ObjectId> = targets.iter().map(|t| t.group()).collect();
    ids.sort();
    ids.dedup();
    let mut changed = NoticeEvent::default();
    for id in ids {
        // A whole group named, or only some of its members.
        let whole = targets.contains(&Target::Group(id));
        let members: Vec<ObjectId> = targets
            .iter()
            .filter_map(|t| match t {
                Target::Member { group, member } if *group == id => Some(*member),
                _ => None,
            })
            .collect();
        let members = (!whole).then_some(members.as_slice());
        match changed_one(store, tenant, owner, id, members, &apply).await? {
            // Archived through: no longer listed.
            Some(group) if group.visible == 0 => changed.removed.push(id),
            Some(_) => changed.updated.push(id),
            None => {}
        }
    }
    Ok(changed)
}

async fn changed_one(
    store: &dyn Store,
    tenant: &str,
    owner: &str,
    id: ObjectId,
    members: Option<&[ObjectId]>,
    apply: &impl Fn(&mut NoticeGroup, Option<&[ObjectId]>) -> bool,
) -> StoreResult<Option<NoticeGroup>> {
    for _ in 0..RETRIES {
        let Some(mut group) = store
            .notice_groups(tenant, owner, NoticeSelect::Ids(&[id]))
            .await?
            .pop()
        else {
            return Ok(None);
        };
        if !apply(&mut group, members) {
            return Ok(None);
        }
        group.version += 1;
        if store.put_notice_group(&group).await? {
            return Ok(Some(group));
        }
    }
    Err(contended(owner))
}

/// Changes `owner`'s inbox with `edit`, which says whether it changed
/// anything (or refuses with its own error). Returns the inbox as stored.
pub async fn update<E: From<crate::store::StoreError>>(
    store: &dyn Store,
    tenant: &str,
    owner: &str,
    edit: impl Fn(&mut Inbox) -> Result<bool, E>,
) -> Result<Inbox, E> {
    for _ in 0..RETRIES {
        let mut inbox = store.inbox(tenant, owner).await?;
        if !edit(&mut inbox)? {
            return Ok(inbox);
        }
        inbox.version += 1;
        if store.put_inbox(&inbox).await? {
            return Ok(inbox);
        }
    }
    Err(contended(owner).into())
}

/// Marks everything up to `until` seen (never moves back). Returns the inbox.
pub async fn mark_seen(
    store: &dyn Store,
    tenant: &str,
    owner: &str,
    until: Millis,
) -> StoreResult<Inbox> {
    update(store, tenant, owner, |inbox| {
        let later = until > inbox.seen_until;
        if later {
            inbox.seen_until = until;
        }
        Ok::<_, crate::store::StoreError>(later)
    })
    .await
}
