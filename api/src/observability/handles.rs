//! Metric handles found by a text key. A Prometheus family hashes an owned
//! label set (a `String` per label, SipHash) on every update; the gateway
//! updates several series per request, so it keeps the handles of the series
//! it has used here, found with one FxHash lookup of a borrowed key. The
//! handles share their values with the families, which still render them.

use std::sync::RwLock;

use rustc_hash::FxHashMap;

use crate::locks::{read, write};

/// Keys kept before the map starts over (its handles stay in the families;
/// a key seen again is looked up there once more).
const KEPT: usize = 4096;

pub struct Handles<V> {
    by_key: RwLock<FxHashMap<String, V>>,
}

impl<V> Default for Handles<V> {
    fn default() -> Self {
        Self {
            by_key: RwLock::default(),
        }
    }
}

impl<V> Handles<V> {
    /// Calls `update` with the handle for `key`, made by `make` the first time.
    pub fn with<R>(&self, key: &str, make: impl FnOnce() -> V, update: impl FnOnce(&V) -> R) -> R {
        if let Some(handle) = read(&self.by_key).get(key) {
            return update(handle);
        }
        let mut by_key = write(&self.by_key);
        if by_key.len() >= KEPT {
            by_key.clear();
        }
        update(by_key.entry(key.to_owned()).or_insert_with(make))
    }
}

/// `a` and `b` as one key (the unit separator keeps `a`+`bc` apart from `ab`+`c`).
pub fn pair_key(a: &str, b: &str) -> String {
    let mut key = String::with_capacity(a.len() + b.len() + 1);
    key.push_str(a);
    key.push('\u{1f}');
    key.push_str(b);
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn makes_a_handle_once_per_key() {
        let handles = Handles::<Cell<u32>>::default();
        let made = Cell::new(0);
        for key in ["a", "b", "a", "a"] {
            handles.with(
                key,
                || {
                    made.set(made.get() + 1);
                    Cell::new(0)
                },
                |count| count.set(count.get() + 1),
            );
        }
        assert_eq!(made.get(), 2);
        assert_eq!(handles.with("a", || Cell::new(0), Cell::get), 3);
        assert_ne!(pair_key("a", "bc"), pair_key("ab", "c"));
    }
}
