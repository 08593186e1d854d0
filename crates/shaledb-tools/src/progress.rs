//! A spinner on stderr for commands that work a while without printing (verify, compact,
//! checkpoint), shown only when both stdout and stderr are terminals: never in pipes, files
//! or tests.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// A running spinner; cleared when dropped.
pub(crate) struct Spinner(ProgressBar);

impl Spinner {
    /// Starts a spinner saying `message`.
    pub(crate) fn start(message: &str) -> Spinner {
        let on_terminal = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        let target = if on_terminal {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(message.to_string());
        if on_terminal {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Spinner(bar)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
