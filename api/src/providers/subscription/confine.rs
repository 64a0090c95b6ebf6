//! Vendor CLIs run inside Onyx's own sandbox (`onyx sandbox-exec`, the one
//! `exec` uses): their config dir read-write, their install read-only, the
//! system directories read-only, the network kept (they talk to their
//! vendor), and nothing else: not the master key, not another CLI's
//! credentials, not an agent's workspace. A prompt that talks a CLI into
//! running `cat master.key` gets a refusal from the kernel, whatever the
//! CLI's own sandbox allows. No resource limits: a CLI is a long-lived
//! program, not one command; its PID namespace still ends whatever it
//! starts when it ends.

use std::path::{Path, PathBuf};

use crate::sandbox::{self, Limits, Policy};

/// The helper command that runs `program` with `args` confined, `home` its config dir.
pub(super) fn command(
    program: &str,
    args: &[String],
    home: &Path,
) -> std::io::Result<tokio::process::Command> {
    let program = resolve(program)?;
    let policy = Policy {
        workspace: home.to_path_buf(),
        read_only: vec![install_dir(&program)],
        hidden: vec![super::data_dir()],
        network: true,
        require: false,
        limits: Limits::UNLIMITED,
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exe = std::env::current_exe()?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(sandbox::helper_args(&policy, &program.to_string_lossy(), &args));
    Ok(cmd)
}

/// `program` as a path: as given when it names one, else found on `PATH`.
fn resolve(program: &str) -> std::io::Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    sandbox::tether::on_path(program)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("{program} is not on PATH")))
}

/// What the CLI needs to read of its install: the outermost `node_modules`
/// holding it (an npm package's own dependencies and native parts sit
/// beside it), else the folder of the program itself (links followed).
fn install_dir(program: &Path) -> PathBuf {
    let real = program.canonicalize().unwrap_or_else(|_| program.to_path_buf());
    let outermost = real
        .ancestors()
        .filter(|dir| dir.file_name().is_some_and(|n| n == "node_modules"))
        .last();
    match outermost {
        Some(dir) => dir.to_path_buf(),
        None => real.parent().map_or_else(|| real.clone(), Path::to_path_buf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npm_package_is_read_from_its_outermost_node_modules() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let package = root.join("cli/node_modules/@vendor/tool/bin");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::create_dir_all(root.join("cli/node_modules/.bin")).unwrap();
        std::fs::write(package.join("tool.js"), "").unwrap();
        let shim = root.join("cli/node_modules/.bin/tool");
        std::os::unix::fs::symlink("../@vendor/tool/bin/tool.js", &shim).unwrap();
        assert_eq!(install_dir(&shim), root.join("cli/node_modules"));
        let native = root.join("native/tool");
        std::fs::create_dir_all(native.parent().unwrap()).unwrap();
        std::fs::write(&native, "").unwrap();
        assert_eq!(install_dir(&native), root.join("native"));
    }

    #[test]
    fn a_bare_name_is_found_on_path() {
        assert!(resolve("sh").unwrap().is_absolute());
        assert_eq!(resolve("./x").unwrap(), PathBuf::from("./x"));
        assert!(resolve("onyx-no-such-program").is_err());
    }
}
