//! The event hub: routes live events to the subscriptions of their topic.
//!
//! A topic is one reader's feed, one slice (a `refId`) or one action. The hub
//! maps each topic that has a live subscription to the inboxes of its
//! subscriptions, so publishing costs work for that topic's sockets only, never
//! for every open socket. Topics are created with their first subscription and
//! removed with their last. An event is built once and shared (`Arc`) by every
//! subscriber of its topic, with the action it concerns when the publisher has
//! it, so subscribers do not each load it again.
//!
//! An inbox holds what its subscriber has not read yet, up to the hub's
//! capacity; an event that finds it full is counted as missed, and the
//! subscriber is told it lagged. The inbox allocates only for a backlog: an
//! idle subscriber costs a few words, not a buffer of `capacity` slots.
//!
//! When several processes share one store, the hub also relays what it
//! publishes to the others (see [`crate::relay`]): `publish*` delivers here
//! and relays, `deliver*` (for what came from another process) delivers here
//! only.

pub mod shared;
pub mod signal;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_graphql::Enum;
use tokio::sync::{mpsc, Notify};

use crate::model::{Action, Comment, FeedItem, ObjectId};
pub use signal::Signal;

/// What happened to an item of a feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
pub enum FeedEventKind {
    /// The item was delivered into the feed.
    Added,
    /// The item left the feed (action hidden or deleted, item hidden by its reader).
    Removed,
    /// A comment raised the item: it carries its new relevancy and reason.
    Bumped,
}

/// A change to one reader's feed.
#[derive(Clone, Debug)]
pub struct FeedEvent {
    pub kind: FeedEventKind,
    pub tenant: String,
    pub item: FeedItem,
    /// The item's action, when the publisher has it at hand.
    pub action: Option<Arc<Action>>,
    /// Its result per selection, shared with the events of the same
    /// publication whose items differ only in their reader (see
    /// [`shared`]); `None` for an event no other subscriber receives.
    pub shared: Option<Arc<shared::Renders>>,
}

/// What happened to an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
pub enum ActionEventKind {
    Commented,
    Liked,
    Unliked,
}

/// A reaction to one action.
#[derive(Clone, Debug)]
pub struct ActionEvent {
    pub kind: ActionEventKind,
    /// The action as of the reaction, its counts included.
    pub action: Arc<Action>,
    /// The new comment, for `Commented`.
    pub comment: Option<Comment>,
    /// Who liked or unliked, for `Liked` / `Unliked`.
    pub user: Option<String>,
    /// Its result per selection, shared by the action's subscribers (see
    /// [`shared`]).
    pub shared: Arc<shared::Renders>,
}

/// A change to one user's notifications: groups that were added, that
/// changed (a new member, read, archived), that went (trimmed). All empty
/// when only what was seen changed. Subscribers read the groups and the
/// counts from the store, so the event says only which.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NoticeEvent {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<ObjectId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updated: Vec<ObjectId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<ObjectId>,
}

/// What a topic's subscribers receive.
#[derive(Clone, Debug)]
pub enum Event {
    Feed(FeedEvent),
    /// An action joined a slice, with its result per selection, shared by
    /// the slice's subscribers (and those of the action's other slices).
    Slice(Arc<Action>, Arc<shared::Renders>),
    Action(Arc<ActionEvent>),
    Notices(NoticeEvent),
}

/// Where an event goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Topic {
    Feed {
        tenant: String,
        reader: String,
    },
    Slice {
        tenant: String,
        ref_id: String,
    },
    Action {
        tenant: String,
        action_id: ObjectId,
    },
    /// One user's notifications.
    Notices {
        tenant: String,
        user: String,
    },
}

/// Routes events to live subscribers. Injected into the API and the worker.
pub struct Hub {
    /// A std mutex: every critical section is a map lookup or insert, never held
    /// across an await, so an async mutex would only add cost.
    topics: Mutex<HashMap<Topic, Vec<Arc<Inbox>>>>,
    capacity: usize,
    /// Where signals for the other processes go, once a relay runs.
    outbox: OnceLock<mpsc::Sender<Signal>>,
    /// Signals the relay's queue had no room for.
    dropped: AtomicU64,
}

/// What one subscription has not read yet.
struct Inbox {
    state: Mutex<Backlog>,
    /// Wakes the subscription's reader; a wake-up sent while it is not
    /// waiting is kept for its next wait.
    ready: Notify,
}

