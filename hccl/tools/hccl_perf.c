/* hccl_perf: nccl-tests' all_reduce_perf & co. for HCCL.
 *
 *   mpirun -np 4 hccl_perf -t allreduce -b 8 -e 256M -f 2 -d float -o sum
 *
 * Prints nccl-tests' columns (size, count, type, redop, root, time, algbw,
 * busbw, #wrong) out of place and in place; every size is checked once with
 * data whose exact result is known. -m device puts the buffers on card 0
 * and runs on its stream. Without mpirun: HCCL_COMM_ID, HCCL_PERF_RANK and
 * HCCL_PERF_NRANKS. */
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hccl.h"
#include "hpu/clock.h"
#include "hpu/device.h"
#include "hpu/dtype.h"
#include "hpu/memory.h"
#include "hpu/stream.h"

static int rank, nranks, use_mpi;
static hcclComm_t comm;

static double now_us(void) { return (double)hpu_now_ns() / 1e3; }

/* Command-line values are checked: a typo must not silently run another
 * benchmark than the one asked for. */
static void bad_arg(const char *what, const char *val) {
  fprintf(stderr, "hccl_perf: bad %s '%s' (hccl_perf -h lists the options)\n", what, val);
  exit(2);
}

static size_t parse_size(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (e == s || v < 0) bad_arg("size", s);
  switch (*e) {
    case 'K': case 'k': v *= 1024; e++; break;
    case 'M': case 'm': v *= 1024 * 1024; e++; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; e++; break;
  }
  if (*e) bad_arg("size", s);
  return (size_t)v;
}

static int parse_int(const char *what, const char *s, long lo, long hi) {
  char *e;
  long v = strtol(s, &e, 10);
  if (e == s || *e || v < lo || v > hi) bad_arg(what, s);
  return (int)v;
}

static int parse_name(const char *what, const char *s, const char *const *names, int n) {
  for (int k = 0; k < n; k++)
    if (!strcmp(s, names[k])) return k;
  bad_arg(what, s);
  return -1;
}

static const char *type_names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
static const char *op_names[] = {"sum", "prod", "max", "min", "avg"};
static const char *mem_names[] = {"host", "device"};
static size_t type_size(int t) { return t <= 1 ? 1 : t == 6 || t == 9 ? 2 : t <= 3 || t == 7 ? 4 : 8; }

static void store(void *b, int t, size_t i, double v) {
  switch (t) {
    case 0: ((int8_t *)b)[i] = (int8_t)v; break;
    case 1: ((uint8_t *)b)[i] = (uint8_t)v; break;
    case 2: ((int32_t *)b)[i] = (int32_t)v; break;
    case 3: ((uint32_t *)b)[i] = (uint32_t)v; break;
    case 4: ((int64_t *)b)[i] = (int64_t)v; break;
    case 5: ((uint64_t *)b)[i] = (uint64_t)v; break;
    case 6: ((uint16_t *)b)[i] = hpu_float_to_half((float)v); break;
    case 7: ((float *)b)[i] = (float)v; break;
    case 8: ((double *)b)[i] = v; break;
    case 9: ((uint16_t *)b)[i] = hpu_float_to_bf16((float)v); break;
  }
}

/* Small integers: exact in every type and reduction order. */
static double input(int r, size_t i, int op) { return op == 1 ? ((r + i) % 3 == 0 ? 2 : 1) : (double)((r + i * 13) % 5); }
static double expect(size_t i, int op, int n) {
  double a = input(0, i, op);
  for (int r = 1; r < n; r++) {
    double v = input(r, i, op);
    a = op == 1 ? a * v : op == 2 ? (v > a ? v : a) : op == 3 ? (v < a ? v : a) : a + v;
  }
  return op == 4 ? a / n : a;
}

