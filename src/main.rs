//! The `compactd` binary: parses arguments and hands over to the library.

use std::process::ExitCode;

/// mimalloc instead of the system allocator: reading a session allocates a string per text field,
/// and with glibc malloc that was about 15% of planning a 20 MB session (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = compactd::cli::Cli::from_args(std::env::args_os());
    let stdout = std::io::stdout();
    match compactd::cli::run(cli, &mut stdout.lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compactd: {e}");
            ExitCode::from(2)
        }
    }
}
