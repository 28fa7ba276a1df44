//! Recall's storage (issue 27): the redacted conversations of wire summarizations, turn by turn,
//! with a full-text index — PostgreSQL's `tsvector` with a GIN index, SQLite's FTS5 — searched
//! and read per tenant, never across tenants, until they expire.

use serde::Serialize;

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use crate::backend::{Backend, FullText, RowsAffected};
use crate::{StoreError, within};

/// One turn of a stored conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RecallTurn {
    pub seq: i32,
    /// `user`, `assistant`, `tool` or `developer`.
    pub role: String,
    /// The tool that produced a result, or the tools an assistant turn called.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// File paths the turn's tool calls named, space-separated.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub paths: String,
    pub text: String,
}

/// A conversation to keep.
#[derive(Debug, Clone)]
pub struct NewRecall {
    pub id: String,
    pub tenant: String,
    /// The wire it came from (`remote-endpoint`, `chat`, `gateway:…`).
    pub source: String,
    /// The stored session whose compactions summarized these turns (then `expires_at_ms` is
    /// `i64::MAX`: they go with the session).
    pub session_id: Option<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub turns: Vec<RecallTurn>,
}

/// What to search for.
#[derive(Debug, Clone, Default)]
pub struct RecallQuery {
    /// Words, all of which a turn must hold.
    pub text: String,
    pub recall_id: Option<String>,
    /// Only the turns a stored session's compactions summarized.
    pub session_id: Option<String>,
    pub role: Option<String>,
    pub tool: Option<String>,
    /// A path (or part of one) the turn's calls named.
    pub path: Option<String>,
    pub limit: i64,
    pub now_ms: i64,
}

/// A turn that matched, best first.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecallHit {
    pub recall_id: String,
    /// The stored session the turn is an entry of (its `seq` the entry's position there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub seq: i32,
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The matched words in context, marked `[like this]`.
    pub snippet: String,
    pub created_at_ms: i64,
}

/// The words of a query: letters, digits, `_`, `.`, `/` and `-` runs (a path or an identifier is
/// one word), at most 16; FTS syntax never reaches the database.
pub fn query_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')))
        .map(|w| w.trim_matches(['.', '/', '-']))
        .filter(|w| !w.is_empty())
        .take(16)
        .map(str::to_lowercase)
        .collect()
}

#[async_trait::async_trait]
pub trait Recall: Send + Sync {
    /// Keeps conversations, all their turns, in one transaction.
    async fn save_recalls(&self, recalls: &[NewRecall]) -> Result<(), StoreError>;
    /// Turns of `tenant`'s unexpired conversations that hold every word of the query.
    async fn search_recall(
        &self,
        tenant: &str,
        query: &RecallQuery,
    ) -> Result<Vec<RecallHit>, StoreError>;
    /// Turns `from..from+limit` of one of `tenant`'s unexpired conversations; `None` when it has
    /// no such conversation.
    async fn recall_turns(
        &self,
        tenant: &str,
        id: &str,
        from: i32,
        limit: i64,
        now_ms: i64,
    ) -> Result<Option<(i64, Vec<RecallTurn>)>, StoreError>;
    /// Deletes the conversations expired by `now_ms`; how many.
    async fn purge_recalls(&self, now_ms: i64) -> Result<u64, StoreError>;
}

