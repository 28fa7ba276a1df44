//! Reading the session file a command names: large files are mapped, not copied.

use std::io::Read;
use std::path::Path;

/// The bytes of `file`, or of standard input for `-`.
#[allow(unsafe_code)]
pub(super) fn read(file: &Path) -> Result<bytes::Bytes, String> {
    let failed = |e: std::io::Error| format!("cannot read {}: {e}", file.display());
    if file == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).map_err(failed)?;
        return Ok(bytes.into());
    }
    let mut opened = std::fs::File::open(file).map_err(failed)?;
    let metadata = opened.metadata().map_err(failed)?;
    if metadata.is_file() && metadata.len() >= MAP_AT_LEAST {
        // Mapped, not read: the file's pages are already in memory (the kernel's page cache),
        // and a copy is fresh memory that the kernel zeroes first — zeroing and copying were a
        // sixth of a profile of planning a 20 MB session, and mapping made its median 4–10 %
        // faster (BENCHMARKS.md). Populated up front, so that parsing does not stop at a page
        // fault every few pages.
        // SAFETY: the map is read-only and lives as long as the session read from it. A file
        // that another program truncates or rewrites while compactd reads it is the risk every
        // mapping reader takes (ripgrep maps too): agents append to their sessions, which
        // leaves the mapped bytes as they were.
        if let Ok(map) = unsafe { memmap2::MmapOptions::new().populate().map(&opened) } {
            return Ok(bytes::Bytes::from_owner(map));
        }
    }
    // The file already open, read whole (the length is only a capacity hint: it may grow).
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    opened.read_to_end(&mut bytes).map_err(failed)?;
    Ok(bytes.into())
}

/// Files smaller than this are read: mapping pays a few system calls that only a large file
/// earns back.
const MAP_AT_LEAST: u64 = 1 << 20;
