//! The store error: `Clone`, so DataLoader results can share it, with a kind
//! that callers branch on.

use std::fmt;
use std::sync::Arc;

use crate::model::limits::InputError;

/// What went wrong, as far as a caller needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request itself is wrong (unknown user, mismatched group kind…).
    InvalidInput,
    /// The thing to change does not exist.
    NotFound,
    /// A fan-out lease was taken over by another worker.
    LeaseLost,
    /// The backend cannot take the request right now (a lost database, a
    /// full or failing disk); retrying later may work. Answered
    /// `STORAGE_UNAVAILABLE`.
    Unavailable,
    /// Anything else: a bug, or stored data that cannot be read
    /// ([`StoreError::corrupt`]).
    Internal,
}

#[derive(Clone, Debug)]
pub struct StoreError {
    pub kind: ErrorKind,
    pub message: String,
    pub source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// Wraps a backend error as `kind`, keeping it as the source.
    pub fn from_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            kind,
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// A stored record that cannot be read (an unknown code, a value cut
    /// short): `record` says which (family or collection, and its key or
    /// id), `detail` what is wrong with it.
    pub fn corrupt(record: impl fmt::Display, detail: impl fmt::Display) -> Self {
        Self::new(
            ErrorKind::Internal,
            format!("corrupt record {record}: {detail}"),
        )
    }

    pub fn internal(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::from_source(ErrorKind::Internal, message, source)
    }
}

impl StoreError {
    /// The message with its causes, for logs.
    pub fn chain(&self) -> String {
        let mut out = self.message.clone();
        let mut cause = std::error::Error::source(self);
        while let Some(err) = cause {
            out.push_str(": ");
            out.push_str(&err.to_string());
            cause = err.source();
        }
        out
    }
}

/// The message alone: the cause is the error's `source`, so reports that walk
/// the chain (anyhow, `chain`) show it once.
impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<InputError> for StoreError {
    fn from(err: InputError) -> Self {
        StoreError::invalid(err.0)
    }
}
