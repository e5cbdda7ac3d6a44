//! Integration tests: one binary, so the crate links once.

mod actor_feed;
mod api;
mod archive;
mod bench;
mod common;
mod demo;
mod follow;
mod garbage;
mod live;
mod mongo_failures;
mod readme;
mod relevancy;
mod security;
mod store_suite;
mod worker;
