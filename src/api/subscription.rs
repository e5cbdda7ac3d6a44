//! Subscription root: live changes to the viewer's feed.

use async_graphql::{Context, Subscription};
use futures_util::stream::{self, Stream};
use tokio::sync::broadcast::error::RecvError;

use super::error::{coded, LAGGED};
use super::types::FeedEventNode;
use super::{session, state, viewer};

pub struct SubscriptionRoot;

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
        // The permit lives as long as the stream: ending the subscription frees it.
        Ok(stream::unfold(
            Some((subscription, permit)),
            |state| async move {
                let (mut subscription, permit) = state?;
                match subscription.receiver.recv().await {
                Ok(event) => Some((
                    Ok(FeedEventNode::new(&event)),
                    Some((subscription, permit)),
                )),
                Err(RecvError::Lagged(missed)) => Some((
                    Err(coded(
                        LAGGED,
                        format!(
                            "this subscription fell {missed} events behind; refetch the feed and subscribe again"
                        ),
                    )),
                    None,
                )),
                Err(RecvError::Closed) => None,
            }
            },
        ))
    }
}
