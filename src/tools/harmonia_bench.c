/* harmonia-bench: the BBIO paper's interference microbenchmark (e-Science 2016, section V-A).
 *
 * The MPI processes are split into K applications (contiguous blocks of ranks). Every process
 * writes N requests of S bytes contiguously into its own file, waiting d seconds between
 * requests; application k starts D_k seconds after the common start. Each application's I/O
 * phase time runs from the first open to the last close of its processes (delays included).
 *
 *   mpirun -np P harmonia-bench --dir DIR --apps K --requests N --size S [--delay d]
 *          [--offsets D_0,D_1,...] [--only k] [--api posix|stdio] [--sync fsync|direct|none]
 *          [--start-at T] [--first-app k] [--steps K] [--compute C] [--keep 1]
 *
 * Applications may also be separate jobs, one mpirun each (as under the scheduler daemon, where
 * each must register as a job of its own): then --start-at T (seconds since the epoch) gives
 * them a common origin, and --first-app k numbers this launch's applications from k. Each
 * process declares its I/O phase (open to close) with harmonia_io_begin/end when libharmonia is
 * loaded.
 *
 * With --steps K each process runs K time steps (VPIC-like): C seconds of computation (sleep),
 * then the I/O phase, into a file of its own per step. --keep 1 leaves the files in place, each
 * request starting with "app:rank:step:request;" padded with dots to 64 bytes, so that a
 * reader can check every byte landed where it was written (harmonia.buffers.verify).
 *
 * With --only k, the other applications stay idle (the "alone" run interference is measured
 * against). Rank 0 prints one JSON object: {"apps": [{"app", "ranks", "start", "end",
 * "phase_time", "bytes"}]}. Writes must reach the device or the page cache hides interference:
 * --sync fsync (default) syncs each file before closing it, --sync direct uses O_DIRECT. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_APPS 64

static void usage_error(int rank, const char* message) {
  if (rank == 0) fprintf(stderr, "harmonia-bench: %s\n", message);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static void sleep_seconds(double seconds) {
  if (seconds <= 0) return;
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* libharmonia's phase markers, when the library is loaded (LD_PRELOAD); no-ops otherwise. */
typedef int (*PhaseBegin)(const char*, size_t);
typedef int (*PhaseEnd)(void);

/* One I/O phase: `requests` writes of `size` bytes into `path`, then the sync. With `label` >= 0
 * each request begins with "label:rank:step:request;". Returns nonzero when a call failed. */
