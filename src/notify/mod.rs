//! Notifications: who hears of what happened, written into their groups.
//!
//! What happened *to* a user notifies them: a comment or like on their
//! action, a new comment in a discussion they took part in, their
//! assignment to a ref, a rating request naming them, the hire of an
//! applicant they are assigned to. [`for_action`], [`for_comment`] and
//! [`for_job`] say who, by the [`NoticeRules`]; the worker calls them
//! within the job that leases the cause (the action's fan-out, the
//! comment's bump, a like's or assignment's notice job) and [`deliver`]s
//! what they return. Every notice has a source key unique per owner, so a
//! job run again writes nothing twice.
//!
//! What the user does with them (reads, archives, sees, prefers, marks) is
//! in [`inbox`].

pub mod inbox;
pub mod rules;

use std::collections::BTreeMap;

use futures_util::{stream, StreamExt, TryStreamExt};

use crate::descriptor::catalog::{Catalog, NotifyTo};
use crate::events::{Event, Hub, NoticeEvent, Topic};
use crate::model::{Action, Comment, Millis, Notice, NoticeGroup, NoticeReason, ObjectId};
use crate::store::{
    Direction, ErrorKind, Graph, NoticeJob, NoticeSource, Notices, Records, Store, StoreError,
    StoreResult,
};
pub use rules::NoticeRules;

/// Page size when reading an action's comments.
const PAGE: usize = 10_000;
/// Times a write that lost a race to another reads again and retries.
pub(crate) const RETRIES: usize = 32;

/// One notice for `owner`.
pub type Addressed = (String, Notice);

fn notice(
    reason: NoticeReason,
    source: String,
    actor: &str,
    action_id: Option<ObjectId>,
    at: Millis,
) -> Notice {
    Notice {
        id: ObjectId::new(),
        source,
        reason,
        actor: actor.to_owned(),
        action_id,
        comment_id: None,
        ref_id: None,
        at,
        read: false,
        archived: false,
    }
}

/// Who an action notifies, by its type's `@notify` rules: the rater a
/// rating request names, the users assigned to an applicant who was
/// hired… Never the actor.
pub async fn for_action(
    store: &dyn Store,
    rules: &NoticeRules,
    descriptors: &Catalog,
    action: &Action,
) -> StoreResult<Vec<Addressed>> {
    if action.hidden {
        return Ok(Vec::new());
    }
    let Some(ty) = descriptors.get(action.descriptor.type_name()) else {
        return Ok(Vec::new());
    };
    let source = format!("a:{}", action.id);
    let mut out: Vec<Addressed> = Vec::new();
    for rule in ty.notify.iter().filter(|r| rules.on(r.reason)) {
        let id = |field: &str| action.descriptor.str_field(field).map(str::to_owned);
        let ref_id = rule.ref_field.as_deref().and_then(id);
        let owners = match &rule.to {
            NotifyTo::User(field) => id(field).into_iter().collect(),
            NotifyTo::AssignedTo(field) => match id(field) {
                Some(object) => store
                    .assignment(&action.tenant, Direction::In, &[object])
                    .await?
                    .into_iter()
                    .map(|(_, user)| user)
                    .collect(),
                None => Vec::new(),
            },
        };
        for owner in owners.into_iter().filter(|o| *o != action.actor_id) {
            let mut n = notice(
                rule.reason,
                source.clone(),
                &action.actor_id,
                Some(action.id),
                action.conducted,
            );
            n.ref_id.clone_from(&ref_id);
            out.push((owner, n));
        }
    }
    Ok(out)
}

/// Who a comment notifies: the action's actor (`COMMENT`), and everyone
/// who commented on it before (`REPLY`). Never the commenter.
pub async fn for_comment(
    store: &dyn Store,
    rules: &NoticeRules,
    action: &Action,
    comment: &Comment,
) -> StoreResult<Vec<Addressed>> {
    let by = comment.author_id.as_str();
    let source = format!("c:{}", comment.id);
    let make = |reason: NoticeReason| {
        let mut n = notice(reason, source.clone(), by, Some(action.id), comment.created);
        n.comment_id = Some(comment.id);
        n
    };
    let mut out: Vec<Addressed> = Vec::new();
    if action.actor_id != by && rules.on(NoticeReason::Comment) {
        out.push((action.actor_id.clone(), make(NoticeReason::Comment)));
    }
    if rules.on(NoticeReason::Reply) {
        let mut after = None;
        let mut told: Vec<String> = vec![by.to_owned(), action.actor_id.clone()];
        loop {
            let page = store
                .comments(&action.tenant, action.id, after, PAGE)
                .await?;
            let last_page = page.len() < PAGE;
            after = page.last().map(|c| c.id);
            // Comments after this one did not exist when it was made.
            for earlier in page
                .into_iter()
                .filter(|c| c.id.bytes() < comment.id.bytes())
            {
                if !told.contains(&earlier.author_id) {
                    out.push((earlier.author_id.clone(), make(NoticeReason::Reply)));
                    told.push(earlier.author_id);
                }
            }
            if last_page {
                break;
            }
        }
    }
    Ok(out)
}

