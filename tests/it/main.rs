//! Integration tests: one binary, so the crate links once.

mod api;
mod archive;
mod bench;
mod common;
mod demo;
mod embed;
mod expiry;
mod follow;
mod garbage;
mod group_feeds;
mod group_follows;
mod http;
mod layouts;
mod live;
mod metrics;
mod models;
mod mongo_failures;
mod processes;
mod ranked_lists;
mod readme;
mod relevancy;
mod scopes;
mod security;
mod store_models;
mod store_suite;
mod worker;
