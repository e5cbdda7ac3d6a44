//! The event hub: routes feed events to the live subscriptions of their reader.
//!
//! A map from `(tenant, reader)` to a broadcast channel, so publishing an event
//! costs work for its recipient's sockets only, never for every open socket.
//! Channels are created on the first subscription of a reader and removed with
//! the last one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::Enum;
use tokio::sync::broadcast;

use crate::model::FeedItem;

/// What happened to an item of a feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
pub enum FeedEventKind {
    /// The item was delivered into the feed.
    Added,
    /// The item left the feed (action hidden or deleted, item hidden by its reader).
    Removed,
}

/// A change to one reader's feed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedEvent {
    pub kind: FeedEventKind,
    pub tenant: String,
    pub item: FeedItem,
}

type Key = (String, String);

/// Routes feed events to live subscribers. Injected into the API and the worker.
pub struct Hub {
    /// A std mutex: every critical section is a map lookup or insert, never held
    /// across an await, so an async mutex would only add cost.
    readers: Mutex<HashMap<Key, broadcast::Sender<Arc<FeedEvent>>>>,
    capacity: usize,
}

/// A live subscription to one reader's feed events. Dropping it unsubscribes.
pub struct Subscription {
    pub receiver: broadcast::Receiver<Arc<FeedEvent>>,
    hub: Arc<Hub>,
    key: Key,
}

impl Hub {
    /// `capacity` is how many events one reader's subscriptions may fall behind
    /// before they are told they lagged: enough for a burst of fan-outs landing
    /// at once, small enough that a stuck socket holds little memory.
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            readers: Mutex::new(HashMap::new()),
            capacity,
        })
    }

    pub fn subscribe(self: &Arc<Self>, tenant: &str, reader: &str) -> Subscription {
        let key = (tenant.to_owned(), reader.to_owned());
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        let receiver = readers
            .entry(key.clone())
            .or_insert_with(|| broadcast::channel(self.capacity).0)
            .subscribe();
        Subscription {
            receiver,
            hub: self.clone(),
            key,
        }
    }

    /// Sends an event to its reader's live subscriptions, if any.
    pub fn publish(&self, event: FeedEvent) {
        let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sender) = readers.get(&(event.tenant.clone(), event.item.owner.clone())) {
            // An error only means every receiver went away meanwhile.
            let _ = sender.send(Arc::new(event));
        }
    }

    /// How many readers have a live subscription.
    pub fn live_readers(&self) -> usize {
        self.readers.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut readers = self.hub.readers.lock().unwrap_or_else(|e| e.into_inner());
        // Our receiver is still alive here, so 1 means it was the last one.
        if readers
            .get(&self.key)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            readers.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObjectId, Reason, ReasonKind};

    fn event(owner: &str) -> FeedEvent {
        FeedEvent {
            kind: FeedEventKind::Added,
            tenant: "acme".into(),
            item: FeedItem {
                owner: owner.into(),
                action_id: ObjectId::new(),
                relevancy: 1,
                reason: Reason {
                    kind: ReasonKind::Follows,
                    actor_id: "bob".into(),
                },
            },
        }
    }

    #[tokio::test]
    async fn events_reach_only_their_reader_and_channels_go_with_the_last_subscriber() {
        let hub = Hub::new(8);
        let mut alice = hub.subscribe("acme", "alice");
        let mut alice2 = hub.subscribe("acme", "alice");
        let mut carol = hub.subscribe("acme", "carol");
        hub.publish(event("alice"));
        assert_eq!(alice.receiver.recv().await.unwrap().item.owner, "alice");
        assert_eq!(alice2.receiver.recv().await.unwrap().item.owner, "alice");
        assert!(carol.receiver.try_recv().is_err());
        assert_eq!(hub.live_readers(), 2);
        drop(alice);
        assert_eq!(hub.live_readers(), 2);
        drop(alice2);
        assert_eq!(hub.live_readers(), 1);
        drop(carol);
        assert_eq!(hub.live_readers(), 0);
    }
}
