#![no_main]
//! Fuzz target `wal`: see shaledb_testkit::fuzz::wal.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shaledb_testkit::fuzz::wal(data);
});
