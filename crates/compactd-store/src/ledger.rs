//! The store's ledger: the call log, cached summaries, budgets, API keys and the secrets the
//! replicas share — what the pipeline and access control write and read, beside the sessions
//! (`sql.rs`). The same SQL for both backends, implemented once
//! for every [`Backend`] as the sessions' queries are.

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use crate::backend::{Backend, RowsAffected};
use crate::{CallRecord, KeyRecord, StoreError};

/// A summary for the shared cache (JSON), until it expires.
#[derive(Debug, Clone)]
pub struct CachedSummaryRow {
    pub key: String,
    pub summary: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
}

#[async_trait::async_trait]
pub trait Ledger: Send + Sync {
    /// Writes call-log rows, all or none, in one transaction.
    async fn log_calls(&self, calls: &[CallRecord]) -> Result<(), StoreError>;
    /// Upstream tokens (input plus output, cache hits and the extractive summarizer excluded)
    /// of `tenant`'s calls since `since_ms`.
    async fn upstream_tokens_since(&self, tenant: &str, since_ms: i64) -> Result<i64, StoreError>;
    /// Whether a summary with this fingerprint was written for `tenant` since `since_ms`.
    async fn summary_written_since(
        &self,
        tenant: &str,
        fingerprint: &str,
        since_ms: i64,
    ) -> Result<bool, StoreError>;
    /// A cached summary (JSON) that has not expired.
    async fn cached_summary(&self, key: &str, now_ms: i64) -> Result<Option<String>, StoreError>;
    /// Stores (or replaces) cached summaries, all in one transaction (a key given twice keeps
    /// the last); drops expired ones now and then.
    async fn put_cached_summaries(&self, rows: &[CachedSummaryRow]) -> Result<(), StoreError>;
    /// Sets (`Some`) or removes (`None`) `tenant`'s daily upstream token budget.
    async fn set_budget(
        &self,
        tenant: &str,
        daily_tokens: Option<i64>,
        now_ms: i64,
    ) -> Result<(), StoreError>;
    /// `tenant`'s daily upstream token budget, if it has one.
    async fn budget(&self, tenant: &str) -> Result<Option<i64>, StoreError>;
    /// A tenant's most recent calls, newest first: `limit` of them, from the one before `before`
    /// (a row's `call_id`) on, or from the newest.
    async fn calls(
        &self,
        tenant: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<CallRecord>, StoreError>;
    async fn create_key(&self, key: &KeyRecord) -> Result<(), StoreError>;
    /// The key with this hash, if it exists and is not revoked.
    async fn find_key(&self, key_hash: &str) -> Result<Option<KeyRecord>, StoreError>;
    async fn list_keys(&self) -> Result<Vec<KeyRecord>, StoreError>;
    /// Revokes a key; `false` when there is no such key or it was revoked already.
    async fn revoke_key(&self, key_id: &str, now_ms: i64) -> Result<bool, StoreError>;
    async fn active_key_count(&self) -> Result<i64, StoreError>;
    /// The secret named `name`: `candidate` when none was stored yet (it is stored), else the one
    /// stored first — every replica gets the same.
    async fn shared_secret(
        &self,
        name: &str,
        candidate: &str,
        now_ms: i64,
    ) -> Result<String, StoreError>;
}

#[async_trait::async_trait]
impl<B> Ledger for B
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
    async fn log_calls(&self, calls: &[crate::CallRecord]) -> Result<(), crate::StoreError> {
        if calls.is_empty() {
            return Ok(());
        }
        // The wait for the turn is not the store's slowness: outside the deadline.
        let _turn = self.batch_turn().await;
        crate::within(self.deadline(), async {
            let mut tx = self.begin_write().await?;
            // 26 parameters a row: 500 rows stay under both servers' parameter limits.
            // Chunks come in a few fixed sizes so that their statements are prepared
            // once and then found in the connection's statement cache.
            for chunk in crate::fixed_chunks(calls) {
                let mut query = sqlx::QueryBuilder::<B::Db>::new(
                    "insert into summarization_calls (endpoint, session_id, model, outcome, status, prompt_bytes, \
                     summary_bytes, input_tokens, output_tokens, latency_ms, prompt, summary, created_at_ms, \
                     tenant, purpose, cached, cached_input_tokens, summary_fingerprint, loop_detected, \
                     budget_exhausted, agent, wire, tokens_before, tokens_after, anchors, anchors_kept) ",
                );
                let text = |t: Option<&str>| t.map(|t| crate::column_text(t).into_owned());
                query.push_values(chunk, |mut row, call| {
                    row.push_bind(call.endpoint.clone())
                        .push_bind(call.session_id.clone())
                        .push_bind(text(call.model.as_deref()))
                        .push_bind(call.outcome.clone())
                        .push_bind(call.status)
                        .push_bind(call.prompt_bytes)
                        .push_bind(call.summary_bytes)
                        .push_bind(call.input_tokens)
                        .push_bind(call.output_tokens)
                        .push_bind(call.latency_ms)
                        .push_bind(text(call.prompt.as_deref()))
                        .push_bind(text(call.summary.as_deref()))
                        .push_bind(call.created_at_ms)
                        .push_bind(crate::column_text(&call.tenant).into_owned())
                        .push_bind(call.purpose.clone())
                        .push_bind(call.cached)
                        .push_bind(call.cached_input_tokens)
                        .push_bind(call.summary_fingerprint.clone())
                        .push_bind(call.loop_detected)
                        .push_bind(call.budget_exhausted)
                        .push_bind(call.agent.clone())
                        .push_bind(call.wire.clone())
                        .push_bind(call.tokens_before)
                        .push_bind(call.tokens_after)
                        .push_bind(call.anchors)
                        .push_bind(call.anchors_kept);
                });
                query.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn calls(
        &self,
        tenant: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<crate::CallRecord>, crate::StoreError> {
        // Newest first by id: ids grow with the writes (a batch is one transaction), so
        // a page continues exactly where the last one ended, whatever is written meanwhile.
        crate::within(self.deadline(), async {
            Ok(sqlx::query_as(
                "select call_id, endpoint, tenant, purpose, session_id, model, outcome, status, prompt_bytes, \
                 summary_bytes, input_tokens, output_tokens, latency_ms, prompt, summary, created_at_ms, \
                 cached, cached_input_tokens, summary_fingerprint, loop_detected, budget_exhausted, \
                 agent, wire, tokens_before, tokens_after, anchors, anchors_kept \
                 from summarization_calls where tenant = $1 and call_id < $2 \
                 order by call_id desc limit $3",
            )
            .bind(tenant)
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn upstream_tokens_since(
        &self,
        tenant: &str,
        since_ms: i64,
    ) -> Result<i64, crate::StoreError> {
        crate::within(self.deadline(), async {
            let used: Option<i64> = sqlx::query_scalar(
                "select cast(sum(input_tokens + output_tokens) as bigint) from summarization_calls \
                 where tenant = $1 and created_at_ms >= $2 and not cached and model <> 'extractive'",
            )
            .bind(tenant)
            .bind(since_ms)
            .fetch_one(self.pool())
            .await?;
            Ok(used.unwrap_or(0))
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn summary_written_since(
        &self,
        tenant: &str,
        fingerprint: &str,
        since_ms: i64,
    ) -> Result<bool, crate::StoreError> {
        crate::within(self.deadline(), async {
            let found: Option<i64> = sqlx::query_scalar(
                "select cast(1 as bigint) from summarization_calls where tenant = $1 and summary_fingerprint = $2 \
                 and created_at_ms >= $3 limit 1",
            )
            .bind(tenant)
            .bind(fingerprint)
            .bind(since_ms)
            .fetch_optional(self.pool())
            .await?;
            Ok(found.is_some())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn cached_summary(
        &self,
        key: &str,
        now_ms: i64,
    ) -> Result<Option<String>, crate::StoreError> {
        if !self.may_hold_cached(key, now_ms) {
            return Ok(None);
        }
        crate::within(self.deadline(), async {
            Ok(sqlx::query_scalar(
                "select summary from summary_cache where cache_key = $1 and expires_at_ms > $2",
            )
            .bind(key)
            .bind(now_ms)
            .fetch_optional(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn put_cached_summaries(
        &self,
        rows: &[CachedSummaryRow],
    ) -> Result<(), crate::StoreError> {
        // One row per key: an upsert may not touch the same row twice in one statement.
        let mut latest: std::collections::HashMap<&str, &CachedSummaryRow> =
            std::collections::HashMap::with_capacity(rows.len());
        for row in rows {
            latest.insert(&row.key, row);
        }
        let rows: Vec<&CachedSummaryRow> = latest.into_values().collect();
        let Some(now_ms) = rows.iter().map(|r| r.created_at_ms).max() else {
            return Ok(());
        };
        let _turn = self.batch_turn().await;
        crate::within(self.deadline(), async {
            let mut tx = self.begin_write().await?;
            for chunk in crate::fixed_chunks(&rows) {
                let mut query = sqlx::QueryBuilder::<B::Db>::new(
                    "insert into summary_cache (cache_key, summary, created_at_ms, expires_at_ms) ",
                );
                query.push_values(chunk, |mut bind, row| {
                    bind.push_bind(row.key.clone())
                        .push_bind(crate::column_text(&row.summary).into_owned())
                        .push_bind(row.created_at_ms)
                        .push_bind(row.expires_at_ms);
                });
                query.push(
                    " on conflict (cache_key) do update \
                     set summary = excluded.summary, created_at_ms = excluded.created_at_ms, \
                     expires_at_ms = excluded.expires_at_ms",
                );
                query.build().execute(&mut *tx).await?;
            }
            // Expired rows go now and then (one batch in 64), by the expiry index.
            if fastrand::u8(..64) == 0 {
                sqlx::query("delete from summary_cache where expires_at_ms <= $1")
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            self.note_cached(&rows);
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_budget(
        &self,
        tenant: &str,
        daily_tokens: Option<i64>,
        now_ms: i64,
    ) -> Result<(), crate::StoreError> {
        crate::within(self.deadline(), async {
            match daily_tokens {
                Some(tokens) => {
                    sqlx::query(
                        "insert into tenant_budgets (tenant, daily_tokens, updated_at_ms) values ($1, $2, $3) \
                         on conflict (tenant) do update set daily_tokens = excluded.daily_tokens, \
                         updated_at_ms = excluded.updated_at_ms",
                    )
                    .bind(crate::column_text(tenant).into_owned())
                    .bind(tokens)
                    .bind(now_ms)
                    .execute(self.pool())
                    .await?;
                }
                None => {
                    sqlx::query("delete from tenant_budgets where tenant = $1")
                        .bind(tenant)
                        .execute(self.pool())
                        .await?;
                }
            }
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn budget(&self, tenant: &str) -> Result<Option<i64>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(
                sqlx::query_scalar("select daily_tokens from tenant_budgets where tenant = $1")
                    .bind(tenant)
                    .fetch_optional(self.pool())
                    .await?,
            )
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn create_key(&self, key: &crate::KeyRecord) -> Result<(), crate::StoreError> {
        crate::within(self.deadline(), async {
            sqlx::query(
                "insert into api_keys (key_id, tenant, name, key_hash, created_at_ms, revoked_at_ms) \
                 values ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&key.key_id)
            .bind(crate::column_text(&key.tenant).into_owned())
            .bind(key.name.as_deref().map(|n| crate::column_text(n).into_owned()))
            .bind(&key.key_hash)
            .bind(key.created_at_ms)
            .bind(key.revoked_at_ms)
            .execute(self.pool())
            .await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn find_key(
        &self,
        key_hash: &str,
    ) -> Result<Option<crate::KeyRecord>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(sqlx::query_as(
                "select * from api_keys where key_hash = $1 and revoked_at_ms is null",
            )
            .bind(key_hash)
            .fetch_optional(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_keys(&self) -> Result<Vec<crate::KeyRecord>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(
                sqlx::query_as("select * from api_keys order by created_at_ms, key_id")
                    .fetch_all(self.pool())
                    .await?,
            )
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn revoke_key(&self, key_id: &str, now_ms: i64) -> Result<bool, crate::StoreError> {
        crate::within(self.deadline(), async {
            let revoked = sqlx::query(
                "update api_keys set revoked_at_ms = $1 where key_id = $2 and revoked_at_ms is null",
            )
            .bind(now_ms)
            .bind(key_id)
            .execute(self.pool())
            .await?
            .rows_affected();
            Ok(revoked > 0)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn active_key_count(&self) -> Result<i64, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(
                sqlx::query_scalar("select count(*) from api_keys where revoked_at_ms is null")
                    .fetch_one(self.pool())
                    .await?,
            )
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn shared_secret(
        &self,
        name: &str,
        candidate: &str,
        now_ms: i64,
    ) -> Result<String, crate::StoreError> {
        crate::within(self.deadline(), async {
            sqlx::query(
                "insert into shared_secrets (name, value, created_at_ms) values ($1, $2, $3) \
                 on conflict (name) do nothing",
            )
            .bind(name)
            .bind(candidate)
            .bind(now_ms)
            .execute(self.pool())
            .await?;
            Ok(
                sqlx::query_scalar("select value from shared_secrets where name = $1")
                    .bind(name)
                    .fetch_one(self.pool())
                    .await?,
            )
        })
        .await
    }
}
