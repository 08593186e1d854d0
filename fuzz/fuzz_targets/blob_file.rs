#![no_main]
//! Fuzz target `blob_file`: see shaledb_testkit::fuzz::blob_file.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shaledb_testkit::fuzz::blob_file(data);
});
