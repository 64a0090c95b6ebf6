//! The environment a sandboxed command, an MCP stdio server or a vendor CLI
//! gets: an allow list of the gateway's variables that say how to run
//! (`PATH`, locale, time zone, terminal, user), never the rest, so no
//! credential (`PGPASSWORD`, `DATABASE_URL`, a proxy URL with a password, a
//! socket such as `SSH_AUTH_SOCK`) reaches them whatever it is called. What a
//! program needs beyond that is set by its caller (an MCP server's `env`, a
//! CLI's config dir).

use std::ffi::OsString;

/// Passed through as they are.
const ALLOWED: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "USER",
    "LOGNAME",
    "SHELL",
];
/// Passed through by prefix (`LC_ALL`, `LC_CTYPE`, …).
const ALLOWED_PREFIXES: &[&str] = &["LC_"];

/// Whether the gateway's variable `name` may reach a program it starts.
pub fn is_allowed(name: &str) -> bool {
    ALLOWED.contains(&name) || ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The allowed part of this process's environment.
pub fn allowed_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| name.to_str().is_some_and(is_allowed))
        .collect()
}

/// Execs `command` (program, then arguments); returns the exit code to use
/// when that fails.
pub(super) fn exec(command: &[String]) -> u8 {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = command.split_first() else {
        eprintln!("onyx sandbox-exec: no command given");
        return 2;
    };
    let err = std::process::Command::new(program).args(args).exec();
    eprintln!("onyx sandbox-exec: cannot run {program}: {err}");
    127
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allow_list_passes() {
        for name in ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "USER"] {
            assert!(is_allowed(name), "{name}");
        }
        for name in [
            "OPENAI_API_KEY",
            "ONYX_CONFIG",
            "PGPASSWORD",
            "MYSQL_PWD",
            "DATABASE_URL",
            "HTTPS_PROXY",
            "http_proxy",
            "SERVICE_APIKEY",
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
            "XDG_RUNTIME_DIR",
            "LD_PRELOAD",
            "HOME",
            "path",
        ] {
            assert!(!is_allowed(name), "{name}");
        }
    }
}
