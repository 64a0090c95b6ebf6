//! Rebuilds the crate when the control UI's built files change (they are
//! embedded with `include_dir!`, which cargo cannot track by itself), and
//! gives the release binary's link its memory layout (see [`link_layout`]).

fn main() {
    println!("cargo:rerun-if-changed=../frontend/build");
    link_layout();
}

/// For release builds of the `onyx` binary on x86_64 Linux (linked by LLD,
/// Rust's default linker there):
///
/// - `link/onyx.order` (made by `bench/link_order.sh`) lists the functions
///   the gateway runs, hottest first; the linker puts them together at the
///   front of `.text`, so the code a running gateway touches is a few MB of
///   contiguous pages instead of runs spread over the whole ~100 MB. The link
///   goes through `link/cc-with-order` (`.cargo/config.toml`), which first
///   fits the file to the names this build gave ThinLTO's shared functions.
/// - Relative relocations are packed (`DT_RELR`, glibc 2.36+): the table the
///   loader reads at every start shrinks from ~4 MB to a few KB.
///
/// `ONYX_LINK_LAYOUT=off` leaves both out (another linker, an older glibc).
fn link_layout() {
    // Not `rerun-if-changed` on the order file: that would rebuild the whole
    // crate for a new link order. After `bench/link_order.sh`, touch
    // src/main.rs to relink; any code change relinks too.
    println!("cargo:rerun-if-env-changed=ONYX_LINK_LAYOUT");
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let wanted = env("PROFILE") == "release"
        && env("CARGO_CFG_TARGET_OS") == "linux"
        && env("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && env("CARGO_CFG_TARGET_ENV") == "gnu"
        && env("ONYX_LINK_LAYOUT") != "off";
    if !wanted {
        return;
    }
    println!("cargo:rustc-link-arg-bin=onyx=-Wl,-z,pack-relative-relocs");
    let order = std::path::Path::new(&env("CARGO_MANIFEST_DIR")).join("link/onyx.order");
    if order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=onyx=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        // Functions renamed or gone since the file was made are skipped, quietly.
        println!("cargo:rustc-link-arg-bin=onyx=-Wl,--no-warn-symbol-ordering");
    }
}
