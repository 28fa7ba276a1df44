//! The `compactd` binary: parses arguments and hands over to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = compactd::cli::Cli::parse();
    let stdout = std::io::stdout();
    match compactd::cli::run(cli, &mut stdout.lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compactd: {e}");
            ExitCode::from(2)
        }
    }
}
