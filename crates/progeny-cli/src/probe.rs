//! `progeny probe`: which kernel features this process can use for spawning.

use clap::Args;

use crate::CliResult;

/// Options of `progeny probe`.
#[derive(Debug, Args)]
pub(crate) struct ProbeArgs {}

/// Prints one line per feature: name, yes/no, and how that was learned or why not.
pub(crate) fn run(_args: ProbeArgs) -> CliResult {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    write!(out, "{}", progeny::probe())?;
    Ok(())
}
