//! Compiles the C part of Tollgate: `long double` arithmetic for INCRBYFLOAT and
//! HINCRBYFLOAT (src/native/longdouble.c), which Rust cannot express.
fn main() {
    println!("cargo:rerun-if-changed=src/native/longdouble.c");
    // src/server/mod.rs asks whether tokio's unstable options are on (.cargo/config.toml).
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
    cc::Build::new()
        .file("src/native/longdouble.c")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("tollgate_native");
}
