//! The log that carries live-event signals between processes sharing one
//! store: each process appends what its hub publishes and tails what the
//! others appended (see [`crate::relay`]). The embedded store is one
//! process and has none; MongoDB's is a collection read by a change stream.

use async_trait::async_trait;
use futures_util::stream::BoxStream;

use super::{StoreError, StoreResult};
use crate::events::Signal;
use crate::model::{Millis, ObjectId};

/// Where a tail stands in the log: a later tail opened with it goes on
/// with the first signal after.
#[derive(Clone, Debug, PartialEq)]
pub struct LogToken(pub bson::Bson);

/// A signal another process appended.
#[derive(Clone, Debug)]
pub struct Logged {
    pub signal: Signal,
    /// When it was appended (by its process's clock).
    pub at: Millis,
    /// The process that appended it.
    pub origin: String,
    /// Its place among that process's signals: each process's signals
    /// carry increasing serials, so one read again (a tail resumed from a
    /// position a little behind) is known as such.
    pub serial: ObjectId,
}

/// Why a tail ended, and where it stood: a tail opened again from
/// `position` misses nothing.
#[derive(Clone, Debug)]
pub struct TailEnd {
    pub error: StoreError,
    /// Just after the last signal the tail yielded, or later where the
    /// backend can tell (nothing skipped either way); none if it cannot.
    pub position: Option<LogToken>,
}

/// An open tail of the log: the signals other processes append, waiting
/// for each, until an error ends it (its last item; none follows).
pub type Tail = BoxStream<'static, Result<Logged, Box<TailEnd>>>;

#[async_trait]
pub trait EventLog: Send + Sync {
    /// Appends `signals` of process `origin`, in order, at `at`, each with
    /// its serial (increasing within the process). Appending again what was
    /// appended (a try whose answer was lost) adds nothing twice.
    async fn append(
        &self,
        origin: &str,
        at: Millis,
        signals: &[(ObjectId, Signal)],
    ) -> StoreResult<()>;

    /// Reads what processes other than `origin` append: from just after
    /// `after`, or from now.
    async fn tail(&self, origin: &str, after: Option<LogToken>) -> StoreResult<Tail>;
}
