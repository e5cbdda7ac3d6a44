//! Webhooks: what Riverfeed tells an application's backend, signed as the
//! Standard Webhooks specification says, and only to endpoints it may
//! reach. Here so far: the signature and the endpoint check, for the
//! registrations, the durable outbox and the sender to build on.

pub mod sign;
pub mod target;
