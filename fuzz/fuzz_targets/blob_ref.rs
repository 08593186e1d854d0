#![no_main]
//! Fuzz target `blob_ref`: see shaledb_testkit::fuzz::blob_ref.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shaledb_testkit::fuzz::blob_ref(data);
});
