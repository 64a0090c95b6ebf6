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

use super::types::LogMessage;
use crate::storage::{Bucket, ObjectKey, ObjectStore, PutCondition, StoreError};

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
        let mut slots = match self.next_seq.lock() {
            Ok(slots) => slots,
            Err(poisoned) => poisoned.into_inner(),
        };
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
        let mut keys: Vec<(u64, String)> = self
            .store
            .list(Bucket::Sessions, &prefix(agent, session))
            .await?
            .into_iter()
            .filter_map(|o| seq_of(&o.key).map(|seq| (seq, o.key)))
            .filter(|(seq, _)| *seq >= from_seq)
            .collect();
        keys.sort();
        let bodies: Vec<(u64, Option<Bytes>)> = futures::stream::iter(keys)
            .map(|(seq, key)| async move {
                let key = ObjectKey::new(key)?;
                let body = self.store.get(Bucket::Sessions, &key).await?.map(|o| o.body);
                Ok::<_, StoreError>((seq, body))
            })
            .buffered(16)
            .try_collect()
            .await?;
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

    #[test]
    fn sequence_numbers_come_from_segment_names() {
        assert_eq!(seq_of("main/0190/00000042.jsonl"), Some(42));
        assert_eq!(seq_of("main/0190/notes.txt"), None);
        assert!(segment("main", "../x", 1).is_err());
    }
}
