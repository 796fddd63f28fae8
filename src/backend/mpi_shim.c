#include <mpi.h>

/* MPI_IN_PLACE as a value Rust can read. */
void *fabricbench_mpi_in_place(void) { return MPI_IN_PLACE; }
