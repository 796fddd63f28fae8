//! What the other files of `output` say about paths: their kind, their folder,
//! the all-pairs heatmap's name, and I/O errors without `tempfile`'s additions.

use std::path::{Path, PathBuf};

/// What a path other than a regular file is, for messages ("a directory", "a FIFO").
pub fn file_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    [
        (t.is_dir(), "a directory"),
        (t.is_symlink(), "a symbolic link"),
        (t.is_fifo(), "a FIFO"),
        (t.is_char_device(), "a character device"),
        (t.is_block_device(), "a block device"),
        (t.is_socket(), "a socket"),
    ]
    .into_iter()
    .find_map(|(is, kind)| is.then_some(kind))
    .or((!t.is_file()).then_some("not a regular file"))
}

/// The folder `path` goes in.
pub fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Where the all-pairs heatmap of the matrices in `csv` goes: beside it, as a PNG.
pub fn heatmap_of(csv: &Path) -> PathBuf {
    csv.with_extension("png")
}

/// The OS error alone, without the temporary path `tempfile` wraps it with
/// ("... at path \"/x/.tmpAb12\"", which hides the OS error's code):
/// messages name the user's path instead.
pub fn bare(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error().is_some() {
        return e;
    }
    match e.to_string().split_once(" at path ") {
        Some((os, _)) => std::io::Error::new(e.kind(), os.to_string()),
        None => e,
    }
}
