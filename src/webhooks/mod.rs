//! Webhooks: what Riverfeed tells an application's backend, at least once,
//! signed as the Standard Webhooks specification says, and only to
//! endpoints it may reach.
//!
//! - **Registrations** ([`registry`]; the data in [`crate::model`]) are
//!   records of their tenant: the
//!   endpoint's URL, the events it hears, its signing secret (and the one a
//!   rotation replaced, still signed with for a day), enabled or not.
//! - **The outbox** ([`outbox`]): an event is told by the job that carries
//!   it, which the store wrote in the same step as what happened (an
//!   action's fan-out, a comment's bump, a like's notice job). Before that
//!   job is finished, it queues one delivery job per endpoint that hears
//!   the event. A crash before the finish runs the carrying job again,
//!   which queues the same deliveries under the same keys: none is lost,
//!   and one sent twice carries the same `webhook-id`.
//! - **The sender** ([`send`]) claims delivery jobs under a lease, signs
//!   and posts each, retries failures on a schedule for a day, then keeps
//!   what still fails as a dead delivery to replay.
//! - **The circuit** ([`circuit`]) pauses an endpoint whose attempts have
//!   all failed for a day; its deliveries wait until it is resumed.
//! - [`sign`] is the signature; [`target`] the endpoint check (SSRF).

pub mod circuit;
pub mod outbox;
pub mod registry;
pub mod send;
pub mod sign;
pub mod target;

pub use outbox::{Event, Outbox};
