//! What can go wrong in an operation of the application layer, in its own terms. The HTTP layer
//! maps each to a status once (`http/error.rs`); the CLI prints it.

use crate::pipeline::SummarizeError;
use compactd_core::compaction::NothingReason;
use compactd_core::session::ParseError;
use compactd_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No such session (or not the caller's).
    #[error("{0}")]
    NotFound(String),
    /// A value the caller gave is not acceptable; `param` names it.
    #[error("{message}")]
    Invalid { param: String, message: String },
    /// A value the caller gave cannot be read at all (a NUL byte in a name or filter): a
    /// malformed request, answered 400 rather than 422.
    #[error("{message}")]
    Malformed { param: String, message: String },
    /// A session file or appended lines that cannot be read (or break a limit).
    #[error(transparent)]
    InvalidSession(#[from] ParseError),
    /// The request conflicts with what is stored (`code` says how).
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// There is nothing to compact or summarize.
    #[error("nothing to compact: {1}")]
    Nothing(NothingReason, String),
    /// Over a size limit (the message names the setting).
    #[error("{0}")]
    TooLarge(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Summarize(#[from] SummarizeError),
    /// CPU work on the caller's input (`.0` says which) did not finish within the request's
    /// deadline (`COMPACTD_DEADLINE_SECS`): a 503 with Retry-After.
    #[error("{0} did not finish within the deadline")]
    DeadlineExceeded(&'static str),
    /// A bug.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl AppError {
    pub fn invalid(param: &str, message: impl Into<String>) -> AppError {
        AppError::Invalid {
            param: param.to_owned(),
            message: message.into(),
        }
    }
}

impl From<crate::cpu::CpuError> for AppError {
    fn from(error: crate::cpu::CpuError) -> Self {
        AppError::Internal(anyhow::Error::new(error))
    }
}

impl From<crate::app::compaction::compactor::CompactError> for AppError {
    fn from(error: crate::app::compaction::compactor::CompactError) -> Self {
        use crate::app::compaction::compactor::CompactError;
        match error {
            CompactError::Nothing(reason, message) => AppError::Nothing(reason, message),
            // The parameter that named the entry is the caller's to say (see `with_param`).
            CompactError::UnknownLeaf(e) => AppError::invalid("leafId", e.to_string()),
            CompactError::Summarize(e) => AppError::Summarize(e),
        }
    }
}
