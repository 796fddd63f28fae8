//! A tool that starts on a host without any MPI library (`doctor` on one node)
//! and its twin built with MPI (`doctor-mpi`, the same code gathering over MPI):
//! started by a launcher, the tool becomes its twin in the same process, with the
//! same arguments, so `mpirun doctor` works as it did while `doctor` alone
//! never loads libmpi.

use super::ExitStatus;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

/// Replaces this process with `twin`, found beside this executable, keeping argv
/// (argv[0] too: messages name the binary the user typed). Returns only when it
/// cannot, after one line saying why.
pub fn become_twin(program: &str, twin: &str) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!(
                "{program}: error: cannot find this executable to start {twin} beside it: {e}"
            );
            return ExitStatus::Failed.into();
        }
    };
    let path = exe.with_file_name(twin);
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| program.into());
    let error = Command::new(&path).arg0(arg0).args(args).exec();
    eprintln!(
        "{program}: error: started by an MPI launcher, it runs as {twin}, which gathers over MPI, \
         but {} cannot start: {error}; install {twin} in the same folder as {program}",
        path.display()
    );
    ExitStatus::Failed.into()
}
