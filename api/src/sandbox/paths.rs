//! Which paths a sandboxed command may read: the system directories, the
//! parts of `/etc` programs need (not all of it: no config of other
//! services, no keys), and what a policy adds; a hidden path beneath one (a
//! config file under `/etc`, a data dir under `/usr/local`) is carved out by
//! allowing its siblings instead, since Landlock only grants, never denies
//! beneath a grant. `/opt` is not granted: a tool installed there is named
//! in `tools.exec.readOnly`.

use std::path::{Path, PathBuf};

/// Read-only (and executable) for every command.
pub const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];

/// What programs read under `/etc`: the loader, certificates, users and
/// groups, name resolution, time zones, locales, alternatives, and the
/// system-wide settings of the interpreters and tools agents run.
pub const ETC_ENTRIES: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "passwd",
    "group",
    "nsswitch.conf",
    "resolv.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "hostname",
    "localtime",
    "timezone",
    "zoneinfo",
    "locale.alias",
    "locale.conf",
    "default/locale",
    "alternatives",
    "mime.types",
    "magic",
    "protocols",
    "services",
    "os-release",
    "lsb-release",
    "debian_version",
    "shells",
    "terminfo",
    "inputrc",
    "profile",
    "gitconfig",
    "perl",
    "selinux/config",
];

/// `/etc` entries whose name starts with one of these (versioned folders: `python3.13`).
const ETC_PREFIXES: &[&str] = &["python"];

/// The system directories, the `/etc` entries that exist, and `extra`.
pub(super) fn system_paths(extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    let etc = Path::new("/etc");
    out.extend(ETC_ENTRIES.iter().map(|name| etc.join(name)));
    if let Ok(entries) = std::fs::read_dir(etc) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if ETC_PREFIXES.iter().any(|p| name.to_string_lossy().starts_with(p)) {
                out.push(entry.path());
            }
        }
    }
    out.extend(extra.iter().cloned());
    out
}

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
