//! `shale-bench`: db_bench-compatible benchmarks, YCSB and side-by-side comparisons.
//! All logic lives in the `shaledb_bench` library.

fn main() {
    eprintln!("shale-bench: work in progress");
    std::process::exit(2);
}
