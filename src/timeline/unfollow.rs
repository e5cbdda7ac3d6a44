//! Unfollows: an ended follow, friendship or group follow, or a group left,
//! is its cleanup job, pending until the worker has taken what it brought
//! out of storage (see [`crate::store::jobs`]). Reads leave those items out
//! meanwhile ([`super::Visibility`]); following again cancels it.

use crate::model::Millis;
use crate::store::{JobKind, Jobs, QueuedRead, Store, StoreResult, Unfollow};

/// Queues `unfollow`'s cleanup: from now on, reads apply it. Nothing
/// changes if it is pending already.
pub async fn start(store: &dyn Store, unfollow: &Unfollow, now: Millis) -> StoreResult<()> {
    store.enqueue(&unfollow.to_job(now)?).await.map(drop)
}

/// Ends `unfollow` before its cleanup ran (the reader follows again): what
/// it covered stays. A no-op if none is pending.
pub async fn end(store: &dyn Store, unfollow: &Unfollow) -> StoreResult<()> {
    store
        .cancel(JobKind::Cleanup, &unfollow.tenant, &unfollow.key())
        .await
        .map(drop)
}

/// The unfollows of `reader` whose cleanup has not run yet. One round
/// trip, and none while no cleanup is pending anywhere on the embedded
/// store.
pub async fn pending(store: &dyn Store, tenant: &str, reader: &str) -> StoreResult<Vec<Unfollow>> {
    store
        .queued(
            JobKind::Cleanup,
            tenant,
            QueuedRead::under(&Unfollow::reader_prefix(reader)),
        )
        .await?
        .iter()
        .map(|q| Unfollow::of_job(&q.job))
        .collect()
}
