//! Summaries prepared ahead (issue 67): one a tenant's agent session, replaced by a newer one,
//! read when the session's compaction comes, dropped once used or a day old. The same SQL for
//! both backends, implemented once for every [`Backend`].

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use crate::StoreError;
use crate::backend::{Backend, RowsAffected};

/// A session's prepared summary and the prefix of its conversation it covers.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PreparedRow {
    pub tenant: String,
    pub session_key: String,
    /// The conversation known by its first message, read loosely (empty: not known so): what
    /// finds the summary from a compaction that names no session.
    pub opening: String,
    pub prefix_items: i64,
    pub prefix_hash: String,
    /// The chained hash of the same prefix read loosely, as a pi-family agent writes it into its
    /// summarization prompt (each text cut, no reasoning; empty: not known).
    pub loose_hash: String,
    pub prefix_tokens: i64,
    pub summary: String,
    pub model: String,
    pub created_at_ms: i64,
}

/// How long a prepared summary is kept when no compaction comes for it.
pub const PREPARED_TTL_MS: i64 = 24 * 60 * 60 * 1000;

#[async_trait::async_trait]
pub trait Prepared: Send + Sync {
    /// Stores `row` as its session's prepared summary (replacing an older one); drops the
    /// prepared summaries of every session older than [`PREPARED_TTL_MS`].
    async fn put_prepared(&self, row: &PreparedRow) -> Result<(), StoreError>;
    /// The session's prepared summary, if one younger than [`PREPARED_TTL_MS`] is kept.
    async fn prepared(
        &self,
        tenant: &str,
        session_key: &str,
        now_ms: i64,
    ) -> Result<Option<PreparedRow>, StoreError>;
    /// `tenant`'s newest prepared summary of a conversation that opens as `opening` does, if
    /// one younger than [`PREPARED_TTL_MS`] is kept.
    async fn prepared_opening(
        &self,
        tenant: &str,
        opening: &str,
        now_ms: i64,
    ) -> Result<Option<PreparedRow>, StoreError>;
    /// Drops the session's prepared summary if it is still the one made at `created_at_ms`;
    /// whether one was dropped.
    async fn drop_prepared(
        &self,
        tenant: &str,
        session_key: &str,
        created_at_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Marks the session as being prepared until `expires_at_ms`, unless a mark not yet expired
    /// at `now_ms` is there (another replica's); whether it was marked.
    async fn begin_preparing(
        &self,
        tenant: &str,
        session_key: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Whether the session is being prepared (marked, and not expired at `now_ms`).
    async fn preparing(
        &self,
        tenant: &str,
        session_key: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Takes the session's mark away.
    async fn end_preparing(&self, tenant: &str, session_key: &str) -> Result<(), StoreError>;
}

#[async_trait::async_trait]
impl<B> Prepared for B
where
    B: Backend,
    <B::Db as Database>::Arguments: IntoArguments<B::Db>,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'r> &'r str: ColumnIndex<<B::Db as Database>::Row>,
    usize: ColumnIndex<<B::Db as Database>::Row>,
    for<'q> bool: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> i32: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> i64: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> f64: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> String: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db>,
    for<'q> Option<String>: Encode<'q, B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db>,
    for<'q> Option<f64>: Encode<'q, B::Db>,
{
    #[tracing::instrument(level = "debug", skip_all)]
    async fn put_prepared(&self, row: &PreparedRow) -> Result<(), StoreError> {
        crate::within(self.deadline(), async {
            let mut tx = self.pool().begin().await?;
            sqlx::query(
                "insert into prepared_summaries (tenant, session_key, prefix_items, \
                 prefix_hash, prefix_tokens, summary, model, created_at_ms, opening, \
                 loose_hash) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                 on conflict (tenant, session_key) do update set \
                 prefix_items = excluded.prefix_items, prefix_hash = excluded.prefix_hash, \
                 prefix_tokens = excluded.prefix_tokens, summary = excluded.summary, \
                 model = excluded.model, created_at_ms = excluded.created_at_ms, \
                 opening = excluded.opening, loose_hash = excluded.loose_hash",
            )
            .bind(crate::column_text(&row.tenant).into_owned())
            .bind(crate::column_text(&row.session_key).into_owned())
            .bind(row.prefix_items)
            .bind(&row.prefix_hash)
            .bind(row.prefix_tokens)
            .bind(crate::column_text(&row.summary).into_owned())
            .bind(crate::column_text(&row.model).into_owned())
            .bind(row.created_at_ms)
            .bind(crate::column_text(&row.opening).into_owned())
            .bind(&row.loose_hash)
            .execute(&mut *tx)
            .await?;
            sqlx::query("delete from prepared_summaries where created_at_ms < $1")
                .bind(row.created_at_ms - PREPARED_TTL_MS)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prepared(
        &self,
        tenant: &str,
        session_key: &str,
        now_ms: i64,
    ) -> Result<Option<PreparedRow>, StoreError> {
        crate::within(self.deadline(), async {
            let row: Option<PreparedRow> = sqlx::query_as(
                "select tenant, session_key, opening, prefix_items, prefix_hash, \
                 loose_hash, prefix_tokens, summary, model, created_at_ms \
                 from prepared_summaries \
                 where tenant = $1 and session_key = $2 and created_at_ms >= $3",
            )
            .bind(crate::column_text(tenant).into_owned())
            .bind(crate::column_text(session_key).into_owned())
            .bind(now_ms - PREPARED_TTL_MS)
            .fetch_optional(self.pool())
            .await?;
            Ok(row)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prepared_opening(
        &self,
        tenant: &str,
        opening: &str,
        now_ms: i64,
    ) -> Result<Option<PreparedRow>, StoreError> {
        if opening.is_empty() {
            return Ok(None);
        }
        crate::within(self.deadline(), async {
            let row: Option<PreparedRow> = sqlx::query_as(
                "select tenant, session_key, opening, prefix_items, prefix_hash, \
                 loose_hash, prefix_tokens, summary, model, created_at_ms \
                 from prepared_summaries \
                 where tenant = $1 and opening = $2 and created_at_ms >= $3 \
                 order by created_at_ms desc limit 1",
            )
            .bind(crate::column_text(tenant).into_owned())
            .bind(crate::column_text(opening).into_owned())
            .bind(now_ms - PREPARED_TTL_MS)
            .fetch_optional(self.pool())
            .await?;
            Ok(row)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn drop_prepared(
        &self,
        tenant: &str,
        session_key: &str,
        created_at_ms: i64,
    ) -> Result<bool, StoreError> {
        crate::within(self.deadline(), async {
            let done = sqlx::query(
                "delete from prepared_summaries \
                 where tenant = $1 and session_key = $2 and created_at_ms = $3",
            )
            .bind(crate::column_text(tenant).into_owned())
            .bind(crate::column_text(session_key).into_owned())
            .bind(created_at_ms)
            .execute(self.pool())
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn begin_preparing(
        &self,
        tenant: &str,
        session_key: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<bool, StoreError> {
        crate::within(self.deadline(), async {
            // Taken when there is no mark, or only an expired one (a replica that died).
            let done = sqlx::query(
                "insert into preparing_sessions (tenant, session_key, expires_at_ms) \
                 values ($1, $2, $3) on conflict (tenant, session_key) do update \
                 set expires_at_ms = excluded.expires_at_ms \
                 where preparing_sessions.expires_at_ms < $4",
            )
            .bind(crate::column_text(tenant).into_owned())
            .bind(crate::column_text(session_key).into_owned())
            .bind(expires_at_ms)
            .bind(now_ms)
            .execute(self.pool())
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn preparing(
        &self,
        tenant: &str,
        session_key: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        crate::within(self.deadline(), async {
            let marked: Option<i64> = sqlx::query_scalar(
                "select expires_at_ms from preparing_sessions \
                 where tenant = $1 and session_key = $2 and expires_at_ms >= $3",
            )
            .bind(crate::column_text(tenant).into_owned())
            .bind(crate::column_text(session_key).into_owned())
            .bind(now_ms)
            .fetch_optional(self.pool())
            .await?;
            Ok(marked.is_some())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn end_preparing(&self, tenant: &str, session_key: &str) -> Result<(), StoreError> {
        crate::within(self.deadline(), async {
            sqlx::query("delete from preparing_sessions where tenant = $1 and session_key = $2")
                .bind(crate::column_text(tenant).into_owned())
                .bind(crate::column_text(session_key).into_owned())
                .execute(self.pool())
                .await?;
            Ok(())
        })
        .await
    }
}
