/* Preprocessed by build.rs only: the MPI whose mpi.h this build includes. */
#include <mpi.h>
#if defined(OMPI_MAJOR_VERSION)
fabricbench_mpi "Open MPI" OMPI_MAJOR_VERSION . OMPI_MINOR_VERSION . OMPI_RELEASE_VERSION
#elif defined(I_MPI_VERSION)
fabricbench_mpi "Intel MPI" I_MPI_VERSION
#elif defined(MVAPICH2_VERSION)
fabricbench_mpi "MVAPICH2" MVAPICH2_VERSION
#elif defined(MVAPICH_VERSION)
fabricbench_mpi "MVAPICH" MVAPICH_VERSION
#elif defined(MPICH_VERSION)
fabricbench_mpi "MPICH" MPICH_VERSION
#else
fabricbench_mpi "MPI standard" MPI_VERSION . MPI_SUBVERSION
#endif
