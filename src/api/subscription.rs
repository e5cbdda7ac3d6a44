//! Subscription root: live changes to the viewer's feed, to a slice and to an
//! action.
//!
//! Every stream subscribes to its hub topic before it reads anything, so no
//! event falls between a read and going live. A stream ends with a coded error
//! when its subscriber lags behind the event buffer (`LAGGED`) or its token
//! expires (`UNAUTHENTICATED`); nothing is dropped silently.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use async_graphql::{Context, MergedSubscription, Subscription, ID};

use super::notifications::NotificationSubscription;
use futures_util::stream::{self, Stream};

use super::access::{access, Access};
use super::cursor::ListId;
use super::error::{coded, not_found, ApiResultExt, LAGGED, UNAUTHENTICATED};
use super::feed::EVENTS_GRACE_MS;
use super::global_id::action_id_arg;
use super::live::{planned, LiveEvent, LiveFeedEvent, Splice, Writer};
use super::types::{ActionEventNode, ActionNode, FeedEventNode, SliceEventNode};
use super::{session, state, viewer, AppState, SubscriptionPermit, Viewer};
use crate::events::shared::Renders;
use crate::events::{Event, FeedEvent, FeedEventKind, Lagged, Topic};
use crate::model::limits::normalize_id;
use crate::model::{Action, Millis, ObjectId, ReasonKind, Stamp};

/// At most this many changes are replayed on resuming; a reader further
/// behind refetches the feed.
pub const MAX_REPLAY: usize = 1_000;

/// Live changes: to the viewer's feed, slices, actions, notifications.
#[derive(MergedSubscription, Default)]
#[graphql(name = "Subscription")]
pub struct SubscriptionRoot(FeedSubscription, NotificationSubscription);

/// Feeds, slices and actions, live.
#[derive(Default)]
pub struct FeedSubscription;

/// What every live stream holds: its place on the hub, its permit among the
/// connection's subscriptions, and its viewer (whose token may expire while
/// the socket stays open).
pub(super) struct Live {
    subscription: crate::events::Subscription,
    _permit: SubscriptionPermit,
    pub(super) viewer: Viewer,
    pub(super) state: AppState,
}

impl Live {
    pub(super) fn open(ctx: &Context<'_>, topic: Topic) -> async_graphql::Result<Self> {
        let viewer = viewer(ctx)?;
        let permit = session(ctx)?.subscription_permit()?;
        let state = state(ctx)?.clone();
        Ok(Self {
            subscription: state.hub.subscribe(topic),
            _permit: permit,
            viewer: viewer.clone(),
            state,
        })
    }

    /// The next event, or the error that ends the stream (`None` at the end).
    pub(super) async fn next(&mut self) -> Option<Result<Arc<Event>, async_graphql::Error>> {
        let received = self.subscription.recv().await;
        if self.viewer.expired() {
            return Some(Err(coded(
                UNAUTHENTICATED,
                "the token has expired; subscribe again with a fresh one",
            )));
        }
        match received {
            Ok(event) => Some(Ok(event)),
            Err(Lagged(missed)) => {
                self.state.metrics.lagged_subscriptions.inc();
                Some(Err(coded(
                    LAGGED,
                    format!(
                    "this subscription fell {missed} events behind; refetch and subscribe again"
                ),
                )))
            }
        }
    }

    /// The next event whose action (as `pick` finds it) the viewer may read;
    /// events without one, or with one the viewer may not read, are passed over.
    async fn next_readable<T>(
        &mut self,
        pick: for<'e> fn(&'e Event) -> Option<(&'e Action, T)>,
    ) -> Option<async_graphql::Result<T>> {
        loop {
            let event = match self.next().await? {
                Ok(event) => event,
                Err(err) => return Some(Err(err)),
            };
            let Some((action, node)) = pick(&event) else {
                continue;
            };
            let store = self.state.store.as_ref();
            let expiry = self.state.expiry();
            let (tenant, user) = (&self.viewer.tenant, &self.viewer.user);
            // Boxed, as every read a live stream makes: an idle subscriber
            // holds the stream's state, which would otherwise lay the
            // read's out inline.
            let access = Box::pin(Access::load(store, tenant, user, [action], expiry));
            match access.await.api() {
                Ok(access) if access.can_read(action) => return Some(Ok(node)),
                Ok(_) => continue,
                Err(err) => return Some(Err(err)),
            }
        }
    }
}

/// Runs a live stream until its first error, which it passes on and ends with.
pub(super) fn until_error<S, T, F, Fut>(
    state: S,
    next: F,
) -> impl Stream<Item = async_graphql::Result<T>>
where
    F: Fn(S) -> Fut + Copy,
    Fut: std::future::Future<Output = Option<(async_graphql::Result<T>, S)>>,
{
    stream::unfold(Some(state), move |state| async move {
        match next(state?).await? {
            (Ok(item), state) => Some((Ok(item), Some(state))),
            (Err(err), _) => Some((Err(err), None)),
        }
    })
}

