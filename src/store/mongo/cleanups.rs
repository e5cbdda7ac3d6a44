//! MongoDB: cleanups. The items an ended edge or a group left brought are
//! taken out of the reader's feed by its cleanup job (see
//! [`crate::store::jobs`]): the job is checked, the items taken, the job
//! finished. A re-follow that cancels the job before the check keeps every
//! item.

use crate::model::{FeedItem, ObjectId};
use crate::store::{Lease, StoreResult, Unfollow};

use super::layout::Which;
use super::MongoStore;

impl MongoStore {
    pub(super) async fn clean_docs(
        &self,
        lease: &Lease,
        named: &[ObjectId],
    ) -> StoreResult<Vec<FeedItem>> {
        let u = Unfollow::of_job(&lease.job)?;
        if !self.holds(lease).await? {
            return Ok(Vec::new());
        }
        let which = Which {
            owner: &u.reader,
            reasons: u.kind.reasons(),
            ids: Some(named),
            below: None,
        };
        let taken = self.layout.take(&u.tenant, which).await?;
        self.finish(lease).await?;
        Ok(taken)
    }
}
