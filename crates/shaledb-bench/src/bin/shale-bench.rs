//! `shale-bench`: db_bench-compatible benchmarks, YCSB and side-by-side comparisons.
//! All logic lives in the `shaledb_bench` library.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(shaledb_bench::cli::main(&args));
}
