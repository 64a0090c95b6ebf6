//! The processes running on this machine, as `/proc` lists them.

/// Live processes (not zombies) whose command line is exactly `argv`.
pub fn running(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    live(|cmdline| cmdline == wanted)
}

/// Live processes (not zombies) with `part` anywhere in their command line.
pub fn running_with(part: &str) -> Vec<u32> {
    live(|cmdline| cmdline.windows(part.len()).any(|w| w == part.as_bytes()))
}

fn live(matches: impl Fn(&[u8]) -> bool) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rfind(')').is_some_and(|i| stat[i + 2..].starts_with('Z'));
        if matches(&cmdline) && !zombie {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` is a live process (not a zombie).
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')').is_some_and(|i| !stat[i + 2..].starts_with('Z'))
}

/// Waits up to `timeout` until `find` lists no process; otherwise kills
/// those still listed (so a failure leaves nothing behind) and fails,
/// naming them and `what` they outlived.
pub async fn assert_all_end(timeout: std::time::Duration, what: &str, find: impl Fn() -> Vec<u32>) {
    let ended = super::poll_until(timeout, async || find().is_empty().then_some(())).await;
    let left = if ended.is_some() { Vec::new() } else { find() };
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(left.is_empty(), "processes outlived {what}: {left:?}");
}
