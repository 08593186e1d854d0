//! Links the peer engines' system libraries (Debian librocksdb-dev, libleveldb-dev,
//! libwiredtiger-dev) and compiles the WiredTiger C shim, only with the `peers` feature, so the
//! default build needs no system library.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc/wt_shim.c");
    if std::env::var_os("CARGO_FEATURE_PEERS").is_none() {
        return;
    }
    peers::build();
}

#[cfg(feature = "peers")]
mod peers {
    pub fn build() {
        cc::Build::new()
            .file("csrc/wt_shim.c")
            .warnings(true)
            .compile("shaledb_wt_shim");
        println!("cargo:rustc-link-lib=dylib=wiredtiger");
        println!("cargo:rustc-link-lib=dylib=rocksdb");
        println!("cargo:rustc-link-lib=dylib=leveldb");
    }
}

#[cfg(not(feature = "peers"))]
mod peers {
    pub fn build() {}
}