/// Who a notice job notifies: the liked action's actor, the user
/// assigned. Nobody if the like was taken back, or the assignment undone,
/// before the job ran.
pub async fn for_job(
    store: &dyn Store,
    rules: &NoticeRules,
    job: &NoticeJob,
) -> StoreResult<Vec<Addressed>> {
    let tenant = job.tenant.as_str();
    match &job.source {
        NoticeSource::Like { action_id, user } => {
            if !rules.on(NoticeReason::Like)
                || store.liked(tenant, user, &[*action_id]).await?.is_empty()
            {
                return Ok(Vec::new());
            }
            let action = store.get_actions(tenant, &[*action_id]).await?.pop();
            Ok(action
                .filter(|a| !a.hidden && a.actor_id != *user)
                .map(|a| {
                    let n = notice(
                        NoticeReason::Like,
                        job.source.key(),
                        user,
                        Some(a.id),
                        job.at,
                    );
                    vec![(a.actor_id, n)]
                })
                .unwrap_or_default())
        }
        NoticeSource::Assigned { ref_id, user, by } => {
            if !rules.on(NoticeReason::Assigned)
                || user == by
                || !store
                    .assignment(tenant, Direction::Out, std::slice::from_ref(user))
                    .await?
                    .iter()
                    .any(|(_, assigned)| assigned == ref_id)
            {
                return Ok(Vec::new());
            }
            let mut n = notice(NoticeReason::Assigned, job.source.key(), by, None, job.at);
            n.ref_id = Some(ref_id.clone());
            Ok(vec![(user.clone(), n)])
        }
    }
}

/// What [`deliver`] changed for one owner.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delivered {
    pub owner: String,
    pub change: NoticeEvent,
    /// The notices the owner's preferences let in, written now or before
    /// (a job run again): what webhooks tell.
    pub wanted: Vec<Notice>,
}

/// Owners whose groups [`deliver`] writes at once. Each owner's writes are
/// synced commits; the engine merges the commits waiting together into one
/// sync (RocksDB's write groups; MongoDB's requests run side by side), so a
/// burst costs a sync per round of owners rather than per notice. One
/// owner's groups are written one after another: they are trimmed together.
const OWNERS_AT_ONCE: usize = 64;

/// Writes `notices` (of `tenant`) into their owners' groups, as the owners'
/// preferences at `now` allow, trimming an owner's oldest groups when one
/// is created. The notices of one group are added to it together, in one
/// write; many owners are written at once. Returns what changed, per owner
/// (in owner order), for live events, with the notices each owner wanted.
pub async fn deliver(
    store: &dyn Store,
    rules: &NoticeRules,
    tenant: &str,
    notices: Vec<Addressed>,
    now: Millis,
) -> StoreResult<Vec<Delivered>> {
    let mut by_owner: BTreeMap<String, Vec<Notice>> = BTreeMap::new();
    for (owner, n) in notices {
        by_owner.entry(owner).or_default().push(n);
    }
    let written: Vec<Option<Delivered>> = stream::iter(by_owner)
        .map(|(owner, notices)| deliver_to(store, rules, tenant, owner, notices, now))
        .buffered(OWNERS_AT_ONCE)
        .try_collect()
        .await?;
    Ok(written.into_iter().flatten().collect())
}

/// [`deliver`] to one owner: the notices their inbox wants, by group.
async fn deliver_to(
    store: &dyn Store,
    rules: &NoticeRules,
    tenant: &str,
    owner: String,
    notices: Vec<Notice>,
    now: Millis,
) -> StoreResult<Option<Delivered>> {
    let inbox = store.inbox(tenant, &owner).await?;
    // By group key, in the order they came.
    let mut by_key: Vec<(String, Vec<Notice>)> = Vec::new();
    let mut wanted = Vec::new();
    for n in notices {
        if !inbox.wants(n.reason, n.action_id, now) {
            continue;
        }
        wanted.push(n.clone());
        let key = rules.notice_key(&n);
        match by_key.iter_mut().find(|(k, _)| *k == key) {
            Some((_, same)) => same.push(n),
            None => by_key.push((key, vec![n])),
        }
    }
    let mut change = NoticeEvent::default();
    for (key, notices) in by_key {
        match add(store, tenant, &owner, &key, notices).await? {
            Some((id, true)) => {
                change.added.push(id);
                change.removed.extend(
                    store
                        .trim_notices(tenant, &owner, rules.groups_kept)
                        .await?,
                );
            }
            Some((id, false)) if !change.added.contains(&id) && !change.updated.contains(&id) => {
                change.updated.push(id)
            }
            _ => {}
        }
    }
    let told = change != NoticeEvent::default() || !wanted.is_empty();
    Ok(told.then_some(Delivered {
        owner,
        change,
        wanted,
    }))
}

/// Adds notices to the group of `key`, creating it if need be, in one
/// write. Returns the group's id and whether it was created; none if the
/// group holds every notice's source already.
async fn add(
    store: &dyn Store,
    tenant: &str,
    owner: &str,
    key: &str,
    notices: Vec<Notice>,
) -> StoreResult<Option<(ObjectId, bool)>> {
    let Some(reason) = notices.first().map(|n| n.reason) else {
        return Ok(None);
    };
    for _ in 0..RETRIES {
        let stored = store.notice_group(tenant, owner, key).await?;
        let created = stored.is_none();
        let mut group = stored.unwrap_or_else(|| NoticeGroup::new(tenant, owner, key, reason));
        let mut added = false;
        for n in &notices {
            added |= group.add(n.clone());
        }
        if !added {
            return Ok(None);
        }
        group.version += 1;
        if store.put_notice_group(&group).await? {
            return Ok(Some((group.id, created)));
        }
    }
    Err(contended(owner))
}

pub(crate) fn contended(owner: &str) -> StoreError {
    StoreError::new(
        ErrorKind::Unavailable,
        format!("{owner}'s notifications kept changing under {RETRIES} tries; try again"),
    )
}

/// Tells `owner`'s live notification subscriptions, here and in the other
/// processes, what changed.
pub fn publish(hub: &Hub, tenant: &str, owner: &str, change: NoticeEvent) {
    let topic = Topic::Notices {
        tenant: tenant.to_owned(),
        user: owner.to_owned(),
    };
    hub.publish(&topic, Event::Notices(change));
}