enum { T_ALLREDUCE, T_ALLGATHER, T_REDUCESCATTER, T_BROADCAST, T_REDUCE, T_ALLTOALL };
static const char *coll_names[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"};

static hcclResult_t run(int coll, void *s, void *r, size_t count, int t, int op, hcclStream_t st) {
  switch (coll) {
    case T_ALLREDUCE: return hcclAllReduce(s, r, count, (hcclDataType_t)t, (hcclRedOp_t)op, comm, st);
    case T_ALLGATHER: return hcclAllGather(s, r, count / (size_t)nranks, (hcclDataType_t)t, comm, st);
    case T_REDUCESCATTER: return hcclReduceScatter(s, r, count / (size_t)nranks, (hcclDataType_t)t, (hcclRedOp_t)op, comm, st);
    case T_BROADCAST: return hcclBroadcast(s, r, count, (hcclDataType_t)t, 0, comm, st);
    case T_REDUCE: return hcclReduce(s, r, count, (hcclDataType_t)t, (hcclRedOp_t)op, 0, comm, st);
    default: return hcclAlltoAll(s, r, count / (size_t)nranks, (hcclDataType_t)t, comm, st);
  }
}

static double bus_factor(int coll) {
  double n = nranks;
  switch (coll) {
    case T_ALLREDUCE: return 2 * (n - 1) / n;
    case T_ALLGATHER: case T_REDUCESCATTER: case T_ALLTOALL: return (n - 1) / n;
    default: return 1;
  }
}

static double max_all(double v) {
  double out = v;
  if (use_mpi) MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  else hcclAllReduce(&v, &out, 1, hcclFloat64, hcclMax, comm, NULL);
  return out;
}

static void die(const char *what, hcclResult_t r) {
  fprintf(stderr, "[rank %d] %s: %s: %s\n", rank, what, hcclGetErrorString(r), hcclGetLastError(comm));
  if (use_mpi) MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* Elements of the result that this rank checks, for the layout of coll. */
static size_t check(int coll, const char *out, size_t count, int t, int op, int inplace_unused) {
  (void)inplace_unused;
  size_t es = type_size(t), wrong = 0, per = count / (size_t)nranks;
  char want[8];
  for (size_t i = 0; i < count; i++) {
    double v;
    size_t pos = i;
    switch (coll) {
      case T_ALLREDUCE: v = expect(i, op, nranks); break;
      case T_REDUCE: if (rank != 0) return 0; v = expect(i, op, nranks); break;
      case T_BROADCAST: v = input(0, i, 0); break;
      case T_ALLGATHER: if (i >= per * (size_t)nranks) return wrong; v = input((int)(i / per), i % per, 0); break;
      case T_REDUCESCATTER: if (i >= per) return wrong; v = expect((size_t)rank * per + i, op, nranks); break;
      default: if (i >= per * (size_t)nranks) return wrong; v = input((int)(i / per) * 31 + rank, i % per, 0); break;
    }
    store(want, t, 0, v);
    if (memcmp(out + pos * es, want, es) != 0) wrong++;
  }
  return wrong;
}

static void fill(int coll, char *in, size_t count, int t, int op) {
  size_t per = count / (size_t)nranks;
  for (size_t i = 0; i < count; i++) {
    double v;
    switch (coll) {
      case T_ALLGATHER: if (i >= per) return; v = input(rank, i, 0); break;
      case T_BROADCAST: v = rank == 0 ? input(0, i, 0) : 0; break;
      case T_ALLTOALL: if (i >= per * (size_t)nranks) return; v = input(rank * 31 + (int)(i / per), i % per, 0); break;
      default: v = input(rank, i, op); break;
    }
    store(in, t, i, v);
  }
}

int main(int argc, char **argv) {
  size_t minb = 8, maxb = 64 << 20;
  double factor = 2;
  int coll = T_ALLREDUCE, t = 7, op = 0, iters = -1, warm = 5, do_check = 1, device = 0, inplace_cols = 1;
  int c;
  while ((c = getopt(argc, argv, "b:e:f:t:d:o:n:w:c:m:i:h")) != -1) {
    switch (c) {
      case 'b': minb = parse_size(optarg); break;
      case 'e': maxb = parse_size(optarg); break;
      case 'f': {
        char *e;
        factor = strtod(optarg, &e);
        if (e == optarg || *e || !(factor > 1)) bad_arg("factor (> 1)", optarg);
        break;
      }
      case 't': coll = parse_name("collective", optarg, coll_names, 6); break;
      case 'd': t = parse_name("type", optarg, type_names, 10); break;
      case 'o': op = parse_name("op", optarg, op_names, 5); break;
      case 'n': iters = parse_int("iteration count", optarg, 1, 1 << 30); break;
      case 'w': warm = parse_int("warm-up count", optarg, 0, 1 << 30); break;
      case 'c': do_check = parse_int("check flag (0 or 1)", optarg, 0, 1); break;
      case 'm': device = parse_name("memory kind (host or device)", optarg, mem_names, 2); break;
      case 'i': inplace_cols = parse_int("in-place flag (0 or 1)", optarg, 0, 1); break;
      default:
        printf("usage: hccl_perf [-t allreduce|allgather|reducescatter|broadcast|reduce|alltoall] [-b min] [-e max]\n"
               "                 [-f factor] [-d type] [-o op] [-n iters] [-w warmup] [-c check] [-m host|device] [-i 0|1]\n");
        return 0;
    }
  }
  const char *er = getenv("HCCL_PERF_RANK");
  use_mpi = !er;
  hcclUniqueId id;
  if (use_mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0 && hcclGetUniqueId(&id) != hcclSuccess) die("hcclGetUniqueId", hcclSystemError);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  } else {
    const char *en = getenv("HCCL_PERF_NRANKS");
    nranks = parse_int("HCCL_PERF_NRANKS", en ? en : "1", 1, 1 << 16);
    rank = parse_int("HCCL_PERF_RANK", er, 0, nranks - 1);
    if (hcclGetUniqueId(&id) != hcclSuccess) die("hcclGetUniqueId", hcclSystemError);
  }
  hcclResult_t r = hcclCommInitRank(&comm, nranks, id, rank);
  if (r != hcclSuccess) die("hcclCommInitRank", r);
  size_t es = type_size(t);
  size_t maxcount = maxb / es + (size_t)nranks;
  char *s, *rb, *ck;
  hpu_stream_t stream;
  hcclStream_t st = NULL;
  if (device) {
    if (hpu_init() != HPU_SUCCESS || hpu_malloc(0, maxcount * es, (void **)&s) != HPU_SUCCESS ||
        hpu_malloc(0, maxcount * es, (void **)&rb) != HPU_SUCCESS || hpu_stream_default(0, &stream) != HPU_SUCCESS) {
      fprintf(stderr, "device buffers: %s\n", hpu_last_error());
      return 1;
    }
    st = (hcclStream_t)&stream;
  } else {
    s = malloc(maxcount * es);
    rb = malloc(maxcount * es);
  }
  ck = malloc(maxcount * es);
  memset(s, 1, maxcount * es);
  memset(rb, 0, maxcount * es);
  if (rank == 0) {
    int v;
    hcclGetVersion(&v);
    printf("# hccl_perf %s: nranks %d, version %d, %s buffers, %s\n", coll_names[coll], nranks, v,
           device ? "device (card 0 arena, stream)" : "host", use_mpi ? "mpirun" : "env");
    printf("#%10s %12s %8s %6s %6s %10s %7s %7s %6s", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
    if (inplace_cols) printf(" %10s %7s %7s %6s", "time", "algbw", "busbw", "#wrong");
    printf("\n#%10s %12s %8s %6s %6s %10s %7s %7s %6s", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
    if (inplace_cols) printf(" %10s %7s %7s %6s", "(us)", "(GB/s)", "(GB/s)", "");
    printf("\n");
  }
  for (size_t bytes = minb; bytes <= maxb; bytes = (size_t)((double)bytes * factor) > bytes ? (size_t)((double)bytes * factor) : bytes + 1) {
    size_t count = bytes / es;
    if (coll == T_ALLGATHER || coll == T_REDUCESCATTER || coll == T_ALLTOALL) count -= count % (size_t)nranks;
    if (count == 0) continue;
    int n = iters > 0 ? iters : bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 20 : 5;
    double tm[2];
    size_t wrong[2];
    for (int ip = 0; ip <= inplace_cols; ip++) {
      char *in = s, *out = ip ? s : rb;
      if (ip && coll == T_ALLGATHER) in = rb + (size_t)rank * (count / (size_t)nranks) * es, out = rb;
      if (ip && coll == T_REDUCESCATTER) in = s, out = s + (size_t)rank * (count / (size_t)nranks) * es;
      for (int w = 0; w < warm; w++) if ((r = run(coll, in, out, count, t, op, st)) != hcclSuccess) die("warmup", r);
      if (st) hpu_stream_synchronize(stream);
      hcclBarrier(comm, NULL);
      double t0 = now_us();
      for (int k = 0; k < n; k++) if ((r = run(coll, in, out, count, t, op, st)) != hcclSuccess) die("timed run", r);
      if (st) hpu_stream_synchronize(stream);
      tm[ip] = max_all((now_us() - t0) / n);
      wrong[ip] = 0;
      if (do_check) {
        if (st) hpu_stream_synchronize(stream);
        fill(coll, in, count, t, op);
        if ((r = run(coll, in, out, count, t, op, st)) != hcclSuccess) die("check run", r);
        if (st) hpu_stream_synchronize(stream);
        memcpy(ck, out, count * es);
        double w = (double)check(coll, ck, count, t, op, ip);
        wrong[ip] = (size_t)max_all(w);
      }
    }
    if (rank == 0) {
      double gb = (double)count * (double)es / 1e3;   /* bytes / us / 1e3 = GB/s */
      printf(" %10zu %12zu %8s %6s %6d %10.2f %7.2f %7.2f %6zu", count * es, count, type_names[t], op_names[op],
             coll == T_BROADCAST || coll == T_REDUCE ? 0 : -1, tm[0], gb / tm[0], gb / tm[0] * bus_factor(coll), wrong[0]);
      if (inplace_cols)
        printf(" %10.2f %7.2f %7.2f %6zu", tm[1], gb / tm[1], gb / tm[1] * bus_factor(coll), wrong[1]);
      printf("\n");
      fflush(stdout);
    }
    if (bytes == maxb) break;
  }
  hcclCommDestroy(comm);
  if (device) { hpu_free(0, s); hpu_free(0, rb); } else { free(s); free(rb); }
  free(ck);
  if (use_mpi) MPI_Finalize();
  return 0;
}
