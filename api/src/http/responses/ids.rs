//! Responses API identifiers: a prefix naming the kind (`resp_`, `msg_`,
//! `fc_`, …) and a UUIDv7 in its simple form.

fn new(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

pub fn response() -> String {
    new("resp")
}

pub fn message() -> String {
    new("msg")
}

pub fn function_call() -> String {
    new("fc")
}

pub fn function_call_output() -> String {
    new("fco")
}

pub fn reasoning() -> String {
    new("rs")
}
