//! Subscription root: live changes to the viewer's feed.

use async_graphql::{Context, Subscription};
use futures_util::stream::{self, Stream};
use tokio::sync::broadcast::error::RecvError;

use super::error::{coded, LAGGED, UNAUTHENTICATED};
use super::types::FeedEventNode;
use super::{session, state, viewer, SubscriptionPermit, Viewer};

pub struct SubscriptionRoot;

/// What a live `feedEvents` stream holds.
struct Live {
    subscription: crate::events::Subscription,
    _permit: SubscriptionPermit,
    viewer: Viewer,
    cursors: std::sync::Arc<super::cursor::CursorKey>,
}

#[Subscription(name = "Subscription")]
impl SubscriptionRoot {
    /// Items added to and removed from the viewer's home feed, as they happen.
    ///
    /// A subscriber that falls too far behind gets one `LAGGED` error and the
    /// stream ends: refetch the feed and subscribe again.
    async fn feed_events(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<FeedEventNode>>> {
        let viewer = viewer(ctx)?;
        let permit = session(ctx)?.subscription_permit()?;
        let subscription = state(ctx)?.hub.subscribe(&viewer.tenant, &viewer.user);
        // The state carries the permit, so ending the subscription frees it, and
        // the viewer, whose token may expire while the socket stays open.
        let live = Live {
            subscription,
            _permit: permit,
            viewer: viewer.clone(),
            cursors: state(ctx)?.cursors.clone(),
        };
        Ok(stream::unfold(Some(live), |state| async move {
            let mut live = state?;
            let received = live.subscription.receiver.recv().await;
            if live.viewer.expired() {
                let expired = coded(
                    UNAUTHENTICATED,
                    "the token has expired; subscribe again with a fresh one",
                );
                return Some((Err(expired), None));
            }
            match received {
                Ok(event) => {
                    let node = FeedEventNode::new(&event, &live.cursors);
                    Some((Ok(node), Some(live)))
                }
                Err(RecvError::Lagged(missed)) => {
                    let lagged = coded(
                        LAGGED,
                        format!(
                            "this subscription fell {missed} events behind; refetch the feed and subscribe again"
                        ),
                    );
                    Some((Err(lagged), None))
                }
                Err(RecvError::Closed) => None,
            }
        }))
    }
}
