//! The environment a sandboxed command gets: the gateway's, minus anything
//! that looks like a secret or is Onyx's own (`ONYX_*`).

/// Whether an environment variable must not reach a command.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("ONYX_")
        || [
            "_API_KEY",
            "_TOKEN",
            "_SECRET",
            "_PASSWORD",
            "_PASS",
            "_KEY",
            "_CREDENTIALS",
        ]
        .iter()
        .any(|suffix| upper.ends_with(suffix))
        || ["API_KEY", "TOKEN", "SECRET", "PASSWORD"].contains(&upper.as_str())
        || upper.starts_with("AWS_SECRET")
        || upper.starts_with("AWS_SESSION")
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
    fn secrets_and_onyx_variables_are_recognised() {
        for name in [
            "OPENAI_API_KEY",
            "ONYX_API_KEY",
            "ONYX_CONFIG",
            "TELEGRAM_BOT_TOKEN",
            "S3_SECRET",
            "SURREAL_PASSWORD",
            "GITHUB_TOKEN",
            "aws_secret_access_key",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TERM", "PWD", "TOKENIZERS_PARALLELISM"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
