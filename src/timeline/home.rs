//! A reader's home feed as they see it, whatever the model: a page of it,
//! one item of it, and its changes since a cursor (a resumed
//! subscription's replay). Each reads the model's [`Plan`] and the store,
//! and gives items already decided by [`Visibility`]; the API only shapes
//! them.
//!
//! Items the reader may no longer see (scope narrowed, membership left,
//! action hidden, edge ended) are dropped after the read. To still fill a
//! page, a few more rounds are read past them; the page's bounds are those
//! of the items scanned, so the next page starts after them even when none
//! could be shown.

use std::collections::HashMap;

use super::access::{Access, Expiry};
use super::audience;
use super::builds::RiverBuilds;
use super::feed_model::FeedModel;
use super::read::{self, Entry, Plan, MAX_ROUNDS};
use super::visibility::Visibility;
use crate::clock::Clock;
use crate::model::{Action, FeedItem, Millis, ObjectId, Position, Reason, Stamp};
use crate::store::{FeedRange, Store, StoreResult, Timelines};

/// What reading home feeds needs of the deployment.
#[derive(Clone, Copy)]
pub struct Feeds<'a> {
    pub store: &'a dyn Store,
    pub model: FeedModel,
    pub clock: &'a dyn Clock,
    /// `--item-ttl`: actions older than this are not shown.
    pub item_ttl: Option<Millis>,
    /// Where a dormant reader's read asks for their river (rivers).
    pub builds: &'a RiverBuilds,
}

/// Which page of a home feed to read.
#[derive(Clone, Copy, Debug)]
pub struct PageRequest<'a> {
    /// The page starts strictly below (older than) this (`after`).
    pub older_than: Option<Position>,
    /// The page ends strictly above (newer than) this (`before`).
    pub newer_than: Option<Position>,
    /// At most this many items.
    pub limit: usize,
    /// Counted from the oldest end (`last`), not from the newest (`first`).
    pub backwards: bool,
    /// Whether the copies of actions a timeline keeps (`--embed-actions`)
    /// serve the page, or its actions are all loaded.
    pub copies_serve: bool,
    /// Only the actions whose free text matches (a keyword filter).
    pub matching: Option<&'a crate::descriptor::matching::Matching>,
}

/// A page of a home feed, its items decided.
#[derive(Debug, Default)]
pub struct Page {
    /// What the page shows, newest first, each item with its action.
    pub items: Vec<(FeedItem, Action)>,
    /// The newest and oldest positions scanned (shown or not).
    pub newest: Option<Position>,
    pub oldest: Option<Position>,
    /// More items lie past the page, in the direction it was read.
    pub more: bool,
    /// The names of the actors that copies of the actions gave.
    pub names: HashMap<String, Option<String>>,
    /// When the page was read.
    pub read_at: Millis,
}