static int write_phase(const char* path, const char* api, const char* sync, int direct,
                       char* buffer, long requests, long size, double delay, int label, int rank,
                       int step, PhaseBegin phase_begin, PhaseEnd phase_end) {
  if (phase_begin) phase_begin("harmonia-bench", (size_t)requests * (size_t)size);
  int failed = 0;
  FILE* f = NULL;
  int fd = -1;
  if (!strcmp(api, "posix")) {
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0644);
    failed = fd < 0;
  } else {
    f = fopen(path, "w");
    failed = f == NULL;
  }
  for (long r = 0; r < requests && !failed; ++r) {
    if (r > 0) sleep_seconds(delay);
    if (label >= 0) {
      const int n = snprintf(buffer, 64, "%d:%d:%d:%ld;", label, rank, step, r);
      memset(buffer + n, '.', (size_t)(64 - n));
    }
    if (f)
      failed = fwrite(buffer, 1, (size_t)size, f) != (size_t)size;
    else
      failed = write(fd, buffer, (size_t)size) != size;
  }
  if (f) {
    if (!failed) failed = fflush(f) != 0 || (!strcmp(sync, "fsync") && fsync(fileno(f)) != 0);
    if (f) failed |= fclose(f) != 0;
  } else {
    if (!failed && !strcmp(sync, "fsync")) failed = fsync(fd) != 0;
    if (fd >= 0) failed |= close(fd) != 0;
  }
  if (phase_end) phase_end();
  return failed;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  const char* dir = NULL;
  const char* api = "posix";
  const char* sync = "fsync";
  int apps = 1, only = -1, first_app = 0, steps = 1, keep = 0;
  double compute = 0;
  double start_at = 0;
  long requests = 0, request_size = 0;
  double delay = 0, offsets[MAX_APPS] = {0};
  for (int i = 1; i < argc; ++i) {
    const char* value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!value) usage_error(rank, "every option takes a value");
    if (!strcmp(argv[i], "--dir"))
      dir = value;
    else if (!strcmp(argv[i], "--apps"))
      apps = atoi(value);
    else if (!strcmp(argv[i], "--requests"))
      requests = atol(value);
    else if (!strcmp(argv[i], "--size"))
      request_size = atol(value);
    else if (!strcmp(argv[i], "--delay"))
      delay = atof(value);
    else if (!strcmp(argv[i], "--only"))
      only = atoi(value);
    else if (!strcmp(argv[i], "--api"))
      api = value;
    else if (!strcmp(argv[i], "--sync"))
      sync = value;
    else if (!strcmp(argv[i], "--start-at"))
      start_at = atof(value);
    else if (!strcmp(argv[i], "--first-app"))
      first_app = atoi(value);
    else if (!strcmp(argv[i], "--steps"))
      steps = atoi(value);
    else if (!strcmp(argv[i], "--compute"))
      compute = atof(value);
    else if (!strcmp(argv[i], "--keep"))
      keep = atoi(value);
    else if (!strcmp(argv[i], "--offsets")) {
      char* copy = strdup(value);
      int k = 0;
      for (char* item = strtok(copy, ","); item && k < MAX_APPS; item = strtok(NULL, ","))
        offsets[k++] = atof(item);
      free(copy);
    } else
      usage_error(rank, "unknown option (see the usage in harmonia_bench.c)");
    ++i;
  }
  if (!dir || requests <= 0 || request_size <= 0)
    usage_error(rank, "--dir, --requests and --size are required, > 0");
  if (steps < 1 || compute < 0) usage_error(rank, "--steps must be >= 1, --compute >= 0");
  if (keep && request_size < 64) usage_error(rank, "--keep needs a --size of 64 bytes or more");
  if (apps < 1 || apps > MAX_APPS || apps > size)
    usage_error(rank, "--apps must be in [1, processes]");
  if (strcmp(api, "posix") && strcmp(api, "stdio"))
    usage_error(rank, "--api must be posix or stdio");
  if (strcmp(sync, "fsync") && strcmp(sync, "direct") && strcmp(sync, "none"))
    usage_error(rank, "--sync must be fsync, direct or none");
  const int direct = !strcmp(sync, "direct");
  if (direct && (request_size % 4096 || strcmp(api, "posix")))
    usage_error(rank, "--sync direct needs --api posix and a --size multiple of 4096");

  if (first_app < 0 || first_app + apps > MAX_APPS)
    usage_error(rank, "--first-app must be in [0, 64 - apps]");
  const int app = (int)((long)rank * apps / size);
  const int label = first_app + app;
  PhaseBegin phase_begin = NULL;
  PhaseEnd phase_end = NULL;
  void* symbol = dlsym(RTLD_DEFAULT, "harmonia_io_begin");
  memcpy(&phase_begin, &symbol, sizeof phase_begin); /* ISO C has no object-to-function cast */
  symbol = dlsym(RTLD_DEFAULT, "harmonia_io_end");
  memcpy(&phase_end, &symbol, sizeof phase_end);
  const int active = only < 0 || only == app;
  char* buffer = NULL;
  if (posix_memalign((void**)&buffer, 4096, (size_t)request_size) != 0)
    MPI_Abort(MPI_COMM_WORLD, 1);
  memset(buffer, 'a' + app % 26, (size_t)request_size);
  char path[4096];

  MPI_Barrier(MPI_COMM_WORLD);
  double origin = MPI_Wtime();
  int late = 0;
  if (start_at > 0) {
    /* A common origin for separate launches: everyone starts at the same wall-clock time. */
    const double wait = start_at - wall_seconds();
    late = wait < 0;
    sleep_seconds(wait);
    origin = MPI_Wtime() - (late ? -wait : 0);
  }
  double start = 0, end = 0;
  int failed = 0;
  if (active) {
    sleep_seconds(offsets[app]);
    start = MPI_Wtime() - origin;
    for (int step = 0; step < steps && !failed; ++step) {
      sleep_seconds(compute);
      if (steps == 1)
        snprintf(path, sizeof path, "%s/app%d-rank%d.dat", dir, label, rank);
      else
        snprintf(path, sizeof path, "%s/app%d-rank%d-step%d.dat", dir, label, rank, step);
      failed = write_phase(path, api, sync, direct, buffer, requests, request_size, delay,
                           keep ? label : -1, rank, step, phase_begin, phase_end);
      if (!keep) {
        /* A file placed on a PFS server (HARMONIA_PFS_ROOT) is a link to where it went. */
        char placed[4096];
        if (realpath(path, placed) && strcmp(placed, path)) unlink(placed);
        unlink(path);
      }
    }
    end = MPI_Wtime() - origin;
  }

  /* Per application: the earliest start and the latest end of its processes. */
  double starts[MAX_APPS], ends[MAX_APPS], first[MAX_APPS], last[MAX_APPS];
  int counts[MAX_APPS] = {0}, ranks[MAX_APPS];
  for (int k = 0; k < MAX_APPS; ++k) {
    starts[k] = k == app && active ? start : 1e300;
    ends[k] = k == app && active ? end : 0;
    counts[k] = k == app ? 1 : 0;
  }
  MPI_Reduce(starts, first, MAX_APPS, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  MPI_Reduce(ends, last, MAX_APPS, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(counts, ranks, MAX_APPS, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  int any_failed = 0, any_late = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&late, &any_late, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && !any_failed) {
    printf("{\"late\": %s, \"apps\": [", any_late ? "true" : "false");
    int printed = 0;
    for (int k = 0; k < apps; ++k) {
      if (only >= 0 && k != only) continue;
      printf(
          "%s{\"app\": %d, \"ranks\": %d, \"start\": %.6f, \"end\": %.6f, \"phase_time\": %.6f, "
          "\"bytes\": %ld}",
          printed++ ? ", " : "", first_app + k, ranks[k], first[k], last[k], last[k] - first[k],
          (long)ranks[k] * requests * request_size * steps);
    }
    printf("]}\n");
  }
  if (rank == 0 && any_failed) fprintf(stderr, "harmonia-bench: a write failed in %s\n", dir);
  free(buffer);
  MPI_Finalize();
  return any_failed;
}
