//! Issue 37, point 7: no Unix-socket connects from the sandbox. A listening
//! socket in a folder the sandbox cannot list (beneath the gateway's home),
//! which `nobody` reaches outside the sandbox, is not reachable from `exec`:
//! not by `connect()`, not by a datagram pair's `sendto()`, and an abstract
//! socket neither. A stream `socketpair` (what programs use for their own
//! children) still works.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};

use super::*;
use crate::harness::unprivileged::{RunAs, give_to_nobody};

/// A Python program run as `python3 -c`: tries each way to reach `path`
/// and the abstract name, printing one word per outcome.
fn probe(path: &str, abstract_name: &str) -> String {
    format!(
        r#"import socket
def attempt(name, f):
    try:
        f()
        print(name + '=REACHED')
    except OSError as e:
        print(name + '=refused:' + type(e).__name__)
def stream():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect('{path}')
def datagram():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b'hello', '{path}.dgram')
def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect('\0{abstract_name}')
attempt('stream', stream)
attempt('datagram', datagram)
attempt('abstract', abstract)
a, b = socket.socketpair()
a.sendall(b'pair-ok')
print(b.recv(16).decode())
"#
    )
}

#[tokio::test]
async fn exec_cannot_reach_a_unix_socket_outside_the_sandbox() {
    let fakes = Fakes::start().await;
    let config = exec_config(&fakes, json!({ "timeoutSeconds": 30 }));
    let onyx = Onyx::start_as(RunAs::Nobody, Some(&config), &[]).await;

    // A socket such as docker.sock or the SSH agent's, in a folder of the
    // gateway user's home (which the sandbox cannot list).
    let private = onyx.dir.path().join("private");
    std::fs::create_dir_all(&private).unwrap();
    let path = private.join("agent.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let datagram = UnixDatagram::bind(private.join("agent.sock.dgram")).unwrap();
    datagram.set_nonblocking(true).unwrap();
    let abstract_name = format!("onyx-test-{}", std::process::id());
    let abstract_addr = SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    let abstract_listener = UnixListener::bind_addr(&abstract_addr).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    give_to_nobody(&private);
    let script = probe(&path.display().to_string(), &abstract_name);

    // Outside the sandbox, nobody reaches all three: the sandbox is what stops it.
    let outside = std::process::Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let outside = String::from_utf8_lossy(&outside.stdout).to_string();
    for way in ["stream", "datagram", "abstract"] {
        assert!(
            outside.contains(&format!("{way}=REACHED")),
            "{way} outside: {outside}"
        );
    }
    while listener.accept().is_ok() || abstract_listener.accept().is_ok() {}
    let mut buffer = [0u8; 16];
    while datagram.recv(&mut buffer).is_ok() {}

    let command = format!("/usr/bin/python3 -c {}", shell_quote(&script));
    let out = exec(&onyx, &command).await;
    for way in ["stream", "datagram", "abstract"] {
        assert!(
            out.contains(&format!("{way}=refused:PermissionError")),
            "{way}: {out}"
        );
    }
    assert!(!out.contains("REACHED"), "{out}");
    assert!(out.contains("pair-ok"), "a stream socketpair works: {out}");
    assert!(listener.accept().is_err(), "a connection reached the socket");
    assert!(
        abstract_listener.accept().is_err(),
        "a connection reached the abstract socket"
    );
    assert!(
        datagram.recv(&mut buffer).is_err(),
        "a datagram reached the socket"
    );
}

/// `text` as one single-quoted shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
