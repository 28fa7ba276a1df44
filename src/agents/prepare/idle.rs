//! Sessions that stop short of their trigger: the user reading, away, or a long tool run. A
//! session (by its header, or without one by its opening) past half the share with no summary kept is prepared once it has been idle
//! `COMPACTD_PREPARE_IDLE_SECS`, so that the compaction a few turns after the pause is answered at
//! once. Only its latest turn is held (the body shared with the request, not copied), for a
//! bounded number of sessions and bytes; one timer a session, which ends when it prepares or is no longer
//! waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{Preparer, Turn};
use crate::app::App;

/// At most this many sessions wait for their idle time on a replica; past it, a session is
/// prepared only by its trigger.
const MAX_WAITING: usize = 256;
/// At most this many bytes of their bodies are held (a body may be 32 MiB); past it, a session
/// waits no longer (an older turn never stands for its latest).
const MAX_WAITING_BYTES: usize = 256 << 20;

type Key = (String, String);

/// A session's latest turn and when it came.
struct Waiting {
    last: Instant,
    turn: Turn,
}

/// The sessions waiting to be prepared when idle.
#[derive(Default)]
pub(super) struct Idle {
    waiting: Mutex<HashMap<Key, Waiting>>,
}

impl std::fmt::Debug for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idle").finish_non_exhaustive()
    }
}

impl Idle {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes `turn` as its session's latest; the session's timer starts with its first.
    pub(super) fn wait(app: &App, preparer: &Arc<Preparer>, key: Key, turn: Turn) {
        let mut waiting = preparer.idle.lock();
        let last = Instant::now();
        let others: usize = (waiting.iter())
            .filter(|(other, _)| **other != key)
            .map(|(_, w)| w.turn.plain.len())
            .sum();
        if others + turn.plain.len() > MAX_WAITING_BYTES {
            waiting.remove(&key);
            return;
        }
        if let Some(known) = waiting.get_mut(&key) {
            *known = Waiting { last, turn };
            return;
        }
        if waiting.len() >= MAX_WAITING {
            return;
        }
        waiting.insert(key.clone(), Waiting { last, turn });
        drop(waiting);
        tokio::spawn(timer(app.clone(), preparer.clone(), key));
    }

    /// The session is no longer waiting (it is being prepared, or its turn went elsewhere).
    pub(super) fn forget(&self, key: &Key) {
        self.lock().remove(key);
    }
}

/// Sleeps until the session has been idle long enough, then prepares its latest turn.
async fn timer(app: App, preparer: Arc<Preparer>, key: Key) {
    let after = preparer.idle_after;
    loop {
        let Some(last) = preparer.idle.lock().get(&key).map(|w| w.last) else {
            return;
        };
        tokio::time::sleep_until((last + after).into()).await;
        let turn = {
            let mut waiting = preparer.idle.lock();
            match waiting.get(&key) {
                None => return,
                Some(latest) if latest.last.elapsed() < after => continue,
                Some(_) => waiting.remove(&key).map(|w| w.turn),
            }
        };
        let Some(turn) = turn else {
            return;
        };
        super::start(&app, &preparer, turn);
        return;
    }
}
