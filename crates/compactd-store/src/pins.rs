//! Text a user pins to a stored session, carried verbatim by every later compaction of it; kept
//! beside its entries (`sql.rs`). The same SQL for both backends, implemented once for every
//! [`Backend`].

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use crate::backend::{Backend, RowsAffected};
use crate::{PinAdded, PinRecord, StoreError};

#[async_trait::async_trait]
pub trait Pins: Send + Sync {
    /// Pins text to a session unless it has this text pinned already or `max_pins` pins, checked
    /// and written in one transaction (concurrent adds take turns).
    async fn add_pin(&self, pin: &PinRecord, max_pins: i64) -> Result<PinAdded, StoreError>;
    /// A session's pins, oldest first.
    async fn pins(&self, session_id: &str) -> Result<Vec<PinRecord>, StoreError>;
    /// Removes a pin; `false` when the session has no such pin.
    async fn delete_pin(&self, session_id: &str, pin_id: &str) -> Result<bool, StoreError>;
}

#[async_trait::async_trait]
impl<B> Pins for B
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
    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn add_pin(&self, pin: &PinRecord, max_pins: i64) -> Result<PinAdded, StoreError> {
        crate::within(self.deadline(), async {
            let mut tx = self.begin_write().await?;
            // Concurrent adds to one session take turns on its row (PostgreSQL's row
            // lock; SQLite's write lock), so the count and the duplicate check below see
            // every pin committed before.
            let locked = sqlx::query(
                "update sessions set updated_at_ms = updated_at_ms where session_id = $1",
            )
            .bind(&pin.session_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if locked == 0 {
                return Ok(PinAdded::NoSession);
            }
            let text = crate::column_text(&pin.text).into_owned();
            let same: Option<PinRecord> = sqlx::query_as(
                "select * from pins where session_id = $1 and text = $2",
            )
            .bind(&pin.session_id)
            .bind(&text)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(same) = same {
                return Ok(PinAdded::Existing(same));
            }
            let count: i64 = sqlx::query_scalar("select count(*) from pins where session_id = $1")
                .bind(&pin.session_id)
                .fetch_one(&mut *tx)
                .await?;
            if count >= max_pins {
                return Ok(PinAdded::Full);
            }
            sqlx::query(
                "insert into pins (pin_id, session_id, text, created_at_ms) values ($1, $2, $3, $4)",
            )
            .bind(&pin.pin_id)
            .bind(&pin.session_id)
            .bind(&text)
            .bind(pin.created_at_ms)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(PinAdded::Added)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn pins(&self, session_id: &str) -> Result<Vec<PinRecord>, StoreError> {
        crate::within(self.deadline(), async {
            Ok(sqlx::query_as(
                "select * from pins where session_id = $1 order by created_at_ms, pin_id",
            )
            .bind(session_id)
            .fetch_all(self.pool())
            .await?)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = B::NAME))]
    async fn delete_pin(&self, session_id: &str, pin_id: &str) -> Result<bool, StoreError> {
        crate::within(self.deadline(), async {
            let deleted = sqlx::query("delete from pins where session_id = $1 and pin_id = $2")
                .bind(session_id)
                .bind(pin_id)
                .execute(self.pool())
                .await?
                .rows_affected();
            Ok(deleted > 0)
        })
        .await
    }
}
