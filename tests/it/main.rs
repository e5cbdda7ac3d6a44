//! Integration tests: one binary, so the crate links once.

mod api;
mod common;
mod demo;
mod garbage;
mod mongo_failures;
mod readme;
mod security;
mod store_suite;
mod worker;
