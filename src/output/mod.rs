//! Every file and folder a binary writes, in one place: where it may go
//! (`check`), that no two of a binary's outputs are one file (`identity`), and
//! how it is made (`create`).
//!
//! The rules, for every binary and every output flag:
//! - checked before anything is measured or created, one usage line per mistake
//!   (exit 2): not a folder, FIFO or device; never a symbolic link; in a folder
//!   this process can create files in (tried with a temporary file, which root
//!   passes access(2) on and still cannot write: sysfs, a read-only mount);
//!   and distinct, by real identity, from the binary's other outputs;
//! - a file streamed row by row (`--csv`, `--counters`) is created with
//!   O_EXCL|O_NOFOLLOW, or reopened with O_NOFOLLOW (`--append`, a file its last
//!   run left without rows), so every finished row stays where it was written;
//! - a file written whole (charts, histograms, doctor's findings, the rack report,
//!   the first `-J` document) goes to a temporary file of unpredictable name in
//!   its folder (created with O_EXCL, by the `tempfile` crate) and is renamed into
//!   place only when complete: a full disk or a kill leaves the old file or none,
//!   never a partial one (a process killed outright may leave the hidden
//!   `.NAME.XXXXXX.tmp`, never a partial NAME);
//! - the folder the user names is followed as typed (a link there is the user's);
//!   nothing inside it is: a folder this process makes in it (`--plot`/`--hist`'s
//!   `<run_id>`) is made with mkdir and must be a real folder.

pub mod check;
pub mod create;
pub mod identity;
pub mod path;

pub use check::{
    check_file, check_folder, check_new_folder, csv_flag, Existing, FileFlag, COUNTERS_FLAG,
};
pub use create::{
    create_new, create_new_folder, create_subfolder, open_existing, write_whole, Replace, WholeFile,
};
pub use identity::Outputs;
pub use path::{file_kind, heatmap_of};
