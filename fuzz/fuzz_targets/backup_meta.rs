#![no_main]
//! Fuzz target `backup_meta`: see shaledb_testkit::fuzz::backup_meta.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shaledb_testkit::fuzz::backup_meta(data);
});