#[derive(Default)]
struct Backlog {
    events: VecDeque<Arc<Event>>,
    /// Events that found the backlog full.
    missed: u64,
}

impl Inbox {
    fn deliver(&self, event: &Arc<Event>, capacity: usize) {
        {
            let mut backlog = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if backlog.events.len() >= capacity {
                backlog.missed += 1;
            } else {
                backlog.events.push_back(event.clone());
            }
        }
        self.ready.notify_one();
    }
}

/// The subscription fell this many events behind and missed them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lagged(pub u64);

/// A live subscription to one topic. Dropping it unsubscribes.
pub struct Subscription {
    inbox: Arc<Inbox>,
    hub: Arc<Hub>,
    topic: Topic,
}

impl Subscription {
    /// The next event, waiting for one; `Lagged` once events were missed.
    pub async fn recv(&mut self) -> Result<Arc<Event>, Lagged> {
        loop {
            if let Some(next) = self.try_next() {
                return next;
            }
            self.inbox.ready.notified().await;
        }
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<Result<Arc<Event>, Lagged>> {
        self.try_next()
    }

    fn try_next(&self) -> Option<Result<Arc<Event>, Lagged>> {
        let mut backlog = self.inbox.state.lock().unwrap_or_else(|e| e.into_inner());
        if backlog.missed > 0 {
            return Some(Err(Lagged(backlog.missed)));
        }
        backlog.events.pop_front().map(Ok)
    }
}

impl Hub {
    /// `capacity` is how many events one subscription may fall behind before
    /// it is told it lagged: enough for a burst of fan-outs landing at once,
    /// small enough that a stuck socket holds little memory.
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            topics: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            outbox: OnceLock::new(),
            dropped: AtomicU64::new(0),
        })
    }

    /// From now on, what this hub publishes is also sent to `outbox` for the
    /// other processes. Set once; false if a relay was set already.
    pub fn relay_to(&self, outbox: mpsc::Sender<Signal>) -> bool {
        self.outbox.set(outbox).is_ok()
    }

    /// Whether other processes hear what this hub publishes.
    pub fn relays(&self) -> bool {
        self.outbox.get().is_some()
    }

    /// Sends a signal to the other processes (if a relay runs). A relay too
    /// far behind to take it drops it and counts it: live subscribers
    /// elsewhere miss that event, and their resume cursors still hold it.
    pub fn forward(&self, signal: Signal) {
        if let Some(outbox) = self.outbox.get() {
            if outbox.try_send(signal).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Signals dropped because the relay fell behind.
    pub fn dropped_signals(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn subscribe(self: &Arc<Self>, topic: Topic) -> Subscription {
        let inbox = Arc::new(Inbox {
            state: Mutex::new(Backlog::default()),
            ready: Notify::new(),
        });
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics.entry(topic.clone()).or_default().push(inbox.clone());
        Subscription {
            inbox,
            hub: self.clone(),
            topic,
        }
    }

    /// Sends an event to its topic's live subscriptions, here and in the
    /// other processes.
    pub fn publish(&self, topic: &Topic, event: Event) {
        if self.relays() {
            if let Some(signal) = Signal::of_event(topic, &event) {
                self.forward(signal);
            }
        }
        self.deliver(topic, event);
    }

    /// Sends an event to its topic's live subscriptions in this process.
    pub fn deliver(&self, topic: &Topic, event: Event) {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(inboxes) = topics.get(topic) {
            let event = Arc::new(event);
            for inbox in inboxes {
                inbox.deliver(&event, self.capacity);
            }
        }
    }

    /// Sends one event per item (of a fan-out, a bump, a removal) to the
    /// items' readers, here and in the other processes.
    pub fn publish_feed_items(
        &self,
        kind: FeedEventKind,
        tenant: &str,
        action: Option<&Arc<Action>>,
        items: impl IntoIterator<Item = FeedItem>,
    ) {
        if !self.relays() {
            return self.deliver_feed_items(kind, tenant, action, items);
        }
        let items: Vec<FeedItem> = items.into_iter().collect();
        for chunk in items.chunks(signal::ITEMS_PER_SIGNAL) {
            self.forward(Signal::Items {
                kind: kind.into(),
                tenant: tenant.to_owned(),
                action: action.map(|a| (**a).clone()),
                items: chunk.iter().map(Into::into).collect(),
            });
        }
        self.deliver_feed_items(kind, tenant, action, items);
    }

    /// Sends one event per item to the items' readers in this process, all
    /// sharing `action` when the publisher has it. Holds the lock once for
    /// the lot, and builds an event only for a reader who is listening: a
    /// fan-out to a million readers of whom a few are online costs a
    /// million lookups, no more.
    pub fn deliver_feed_items(
        &self,
        kind: FeedEventKind,
        tenant: &str,
        action: Option<&Arc<Action>>,
        items: impl IntoIterator<Item = FeedItem>,
    ) {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        if topics.is_empty() {
            return;
        }
        // One key, its reader rewritten in place for each item.
        let mut topic = Topic::Feed {
            tenant: tenant.to_owned(),
            reader: String::new(),
        };
        // The items seen with a listener, but for their reader, each with
        // the renders its readers share: a fan-out's items are all alike.
        let mut alike: Vec<(FeedItem, Arc<shared::Renders>)> = Vec::new();
        for item in items {
            if let Topic::Feed { reader, .. } = &mut topic {
                reader.clear();
                reader.push_str(&item.owner);
            }
            if let Some(inboxes) = topics.get(&topic) {
                // The last few only: a publication of unlike items (a
                // removal of many actions) must not scan all it has seen.
                let found = alike
                    .iter()
                    .rev()
                    .take(8)
                    .find(|(seen, _)| alike_but_reader(seen, &item));
                let shared = match found {
                    Some((_, shared)) => shared.clone(),
                    None => {
                        let shared = Arc::new(shared::Renders::default());
                        alike.push((item.clone(), shared.clone()));
                        shared
                    }
                };
                let event = Arc::new(Event::Feed(FeedEvent {
                    kind,
                    tenant: tenant.to_owned(),
                    item,
                    action: action.cloned(),
                    shared: Some(shared),
                }));
                for inbox in inboxes {
                    inbox.deliver(&event, self.capacity);
                }
            }
        }
    }

    /// The readers of `tenant` with a live feed subscription, in no
    /// particular order: whom an action merged in at read (not fanned out)
    /// is told about, at a cost that grows with the readers online.
    pub fn online_readers(&self, tenant: &str) -> Vec<String> {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics
            .keys()
            .filter_map(|topic| match topic {
                Topic::Feed { tenant: t, reader } if t == tenant => Some(reader.clone()),
                _ => None,
            })
            .collect()
    }

    /// Whether `reader` has a live feed subscription.
    pub fn is_online(&self, tenant: &str, reader: &str) -> bool {
        let topic = Topic::Feed {
            tenant: tenant.to_owned(),
            reader: reader.to_owned(),
        };
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics.contains_key(&topic)
    }

    /// How many live subscriptions there are, on every topic.
    pub fn live_subscriptions(&self) -> usize {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics.values().map(Vec::len).sum()
    }

    /// How many topics have a live subscription.
    pub fn live_topics(&self) -> usize {
        self.topics.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Whether two items are the same but for their reader (and what depends
/// on the reader alone).
fn alike_but_reader(a: &FeedItem, b: &FeedItem) -> bool {
    a.action_id == b.action_id
        && a.relevancy == b.relevancy
        && a.changed == b.changed
        && a.reason == b.reason
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut topics = self.hub.topics.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(inboxes) = topics.get_mut(&self.topic) {
            inboxes.retain(|inbox| !Arc::ptr_eq(inbox, &self.inbox));
            if inboxes.is_empty() {
                topics.remove(&self.topic);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObjectId, Reason, ReasonKind};

    impl Event {
        fn owner(&self) -> &str {
            match self {
                Event::Feed(e) => &e.item.owner,
                _ => "",
            }
        }
    }

    fn feed(tenant: &str, reader: &str) -> Topic {
        Topic::Feed {
            tenant: tenant.into(),
            reader: reader.into(),
        }
    }

    fn event(owner: &str) -> FeedEvent {
        FeedEvent {
            kind: FeedEventKind::Added,
            tenant: "acme".into(),
            item: FeedItem {
                owner: owner.into(),
                action_id: ObjectId::new(),
                relevancy: 1,
                reason: Reason::new(ReasonKind::Follows, "bob"),
                changed: 1,
                copy: None,
            },
            action: None,
            shared: None,
        }
    }

    #[tokio::test]
    async fn events_reach_only_their_reader_and_channels_go_with_the_last_subscriber() {
        let hub = Hub::new(8);
        let mut alice = hub.subscribe(feed("acme", "alice"));
        let mut alice2 = hub.subscribe(feed("acme", "alice"));
        let mut carol = hub.subscribe(feed("acme", "carol"));
        hub.publish_feed_items(FeedEventKind::Added, "acme", None, [event("alice").item]);
        assert_eq!(alice.recv().await.unwrap().owner(), "alice");
        assert_eq!(alice2.recv().await.unwrap().owner(), "alice");
        assert!(carol.try_recv().is_none());
        assert_eq!(hub.live_topics(), 2);
        drop(alice);
        assert_eq!(hub.live_topics(), 2);
        drop(alice2);
        assert_eq!(hub.live_topics(), 1);
        drop(carol);
        assert_eq!(hub.live_topics(), 0);
    }

    #[tokio::test]
    async fn an_inbox_keeps_order_up_to_its_capacity_then_reports_what_was_missed() {
        let hub = Hub::new(2);
        let mut alice = hub.subscribe(feed("acme", "alice"));
        let items: Vec<FeedItem> = (0..2).map(|_| event("alice").item).collect();
        let ids: Vec<ObjectId> = items.iter().map(|i| i.action_id).collect();
        hub.publish_feed_items(FeedEventKind::Added, "acme", None, items);
        // Published before anyone waits: the wake-up is kept for the wait.
        for id in ids {
            let got = alice.recv().await.expect("no lag yet");
            let Event::Feed(feed) = got.as_ref() else {
                panic!("a feed event")
            };
            assert_eq!(feed.item.action_id, id, "in the order published");
        }
        assert!(alice.try_recv().is_none());
        let burst: Vec<FeedItem> = (0..5).map(|_| event("alice").item).collect();
        hub.publish_feed_items(FeedEventKind::Added, "acme", None, burst);
        assert_eq!(
            alice.recv().await.err(),
            Some(Lagged(3)),
            "two kept, three missed"
        );
    }

    #[tokio::test]
    async fn a_waiting_subscriber_wakes_for_an_event_published_later() {
        let hub = Hub::new(4);
        let mut alice = hub.subscribe(feed("acme", "alice"));
        let waiting = tokio::spawn(async move { alice.recv().await.map(|e| e.owner().to_owned()) });
        tokio::task::yield_now().await;
        hub.publish_feed_items(FeedEventKind::Added, "acme", None, [event("alice").item]);
        assert_eq!(waiting.await.unwrap(), Ok("alice".to_owned()));
    }

    #[tokio::test]
    async fn a_fan_out_reaches_the_readers_listening_and_shares_its_action() {
        use crate::descriptor::Descriptor;
        use crate::model::{Counts, FanOut, Scope};
        let action = Arc::new(Action {
            id: ObjectId::new(),
            tenant: "acme".into(),
            actor_id: "bob".into(),
            conducted: 1,
            hidden: false,
            scope: Scope::Public,
            readers: vec![],
            scope_groups: vec![],
            ref_ids: vec![],
            tags: vec![],
            descriptor: Descriptor::new("StatusPost", serde_json::json!({ "text": "hi" })),
            fan_out: FanOut::pending(),
            counts: Counts::default(),
            expires_at: None,
            to: Vec::new(),
            foreign: None,
        });
        let items =
            |owners: &[&str]| -> Vec<FeedItem> { owners.iter().map(|o| event(o).item).collect() };
        let hub = Hub::new(8);
        // Nobody listening: nothing to do, and nothing fails.
        hub.publish_feed_items(
            FeedEventKind::Added,
            "acme",
            Some(&action),
            items(&["alice"]),
        );
        let mut alice = hub.subscribe(feed("acme", "alice"));
        let mut dave = hub.subscribe(feed("acme", "dave"));
        let mut elsewhere = hub.subscribe(feed("globex", "carol"));
        hub.publish_feed_items(
            FeedEventKind::Added,
            "acme",
            Some(&action),
            items(&["alice", "carol", "dave"]),
        );
        let mut got = Vec::new();
        for sub in [&mut alice, &mut dave] {
            let event = sub.try_recv().expect("an event").expect("no lag");
            let Event::Feed(feed) = event.as_ref() else {
                panic!("a feed event");
            };
            assert!(Arc::ptr_eq(feed.action.as_ref().unwrap(), &action));
            got.push(feed.item.owner.clone());
            assert!(sub.try_recv().is_none(), "one event each");
        }
        assert_eq!(got, ["alice", "dave"]);
        assert!(elsewhere.try_recv().is_none(), "other tenants hear nothing");
    }
}
