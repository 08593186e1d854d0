//! placeholder
/// x
pub fn main_with_args<S: AsRef<str>>(_a: &[S]) -> Result<(), String> { Err("todo".into()) }
