//! `onyx hash-password`: reads one line from stdin, prints its argon2id hash.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use crate::auth::hash_password;

pub fn run() -> ExitCode {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("Password (input is shown): ");
        let _ = std::io::stderr().flush();
    }
    let mut line = String::new();
    if let Err(err) = stdin.lock().read_line(&mut line) {
        eprintln!("onyx: cannot read the password: {err}");
        return ExitCode::FAILURE;
    }
    let password = line.trim_end_matches(['\r', '\n']);
    match hash_password(password) {
        Ok(hash) => {
            println!("{hash}");
            eprintln!("Put it in your config as gateway.auth.passwordHash.");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("onyx: {err}");
            ExitCode::FAILURE
        }
    }
}
