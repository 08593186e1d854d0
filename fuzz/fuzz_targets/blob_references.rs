#![no_main]
//! Fuzz target `blob_references`: see shaledb_testkit::fuzz::blob_references.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shaledb_testkit::fuzz::blob_references(data);
});
