//! Command dispatch for the `shale-bench` binary.

use crate::dbbench;

/// Runs `shale-bench` with `args` (without the program name); returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let res = match args.first().map(|s| s.as_str()) {
        Some("-h") | Some("--help") | Some("help") => {
            print!("{}", dbbench::flags::help());
            Ok(())
        }
        Some("ycsb") => crate::ycsb::main_with_args(&args[1..]).map(|_| ()),
        Some("compare") => crate::compare::main_with_args(&args[1..]),
        Some("tpch") => crate::tpch::main_with_args(&args[1..]).map(|_| ()),
        // No arguments: the README's default suite, sized to finish in about a minute on a
        // shared 2-core machine (db_bench's own default --num is 1,000,000).
        None => dbbench::main_with_args(&[
            format!("--benchmarks={}", dbbench::flags::DEFAULT_BENCHMARKS),
            "--num=300000".to_string(),
        ])
        .map(|_| ()),
        _ => dbbench::main_with_args(args).map(|_| ()),
    };
    match res {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("shale-bench: {e}");
            1
        }
    }
}
