//! The event hub: routes live events to the subscriptions of their topic.
//!
//! A topic is one reader's feed, one slice (a `refId`) or one action. The hub
//! maps each topic that has a live subscription to a broadcast channel, so
//! publishing costs work for that topic's sockets only, never for every open
//! socket. Channels are created on a topic's first subscription and removed
//! with its last. An event is built once and shared (`Arc`) by every
//! subscriber of its topic, with the action it concerns when the publisher has
//! it, so subscribers do not each load it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::Enum;
use tokio::sync::broadcast;

use crate::model::{Action, Comment, FeedItem, ObjectId};

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
}

/// What a topic's subscribers receive.
#[derive(Clone, Debug)]
pub enum Event {
    Feed(FeedEvent),
    /// An action joined a slice.
    Slice(Arc<Action>),
    Action(Arc<ActionEvent>),
}

/// Where an event goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Topic {
    Feed { tenant: String, reader: String },
    Slice { tenant: String, ref_id: String },
    Action { tenant: String, action_id: ObjectId },
}

/// Routes events to live subscribers. Injected into the API and the worker.
pub struct Hub {
    /// A std mutex: every critical section is a map lookup or insert, never held
    /// across an await, so an async mutex would only add cost.
    topics: Mutex<HashMap<Topic, broadcast::Sender<Arc<Event>>>>,
    capacity: usize,
}

/// A live subscription to one topic. Dropping it unsubscribes.
pub struct Subscription {
    pub receiver: broadcast::Receiver<Arc<Event>>,
    hub: Arc<Hub>,
    topic: Topic,
}

impl Hub {
    /// `capacity` is how many events one topic's subscriptions may fall behind
    /// before they are told they lagged: enough for a burst of fan-outs landing
    /// at once, small enough that a stuck socket holds little memory.
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            topics: Mutex::new(HashMap::new()),
            capacity,
        })
    }

    pub fn subscribe(self: &Arc<Self>, topic: Topic) -> Subscription {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let receiver = topics
            .entry(topic.clone())
            .or_insert_with(|| broadcast::channel(self.capacity).0)
            .subscribe();
        Subscription {
            receiver,
            hub: self.clone(),
            topic,
        }
    }

    /// Sends an event to its topic's live subscriptions, if any.
    pub fn publish(&self, topic: &Topic, event: Event) {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sender) = topics.get(topic) {
            // An error only means every receiver went away meanwhile.
            let _ = sender.send(Arc::new(event));
        }
    }

    /// Sends one event per item (of a fan-out, a bump, a removal) to the
    /// items' readers, all sharing `action` when the publisher has it. Holds
    /// the lock once for the lot, and builds an event only for a reader who is
    /// listening: a fan-out to a million readers of whom a few are online
    /// costs a million lookups, no more.
    pub fn publish_feed_items(
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
        for item in items {
            if let Topic::Feed { reader, .. } = &mut topic {
                reader.clear();
                reader.push_str(&item.owner);
            }
            if let Some(sender) = topics.get(&topic) {
                let _ = sender.send(Arc::new(Event::Feed(FeedEvent {
                    kind,
                    tenant: tenant.to_owned(),
                    item,
                    action: action.cloned(),
                })));
            }
        }
    }

    /// How many topics have a live subscription.
    pub fn live_topics(&self) -> usize {
        self.topics.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut topics = self.hub.topics.lock().unwrap_or_else(|e| e.into_inner());
        // Our receiver is still alive here, so 1 means it was the last one.
        if topics
            .get(&self.topic)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            topics.remove(&self.topic);
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
            },
            action: None,
        }
    }

    #[tokio::test]
    async fn events_reach_only_their_reader_and_channels_go_with_the_last_subscriber() {
        let hub = Hub::new(8);
        let mut alice = hub.subscribe(feed("acme", "alice"));
        let mut alice2 = hub.subscribe(feed("acme", "alice"));
        let mut carol = hub.subscribe(feed("acme", "carol"));
        hub.publish_feed_items(FeedEventKind::Added, "acme", None, [event("alice").item]);
        assert_eq!(alice.receiver.recv().await.unwrap().owner(), "alice");
        assert_eq!(alice2.receiver.recv().await.unwrap().owner(), "alice");
        assert!(carol.receiver.try_recv().is_err());
        assert_eq!(hub.live_topics(), 2);
        drop(alice);
        assert_eq!(hub.live_topics(), 2);
        drop(alice2);
        assert_eq!(hub.live_topics(), 1);
        drop(carol);
        assert_eq!(hub.live_topics(), 0);
    }

    #[tokio::test]
    async fn a_fan_out_reaches_the_readers_listening_and_shares_its_action() {
        use crate::descriptor::{Descriptor, StatusPost};
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
            descriptor: Descriptor::StatusPost(StatusPost { text: "hi".into() }),
            fan_out: FanOut::pending(),
            counts: Counts::default(),
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
            let event = sub.receiver.try_recv().expect("an event");
            let Event::Feed(feed) = event.as_ref() else {
                panic!("a feed event");
            };
            assert!(Arc::ptr_eq(feed.action.as_ref().unwrap(), &action));
            got.push(feed.item.owner.clone());
            assert!(sub.receiver.try_recv().is_err(), "one event each");
        }
        assert_eq!(got, ["alice", "dave"]);
        assert!(
            elsewhere.receiver.try_recv().is_err(),
            "other tenants hear nothing"
        );
    }
}