/// A `feedEvents` stream: first the replay, then live events.
struct FeedStream {
    live: Live,
    replay: VecDeque<FeedEvent>,
    /// What the replay and the live events passed on, by action: an item
    /// added again, or a change no newer, is skipped (a relayed announcement
    /// tried twice, a pulled item written into a river).
    replayed: HashMap<ObjectId, Millis>,
    /// The live entries of `replayed`, oldest first, so it stays bounded.
    remembered: VecDeque<ObjectId>,
    /// Live `ADDED` / `BUMPED` events at or before this were replayed or missed
    /// on purpose (the client's cursor is past them).
    after: Option<Stamp>,
    /// The newest change passed on, for resume cursors.
    resume: Stamp,
    /// How the selection's events are written without an execution each,
    /// and the transport's splice, when they may be.
    shared: Option<(Writer, Splice)>,
}

impl FeedStream {
    async fn next(&mut self) -> Option<async_graphql::Result<LiveFeedEvent>> {
        if let Some(event) = self.replay.pop_front() {
            return Some(Ok(self.node(&event)));
        }
        loop {
            // Live events are shared by every subscriber of the feed: read
            // in place, not copied.
            let shared = match self.live.next().await? {
                Ok(shared) => shared,
                Err(err) => return Some(Err(err)),
            };
            if let Event::Feed(event) = shared.as_ref() {
                if event.kind == FeedEventKind::Removed {
                    // Added again later, it is new.
                    self.replayed.remove(&event.item.action_id);
                }
                if !self.seen(event) {
                    self.remember(event);
                    return Some(Ok(self.node(event)));
                }
            }
        }
    }

    /// Notes a live event passed on, forgetting the oldest past a bound.
    fn remember(&mut self, event: &FeedEvent) {
        if event.kind == FeedEventKind::Removed {
            return;
        }
        let id = event.item.action_id;
        if self.replayed.insert(id, event.item.changed).is_none() {
            self.remembered.push_back(id);
        }
        while self.remembered.len() > MAX_REPLAY {
            if let Some(old) = self.remembered.pop_front() {
                self.replayed.remove(&old);
            }
        }
    }

    /// The event's node, its resume cursor moved past it.
    fn node(&mut self, event: &FeedEvent) -> LiveFeedEvent {
        if event.kind != FeedEventKind::Removed && event.item.stamp() > self.resume {
            self.resume = event.item.stamp();
        }
        let node = FeedEventNode::new(event, self.resume, &self.live.state.cursors);
        let shared = match (&self.shared, &event.shared) {
            (Some((writer, splice)), Some(renders)) => {
                Some((writer.clone(), splice.clone(), renders.clone()))
            }
            // An event no other subscriber receives is planned all the
            // same, with renders of its own.
            (Some((writer @ Writer::Planned(_), splice)), None) => {
                Some((writer.clone(), splice.clone(), Arc::default()))
            }
            _ => None,
        };
        LiveFeedEvent { node, shared }
    }

    /// Whether a live event repeats what the replay (or the cursor)
    /// covered: an item the replay added, added again (a pulled item the
    /// replay gave at its own time, then written into a river, has a later
    /// change stamp but is no news), or a change no newer than the replay's.
    fn seen(&self, event: &FeedEvent) -> bool {
        if event.kind == FeedEventKind::Removed {
            return false;
        }
        let stamp = event.item.stamp();
        let replayed = self.replayed.get(&event.item.action_id);
        self.after.is_some_and(|after| stamp <= after)
            || (event.kind == FeedEventKind::Added && replayed.is_some())
            || replayed.is_some_and(|&changed| event.item.changed <= changed)
    }
}

