/* bare-loop: one MPI collective in a loop with no harness around it, the limit
 * any benchmark of that call can reach. Built and run by scripts/compare-osu.sh.
 *
 *   mpirun -np N bare-loop CALL TYPE BYTES[,BYTES...] ITERS WARMUP MODE
 *
 * CALL    allreduce bcast reduce reduce_scatter allgather alltoall gather scatter
 * TYPE    float or char
 * BYTES   the collective's size as nccl-tests and fabricbench count it (the whole
 *         result; per rank BYTES/N for the chunked collectives)
 * MODE    b2b: calls back to back, the loop timed whole (nccl-tests' method);
 *         barrier: each call timed alone, a barrier after it outside the timer
 *         (OSU's method)
 *
 * The call, count, datatype, root (0) and buffers are those of fabricbench's mpi
 * backend: page-aligned send and receive buffers, out of place (for bcast the
 * receive buffer), sized as nccl-tests sizes them for the largest size
 * (allgather's and gather's send buffer one rank's chunk, reduce_scatter's and
 * scatter's receive buffer one chunk, the rest the whole) and zero, as a run with
 * -c 0 leaves them. Prints the mean over ranks of each rank's microseconds per
 * call, as fabricbench's -a 1 and OSU do: one line "BYTES US" per size. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void)
{
    fprintf(stderr, "usage: bare-loop allreduce|bcast|reduce|reduce_scatter|allgather|alltoall|gather|scatter float|char BYTES ITERS WARMUP b2b|barrier\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc != 7) usage();
    const char *call = argv[1];
    MPI_Datatype dt = strcmp(argv[2], "float") == 0 ? MPI_FLOAT : MPI_CHAR;
    if (dt == MPI_CHAR && strcmp(argv[2], "char") != 0) usage();
    size_t elt = dt == MPI_FLOAT ? 4 : 1;
    long iters = atol(argv[4]), warmup = atol(argv[5]);
    int barrier = strcmp(argv[6], "barrier") == 0;
    if (!barrier && strcmp(argv[6], "b2b") != 0) usage();
    if (iters < 1 || warmup < 0) usage();
    size_t sizes[64], nsizes = 0, largest = 0;
    for (char *tok = strtok(argv[3], ","); tok && nsizes < 64; tok = strtok(NULL, ",")) {
        sizes[nsizes] = strtoull(tok, NULL, 10);
        if (sizes[nsizes] < elt) usage();
        if (sizes[nsizes] > largest) largest = sizes[nsizes];
        nsizes++;
    }
    if (nsizes == 0) usage();

    int which;
    const char *calls[] = {"allreduce", "bcast", "reduce", "reduce_scatter",
                           "allgather", "alltoall", "gather", "scatter"};
    for (which = 0; which < 8 && strcmp(call, calls[which]) != 0; which++) {}
    if (which == 8) usage();
    int chunked = which >= 3;
    /* reduce_scatter and scatter receive one chunk, allgather and gather send one */
    size_t send_bytes = which == 4 || which == 6 ? largest / n : largest;
    size_t recv_bytes = which == 3 || which == 7 ? largest / n : largest;
    void *send = NULL, *recv = NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (posix_memalign(&send, page, send_bytes) || posix_memalign(&recv, page, recv_bytes)) {
        fprintf(stderr, "bare-loop: cannot allocate %zu bytes\n", largest);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(send, 0, send_bytes);
    memset(recv, 0, recv_bytes);
    int *counts = malloc(sizeof(int) * n);

    for (size_t s = 0; s < nsizes; s++) {
        size_t total = sizes[s] / elt;   /* elements of the whole result */
        int count = (int)(chunked ? total / n : total);
        for (int r = 0; r < n; r++) counts[r] = count;
        double timed = 0, t0 = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < warmup + iters; i++) {
            if (i == warmup) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            double start = barrier ? MPI_Wtime() : 0;
            switch (which) {
            case 0: MPI_Allreduce(send, recv, count, dt, MPI_SUM, MPI_COMM_WORLD); break;
            case 1: MPI_Bcast(recv, count, dt, 0, MPI_COMM_WORLD); break;
            case 2: MPI_Reduce(send, recv, count, dt, MPI_SUM, 0, MPI_COMM_WORLD); break;
            /* equal counts, as fabricbench and OSU call it */
            case 3: MPI_Reduce_scatter(send, recv, counts, dt, MPI_SUM, MPI_COMM_WORLD); break;
            case 4: MPI_Allgather(send, count, dt, recv, count, dt, MPI_COMM_WORLD); break;
            case 5: MPI_Alltoall(send, count, dt, recv, count, dt, MPI_COMM_WORLD); break;
            case 6: MPI_Gather(send, count, dt, recv, count, dt, 0, MPI_COMM_WORLD); break;
            case 7: MPI_Scatter(send, count, dt, recv, count, dt, 0, MPI_COMM_WORLD); break;
            }
            if (barrier) {
                if (i >= warmup) timed += MPI_Wtime() - start;
                MPI_Barrier(MPI_COMM_WORLD);
            }
        }
        if (!barrier) timed = MPI_Wtime() - t0;
        double us = timed * 1e6 / iters, sum = 0;
        MPI_Reduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("%zu %.4f\n", sizes[s], sum / n);
    }
    free(counts);
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
