//! include/nvdepot.h is what cbindgen makes of the source: regenerate it
//! with `NVDEPOT_BLESS=1 cargo test -p nvdepot-c --test header`.

use std::path::Path;

#[test]
fn the_checked_in_header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut generated);
    let path = dir.join("include/nvdepot.h");
    if std::env::var_os("NVDEPOT_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/nvdepot.h is not what the source declares; regenerate it: \
         NVDEPOT_BLESS=1 cargo test -p nvdepot-c --test header"
    );
}
