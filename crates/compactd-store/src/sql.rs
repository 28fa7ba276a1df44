//! The sessions' queries of both backends (the call log, budgets, keys and shared secrets are in
//! `ledger.rs`, recall in `recall.rs`). They are written once: `$N` placeholders (SQLite reads
//! them as parameters named `$1`, `$2`, … numbered in order of first use), `on conflict`, and
//! epoch milliseconds instead of timestamp types; implemented once for every [`Backend`], whose
//! `insert_entries` (the bulk path: COPY for PostgreSQL) and `update_facts` differ.

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use crate::backend::{Backend, RowsAffected};

#[async_trait::async_trait]
impl<B> crate::Store for B
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
    fn backend(&self) -> &'static str {
        B::NAME
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn ready(&self) -> Result<(), crate::StoreError> {
        crate::within(self.deadline(), async {
            // A query on a migrated table: proves the connection and the schema.
            sqlx::query("select count(*) from sessions where session_id = $1")
                .bind("")
                .execute(self.pool())
                .await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn insert_session(
        &self,
        session: &crate::SessionRecord,
        entries: &[crate::NewEntry],
    ) -> Result<(), crate::StoreError> {
        crate::within(self.deadline(), async {
            let mut tx = self.begin_write().await?;
            sqlx::query(
                "insert into sessions (session_id, header_id, title_line, header, source_version, leaf_id, \
                 entry_count, byte_size, context_tokens, created_at_ms, updated_at_ms, tenant, facts_version, compaction_count) \
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            )
            .bind(&session.session_id)
            .bind(&session.header_id)
            .bind(&session.title_line)
            .bind(&session.header)
            .bind(session.source_version)
            .bind(&session.leaf_id)
            .bind(session.entry_count)
            .bind(session.byte_size)
            .bind(session.context_tokens)
            .bind(session.created_at_ms)
            .bind(session.updated_at_ms)
            .bind(&session.tenant)
            .bind(session.facts_version)
            .bind(session.compaction_count)
            .execute(&mut *tx)
            .await?;
            B::insert_entries(&mut tx, &session.session_id, entries).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn list_sessions(
        &self,
        tenant: &str,
        limit: i64,
        after: Option<(i64, String)>,
        search: Option<&str>,
    ) -> Result<Vec<crate::SessionRecord>, crate::StoreError> {
        crate::within(self.deadline(), async {
            let (after_ms, after_id) = after.unwrap_or((i64::MIN, String::new()));
            // A LIKE pattern of the search, its wildcards escaped: '' matches every session.
            let pattern = search.map_or_else(String::new, crate::like_pattern);
            Ok(sqlx::query_as(
                "select * from sessions \
                 where tenant = $1 and (created_at_ms > $2 or (created_at_ms = $2 and session_id > $3)) \
                 and ($5 = '' or lower(session_id) like $5 || '%' escape '\\' \
                      or lower(header) like '%' || $5 || '%' escape '\\') \
                 order by created_at_ms, session_id limit $4",
            )
            .bind(tenant)
            .bind(after_ms)
            .bind(after_id)
            .bind(limit)
            .bind(pattern)
            .fetch_all(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn get_session(
        &self,
        session_id: &str,
    ) -> Result<Option<crate::SessionRecord>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(
                sqlx::query_as("select * from sessions where session_id = $1")
                    .bind(session_id)
                    .fetch_optional(self.pool())
                    .await?,
            )
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn delete_session(&self, session_id: &str) -> Result<bool, crate::StoreError> {
        crate::within(self.deadline(), async {
            let mut tx = self.begin_write().await?;
            // Children first: SQLite enforces the foreign keys only when told to.
            for statement in [
                "delete from recall_turns where recall_number in \
                 (select number from recalls where session_id = $1)",
                "delete from recalls where session_id = $1",
                "delete from entries where session_id = $1",
                "delete from compactions where session_id = $1",
                "delete from pins where session_id = $1",
            ] {
                sqlx::query(statement)
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await?;
            }
            let deleted = sqlx::query("delete from sessions where session_id = $1")
                .bind(session_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            Ok(deleted > 0)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn entries(
        &self,
        session_id: &str,
    ) -> Result<Vec<crate::EntryRecord>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(sqlx::query_as(
                "select entry_id, parent_id, entry_type, raw from entries where session_id = $1 order by seq",
            )
            .bind(session_id)
            .fetch_all(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn entry_facts(
        &self,
        session_id: &str,
        from_seq: i64,
    ) -> Result<Vec<crate::FactRecord>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(sqlx::query_as(
                "select seq, entry_id, parent_seq, entry_type, role, tokens, usage_tokens, ctx_usage, \
                 ctx_trailing, first_kept_id from entries where session_id = $1 and seq >= $2 order by seq",
            )
            .bind(session_id)
            .bind(from_seq)
            .fetch_all(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn entry_lines(
        &self,
        session_id: &str,
        from_seq: i64,
        to_seq: i64,
    ) -> Result<Vec<(i64, String)>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(sqlx::query_as(
                "select seq, raw from entries where session_id = $1 and seq >= $2 and seq <= $3 order by seq",
            )
            .bind(session_id)
            .bind(from_seq)
            .bind(to_seq)
            .fetch_all(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn write_facts(
        &self,
        session_id: &str,
        facts: &[crate::FactRecord],
        version: i64,
    ) -> Result<(), crate::StoreError> {
        crate::within(self.deadline(), async {
            let mut tx = self.begin_write().await?;
            // Claim the session first: a concurrent deriver (another replica) waits
            // here and then finds nothing left to do.
            let claimed = sqlx::query(
                "update sessions set facts_version = $1 where session_id = $2 and facts_version < $1",
            )
            .bind(version)
            .bind(session_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if claimed == 0 {
                return Ok(());
            }
            B::update_facts(&mut tx, session_id, facts).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn stale_sessions(
        &self,
        version: i64,
        limit: i64,
    ) -> Result<Vec<String>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(sqlx::query_scalar(
                "select session_id from sessions where facts_version < $1 order by session_id limit $2",
            )
            .bind(version)
            .bind(limit)
            .fetch_all(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn append(
        &self,
        session_id: &str,
        append: &crate::Append,
        now_ms: i64,
    ) -> Result<(), crate::StoreError> {
        crate::within(self.deadline(), async {
            let mut tx = self.begin_write().await?;
            let added = append.entries.len() as i64;
            let bytes: i64 = append.entries.iter().map(|e| e.raw.len() as i64 + 1).sum();
            // The guard on entry_count makes concurrent appends take turns: the loser
            // updates no row and re-checks against what the winner wrote.
            let updated = sqlx::query(
                "update sessions set entry_count = entry_count + $1, byte_size = byte_size + $2, \
                 leaf_id = $3, context_tokens = $4, updated_at_ms = $5, compaction_count = compaction_count + $8 \
                 where session_id = $6 and entry_count = $7",
            )
            .bind(added)
            .bind(bytes)
            .bind(&append.leaf_id)
            .bind(append.context_tokens)
            .bind(now_ms)
            .bind(session_id)
            .bind(append.expected_entry_count)
            .bind(append.compactions_added())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                return Err(crate::StoreError::Changed);
            }
            B::insert_entries(&mut tx, session_id, &append.entries).await?;
            if let Some(c) = &append.compaction {
                sqlx::query(
                    "insert into compactions (session_id, entry_id, leaf_id, first_kept_entry_id, model, \
                     input_tokens, output_tokens, latency_ms, tokens_before, tokens_after, summary, created_at_ms, \
                     fidelity, loop_detected, cached) \
                     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
                )
                .bind(&c.session_id)
                .bind(&c.entry_id)
                .bind(&c.leaf_id)
                .bind(&c.first_kept_entry_id)
                .bind(crate::column_text(&c.model).into_owned())
                .bind(c.input_tokens)
                .bind(c.output_tokens)
                .bind(c.latency_ms)
                .bind(c.tokens_before)
                .bind(c.tokens_after)
                .bind(crate::column_text(&c.summary).into_owned())
                .bind(c.created_at_ms)
                .bind(c.fidelity.as_deref().map(|f| crate::column_text(f).into_owned()))
                .bind(c.loop_detected)
                .bind(c.cached)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn compactions(
        &self,
        session_id: &str,
    ) -> Result<Vec<crate::CompactionRecord>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(sqlx::query_as(
                "select * from compactions where session_id = $1 order by created_at_ms, entry_id",
            )
            .bind(session_id)
            .fetch_all(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn lines_at(
        &self,
        session_id: &str,
        seqs: &[i64],
    ) -> Result<Vec<(i64, String)>, crate::StoreError> {
        crate::within(self.deadline(), async {
            let mut lines = Vec::with_capacity(seqs.len());
            // A statement per thousand positions (SQLite's parameters are bounded),
            // ascending as the positions are.
            for chunk in seqs.chunks(1000) {
                let mut query = sqlx::QueryBuilder::<B::Db>::new(
                    "select seq, raw from entries where session_id = ",
                );
                query.push_bind(session_id).push(" and seq in (");
                let mut list = query.separated(", ");
                for seq in chunk {
                    list.push_bind(*seq);
                }
                query.push(") order by seq");
                lines.extend(
                    query
                        .build_query_as::<(i64, String)>()
                        .fetch_all(self.pool())
                        .await?,
                );
            }
            Ok(lines)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn compactions_of(
        &self,
        session_id: &str,
        entry_ids: &[String],
    ) -> Result<Vec<crate::CompactionRecord>, crate::StoreError> {
        if entry_ids.is_empty() {
            return Ok(Vec::new());
        }
        crate::within(self.deadline(), async {
            let mut query =
                sqlx::QueryBuilder::<B::Db>::new("select * from compactions where session_id = ");
            query.push_bind(session_id).push(" and entry_id in (");
            let mut list = query.separated(", ");
            for id in entry_ids {
                list.push_bind(id.as_str());
            }
            query.push(")");
            Ok(query.build_query_as().fetch_all(self.pool()).await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn compaction_from(
        &self,
        session_id: &str,
        leaf_id: &str,
    ) -> Result<Option<crate::EntryRecord>, crate::StoreError> {
        crate::within(self.deadline(), async {
            Ok(sqlx::query_as(
                "select e.entry_id, e.parent_id, e.entry_type, e.raw
                 from compactions c join entries e
                   on e.session_id = c.session_id and e.entry_id = c.entry_id
                 where c.session_id = $1 and c.leaf_id = $2
                 order by c.created_at_ms, c.entry_id limit 1",
            )
            .bind(session_id)
            .bind(leaf_id)
            .fetch_optional(self.pool())
            .await?)
        })
        .await
    }
}
