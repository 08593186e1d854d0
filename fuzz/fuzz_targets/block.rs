#![no_main]
//! Fuzz target `block`: see shaledb_testkit::fuzz::block.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shaledb_testkit::fuzz::block(data);
});
