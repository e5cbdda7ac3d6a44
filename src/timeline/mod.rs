//! The timeline layer, between the API and the worker on one side and the
//! store on the other: the feed models ([`model`]), how a feed is read
//! under them ([`read`]), a reader's pulled sources ([`sources`]), rivers
//! ([`rivers`]), what a reader may see ([`Access`]) and how a feed is filled
//! outside a fan-out ([`follow`]: a new follow's backfill).

mod access;
pub mod audience;
pub mod follow;
pub mod model;
pub mod read;
pub mod rivers;
pub mod sources;

pub use access::Access;
pub use model::{FeedModel, ModelKind};
