//! Where a daily log's segments live and what a replica remembers of them.
//! A note appended to a day's log that has no plain file becomes its own
//! object, `_segments/{agent}/memory/YYYY-MM-DD.md/{seq}.md` (see
//! `daily_log`). Segments never change once written, so each replica keeps
//! their text, and where the day's log ends (next sequence number, lines,
//! bytes), to append without reading the log again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use bytes::Bytes;

use super::chunker::content_hash;
use super::paths::{self, PathError};
use crate::locks::lock;
use crate::storage::{ObjectInfo, ObjectKey};

/// The top folder segments live under: no agent id starts with '_' (but
/// `_shared`), so no listing of memory files takes them for one.
const DIR: &str = "_segments";

/// The prefix of an agent's segment objects.
pub fn agent_prefix(agent: &str) -> String {
    format!("{DIR}/{agent}/")
}

/// The prefix of a daily log's segment objects.
pub fn prefix(agent: &str, path: &str) -> String {
    format!("{DIR}/{agent}/{path}/")
}

pub fn key(agent: &str, path: &str, seq: u64) -> Result<ObjectKey, PathError> {
    ObjectKey::new(format!("{}{seq:010}.md", prefix(agent, path))).map_err(|_| PathError::Path {
        path: path.into(),
        reason: "not a valid storage key",
    })
}

/// The (agent, daily log path, sequence number) a segment key belongs to.
pub fn parse(key: &str) -> Option<(&str, &str, u64)> {
    let rest = key.strip_prefix(DIR)?.strip_prefix('/')?;
    let (agent, rest) = rest.split_once('/')?;
    let (path, name) = rest.rsplit_once('/')?;
    let seq = name.strip_suffix(".md")?.parse().ok()?;
    let agent = paths::agent(agent).ok()?;
    paths::daily_date(path)?;
    Some((agent, paths::file(path).ok()?, seq))
}

/// A daily log kept as segments, as a listing shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Listed {
    pub last_seq: u64,
    pub bytes: u64,
}

/// The daily logs kept as segments among listed objects, by (agent, path).
pub fn group<'a>(objects: impl IntoIterator<Item = &'a ObjectInfo>) -> HashMap<(&'a str, &'a str), Listed> {
    let mut logs: HashMap<(&str, &str), Listed> = HashMap::new();
    for object in objects {
        if let Some((agent, path, seq)) = parse(&object.key) {
            let log = logs.entry((agent, path)).or_default();
            log.last_seq = log.last_seq.max(seq);
            log.bytes += object.size;
        }
    }
    logs
}

/// How a log kept as segments' change token starts.
pub const ETAG_PREFIX: &str = "segments-";

/// The change token of a log kept as segments: what the index records and
/// what `If-Match` compares (it changes with every append).
pub fn etag(last_seq: u64) -> String {
    format!("{ETAG_PREFIX}{last_seq}")
}

/// The last sequence number a log's change token names (`None` for a plain file's).
pub fn seq_of(etag: &str) -> Option<u64> {
    etag.strip_prefix(ETAG_PREFIX)?.parse().ok()
}

/// The id of the one chunk a segment is indexed as: unique per segment,
/// whatever its note says.
pub fn chunk_id(agent: &str, path: &str, seq: u64) -> String {
    let mut id = content_hash(&format!("{agent}\n{path}\nsegment {seq}"));
    id.truncate(32);
    id
}

/// Where a day's log ends, as far as this replica knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tail {
    /// The next sequence number to try.
    pub next: u64,
    pub lines: usize,
    pub bytes: u64,
}

impl Tail {
    /// Where the log ends once `body` is its next segment.
    pub fn after(self, body: &[u8]) -> Self {
        Self {
            next: self.next + 1,
            lines: self.lines + String::from_utf8_lossy(body).lines().count(),
            bytes: self.bytes + body.len() as u64,
        }
    }
}