/// `Recall` for every backend: saving, reading and purging are the same SQL on both; searching
/// takes the backend's statement (`Backend::RECALL_SEARCH`) and query syntax
/// (`Backend::recall_terms`), and saving the backend's way of indexing the turns it added
/// (`Backend::FULL_TEXT`, see [`FullText`]).
#[async_trait::async_trait]
impl<B> Recall for B
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
    async fn search_recall(
        &self,
        tenant: &str,
        query: &RecallQuery,
    ) -> Result<Vec<RecallHit>, StoreError> {
        let words = query_words(&query.text);
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let terms = B::recall_terms(&words);
        within(self.deadline(), async {
            let rows: Vec<HitRow> = sqlx::query_as(B::RECALL_SEARCH)
                .bind(tenant)
                .bind(&terms)
                .bind(query.now_ms)
                .bind(&query.recall_id)
                .bind(&query.role)
                .bind(&query.tool)
                .bind(&query.path)
                .bind(query.limit)
                .bind(&query.session_id)
                .fetch_all(self.pool())
                .await?;
            Ok(hits(rows))
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn save_recalls(&self, recalls: &[NewRecall]) -> Result<(), StoreError> {
        if recalls.is_empty() {
            return Ok(());
        }
        let _turn = self.batch_turn().await;
        within(self.deadline(), async {
            let mut tx = self.begin_write().await?;
            for chunk in recalls.chunks(500) {
                let mut query = sqlx::QueryBuilder::<B::Db>::new(
                    "insert into recalls (id, tenant, source, session_id, created_at_ms, expires_at_ms) ",
                );
                query.push_values(chunk, |mut row, recall| {
                    row.push_bind(recall.id.as_str())
                        .push_bind(recall.tenant.as_str())
                        .push_bind(recall.source.as_str())
                        .push_bind(recall.session_id.as_deref())
                        .push_bind(recall.created_at_ms)
                        .push_bind(recall.expires_at_ms);
                });
                // The id is the conversation's (the session's): the same one kept again is
                // kept once, and a session's later compactions add their turns to it.
                query.push(" on conflict do nothing");
                query.build().execute(&mut *tx).await?;
            }
            // Turns are appended after the last one there: the transaction holds the
            // database's write lock since the insert above, so no other writer adds any.
            let index_after: Option<(&str, i64)> = match B::FULL_TEXT {
                FullText::Indexed => None,
                FullText::After { last, index } => {
                    Some((index, sqlx::query_scalar(last).fetch_one(&mut *tx).await?))
                }
            };
            // The conversations' numbers: of the rows just written, or of the same
            // conversations kept before. Looked up here, once per conversation, rather than
            // by a subquery per turn in the insert: SQLite keeps each row's subquery cursor
            // open to the statement's end and visits every open cursor on each insert, which
            // made a batch's cost grow with the square of its turns.
            let ids: Vec<&str> = recalls.iter().map(|r| r.id.as_str()).collect();
            let mut numbers = std::collections::HashMap::with_capacity(ids.len());
            for chunk in super::fixed_chunks(&ids) {
                let mut query =
                    sqlx::QueryBuilder::<B::Db>::new("select id, number from recalls where id in (");
                let mut list = query.separated(", ");
                for id in chunk {
                    list.push_bind(*id);
                }
                list.push_unseparated(")");
                let rows: Vec<(String, i64)> =
                    query.build_query_as().fetch_all(&mut *tx).await?;
                numbers.extend(rows);
            }
            // Every id has its row now (written above, or kept before: `on conflict`).
            let turns: Vec<(i64, &NewRecall, &RecallTurn)> = recalls
                .iter()
                .filter_map(|r| Some((*numbers.get(r.id.as_str())?, r)))
                .flat_map(|(number, r)| r.turns.iter().map(move |t| (number, r, t)))
                .collect();
            // 7 parameters a turn: 500 turns per statement stay under both limits; fixed
            // chunk sizes keep the prepared statements few.
            for chunk in super::fixed_chunks(&turns) {
                let mut query = sqlx::QueryBuilder::<B::Db>::new(
                    "insert into recall_turns (recall_number, tenant, seq, role, tool, paths, text) ",
                );
                query.push_values(chunk, |mut row, (number, recall, turn)| {
                    row.push_bind(*number)
                        .push_bind(recall.tenant.as_str())
                        .push_bind(turn.seq)
                        .push_bind(turn.role.as_str())
                        .push_bind(turn.tool.as_deref())
                        .push_bind(&*super::column_text(&turn.paths))
                        .push_bind(&*super::column_text(&turn.text));
                });
                query.push(" on conflict do nothing");
                query.build().execute(&mut *tx).await?;
            }
            if let Some((index, last)) = index_after {
                sqlx::query(index).bind(last).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn recall_turns(
        &self,
        tenant: &str,
        id: &str,
        from: i32,
        limit: i64,
        now_ms: i64,
    ) -> Result<Option<(i64, Vec<RecallTurn>)>, StoreError> {
        within(self.deadline(), async {
            let found: Option<(i64, i64)> = sqlx::query_as(
                "select r.number, \
                   (select count(*) from recall_turns t where t.recall_number = r.number) \
                 from recalls r where r.id = $1 and r.tenant = $2 and r.expires_at_ms > $3",
            )
            .bind(id)
            .bind(tenant)
            .bind(now_ms)
            .fetch_optional(self.pool())
            .await?;
            let Some((number, total)) = found else {
                return Ok(None);
            };
            let rows: Vec<(i32, String, Option<String>, String, String)> = sqlx::query_as(
                "select seq, role, tool, paths, text from recall_turns \
                 where recall_number = $1 and tenant = $2 and seq >= $3 order by seq limit $4",
            )
            .bind(number)
            .bind(tenant)
            .bind(from)
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
            let turns = rows
                .into_iter()
                .map(|(seq, role, tool, paths, text)| RecallTurn {
                    seq,
                    role,
                    tool,
                    paths,
                    text,
                })
                .collect();
            Ok(Some((total, turns)))
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn purge_recalls(&self, now_ms: i64) -> Result<u64, StoreError> {
        within(self.deadline(), async {
            // Turns first: SQLite's FTS triggers fire on the turns' own deletes.
            let mut tx = self.begin_write().await?;
            sqlx::query(
                "delete from recall_turns where recall_number in \
                 (select number from recalls where expires_at_ms <= $1)",
            )
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            let gone = sqlx::query("delete from recalls where expires_at_ms <= $1")
                .bind(now_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            Ok(gone)
        })
        .await
    }
}

type HitRow = (
    String,
    Option<String>,
    i32,
    String,
    Option<String>,
    String,
    i64,
);

fn hits(rows: Vec<HitRow>) -> Vec<RecallHit> {
    rows.into_iter()
        .map(
            |(recall_id, session_id, seq, role, tool, snippet, created_at_ms)| RecallHit {
                recall_id,
                session_id,
                seq,
                role,
                tool,
                snippet,
                created_at_ms,
            },
        )
        .collect()
}

/// PostgreSQL's search: each word a quoted phrase of a `tsquery` (a path's parts in order), all
/// of them required; ranked by `ts_rank`, the words marked by `ts_headline`.
pub(crate) const PG_SEARCH: &str = "select r.id, r.session_id, t.seq, t.role, t.tool, \
       ts_headline('simple', t.text, q, 'StartSel=[, StopSel=], MaxWords=30, MinWords=12'), \
       r.created_at_ms \
     from recall_turns t join recalls r on r.number = t.recall_number, to_tsquery('simple', $2) q \
     where t.tenant = $1 and r.tenant = $1 and r.expires_at_ms > $3 and t.search @@ q \
       and ($4::text is null or r.id = $4) and ($5::text is null or t.role = $5) \
       and ($6::text is null or t.tool = $6) and ($7::text is null or position($7 in t.paths) > 0) \
       and ($9::text is null or r.session_id = $9) \
     order by ts_rank(t.search, q) desc, r.created_at_ms desc, t.seq limit $8";

pub(crate) fn pg_terms(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', "")))
        .collect::<Vec<_>>()
        .join(" & ")
}

/// SQLite's: each word a quoted FTS5 string (a phrase of its tokens), all of them required;
/// ranked by bm25, the words marked by `snippet`.
pub(crate) const SQLITE_SEARCH: &str = "select r.id, r.session_id, t.seq, t.role, t.tool, \
       snippet(recall_fts, 1, '[', ']', '…', 24), r.created_at_ms \
     from recall_fts join recall_turns t on t.rowid = recall_fts.rowid \
       join recalls r on r.number = t.recall_number \
     where recall_fts match $2 and t.tenant = $1 and r.tenant = $1 and r.expires_at_ms > $3 \
       and ($4 is null or r.id = $4) and ($5 is null or t.role = $5) \
       and ($6 is null or t.tool = $6) and ($7 is null or instr(t.paths, $7) > 0) \
       and ($9 is null or r.session_id = $9) \
     order by bm25(recall_fts), r.created_at_ms desc, t.seq limit $8";

pub(crate) fn sqlite_terms(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("\"{}\"", w.replace('"', "")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// SQLite's: the turns after the last one before the save.
/// (What is indexed of a turn is what the view `recall_turns_indexed` shows of it: its text, or
/// the head and tail of a very long one, as PostgreSQL's generated column.)
pub(crate) const FTS5_AFTER: FullText = FullText::After {
    last: "select coalesce(max(rowid), 0) from recall_turns",
    index: "insert into recall_fts (rowid, paths, text) \
            select turn_id, paths, text from recall_turns_indexed where turn_id > $1",
};

#[cfg(test)]
mod tests {
    use super::query_words;

    #[test]
    fn query_words_keep_paths_whole_and_drop_search_syntax() {
        assert_eq!(
            query_words("\"ERR_BAD\" OR src/lib.rs* NEAR(x) -- 'drop'"),
            ["err_bad", "or", "src/lib.rs", "near", "x", "drop"]
        );
        assert!(query_words("  *** ").is_empty());
    }
}
