//! `api/link/cc-with-order`, the compiler driver the release binary is linked
//! through (`.cargo/config.toml`): it fits the function order to the names
//! this build gave ThinLTO's shared functions. Linked for real, as rustc
//! links: `cc` with the toolchain's LLD, on a small C program whose functions
//! carry the `.llvm.<module hash>` names ThinLTO gives.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One module's two shared functions now named after module 222 (the order
/// knew that module as 111); `hot_b` also has a copy in module 333, so only
/// the module's new name tells which copy the order meant.
const PROGRAM: &str = r#"
int hot_a(void) __asm__("onyx_hot_a.llvm.222");
int hot_a(void) { return 1; }
int hot_b(void) __asm__("onyx_hot_b.llvm.222");
int hot_b(void) { return 2; }
int hot_b_copy(void) __asm__("onyx_hot_b.llvm.333");
int hot_b_copy(void) { return 3; }
int cold(void) { return 4; }
int kept(void) { return 5; }
int main(void) { return hot_a() + hot_b() + hot_b_copy() + cold() + kept() - 15; }
"#;

fn wrapper() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("link/cc-with-order")
}

/// The directory of the toolchain's `ld.lld` for `cc -fuse-ld=lld`, where
/// rustc points `cc` too.
fn toolchain_lld_dir() -> PathBuf {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc --print sysroot");
    let sysroot = String::from_utf8(sysroot.stdout).unwrap();
    Path::new(sysroot.trim()).join("lib/rustlib/x86_64-unknown-linux-gnu/bin/gcc-ld")
}

/// Links `program.c` through the wrapper with `order` as the function order,
/// as rustc links the release binary; returns the output's path.
fn link(dir: &Path, order: &str) -> PathBuf {
    std::fs::write(dir.join("program.c"), PROGRAM).unwrap();
    std::fs::write(dir.join("wanted.order"), order).unwrap();
    let out = dir.join("program");
    let status = Command::new(wrapper())
        .current_dir(dir)
        .arg("program.c")
        .arg(format!("-B{}", toolchain_lld_dir().display()))
        .args(["-fuse-ld=lld", "-ffunction-sections", "-o"])
        .arg(&out)
        .arg("-Wl,--symbol-ordering-file=wanted.order")
        .arg("-Wl,--no-warn-symbol-ordering")
        .status()
        .expect("run cc-with-order");
    assert!(status.success(), "the link failed: {status}");
    assert_eq!(Command::new(&out).status().unwrap().code(), Some(0));
    out
}

/// The binary's function names in address order.
fn laid_out(binary: &Path) -> Vec<String> {
    let nm = Command::new("nm")
        .args(["--defined-only", "--numeric-sort"])
        .arg(binary)
        .output()
        .expect("nm");
    String::from_utf8(nm.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2).map(str::to_owned))
        .collect()
}

fn position(names: &[String], name: &str) -> usize {
    names
        .iter()
        .position(|n| n == name)
        .unwrap_or_else(|| panic!("{name} is not in the binary: {names:?}"))
}

#[test]
fn an_order_from_an_earlier_build_is_fitted_to_this_builds_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = link(
        dir.path(),
        "kept\nonyx_hot_b.llvm.111\nonyx_hot_a.llvm.111\ngone.llvm.111\ncold\n",
    );

    let fitted = std::fs::read_to_string(dir.path().join("program.order")).unwrap();
    assert_eq!(
        fitted.lines().collect::<Vec<_>>(),
        [
            "kept",
            "onyx_hot_b.llvm.222",
            "onyx_hot_a.llvm.222",
            "gone.llvm.111",
            "cold"
        ],
        "hot_a has one copy, so module 111 is 222 now; that picks hot_b's copy"
    );
    // The second link used the fitted order: the functions sit in its order,
    // and the copy it did not name comes after them.
    let names = laid_out(&out);
    let at: Vec<usize> = ["kept", "onyx_hot_b.llvm.222", "onyx_hot_a.llvm.222", "cold"]
        .iter()
        .map(|name| position(&names, name))
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    assert!(position(&names, "onyx_hot_b.llvm.333") > at[3], "{names:?}");
}

#[test]
fn an_order_that_fits_is_kept_and_a_link_without_one_is_passed_through() {
    let dir = tempfile::tempdir().unwrap();
    let out = link(dir.path(), "cold\nonyx_hot_a.llvm.222\n");
    let fitted = std::fs::read_to_string(dir.path().join("program.order")).unwrap();
    assert_eq!(fitted, "cold\nonyx_hot_a.llvm.222\n");
    let names = laid_out(&out);
    assert!(position(&names, "cold") < position(&names, "onyx_hot_a.llvm.222"));

    let plain = dir.path().join("plain");
    let status = Command::new(wrapper())
        .current_dir(dir.path())
        .args(["program.c", "-o"])
        .arg(&plain)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(plain.is_file());
    assert!(!dir.path().join("plain.order").exists());
}
