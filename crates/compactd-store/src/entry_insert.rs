//! The entries insert both backends write: thirteen columns, from an entry's facts. PostgreSQL
//! sends a big upload through COPY instead (`postgres.rs`), over the same columns.

use sqlx::{Database, Encode, QueryBuilder, Type};

use super::{NewEntry, column_text};

/// The columns every insert of entries writes, in order.
pub(super) const ENTRY_COLUMNS: &str = "session_id, seq, entry_id, parent_id, entry_type, raw, parent_seq, role, \
     tokens, usage_tokens, ctx_usage, ctx_trailing, first_kept_id";

/// Parameters per row: a statement of [`entries_insert`] binds this many times its rows.
pub(super) const ENTRY_PARAMETERS: usize = count_columns(ENTRY_COLUMNS);

/// How many columns a comma-separated list names.
const fn count_columns(list: &str) -> usize {
    let bytes = list.as_bytes();
    let (mut at, mut count) = (0, 1);
    while at < bytes.len() {
        if bytes[at] == b',' {
            count += 1;
        }
        at += 1;
    }
    count
}

/// One multi-row `insert into entries` of `entries` (positioned by their facts) for `session_id`.
pub(super) fn entries_insert<DB>(session_id: &str, entries: &[NewEntry]) -> QueryBuilder<DB>
where
    DB: Database,
    DB::Arguments: Default,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> Option<&'t str>: Encode<'t, DB> + Type<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
    for<'t> Option<i64>: Encode<'t, DB> + Type<DB>,
    for<'t> Option<f64>: Encode<'t, DB> + Type<DB>,
{
    let mut query = QueryBuilder::<DB>::new(format!("insert into entries ({ENTRY_COLUMNS}) "));
    query.push_values(entries, |mut row, entry| {
        let f = &entry.facts;
        let text = |t: Option<&String>| t.map(|t| column_text(t).into_owned());
        row.push_bind(session_id)
            .push_bind(f.seq)
            .push_bind(f.entry_id.as_str())
            .push_bind(entry.parent_id.as_deref())
            .push_bind(column_text(f.entry_type.as_str()).into_owned())
            .push_bind(entry.raw.as_str())
            .push_bind(f.parent_seq)
            .push_bind(text(f.role.as_ref()))
            .push_bind(f.tokens)
            .push_bind(f.usage_tokens)
            .push_bind(f.ctx_usage)
            .push_bind(f.ctx_trailing)
            .push_bind(text(f.first_kept_id.as_ref()));
    });
    query
}
