//! Riverfeed: an activity-feed service.
//!
//! Applications record what happened (actions); Riverfeed stores each action
//! once, fans it out to the feeds of the people who should see it, ranks every
//! feed by relevancy, and serves feeds, slices and live changes over GraphQL.
//!
//! # Layout
//!
//! - [`model`]: the domain — actions, feed items, users, groups, input limits.
//! - [`descriptor`]: the typed payloads of actions, one file per family.
//! - [`store`]: the storage port (`Store` trait, with `Archive`: export and
//!   import of whole stores) and its backends (`embedded`, RocksDB; `mongo`,
//!   MongoDB), and a call-counting wrapper.
//! - [`timeline`]: the feed models, a reader's home feed as they see it (a
//!   page, one item, the changes since a cursor, each decided by the one
//!   visibility rule), what a reader may read, and how a feed is filled
//!   outside a fan-out (a follow's backfill).
//! - [`fanout`]: the worker that claims jobs with a lease: pending actions (one
//!   feed item per reader) and comments (bumps).
//! - [`relevancy`]: the rules that pick which readers a comment bumps, and how far.
//! - [`events`]: the hub that routes feed, slice and action events to live
//!   subscriptions, and the signals it relays to other processes.
//! - [`relay`]: live events across processes sharing a MongoDB: each appends
//!   what it publishes to the event log and tails what the others append.
//! - [`metrics`]: what a process reports at `/metrics`; [`observe`]: its log
//!   lines and, with `--otlp-endpoint`, its GraphQL operation spans over OTLP.
//! - [`api`]: the GraphQL schema — queries, mutations, subscriptions, cursors,
//!   loaders, access checks and error codes.
//! - [`http`]: the axum router — `/graphql`, `/graphql/ws`, `/graphiql`,
//!   `/healthz`, `/readyz`, `/metrics`, `/demo/`.
//! - [`liveness`]: which serving processes still run, so what a dead one
//!   held (a request's `Idempotency-Key`) is taken over at once.
//! - [`auth`]: identity — JWT bearer tokens and roles, or dev-mode headers.
//! - [`server`]: starts and stops the whole service; [`cli`]: the command line
//!   and its commands; [`config`]: the server's flags; [`duration`]: durations
//!   as people write them.
//! - [`archive_cmd`]: `riverfeed export` and `import` — whole stores
//!   as JSON Lines of [`store::Record`]s.
//! - [`clock`]: injected time, so tests move it instead of sleeping.
//! - [`demo`]: `serve --demo` — a recruiting organisation seeded into the
//!   `demo` tenant for the web demo (`web-demo/`, served at `/demo/`).
//! - [`bench`]: `riverfeed bench`, which measures the server in-process as
//!   clients use it and writes a report; [`rng`]: the seeded generator the demo
//!   and the bench draw from.

pub mod api;
pub mod archive_cmd;
pub mod auth;
pub mod bench;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod descriptor;
pub mod duration;
pub mod events;
pub mod fanout;
pub mod http;
pub mod liveness;
pub mod metrics;
pub mod model;
pub mod notify;
pub mod observe;
pub mod relay;
pub mod relevancy;
pub mod rng;
pub mod server;
pub mod store;
pub mod timeline;
pub mod webhooks;