/// Each replica's memory of segments: their text by key (for whole reads),
/// by log and number (for a prompt's excerpt), and each log's tail.
#[derive(Default)]
pub struct SegmentCache {
    bodies: Mutex<HashMap<String, Bytes>>,
    numbered: Mutex<HashMap<String, BTreeMap<u64, Bytes>>>,
    tails: Mutex<HashMap<String, Tail>>,
}

/// A log's numbered segments kept: its first and last ones (what an excerpt
/// reads); those in between are dropped as the tail moves on.
const KEEP_NUMBERED: usize = 4_096;
/// Logs whose numbered segments are kept before all are dropped.
const MAX_NUMBERED_LOGS: usize = 1_000;

/// Segment texts kept before the oldest are dropped (a busy day's log is a few
/// hundred; today's and yesterday's logs are read into every prompt).
const MAX_BODIES: usize = 20_000;

impl SegmentCache {
    pub fn body(&self, key: &str) -> Option<Bytes> {
        lock(&self.bodies).get(key).cloned()
    }

    pub fn keep_body(&self, key: &str, body: Bytes) {
        let mut bodies = lock(&self.bodies);
        if bodies.len() >= MAX_BODIES {
            bodies.clear();
        }
        bodies.insert(key.to_string(), body);
    }

    /// A log's segment by number, as this replica read or wrote it.
    pub fn segment(&self, agent: &str, path: &str, seq: u64) -> Option<Bytes> {
        lock(&self.numbered).get(&prefix(agent, path))?.get(&seq).cloned()
    }

    pub fn keep_segment(&self, agent: &str, path: &str, seq: u64, body: Bytes) {
        let mut numbered = lock(&self.numbered);
        if numbered.len() >= MAX_NUMBERED_LOGS && !numbered.contains_key(&prefix(agent, path)) {
            numbered.clear();
        }
        let log = numbered.entry(prefix(agent, path)).or_default();
        log.insert(seq, body);
        if log.len() > KEEP_NUMBERED {
            let keep = (KEEP_NUMBERED / 4) as u64;
            let last = log.keys().next_back().copied().unwrap_or(0);
            log.retain(|seq, _| *seq <= keep || *seq + keep > last);
        }
    }

    /// Forgets a log's numbered segments and tail (it was folded, replaced or deleted).
    pub fn forget_log(&self, agent: &str, path: &str) {
        lock(&self.numbered).remove(&prefix(agent, path));
        lock(&self.tails).remove(&prefix(agent, path));
    }

    /// Moves a log's known end forward (never back: an append may have moved it further meanwhile).
    pub fn advance_tail(&self, agent: &str, path: &str, tail: Tail) {
        let mut tails = lock(&self.tails);
        let known = tails.entry(prefix(agent, path)).or_default();
        if tail.next > known.next {
            *known = tail;
        }
    }

    pub fn tail(&self, agent: &str, path: &str) -> Option<Tail> {
        lock(&self.tails).get(&prefix(agent, path)).copied()
    }

    pub fn set_tail(&self, agent: &str, path: &str, tail: Option<Tail>) {
        let mut tails = lock(&self.tails);
        match tail {
            Some(tail) => tails.insert(prefix(agent, path), tail),
            None => {
                lock(&self.numbered).remove(&prefix(agent, path));
                tails.remove(&prefix(agent, path))
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_keys_round_trip_and_nothing_else_parses() {
        let key = key("main", "memory/2026-11-24.md", 7).unwrap();
        assert_eq!(key.as_str(), "_segments/main/memory/2026-11-24.md/0000000007.md");
        assert_eq!(parse(key.as_str()), Some(("main", "memory/2026-11-24.md", 7)));
        for other in [
            "main/memory/2026-11-24.md",
            "_segments/main/MEMORY.md/0000000001.md",
            "_segments/main/memory/2026-11-24.md/x.md",
            "_segments/../memory/2026-11-24.md/0000000001.md",
            "_segments/_x/memory/2026-11-24.md/0000000001.md",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
        assert_eq!(paths::split_key(key.as_str()), None, "not a memory file");
    }
}
