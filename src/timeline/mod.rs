//! The timeline layer, between the API and the worker on one side and the
//! store on the other: what a reader may see ([`Access`]) and how a feed is
//! filled outside a fan-out ([`follow`]: a new follow's backfill).

mod access;
pub mod follow;

pub use access::Access;
