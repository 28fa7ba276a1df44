//! The `compactd` binary: parses arguments and hands over to the library.

use std::io::Write;
use std::process::ExitCode;

/// mimalloc instead of the system allocator: reading a session allocates a string per text field,
/// and with glibc malloc that was about 15% of planning a 20 MB session (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = compactd::cli::Cli::from_args(std::env::args_os());
    // Buffered here, and written through the file descriptor rather than `Stdout`: `Stdout` is
    // line-buffered, so it searched every small write of a plan's multi-megabyte JSON for a
    // newline (~15 % of planning a 20 MB session) and, behind a buffer, still searched every
    // large write whole — the escaped conversation, which holds none (BENCHMARKS.md).
    let mut out = std::io::BufWriter::with_capacity(1 << 16, standard_output());
    let result = compactd::cli::run(cli, &mut out).and_then(|()| {
        out.flush()
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

/// Standard output's file descriptor as a file (a duplicate of it), or `Stdout` where there is
/// none to duplicate.
fn standard_output() -> Box<dyn Write> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        if let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() {
            return Box::new(std::fs::File::from(fd));
        }
    }
    Box::new(std::io::stdout())
}
