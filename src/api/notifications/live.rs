//! `notificationEvents`: the viewer's notifications, live.

use std::collections::VecDeque;
use std::sync::Arc;

use async_graphql::{Context, Enum, SimpleObject, Subscription, ID};
use futures_util::stream::Stream;

use super::counts;
use super::nodes::NotificationGroupNode;
use crate::api::error::ApiResultExt;
use crate::api::global_id::GlobalId;
use crate::api::live::{planned, LiveEvent, PlannedEvent, Splice};
use crate::api::plan::{EventPlan, Whole};
use crate::api::subscription::{until_error, Live};
use crate::api::{viewer, AppState, Session};
use crate::events::shared::Renders;
use crate::events::{Event, NoticeEvent, Topic};
use crate::model::{NoticeGroup, ObjectId};
use crate::store::NoticeSelect;

/// What happened to the viewer's notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
pub enum NotificationEventKind {
    /// A new group.
    Added,
    /// A group changed: a new notification in it, read, archived.
    Updated,
    /// A group went (the oldest, beyond what a user keeps).
    Removed,
    /// Only the counts changed (seen on some device), or the stream began.
    Counts,
}

/// One change to the viewer's notifications, with the counts after it.
#[derive(SimpleObject)]
pub struct NotificationEvent {
    pub kind: NotificationEventKind,
    /// The group as it is now (`ADDED`, `UPDATED`).
    pub group: Option<NotificationGroupNode>,
    /// The group's id (every kind but `COUNTS`).
    pub group_id: Option<ID>,
    pub unseen_count: u64,
    pub unread_count: u64,
}

#[derive(Default)]
pub struct NotificationSubscription;

/// One event of a `notificationEvents` stream.
type LiveNotificationEvent = LiveEvent<NotificationEvent>;

impl PlannedEvent for NotificationEvent {
    const NAME: &'static str = "NotificationEvent";

    /// Written for its subscriber: what it says is theirs alone.
    async fn written(
        &self,
        plan: &EventPlan,
        _: Option<&Renders>,
        state: &AppState,
        session: &Session,
    ) -> Option<String> {
        plan.whole(state, session, Whole::Notice(self)).await
    }
}

/// A `notificationEvents` stream: the counts first, then each change.
struct NoticeStream {
    live: Live,
    pending: VecDeque<NotificationEvent>,
    started: bool,
    shared: Option<(Arc<EventPlan>, Splice)>,
}

impl NoticeStream {
    async fn next(mut self) -> Option<(async_graphql::Result<LiveNotificationEvent>, Self)> {
        loop {
            if let Some(node) = self.pending.pop_front() {
                let plan = self.shared.clone();
                let event = LiveEvent {
                    node,
                    plan,
                    renders: None,
                };
                return Some((Ok(event), self));
            }
            let change = if self.started {
                match self.live.next().await? {
                    Ok(event) => match event.as_ref() {
                        Event::Notices(change) => change.clone(),
                        _ => continue,
                    },
                    Err(err) => return Some((Err(err), self)),
                }
            } else {
                self.started = true;
                NoticeEvent::default()
            };
            // Boxed: an idle subscriber holds this stream's state, which
            // would otherwise lay the reads out inline.
            if let Err(err) = Box::pin(self.expand(change)).await {
                return Some((Err(err), self));
            }
        }
    }

    /// Reads what `change` names and queues its events.
    async fn expand(&mut self, change: NoticeEvent) -> async_graphql::Result<()> {
        let (state, viewer) = (&self.live.state, &self.live.viewer);
        let store = state.store.as_ref();
        let mut ids = change.added.clone();
        ids.extend(&change.updated);
        let groups = if ids.is_empty() {
            Vec::new()
        } else {
            store
                .notice_groups(&viewer.tenant, &viewer.user, NoticeSelect::Ids(&ids))
                .await
                .api()?
        };
        let (inbox, c) = counts(state, viewer).await?;
        let event = |kind, group: Option<NoticeGroup>, id: Option<ObjectId>| NotificationEvent {
            kind,
            group_id: id.map(|id| GlobalId::NotificationGroup(id).encode()),
            group: group.map(|group| NotificationGroupNode {
                group,
                seen_until: inbox.seen_until,
            }),
            unseen_count: c.unseen_count,
            unread_count: c.unread_count,
        };
        for id in ids {
            let Some(group) = groups.iter().find(|g| g.id == id) else {
                continue;
            };
            let kind = if change.added.contains(&id) {
                NotificationEventKind::Added
            } else {
                NotificationEventKind::Updated
            };
            self.pending
                .push_back(event(kind, Some(group.clone()), Some(id)));
        }
        for id in change.removed {
            self.pending
                .push_back(event(NotificationEventKind::Removed, None, Some(id)));
        }
        if self.pending.is_empty() {
            self.pending
                .push_back(event(NotificationEventKind::Counts, None, None));
        }
        Ok(())
    }
}

#[Subscription]
impl NotificationSubscription {
    /// Changes to the viewer's notifications, from any source: new and
    /// updated groups, and the counts, also when another device of the
    /// viewer marks something seen or read. Begins with the counts.
    async fn notification_events(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<LiveNotificationEvent>>>
    {
        let viewer = viewer(ctx)?;
        let topic = Topic::Notices {
            tenant: viewer.tenant.clone(),
            user: viewer.user.clone(),
        };
        // Planned (or not) as planned reads stand when the stream opens.
        let shared = planned(ctx).zip(ctx.data_opt::<Splice>().cloned());
        let stream = NoticeStream {
            live: Live::open(ctx, topic)?,
            pending: VecDeque::new(),
            started: false,
            shared,
        };
        Ok(until_error(stream, NoticeStream::next))
    }
}
