#![no_main]
//! Fuzz target `sst`: see shaledb_testkit::fuzz::sst.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shaledb_testkit::fuzz::sst(data);
});
