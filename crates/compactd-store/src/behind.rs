//! Writing behind the requests: what the request path hands over (call-log rows, conversations
//! for recall, summaries for the shared cache) is queued, bounded in items and in bytes, and
//! written by one task per queue in batches — as many items as queued while the last batch was
//! written, up to a cap, one call (one transaction) each — so that a request never waits for the
//! store. A flush is answered once everything queued before it has been written (or failed): the
//! CLI and shutdown wait for it, and so do tests that read the store at once.
//!
//! A batch is held open for [`LINGER`] after its first item (unless it is full, or a flush is
//! waiting): under load that turns a commit per few items into one per hundreds. Each commit
//! rewrites the same table and index pages into SQLite's WAL, and that, not the rows, was most of
//! the call log's cost at a few thousand rows a second.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

enum Message<T> {
    Item(T),
    Flush(oneshot::Sender<()>),
}

/// How long a batch waits for more items after its first one. Nothing waits on a write but a
/// flush, which cuts it short; a row is at most this much later in the store.
pub const LINGER: Duration = Duration::from_millis(20);

fn has_flush<T>(messages: &[Message<T>]) -> bool {
    messages.iter().any(|m| matches!(m, Message::Flush(_)))
}

/// About how many bytes an item holds while it waits: a queue is bounded in bytes as well as in
/// items, since one item may be a whole conversation (recall) or prompt (the call log's texts).
pub trait Weigh {
    fn weight(&self) -> usize;
}

/// The queueing side of one writer.
pub struct WriteBehind<T> {
    sender: mpsc::Sender<Message<T>>,
    held: Arc<Held>,
}

/// Bytes of the items queued or being written, and the most they may be.
struct Held {
    bytes: AtomicUsize,
    most: usize,
}

impl<T> Clone for WriteBehind<T> {
    fn clone(&self) -> Self {
        WriteBehind {
            sender: self.sender.clone(),
            held: self.held.clone(),
        }
    }
}

impl<T> std::fmt::Debug for WriteBehind<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBehind")
            .field("capacity", &self.sender.capacity())
            .finish()
    }
}

impl<T: Weigh + Send + 'static> WriteBehind<T> {
    /// Starts the writer: `write` gets each batch (at most `batch` items, in queue order), until
    /// every `WriteBehind` of it is dropped. `queue` items wait at most, and `most_bytes` of them
    /// (but one item alone, whatever its size).
    pub fn spawn<W, F>(
        queue: usize,
        most_bytes: usize,
        batch: usize,
        mut write: W,
    ) -> WriteBehind<T>
    where
        W: FnMut(Vec<T>) -> F + Send + 'static,
        F: Future<Output = ()> + Send,
    {
        let (sender, mut receiver) = mpsc::channel::<Message<T>>(queue);
        let held = Arc::new(Held {
            bytes: AtomicUsize::new(0),
            most: most_bytes,
        });
        let writing = held.clone();
        tokio::spawn(async move {
            let mut messages = Vec::with_capacity(batch.min(1024));
            let mut flushes = Vec::new();
            while receiver.recv_many(&mut messages, batch).await > 0 {
                let until = tokio::time::Instant::now() + LINGER;
                let mut seen = 0;
                while messages.len() < batch && !has_flush(&messages[seen..]) {
                    seen = messages.len();
                    let more = receiver.recv_many(&mut messages, batch - seen);
                    match tokio::time::timeout_at(until, more).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                let mut items = Vec::with_capacity(messages.len());
                for message in messages.drain(..) {
                    match message {
                        Message::Item(item) => items.push(item),
                        Message::Flush(done) => flushes.push(done),
                    }
                }
                if !items.is_empty() {
                    // Held until written: the batch is in memory until then.
                    let bytes: usize = items.iter().map(Weigh::weight).sum();
                    write(items).await;
                    writing.bytes.fetch_sub(bytes, Ordering::AcqRel);
                }
                for done in flushes.drain(..) {
                    let _ = done.send(());
                }
            }
        });
        WriteBehind { sender, held }
    }

    /// Queues `item`; gives it back when the queue is full (of items, or of bytes).
    pub fn queue(&self, item: T) -> Result<(), T> {
        let bytes = item.weight();
        let before = self.held.bytes.fetch_add(bytes, Ordering::AcqRel);
        if before > 0 && before + bytes > self.held.most {
            self.held.bytes.fetch_sub(bytes, Ordering::AcqRel);
            return Err(item);
        }
        self.sender.try_send(Message::Item(item)).map_err(|error| {
            self.held.bytes.fetch_sub(bytes, Ordering::AcqRel);
            match error.into_inner() {
                Message::Item(item) => item,
                Message::Flush(_) => unreachable!("an item was sent"),
            }
        })
    }

    /// Waits until everything queued so far is written (or failed).
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.sender.send(Message::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }
}

