//! The `compactd` binary: parses arguments and hands over to the library.

use std::process::ExitCode;

/// mimalloc instead of the system allocator: reading a session allocates a string per text field,
/// and with glibc malloc that was about 15% of planning a 20 MB session (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = compactd::cli::Cli::from_args(std::env::args_os());
    // Buffered: stdout alone is line-buffered, which searched every small write of a plan's
    // multi-megabyte JSON for a newline (~15 % of planning a 20 MB session, BENCHMARKS.md).
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let result = compactd::cli::run(cli, &mut out).and_then(|()| {
        std::io::Write::flush(&mut out)
            .map_err(|e| compactd::cli::CliError::new(format!("cannot write output: {e}")))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compactd: {e}");
            ExitCode::from(2)
        }
    }
}
