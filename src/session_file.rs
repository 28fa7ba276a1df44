//! Writing a user's session file in place (`compactd compact FILE --write`) without ever leaving
//! it half-written, and without the two classic mistakes of a rewrite through a temporary file:
//! widening the file's permissions (a `0600` session holds the user's code and output) and
//! following a symlink someone planted at a predictable temporary name.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Appends `line` and a newline to `file`, adding the newline a last line may lack; synced.
pub(crate) fn append_line(file: &Path, line: &str) -> io::Result<()> {
    let existing_ends_open = {
        let metadata = std::fs::metadata(file)?;
        metadata.len() > 0 && !last_byte_is_newline(file)?
    };
    let mut handle = OpenOptions::new().append(true).open(file)?;
    let mut text = String::with_capacity(line.len() + 2);
    if existing_ends_open {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    handle.write_all(text.as_bytes())?;
    handle.sync_all()
}

fn last_byte_is_newline(file: &Path) -> io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut handle = File::open(file)?;
    handle.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    handle.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// Replaces `file` with `contents` atomically: a new file created exclusively (never an existing
/// path, never through a symlink) under a random name in the same directory, with the original's
/// permissions, written and synced, renamed over the original, and the directory synced so the
/// rename survives a crash. On any failure the original is untouched and the new file removed.
pub(crate) fn replace(file: &Path, contents: &[u8]) -> io::Result<()> {
    let original = std::fs::metadata(file)?;
    let directory = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = file
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?
        .to_string_lossy()
        .into_owned();
    let (temporary, mut handle) = create_exclusive(&directory, &name)?;
    let written = (|| {
        handle.set_permissions(original.permissions())?;
        handle.write_all(contents)?;
        handle.sync_all()?;
        drop(handle);
        std::fs::rename(&temporary, file)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    sync_directory(&directory)
}

/// A new file `.NAME.RANDOM.tmp` in `directory`, created with `O_EXCL` (so a planted file or
/// symlink at that name is an error, not a target) and, on Unix, mode 0600 until the original's
/// permissions are copied onto it.
fn create_exclusive(directory: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    for _ in 0..16 {
        let suffix = crate::access::random_id();
        let path = directory.join(format!(".{name}.{suffix}.tmp"));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary name next to the file",
    ))
}

#[cfg(unix)]
fn sync_directory(directory: &Path) -> io::Result<()> {
    File::open(directory)?.sync_all()
}

#[cfg(not(unix))]
fn sync_directory(_: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "compactd-files-{name}-{}",
            crate::access::random_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_ignores_planted_links() {
        let dir = scratch("replace");
        let file = dir.join("s.jsonl");
        std::fs::write(&file, "old\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        // What an attacker would plant: the old fixed name, pointing at a file of theirs.
        let victim = dir.join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("s.jsonl.compactd-tmp")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("s.jsonl.jsonl.compactd-tmp")).unwrap();

        replace(&file, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        // Nothing left behind but what was there.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "s.jsonl",
                "s.jsonl.compactd-tmp",
                "s.jsonl.jsonl.compactd-tmp",
                "victim"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn appending_adds_a_missing_newline_first() {
        let dir = scratch("append");
        let file = dir.join("s.jsonl");
        std::fs::write(&file, "a").unwrap();
        append_line(&file, "b").unwrap();
        append_line(&file, "c").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a\nb\nc\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