#[Subscription]
impl FeedSubscription {
    /// Changes to the viewer's home feed as they happen: items `ADDED`,
    /// `REMOVED`, and `BUMPED` (raised by a comment, with their new relevancy,
    /// reason and cursor).
    ///
    /// With `after` (a `resumeCursor` of an event, or a feed page's
    /// `eventsCursor`), it first replays the items added or bumped since, oldest
    /// change first, then goes on live with no gap and no repeat at the seam.
    /// Removals while away are not replayed: their items' `action` reads null.
    /// More than 1,000 changes to replay, or a subscriber that falls behind the
    /// event buffer, end the stream with `LAGGED`: refetch the feed.
    async fn feed_events(
        &self,
        ctx: &Context<'_>,
        after: Option<String>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<LiveFeedEvent>>> {
        let viewer = viewer(ctx)?;
        let (tenant, reader) = (viewer.tenant.clone(), viewer.user.clone());
        let list = ListId::feed_changes(&state(ctx)?.cursors, &tenant, &reader);
        let after = after.as_deref().map(|c| list.decode_stamp(c)).transpose()?;
        // Planned (or not) as planned reads stand when the stream opens.
        let shared = Writer::of(ctx);
        let live = Live::open(ctx, Topic::Feed { tenant, reader })?;
        let mut replay = VecDeque::new();
        let mut replayed = HashMap::new();
        if let Some(after) = after {
            // Boxed: the subscription's stream holds this resolver's state for
            // as long as it lives, so the replay's reads (a plan, changes,
            // visibility) must not be laid out inline in every idle
            // subscriber.
            let changes = live.state.feeds();
            let changes = changes.changes(&viewer.tenant, &viewer.user, after, MAX_REPLAY);
            let changes = Box::pin(changes).await.api()?;
            let Some(items) = changes else {
                return Err(coded(
                    LAGGED,
                    format!(
                        "more than {MAX_REPLAY} changes since that cursor; refetch the feed and subscribe with its eventsCursor"
                    ),
                ));
            };
            for item in items {
                replayed.insert(item.action_id, item.changed);
                let kind = if item.reason.kind == ReasonKind::Bumped {
                    FeedEventKind::Bumped
                } else {
                    FeedEventKind::Added
                };
                replay.push_back(FeedEvent {
                    kind,
                    tenant: viewer.tenant.clone(),
                    item,
                    action: None,
                    shared: None,
                });
            }
        }
        let feed = FeedStream {
            live,
            replay,
            replayed,
            remembered: VecDeque::new(),
            after,
            // Before the first change, resuming starts where a page read now would.
            resume: after.unwrap_or(Stamp {
                changed: state(ctx)?.clock.now() - EVENTS_GRACE_MS,
                action_id: ObjectId::from_bytes([0; 12]),
            }),
            shared,
        };
        Ok(until_error(feed, |mut feed| async move {
            let next = feed.next().await?;
            Some((next, feed))
        }))
    }

    /// Actions that join the slice of `refId` (recorded with it among their
    /// `refIds`), as they are recorded; only those the viewer may read.
    async fn slice_events(
        &self,
        ctx: &Context<'_>,
        ref_id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<LiveEvent<SliceEventNode>>>>
    {
        let ref_id = normalize_id("refId", &ref_id).api()?;
        let tenant = viewer(ctx)?.tenant.clone();
        // Planned (or not) as planned reads stand when the stream opens.
        let shared = planned(ctx).zip(ctx.data_opt::<Splice>().cloned());
        let live = Live::open(ctx, Topic::Slice { tenant, ref_id })?;
        Ok(until_error(
            (live, shared),
            |(mut live, shared)| async move {
                let next = live.next_readable(slice_event).await?;
                let next = next.map(|(node, renders)| LiveEvent {
                    node,
                    plan: shared.clone(),
                    renders: Some(renders),
                });
                Some((next, (live, shared)))
            },
        ))
    }

    /// New comments, likes and unlikes of one action the viewer may read, with
    /// its counts after each. Events stop reaching a viewer who may no longer
    /// read the action.
    async fn action_events(
        &self,
        ctx: &Context<'_>,
        action_id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<LiveEvent<ActionEventNode>>>>
    {
        let viewer = viewer(ctx)?;
        let id = action_id_arg("actionId", &action_id)?;
        let store = state(ctx)?.store.clone();
        let action = store
            .get_actions(&viewer.tenant, &[id])
            .await
            .api()?
            .pop()
            .filter(|a| !a.hidden);
        let readable = match &action {
            Some(action) => Box::pin(access(ctx, viewer, [action]))
                .await?
                .can_read(action),
            None => false,
        };
        if !readable {
            return Err(not_found(format!("no action {id}")));
        }
        let topic = Topic::Action {
            tenant: viewer.tenant.clone(),
            action_id: id,
        };
        // Planned (or not) as planned reads stand when the stream opens.
        let shared = planned(ctx).zip(ctx.data_opt::<Splice>().cloned());
        let live = Live::open(ctx, topic)?;
        Ok(until_error(
            (live, shared),
            |(mut live, shared)| async move {
                let next = live.next_readable(action_event).await?;
                let next = next.map(|node| LiveEvent {
                    node,
                    plan: shared.clone(),
                    renders: None,
                });
                Some((next, (live, shared)))
            },
        ))
    }
}

/// A slice event's action, and its node with the renders its subscribers
/// share.
fn slice_event(event: &Event) -> Option<(&Action, (SliceEventNode, Arc<Renders>))> {
    match event {
        Event::Slice(action, renders) => {
            let node = SliceEventNode(ActionNode::new((**action).clone()));
            Some((action, (node, renders.clone())))
        }
        _ => None,
    }
}

/// A reaction's action, and its node (sharing the event).
fn action_event(event: &Event) -> Option<(&Action, ActionEventNode)> {
    match event {
        Event::Action(reaction) => Some((&reaction.action, ActionEventNode(reaction.clone()))),
        _ => None,
    }
}
