//! Rebuilds the crate when the control UI's built files change (they are
//! embedded with `include_dir!`, which cargo cannot track by itself).

fn main() {
    println!("cargo:rerun-if-changed=../frontend/build");
}
