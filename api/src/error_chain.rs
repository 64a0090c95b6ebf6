//! Helpers for reading an error's `source()` chain. A leaf module: any layer
//! may use it, and it imports nothing from the crate.

use std::error::Error;

/// The innermost error message (reqwest's and the AWS SDK's own Display hide
/// the useful part: "error sending request" over "connection refused").
pub fn root_cause(err: &(dyn Error + 'static)) -> String {
    let mut current = err;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// An error and each of its sources, `: `-separated, for the log (a source
/// whose text the previous level already ends with is not repeated).
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(next) = source {
        let part = next.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_innermost_message_is_returned() {
        let err = Outer(std::io::Error::other("connection refused"));
        assert_eq!(root_cause(&err), "connection refused");
        assert_eq!(root_cause(&std::io::Error::other("alone")), "alone");
    }
}
