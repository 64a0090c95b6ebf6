//! Session logs in the object store, as JSONL.
//!
//! S3 cannot append, so each append (one turn: the new user message(s), tool
//! messages and the assistant answer) is its own object:
//! `onyx-sessions/{agent}/{session}/{seq:08}.jsonl`. An append costs one small
//! conditional PUT however long the session is. `seq` is claimed with
//! create-if-absent, so two writers (in one process or in two replicas) can
//! never take the same slot: the loser moves to the next one. Within a process,
//! appends to one session also take a lock, so they are kept in the order they
//! were accepted. Reading a session lists its objects and concatenates them in
//! `seq` order. Objects are written whole (temp file + rename locally, a single
//! PUT on S3), so a crash never leaves a torn line.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::log_message::LogMessage;
use crate::storage::{Bucket, ObjectKey, ObjectStore, PutCondition, StoreError};

/// How many sessions' next `seq` are kept before idle ones are forgotten.
const REMEMBERED_SESSIONS: usize = 4096;

pub struct SessionLog {
    store: Arc<dyn ObjectStore>,
    /// Next free `seq` per session, learned from listing once, then kept.
    next_seq: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<u64>>>>>,
}

fn prefix(agent: &str, session: &str) -> String {
    format!("{agent}/{session}/")
}

fn segment(agent: &str, session: &str, seq: u64) -> Result<ObjectKey, StoreError> {
    Ok(ObjectKey::new(format!("{agent}/{session}/{seq:08}.jsonl"))?)
}

fn seq_of(key: &str) -> Option<u64> {
    key.rsplit('/').next()?.strip_suffix(".jsonl")?.parse().ok()
}

