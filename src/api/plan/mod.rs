//! Planned reads: a query over the read types runs from a plan made once per
//! document, its page written as JSON straight from the rows, instead of
//! through async-graphql's executor field by field.
//!
//! async-graphql stays the schema: it parses, validates and costs every
//! document, serves introspection, mutations and subscriptions, and answers
//! every operation a plan does not cover. [`Planner`] holds whether plans
//! run at all (`--planned-reads`), so the two executors can be compared on
//! the same store.

use std::sync::atomic::{AtomicBool, Ordering};

/// Which executor answered an operation, as `/metrics` counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Executor {
    /// A plan ran it.
    Planned,
    /// async-graphql's executor ran it (no plan covers it, or plans are off).
    Fallback,
}

impl Executor {
    pub fn label(self) -> &'static str {
        match self {
            Executor::Planned => "planned",
            Executor::Fallback => "fallback",
        }
    }
}

/// Whether planned reads run, shared by every request of a server.
#[derive(Debug)]
pub struct Planner {
    enabled: AtomicBool,
}

impl Planner {
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled: AtomicBool::new(enabled),
        }
    }

    /// Whether operations a plan covers run planned.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turns planned reads on or off for the requests that start after.
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }
}

impl Default for Planner {
    fn default() -> Self {
        Self::new(true)
    }
}
