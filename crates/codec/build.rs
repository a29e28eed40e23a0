//! Generates libvpx bindings with bindgen and links libvpx found by pkg-config.
use std::path::PathBuf;

fn main() {
    let lib = pkg_config::Config::new()
        .atleast_version("1.8")
        .probe("vpx")
        .expect("libvpx not found by pkg-config: install libvpx-dev");
    let mut b = bindgen::Builder::default()
        .header_contents(
            "vpx_wrapper.h",
            "#include <vpx/vpx_encoder.h>\n#include <vpx/vpx_decoder.h>\n\
             #include <vpx/vp8cx.h>\n#include <vpx/vp8dx.h>\n",
        )
        .allowlist_function("vpx_.*")
        .allowlist_type("vpx_.*|vp8.*|vp9.*|VP8.*|VP9.*")
        .allowlist_var("VPX_.*|VP8_.*|VP9_.*")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for p in &lib.include_paths {
        b = b.clang_arg(format!("-I{}", p.display()));
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("vpx_bindings.rs");
    b.generate()
        .expect("bindgen over libvpx headers failed (is libclang-dev installed?)")
        .write_to_file(out)
        .expect("write bindings");
}
