//! Issue 37, point 1: the file tools and a link swapped in after the check.
//! As `nobody`, an `exec` call runs a small C program that swaps a workspace
//! file with a link to `{dataDir}/master.key` (`renameat2(RENAME_EXCHANGE)`)
//! in a tight loop, while a second request's `fs_read` reads that file 200
//! times. Before the file tools opened paths with openat2 this hit (the
//! binary of main at 5d6304a returned the key in 1, 4, 9 and 14 of 100
//! reads in four runs); now every read returns the decoy or refuses the
//! link, and never the key.

use super::*;
use crate::harness::unprivileged::RunAs;

const SWAPPER: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
/* swap FILE LINK TARGET: LINK -> TARGET, exchanged with FILE until ./stop exists (60 s at most). */
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    unlink(argv[2]);
    if (symlink(argv[3], argv[2]) != 0) { perror("symlink"); return 1; }
    close(open("running", O_CREAT | O_WRONLY, 0644));
    time_t end = time(NULL) + 60;
    unsigned long swaps = 0;
    for (;;) {
        if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) != 0) {
            perror("renameat2");
            return 1;
        }
        if ((++swaps & 0x3fff) == 0 && (access("stop", F_OK) == 0 || time(NULL) > end)) break;
    }
    printf("swapped %lu times\n", swaps);
    return 0;
}
"#;

const DECOY: &str = "decoy-content";
const READS_PER_STEP: usize = 25;
const STEPS: usize = 8;

/// Compiles the swapper into `dir`.
fn compile_swapper(dir: &std::path::Path) -> std::path::PathBuf {
    let source = dir.join("swap.c");
    std::fs::write(&source, SWAPPER).unwrap();
    let binary = dir.join("swap");
    let out = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    binary
}

#[tokio::test]
async fn fs_read_never_follows_a_link_swapped_in_by_a_background_process() {
    let fakes = Fakes::start().await;
    let config = exec_config(
        &fakes,
        json!({ "timeoutSeconds": 120, "limits": { "cpuSeconds": 100 } }),
    );
    let onyx = Onyx::start_as(RunAs::Nobody, Some(&config), &[]).await;
    let key = std::fs::read_to_string(onyx.dir.path().join("data/master.key")).unwrap();
    let key = key.trim();
    assert!(key.len() >= 32, "the master key file: {key:?}");

    let out = exec(&onyx, &format!("echo {DECOY} > target.txt && echo ready")).await;
    assert!(out.contains("ready"), "{out}");
    let workspace = onyx.workspace("main");
    let build = tempfile::tempdir().unwrap();
    let swapper = compile_swapper(build.path());
    std::fs::copy(&swapper, workspace.join("swap")).unwrap();

    // Request A: the swapper, started by exec, runs until ./stop appears.
    let master_key = onyx.dir.path().join("data/master.key");
    let swap_command = format!("./swap target.txt link {}", master_key.display());
    let script = format!("script: exec {} ; answer", json!({ "command": swap_command }));
    let body = json!({"model": "onyx:main", "messages": [{"role": "user", "content": script}]});
    let swapping = tokio::spawn(onyx.post("/v1/chat/completions").json(&body).send());
    wait_until(secs(30), "the swapper runs", async || {
        workspace.join("running").exists().then_some(())
    })
    .await;

    // Request B: 200 reads of the file being swapped.
    let read = json!({ "path": "target.txt" }).to_string();
    let step = vec![format!("fs_read {read}"); READS_PER_STEP].join(" & ");
    let script = format!("script: {} ; answer", vec![step; STEPS].join(" ; "));
    let answer = onyx.agent_answer("main", &script).await;

    std::fs::write(workspace.join("stop"), "").unwrap();
    let swapped = swapping.await.unwrap().unwrap();
    let swapped: Value = swapped.json().await.unwrap();
    let swapped = swapped["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        swapped.contains("exit code 0") && swapped.contains("swapped"),
        "the swapper ran to the end: {swapped}"
    );

    let results: Vec<&str> = answer
        .strip_prefix("script done: ")
        .unwrap_or_else(|| panic!("{answer}"))
        .split(" | ")
        .collect();
    assert_eq!(results.len(), READS_PER_STEP * STEPS, "{answer}");
    let decoys = results.iter().filter(|r| r.contains(DECOY)).count();
    let refused = results.iter().filter(|r| r.contains("symbolic link")).count();
    let hits = results.iter().filter(|r| r.contains(key)).count();
    assert_eq!(
        hits,
        0,
        "fs_read returned the master key in {hits} of {} reads (decoy {decoys}, refused {refused})",
        results.len()
    );
    let others: Vec<&&str> = results
        .iter()
        .filter(|r| !r.contains(DECOY) && !r.contains("symbolic link"))
        .collect();
    assert!(
        others.is_empty(),
        "reads that were neither the decoy nor refused: {others:?}"
    );
    // The race was really run: the link was there for some reads, the file for others.
    assert!(decoys > 0 && refused > 0, "decoys {decoys}, refused {refused}");
}
