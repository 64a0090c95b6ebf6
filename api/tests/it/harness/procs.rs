//! The processes running on this machine, as `/proc` lists them.

/// Live processes (not zombies) whose command line is exactly `argv`.
pub fn running(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rfind(')').is_some_and(|i| stat[i + 2..].starts_with('Z'));
        if cmdline == wanted && !zombie {
            found.push(pid);
        }
    }
    found
}
