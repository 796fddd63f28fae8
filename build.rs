// MPI_IN_PLACE is a C macro with a different value in every MPI (Open MPI: (void*)1,
// MPICH: (void*)-1) and rsmpi does not export it, so a two-line C shim reads it.
fn main() {
    println!("cargo:rerun-if-changed=src/backend/mpi_shim.c");
    let lib = build_probe_mpi::probe().unwrap_or_else(|errs| {
        panic!("cannot find MPI (install openmpi-bin libopenmpi-dev): {errs:?}")
    });
    let mut build = cc::Build::new();
    build.file("src/backend/mpi_shim.c");
    for dir in &lib.include_paths {
        build.include(dir);
    }
    build.compile("fabricbench_mpi_shim");
}
