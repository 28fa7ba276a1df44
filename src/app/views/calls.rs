//! The call log, a page at a time (`GET /v1/calls`): a tenant's summarization calls, newest
//! first, each with the agent and wire it came by, its tokens before and after, and what the
//! fidelity gate found — the rows the console's fleet page reads. A page continues from the
//! last call of the one before (its id), so that calls written meanwhile neither repeat nor
//! shift a page.

use crate::access::Identity;
use crate::app::{App, AppError};
use compactd_store::CallRecord;

/// Calls on a page, at most.
pub(crate) const MAX_PAGE: i64 = 500;

/// One page of calls.
#[derive(Debug, Clone)]
pub(crate) struct CallsPage {
    pub(crate) calls: Vec<CallRecord>,
    /// Where the next page starts (the `before` to ask it with), when one follows.
    pub(crate) next: Option<i64>,
}

impl App {
    /// `who`'s tenant's calls before the call `before` (from the newest when `None`), at most
    /// `limit` (1 to [`MAX_PAGE`]). Calls are written a moment after they end, in batches.
    pub(crate) async fn calls_page(
        &self,
        who: &Identity,
        before: Option<i64>,
        limit: i64,
    ) -> Result<CallsPage, AppError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let mut calls = self.store.calls(&who.tenant, before, limit + 1).await?;
        let more = calls.len() as i64 > limit;
        calls.truncate(limit as usize);
        let next = if more {
            calls.last().map(|c| c.call_id)
        } else {
            None
        };
        Ok(CallsPage { calls, next })
    }
}