impl Feeds<'_> {
    /// What expiry is judged by now.
    fn expiry(&self) -> Expiry {
        Expiry {
            now: self.clock.now(),
            item_ttl: self.item_ttl,
        }
    }

    /// A page of `reader`'s home feed, newest relevancy first.
    pub async fn page(
        &self,
        tenant: &str,
        reader: &str,
        request: PageRequest<'_>,
    ) -> StoreResult<Page> {
        let store = self.store;
        let read_at = self.clock.now();
        // The reader's ended edges are read with the plan, before any range
        // (see [`Visibility::load`]).
        let behaviour = self.model.behaviour();
        let (plan, visibility) = tokio::join!(
            behaviour.plan(store, tenant, reader, read_at),
            Visibility::load(store, tenant, reader)
        );
        let (plan, visibility) = (plan?, visibility?);
        let backwards = request.backwards;
        let limit = request.limit;
        let mut page = Page {
            read_at,
            ..Page::default()
        };

        // Newest first throughout. Forwards, rounds move to older items;
        // backwards, to newer ones.
        let (mut older_than, mut newer_than) = (request.older_than, request.newer_than);
        for _ in 0..MAX_ROUNDS {
            let want = limit - page.items.len();
            let range = FeedRange {
                older_than,
                newer_than,
                limit: want + 1,
                from_oldest: backwards,
            };
            let mut entries = plan.page(store, tenant, reader, range).await?;
            page.more = entries.len() > want;
            if page.more {
                if backwards {
                    entries.remove(0);
                } else {
                    entries.pop();
                }
            }
            if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
                if backwards {
                    page.newest = Some(first.item.position());
                    page.oldest = page.oldest.or(Some(last.item.position()));
                    newer_than = page.newest;
                } else {
                    page.newest = page.newest.or(Some(first.item.position()));
                    page.oldest = Some(last.item.position());
                    older_than = page.oldest;
                }
            }
            read::settle(store, tenant, reader, &mut entries).await?;
            let mut actions = self
                .actions(tenant, &entries, request.copies_serve, &mut page.names)
                .await?;
            let access =
                Access::load(store, tenant, reader, actions.values(), self.expiry()).await?;
            let shown = entries.into_iter().filter_map(|entry| {
                let action = actions.remove(&entry.item.action_id)?;
                let matches = request.matching.is_none_or(|m| m.matches(&action));
                (matches && visibility.shows(&access, &entry.item, entry.pulled, &action))
                    .then(|| (entry.reason_now(&action), action))
            });
            if backwards {
                let mut round: Vec<_> = shown.collect();
                round.append(&mut page.items);
                page.items = round;
            } else {
                page.items.extend(shown);
            }
            if page.items.len() >= limit || !page.more {
                break;
            }
        }
        // Once the page is read, so the build does not compete with it.
        if plan.river_wanted() {
            self.builds.ask(tenant, reader);
        }
        Ok(page)
    }

    /// The actions of a round's entries: from the copies the entries carry
    /// where those serve, loaded in one store call for the rest. Notes the
    /// names of the actors the copies give.
    async fn actions(
        &self,
        tenant: &str,
        entries: &[Entry],
        copies_serve: bool,
        names: &mut HashMap<String, Option<String>>,
    ) -> StoreResult<HashMap<ObjectId, Action>> {
        let mut actions = HashMap::new();
        let mut missing = Vec::new();
        for entry in entries {
            match entry.item.copy.as_deref().filter(|_| copies_serve) {
                Some(copy) => {
                    names.insert(copy.action.actor_id.clone(), copy.actor_name.clone());
                    actions.insert(entry.item.action_id, copy.action.clone());
                }
                None => missing.push(entry.item.action_id),
            }
        }
        if !missing.is_empty() {
            missing.sort_unstable();
            missing.dedup();
            let loaded = self.store.get_actions(tenant, &missing).await?;
            actions.extend(loaded.into_iter().map(|a| (a.id, a)));
        }
        Ok(actions)
    }

    /// `owner`'s item of `action`, as a page of their feed would show it:
    /// the item the timeline holds; where the model pulls at read and the
    /// timeline holds none (nor a tombstone of an item hidden from the
    /// feed), the item the owner's sources give, as a page would merge it
    /// in (ranked at the action's `conducted`). `None` where the feed would
    /// not show it.
    pub async fn item(
        &self,
        tenant: &str,
        owner: &str,
        action: &Action,
    ) -> StoreResult<Option<FeedItem>> {
        // Hidden is never shown: nothing to read.
        if action.hidden {
            return Ok(None);
        }
        let store = self.store;
        let (held, visibility) = tokio::join!(
            store.feed_item(tenant, owner, action.id),
            Visibility::load(store, tenant, owner)
        );
        let (item, pulled) = match held? {
            Some(item) => (item, false),
            None if self.model.pushes_all() => return Ok(None),
            // Held after all: written since the first look (a river built
            // meanwhile), then it is read again; or a tombstone of an item
            // hidden from the feed.
            None if !store
                .materialised(tenant, owner, &[action.id])
                .await?
                .is_empty() =>
            {
                match store.feed_item(tenant, owner, action.id).await? {
                    Some(item) => (item, false),
                    None => return Ok(None),
                }
            }
            // What the sources no longer give is not shown (as the decision
            // says): told here, the owner's groups need not be read.
            None => match pulled_item(store, owner, action)
                .await?
                .filter(|item| read::still_pulled(item.reason.kind, action))
            {
                Some(item) => (item, true),
                None => return Ok(None),
            },
        };
        let access = Access::load(store, tenant, owner, [action], self.expiry()).await?;
        let visibility = visibility?;
        Ok(visibility
            .shows(&access, &item, pulled, action)
            .then_some(item))
    }

    /// The changes to `reader`'s home feed after `after` (a change stamp),
    /// oldest first: the items the timeline delivered or bumped, and what
    /// the pulled sources added, less what came by an edge the reader
    /// ended. `None` if there are more than `limit`. Whether the reader may
    /// read each item's action is decided when the action is read.
    pub async fn changes(
        &self,
        tenant: &str,
        reader: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Option<Vec<FeedItem>>> {
        let store = self.store;
        // The plan first: under rivers, a river being built meanwhile may
        // show some of the pulled items among the timeline's changes.
        let plan: Option<Plan> = if self.model.pushes_all() {
            None
        } else {
            let now = self.clock.now();
            let plan = self
                .model
                .behaviour()
                .plan(store, tenant, reader, now)
                .await?;
            if plan.river_wanted() {
                self.builds.ask(tenant, reader);
            }
            Some(plan)
        };
        let mut items = store.feed_changes(tenant, reader, after, limit + 1).await?;
        if let Some(plan) = plan {
            // What the reader pulls is not in their timeline's changes.
            let mut pulled = plan
                .changes(store, tenant, reader, after, limit + 1)
                .await?;
            // A river built meanwhile may hold some of them already.
            let held: std::collections::HashSet<ObjectId> =
                items.iter().map(|i| i.action_id).collect();
            pulled.retain(|i| !held.contains(&i.action_id));
            items.extend(pulled);
            items.sort_by_key(|i| i.stamp());
        }
        if items.len() > limit {
            return Ok(None);
        }
        let visibility = Visibility::load(store, tenant, reader).await?;
        let group_items: Vec<ObjectId> = items
            .iter()
            .filter(|i| visibility.needs_actions(i))
            .map(|i| i.action_id)
            .collect();
        let sent: HashMap<ObjectId, Action> = if group_items.is_empty() {
            HashMap::new()
        } else {
            store
                .get_actions(tenant, &group_items)
                .await?
                .into_iter()
                .map(|a| (a.id, a))
                .collect()
        };
        items.retain(|item| !visibility.ended(item, sent.get(&item.action_id)));
        Ok(Some(items))
    }
}

/// The item `reader` pulls for `action` (not materialised), if they do:
/// ranked at the action's `conducted`, with the reason their sources give.
pub async fn pulled_item(
    store: &dyn Store,
    reader: &str,
    action: &Action,
) -> StoreResult<Option<FeedItem>> {
    let readers = [reader.to_owned()];
    let pulled = audience::pulled_readers(store, action, &readers, true).await?;
    Ok(pulled.into_iter().next().map(|(owner, kind)| FeedItem {
        owner,
        action_id: action.id,
        relevancy: action.conducted,
        reason: Reason::new(kind, &action.actor_id),
        changed: action.conducted,
        copy: None,
    }))
}
