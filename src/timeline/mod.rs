//! The timeline layer, between the API and the worker on one side and the
//! store on the other: the feed models ([`feed_model`], one file each:
//! [`push`], [`pull`], [`rivers`], [`hybrid`]; rivers are built off the
//! request path by [`builds`]), how a feed is read under them ([`read`]), a reader's home feed as they see it ([`home`]: a page,
//! one item, the changes since a cursor), who an action reaches
//! ([`audience`]), a reader's pulled sources ([`sources`]), what a reader
//! may read ([`Access`]) and the one decision of what their feed shows
//! ([`Visibility`]), and how a feed changes outside a fan-out ([`follow`]:
//! a follow's backfill, an unfollow's announcement; [`groups`]: what
//! leaving a group takes; [`unfollow`]: an ended edge's pending cleanup).

mod access;
pub mod audience;
pub mod builds;
pub mod feed_model;
pub mod follow;
pub mod groups;
pub mod home;
pub mod hybrid;
pub mod pull;
pub mod push;
pub mod read;
pub mod rivers;
pub mod sources;
pub mod unfollow;
mod visibility;

pub use access::{Access, Expiry};
pub use feed_model::{FeedModel, FeedModelKind, FeedStrategy};
pub use visibility::Visibility;

impl FeedModel {
    /// The model itself. Made here rather than beside [`FeedModel`], so that
    /// the models import their settings and their trait and nothing imports
    /// back.
    pub fn behaviour(&self) -> Box<dyn FeedStrategy> {
        match self.kind {
            FeedModelKind::Push => Box::new(push::Push(*self)),
            FeedModelKind::Pull => Box::new(pull::Pull),
            FeedModelKind::Rivers => Box::new(rivers::Rivers(*self)),
            FeedModelKind::Hybrid => Box::new(hybrid::Hybrid(*self)),
        }
    }
}