// What each record written behind weighs in the queue's byte bound.

impl Weigh for crate::NewRecall {
    fn weight(&self) -> usize {
        let turns: usize = self
            .turns
            .iter()
            .map(|t| t.text.len() + t.paths.len() + t.role.len() + 64)
            .sum();
        turns + self.id.len() + self.tenant.len() + 128
    }
}

impl Weigh for crate::CachedSummaryRow {
    fn weight(&self) -> usize {
        self.key.len() + self.summary.len() + 64
    }
}

impl Weigh for crate::CallRecord {
    fn weight(&self) -> usize {
        let text = |t: &Option<String>| t.as_ref().map_or(0, String::len);
        text(&self.prompt) + text(&self.summary) + 512
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::{Weigh, WriteBehind};

    /// A number weighs its value.
    impl Weigh for u32 {
        fn weight(&self) -> usize {
            *self as usize
        }
    }

    #[tokio::test]
    async fn batches_keep_order_and_a_flush_waits_for_what_came_before() {
        let written: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
        let into = written.clone();
        let behind = WriteBehind::spawn(8, usize::MAX, 3, move |batch| {
            let into = into.clone();
            async move { into.lock().unwrap().push(batch) }
        });
        for i in 0..8 {
            behind.queue(i).unwrap();
        }
        // The queue holds 8: the ninth is given back.
        assert_eq!(behind.queue(8), Err(8));
        behind.flush().await;
        let batches = written.lock().unwrap().clone();
        assert!(
            batches.iter().all(|b| !b.is_empty() && b.len() <= 3),
            "{batches:?}"
        );
        assert_eq!(batches.concat(), (0..8).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_waits_a_little_for_more_items_and_a_flush_does_not_wait() {
        let written: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
        let into = written.clone();
        let behind = WriteBehind::spawn(64, usize::MAX, 16, move |batch| {
            let into = into.clone();
            async move { into.lock().unwrap().push(batch) }
        });
        behind.queue(1).unwrap();
        // The writer takes the first item and holds its batch open (the clock is paused: time
        // moves only when every task waits for it).
        tokio::task::yield_now().await;
        tokio::time::advance(super::LINGER / 2).await;
        behind.queue(2).unwrap();
        behind.queue(3).unwrap();
        tokio::time::advance(super::LINGER).await;
        tokio::task::yield_now().await;
        assert_eq!(*written.lock().unwrap(), vec![vec![1, 2, 3]]);

        // A flush is answered at once, not after the batch's linger.
        behind.queue(4).unwrap();
        let before = tokio::time::Instant::now();
        behind.flush().await;
        assert_eq!(before.elapsed(), std::time::Duration::ZERO);
        assert_eq!(*written.lock().unwrap(), vec![vec![1, 2, 3], vec![4]]);
    }

    #[tokio::test]
    async fn a_queue_holds_its_bytes_until_they_are_written_but_always_one_item() {
        // The writer waits for a permit per batch: what is queued stays held until it is let go.
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let written: Arc<Mutex<Vec<u32>>> = Arc::default();
        let (into, permits) = (written.clone(), gate.clone());
        let behind = WriteBehind::spawn(64, 100, 64, move |batch: Vec<u32>| {
            let (into, permits) = (into.clone(), permits.clone());
            async move {
                permits.acquire().await.unwrap().forget();
                into.lock().unwrap().extend(batch);
            }
        });
        // Alone, an item over the bound is taken; nothing more is while it is held.
        behind.queue(150).unwrap();
        assert_eq!(behind.queue(1), Err(1));
        gate.add_permits(1);
        behind.flush().await;
        // 60 + 40 fit in 100 bytes; 1 more does not until they are written.
        behind.queue(60).unwrap();
        behind.queue(40).unwrap();
        assert_eq!(behind.queue(1), Err(1));
        gate.add_permits(8);
        behind.flush().await;
        behind.queue(1).unwrap();
        behind.flush().await;
        assert_eq!(*written.lock().unwrap(), vec![150, 60, 40, 1]);
    }
}
