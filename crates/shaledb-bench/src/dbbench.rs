//! The db_bench-compatible benchmark: flags, key/value generation, runner and report.

pub mod flags;
pub mod keys;
pub mod live;
pub mod report;
pub mod runner;

pub use flags::Flags;
pub use report::BenchResult;
pub use runner::Runner;

/// Runs db_bench mode with these arguments (no subcommand); returns the results.
pub fn main_with_args<S: AsRef<str>>(args: &[S]) -> Result<Vec<BenchResult>, String> {
    let flags = Flags::parse(args)?;
    let mut r = Runner::new(flags)?;
    r.run_all()
}
