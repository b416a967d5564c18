//! `warden`: the composition root. It parses arguments, loads configuration, wires the layers
//! together and prints results.
//!
//! **Invariant:** exit codes are 0 (ok), 1 (a check failed), 2 (usage or input error).
//!
//! **Must never:** hold logic a library user would need; that lives in the library crates.
#![forbid(unsafe_code)]

use clap::Parser;

/// Warden: governs what AI agents do.
#[derive(Debug, Parser)]
#[command(name = "warden", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
