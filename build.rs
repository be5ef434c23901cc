//! Nothing to build: the package has a build script only so that cargo takes
//! its `[build-dependencies]` (see `Cargo.toml`), which align the features
//! of the macros' dependencies with the Python wheel's build.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
