//! The terminal's raw mode and alternate screen, restored on every way out: a guard whose
//! `Drop` restores, and a panic hook that restores before the panic message is printed.

use crossterm::cursor::Show;
use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use std::io::{self, stdout};

/// Restores the terminal when dropped, whichever way the inspector ends.
pub struct TerminalGuard {
    mouse: bool,
}

impl TerminalGuard {
    pub fn enter(mouse: bool) -> io::Result<Self> {
        install_panic_hook(mouse);
        enable_raw_mode()?;
        let guard = Self { mouse };
        execute!(stdout(), EnterAlternateScreen)?;
        if mouse {
            execute!(stdout(), EnableMouseCapture)?;
        }
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore(self.mouse);
    }
}

/// Best effort: each step is tried even if an earlier one failed.
pub fn restore(mouse: bool) {
    if mouse {
        let _ = execute!(stdout(), DisableMouseCapture);
    }
    let _ = execute!(stdout(), LeaveAlternateScreen, Show);
    let _ = disable_raw_mode();
}

fn install_panic_hook(mouse: bool) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore(mouse);
        tracing::error!(%info, "panic");
        previous(info);
    }));
}
