#![no_main]
//! Fuzz target `api`: see shaledb_testkit::fuzz::api.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shaledb_testkit::fuzz::api(data);
});
