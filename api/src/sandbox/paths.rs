//! Which directories a sandboxed command may read: the system directories,
//! except that a hidden path beneath one (a config file under `/etc`, a data
//! dir under `/opt`) is carved out by allowing its siblings instead, since
//! Landlock only grants, never denies beneath a grant.

use std::path::{Path, PathBuf};

/// Read-only (and executable) for every command.
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt",
];

/// The paths to grant read access to: `roots`, with every `hidden` path
/// (and everything beneath it) left out. Paths are compared canonicalized.
pub(super) fn readable(roots: &[PathBuf], hidden: &[PathBuf]) -> Vec<PathBuf> {
    let hidden: Vec<PathBuf> = hidden.iter().map(|h| canonical(h)).collect();
    let mut out = Vec::new();
    for root in roots {
        let root = canonical(root);
        if root.exists() && !out.contains(&root) {
            grant(&root, &hidden, &mut out);
        }
    }
    out
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

fn grant(dir: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| dir.starts_with(h)) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        out.push(dir.to_path_buf());
        return;
    }
    // A hidden path lies beneath: grant the children one by one.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            grant(&path, hidden, out);
        } else if !hidden.iter().any(|h| path.starts_with(h)) {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_path_beneath_a_root_is_carved_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["etc/ssl", "etc/onyx", "lib"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("etc/hosts"), "x").unwrap();
        std::fs::write(root.join("etc/onyx/onyx.json5"), "{}").unwrap();
        std::fs::write(root.join("etc/onyx/other"), "x").unwrap();
        let roots = [root.join("etc"), root.join("lib"), root.join("missing")];
        let mut granted = readable(&roots, &[root.join("etc/onyx/onyx.json5")]);
        granted.sort();
        let expected = [
            root.join("etc/hosts"),
            root.join("etc/onyx/other"),
            root.join("etc/ssl"),
            root.join("lib"),
        ];
        assert_eq!(granted, expected);
        // Hiding a whole root drops it.
        assert_eq!(readable(&roots, &[root.join("etc")]), [root.join("lib")]);
        // Nothing hidden: the roots as they are.
        assert_eq!(readable(&roots, &[]), [root.join("etc"), root.join("lib")]);
    }
}
