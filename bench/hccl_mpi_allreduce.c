/* OpenMPI's MPI_Allreduce (float sum, host memory) over the same sizes as
 * hccl_perf, printing the same columns (size, time us, algbw, busbw). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t minb = argc > 1 ? strtoull(argv[1], NULL, 0) : 8, maxb = argc > 2 ? strtoull(argv[2], NULL, 0) : 256u << 20;
  double factor = argc > 3 ? atof(argv[3]) : 8;
  float *s = malloc(maxb), *r = malloc(maxb);
  memset(s, 0, maxb);
  memset(r, 0, maxb);
  if (rank == 0) printf("# MPI_Allreduce float sum, %d ranks\n#%10s %10s %7s %7s\n", n, "size", "time(us)", "algbw", "busbw");
  for (size_t b = minb; b <= maxb; b = (size_t)(b * factor)) {
    int cnt = (int)(b / 4), iters = b <= (1 << 20) ? 200 : b <= (16 << 20) ? 20 : 5;
    for (int w = 0; w < 5; w++) MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int k = 0; k < iters; k++) MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters * 1e6, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf(" %10zu %10.2f %7.2f %7.2f\n", b, tmax, b / tmax / 1e3, b / tmax / 1e3 * 2 * (n - 1) / n);
    fflush(stdout);
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