impl SessionLog {
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self {
            store,
            next_seq: Mutex::new(HashMap::new()),
        }
    }

    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    fn slot(&self, session: &str) -> Arc<tokio::sync::Mutex<Option<u64>>> {
        let mut slots = crate::locks::lock(&self.next_seq);
        if slots.len() >= REMEMBERED_SESSIONS && !slots.contains_key(session) {
            // With `recordSessions` every request is a new session: forget
            // the ones no append holds. A forgotten one lists its segments
            // again on its next append, which is correct, only slower.
            slots.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        slots.entry(session.to_string()).or_default().clone()
    }

    /// A session this process just created has no segments: its first append
    /// needs no listing (a conflict still falls back to one).
    pub fn mark_new(&self, session: &str) {
        if let Ok(mut slot) = self.slot(session).try_lock() {
            *slot = Some(0);
        }
    }

    async fn listed_next(&self, agent: &str, session: &str) -> Result<u64, StoreError> {
        let objects = self.store.list(Bucket::Sessions, &prefix(agent, session)).await?;
        Ok(objects
            .iter()
            .filter_map(|o| seq_of(&o.key))
            .max()
            .map_or(0, |max| max + 1))
    }

    /// Appends messages as one segment; returns its sequence number.
    pub async fn append(
        &self,
        agent: &str,
        session: &str,
        messages: &[LogMessage],
    ) -> Result<u64, StoreError> {
        let mut body = Vec::new();
        for message in messages {
            // Serializing our own types cannot fail.
            serde_json::to_writer(&mut body, message).map_err(|e| StoreError::Unavailable(e.to_string()))?;
            body.push(b'\n');
        }
        let body = Bytes::from(body);
        let slot = self.slot(session);
        let mut next = slot.lock().await;
        let mut seq = match *next {
            Some(seq) => seq,
            None => self.listed_next(agent, session).await?,
        };
        loop {
            let key = segment(agent, session, seq)?;
            match self
                .store
                .put(Bucket::Sessions, &key, body.clone(), PutCondition::IfAbsent)
                .await
            {
                Ok(_) => {
                    *next = Some(seq + 1);
                    return Ok(seq);
                }
                // Another replica took this slot: find the end again.
                Err(StoreError::PreconditionFailed) => {
                    seq = self.listed_next(agent, session).await?.max(seq + 1)
                }
                Err(err) => {
                    *next = None;
                    return Err(err);
                }
            }
        }
    }

    /// Every message of a session, in order.
    pub async fn read(&self, agent: &str, session: &str) -> Result<Vec<LogMessage>, StoreError> {
        Ok(self
            .read_segments(agent, session, 0)
            .await?
            .into_iter()
            .flat_map(|(_, messages)| messages)
            .collect())
    }

    /// The segments from `from_seq` on, in order, each with its messages:
    /// only those are fetched, so a compacted session reads a bounded tail.
    pub async fn read_segments(
        &self,
        agent: &str,
        session: &str,
        from_seq: u64,
    ) -> Result<Vec<(u64, Vec<LogMessage>)>, StoreError> {
        let known_end = match self.slot(session).try_lock() {
            Ok(next) => *next,
            Err(_) => None,
        };
        let bodies = match known_end {
            // The end is known here (this process appended or listed): fetch
            // the tail by number, no listing, so the cost does not grow with
            // the session. Segments another replica added past it are found
            // by reading on until one is missing (they are numbered without gaps).
            Some(end) if from_seq > 0 => self.read_from_number(agent, session, from_seq, end).await?,
            _ => self.read_listed(agent, session, from_seq).await?,
        };
        let mut segments = Vec::with_capacity(bodies.len());
        for (seq, body) in bodies {
            let Some(body) = body else { continue };
            let mut messages = Vec::new();
            for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                match serde_json::from_slice::<LogMessage>(line) {
                    Ok(message) => messages.push(message),
                    Err(err) => tracing::warn!(session, error = %err, "skipping an unreadable log line"),
                }
            }
            segments.push((seq, messages));
        }
        Ok(segments)
    }

    async fn get_segment(&self, agent: &str, session: &str, seq: u64) -> Result<Option<Bytes>, StoreError> {
        let key = segment(agent, session, seq)?;
        Ok(self.store.get(Bucket::Sessions, &key).await?.map(|o| o.body))
    }

    async fn read_listed(
        &self,
        agent: &str,
        session: &str,
        from_seq: u64,
    ) -> Result<Vec<(u64, Option<Bytes>)>, StoreError> {
        let mut seqs: Vec<u64> = self
            .store
            .list(Bucket::Sessions, &prefix(agent, session))
            .await?
            .into_iter()
            .filter_map(|o| seq_of(&o.key))
            .filter(|seq| *seq >= from_seq)
            .collect();
        seqs.sort();
        futures::stream::iter(seqs)
            .map(
                |seq| async move { Ok::<_, StoreError>((seq, self.get_segment(agent, session, seq).await?)) },
            )
            .buffered(16)
            .try_collect()
            .await
    }

    async fn read_from_number(
        &self,
        agent: &str,
        session: &str,
        from_seq: u64,
        end: u64,
    ) -> Result<Vec<(u64, Option<Bytes>)>, StoreError> {
        let mut bodies: Vec<(u64, Option<Bytes>)> = futures::stream::iter(from_seq..end)
            .map(
                |seq| async move { Ok::<_, StoreError>((seq, self.get_segment(agent, session, seq).await?)) },
            )
            .buffered(16)
            .try_collect()
            .await?;
        let mut next = end.max(from_seq);
        while let Some(body) = self.get_segment(agent, session, next).await? {
            bodies.push((next, Some(body)));
            next += 1;
        }
        Ok(bodies)
    }

    pub async fn delete(&self, agent: &str, session: &str) -> Result<(), StoreError> {
        for object in self.store.list(Bucket::Sessions, &prefix(agent, session)).await? {
            self.store
                .delete(Bucket::Sessions, &ObjectKey::new(object.key)?)
                .await?;
        }
        if let Ok(mut slots) = self.next_seq.lock() {
            slots.remove(session);
        }
        Ok(())
    }

    /// Every `(agent, session)` that has a log, for `onyx reindex`.
    pub async fn all_sessions(&self) -> Result<Vec<(String, String)>, StoreError> {
        let mut sessions: Vec<(String, String)> = self
            .store
            .list(Bucket::Sessions, "")
            .await?
            .into_iter()
            .filter_map(|o| {
                let mut parts = o.key.splitn(3, '/');
                Some((parts.next()?.to_string(), parts.next()?.to_string()))
            })
            .collect();
        sessions.dedup();
        Ok(sessions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Role;

    #[tokio::test]
    async fn a_tail_is_read_by_number_and_finds_what_another_replica_appended() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(crate::storage::LocalStore::new(dir.path()));
        store.ensure_buckets().await.unwrap();
        let (here, there) = (SessionLog::new(store.clone()), SessionLog::new(store));
        let line = |text: &str| vec![LogMessage::plain(Role::User, text)];
        for i in 0..5 {
            here.append("main", "s1", &line(&format!("turn {i}")))
                .await
                .unwrap();
        }
        there
            .append("main", "s1", &line("from the other replica"))
            .await
            .unwrap();
        let tail = here.read_segments("main", "s1", 3).await.unwrap();
        let seqs: Vec<u64> = tail.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, [3, 4, 5]);
        assert_eq!(tail[2].1[0].text(), "from the other replica");
        // A reader that never appended lists instead, and agrees.
        let fresh = SessionLog::new(here.store.clone());
        assert_eq!(fresh.read_segments("main", "s1", 3).await.unwrap().len(), 3);
        assert_eq!(here.read("main", "s1").await.unwrap().len(), 6);
    }

    #[tokio::test]
    async fn idle_sessions_are_forgotten_and_append_where_they_left_off() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(crate::storage::LocalStore::new(dir.path()));
        store.ensure_buckets().await.unwrap();
        let log = SessionLog::new(store);
        let line = vec![LogMessage::plain(Role::User, "hi")];
        assert_eq!(log.append("main", "first", &line).await.unwrap(), 0);
        for i in 0..REMEMBERED_SESSIONS {
            log.mark_new(&format!("s{i}"));
        }
        assert!(crate::locks::lock(&log.next_seq).len() <= REMEMBERED_SESSIONS);
        // "first" was forgotten; its next append finds its end by listing.
        assert!(!crate::locks::lock(&log.next_seq).contains_key("first"));
        assert_eq!(log.append("main", "first", &line).await.unwrap(), 1);
    }

    #[test]
    fn sequence_numbers_come_from_segment_names() {
        assert_eq!(seq_of("main/0190/00000042.jsonl"), Some(42));
        assert_eq!(seq_of("main/0190/notes.txt"), None);
        assert!(segment("main", "../x", 1).is_err());
    }
}
