/* fsexec: performs a sequence of file-system calls, one line each, in several processes, and
 * prints one JSON line per call: its result, errno after it (errno is set to 4242 before each
 * call, so a call that succeeds and leaves errno alone prints 4242), the bytes every read saw
 * (length and FNV-1a hash), the stat fields, and, for the `tree` call, the whole tree below the
 * working directory as the program sees it. The differential tester (tests/fsoracle) runs the
 * same sequence with and without libharmonia and compares the lines; because the calls are real
 * libc calls made by a dynamically linked program, LD_PRELOAD sees every one of them.
 *
 *   fsexec [--step] DIRECTORY SEQUENCE
 *
 * A line of the sequence is `PROC CALL ARGS...`. PROC is the process that makes the call: 0 is
 * started with the sequence, others by `spawn` (fork and exec of a fresh fsexec, which inherits
 * no descriptor) or `fork` (a child that shares the parent's descriptors), and `exit` ends one.
 * Descriptors are named h0..h7 and stdio streams s0..s3, per process. With --step, fsexec reads
 * a line from standard input after printing each result (the harness takes its time between
 * two calls: snapshots, a node killed, the program killed). Every process runs in DIRECTORY with
 * umask 022. The calls and their arguments are listed in docs/testing.md. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SENTINEL = 4242, MAX_PROCS = 8, MAX_HANDLES = 8, MAX_STREAMS = 4, MAX_ARGS = 12 };
enum { DUP2_BASE = 200 }; /* dup2 onto a handle that is not open uses number 200 + its slot */
#define BAD_POINTER ((const char*)(uintptr_t)0xdeadc0deUL)

/* A growable string for the JSON lines. */
struct text {
  char* data;
  size_t len, cap;
};

static void put(struct text* t, const char* format, ...) {
  for (;;) {
    va_list args;
    va_start(args, format);
    const size_t room = t->cap - t->len;
    const int n = vsnprintf(t->data ? t->data + t->len : NULL, room, format, args);
    va_end(args);
    if (n < 0) abort();
    if ((size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    t->cap = (t->cap + (size_t)n + 1) * 2;
    t->data = realloc(t->data, t->cap);
    if (!t->data) abort();
  }
}

static void append(struct text* t, const char* data, size_t n) {
  if (t->len + n + 1 > t->cap) {
    t->cap = (t->len + n + 1) * 2;
    t->data = realloc(t->data, t->cap);
    if (!t->data) abort();
  }
  memcpy(t->data + t->len, data, n);
  t->len += n;
  t->data[t->len] = '\0';
}

/* Lines read from a descriptor, buffered. */
struct reader {
  int fd;
  char buf[65536];
  size_t start, end;
};

/* Reads one line (without its newline) into `line`; 0 at end of file. */
static int read_line(struct reader* r, struct text* line) {
  line->len = 0;
  put(line, "");
  for (;;) {
    for (size_t k = r->start; k < r->end; ++k) {
      if (r->buf[k] == '\n') {
        append(line, r->buf + r->start, k - r->start);
        r->start = k + 1;
        return 1;
      }
    }
    append(line, r->buf + r->start, r->end - r->start);
    r->start = r->end = 0;
    const ssize_t n = read(r->fd, r->buf, sizeof r->buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return line->len > 0;
    r->end = (size_t)n;
  }
}

static void write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    const ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3); /* the parent is gone */
    data += n;
    len -= (size_t)n;
  }
}

/* ---- data: what writes write, how reads are summed ---- */

static uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* Byte i of a write with seed s; never the same stream for two seeds. */
static char* pattern(size_t n, long seed) {
  char* buf = malloc(n + 1);
  if (!buf) abort();
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t word = splitmix(((uint64_t)seed << 40) ^ (i / 8));
    for (size_t k = 0; k < 8 && i + k < n; ++k) buf[i + k] = (char)(word >> (8 * k));
  }
  return buf;
}

static uint64_t fnv(const char* buf, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
  return h;
}

/* ---- this process's state ---- */

struct child {
  pid_t pid;
  int cmd; /* we write commands here */
  struct reader* res;
};

static int self = -1; /* -1: the coordinator, which makes no file-system call */
static int out_fd = STDOUT_FILENO;
static int in_fd = -1;
static int handles[MAX_HANDLES];
static FILE* streams[MAX_STREAMS];
static struct child children[MAX_PROCS]; /* this process's direct children, by process number */
static int route[MAX_PROCS];             /* the direct child through which a process is reached */
static const char* program;

static void reset_state(void) {
  for (int k = 0; k < MAX_HANDLES; ++k) handles[k] = -1;
  for (int k = 0; k < MAX_STREAMS; ++k) streams[k] = NULL;
  for (int k = 0; k < MAX_PROCS; ++k) {
    children[k].pid = 0;
    route[k] = -1;
  }
}

/* ---- parsing ---- */

static long num(const char* s) { return strtol(s, NULL, 0); }

static int slot(const char* s, int count) {
  const long k = strtol(s + 1, NULL, 10);
  return k >= 0 && k < count ? (int)k : 0;
}

static int fd_of(const char* s) { return handles[slot(s, MAX_HANDLES)]; }

struct flag_name {
  const char* name;
  long value;
};

static const struct flag_name open_flag_names[] = {
    {"RDONLY", O_RDONLY},       {"WRONLY", O_WRONLY},
    {"RDWR", O_RDWR},           {"CREAT", O_CREAT},
    {"EXCL", O_EXCL},           {"TRUNC", O_TRUNC},
    {"APPEND", O_APPEND},       {"CLOEXEC", O_CLOEXEC},
    {"NOFOLLOW", O_NOFOLLOW},   {"SYNC", O_SYNC},
    {"DIRECTORY", O_DIRECTORY}, {"NONBLOCK", O_NONBLOCK},
    {"DSYNC", O_DSYNC},         {NULL, 0}};
static const struct flag_name rename_flag_names[] = {
    {"NOREPLACE", RENAME_NOREPLACE}, {"EXCHANGE", RENAME_EXCHANGE}, {"0", 0}, {NULL, 0}};
static const struct flag_name at_flag_names[] = {
    {"NOFOLLOW", AT_SYMLINK_NOFOLLOW}, {"0", 0}, {NULL, 0}};
static const struct flag_name whence_names[] = {{"SET", SEEK_SET},   {"CUR", SEEK_CUR},
                                                {"END", SEEK_END},   {"DATA", SEEK_DATA},
                                                {"HOLE", SEEK_HOLE}, {NULL, 0}};

/* FLAG|FLAG|...: unknown names are an error in the sequence, reported and fatal. */
static long flags(const char* s, const struct flag_name* names) {
  long value = 0;
  char copy[256];
  snprintf(copy, sizeof copy, "%s", s);
  char* save = NULL;
  for (char* part = strtok_r(copy, "|", &save); part; part = strtok_r(NULL, "|", &save)) {
    const struct flag_name* f = names;
    while (f->name && strcmp(f->name, part) != 0) ++f;
    if (!f->name) {
      fprintf(stderr, "fsexec: unknown flag %s\n", part);
      exit(2);
    }
    value |= f->value;
  }
  return value;
}

/* SIZE,SIZE,... into iovecs filled with seeds seed, seed+1, ... (or zeroed, to read into). */
static int vectors(const char* s, long seed, int fill, struct iovec* iov, int most) {
  int n = 0;
  char copy[256];
  snprintf(copy, sizeof copy, "%s", s);
  char* save = NULL;
  for (char* part = strtok_r(copy, ",", &save); part && n < most;
       part = strtok_r(NULL, ",", &save)) {
    const size_t len = (size_t)num(part);
    iov[n].iov_base = fill ? pattern(len, seed + n) : calloc(len + 1, 1);
    iov[n].iov_len = len;
    ++n;
  }
  return n;
}

static void free_vectors(struct iovec* iov, int n) {
  for (int k = 0; k < n; ++k) free(iov[k].iov_base);
}

/* A time argument: SEC.NSEC, "now" (UTIME_NOW) or "omit" (UTIME_OMIT). */
static struct timespec time_arg(const char* s) {
  struct timespec t = {0, 0};
  if (!strcmp(s, "now")) {
    t.tv_nsec = UTIME_NOW;
  } else if (!strcmp(s, "omit")) {
    t.tv_nsec = UTIME_OMIT;
  } else {
    char* dot = NULL;
    t.tv_sec = strtol(s, &dot, 10);
    t.tv_nsec = *dot == '.' ? strtol(dot + 1, NULL, 10) : 0;
  }
  return t;
}

/* ---- results ---- */

static void begin(struct text* t, const char* op, long ret, int err) {
  put(t, "{\"p\": %d, \"op\": \"%s\", \"ret\": %ld, \"errno\": %d", self, op, ret, err);
}

static void put_stat(struct text* t, const struct stat* st) {
  const char type = S_ISREG(st->st_mode)   ? 'f'
                    : S_ISDIR(st->st_mode) ? 'd'
                    : S_ISLNK(st->st_mode) ? 'l'
                                           : '?';
  put(t,
      ", \"st\": {\"type\": \"%c\", \"mode\": \"%04o\", \"size\": %lld, \"nlink\": %lu, "
      "\"uid\": %u, \"gid\": %u, \"ino\": %llu, \"mtime\": [%lld, %ld], \"atime\": [%lld, %ld]}",
      type, (unsigned)(st->st_mode & 07777), (long long)st->st_size, (unsigned long)st->st_nlink,
      st->st_uid, st->st_gid, (unsigned long long)st->st_ino, (long long)st->st_mtim.tv_sec,
      st->st_mtim.tv_nsec, (long long)st->st_atim.tv_sec, st->st_atim.tv_nsec);
}

static void put_bytes(struct text* t, const char* buf, long n) {
  put(t, ", \"hash\": \"%016llx\"", (unsigned long long)fnv(buf, n > 0 ? (size_t)n : 0));
}

/* ---- the tree as the program sees it ---- */

static int by_name(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* The names of an open directory but . and .., sorted; the directory is closed. */
static char** sorted_names(DIR* d, size_t* count) {
  char** names = NULL;
  *count = 0;
  for (struct dirent* e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    names = realloc(names, (*count + 1) * sizeof *names);
    if (!names) abort();
    names[(*count)++] = strdup(e->d_name);
  }
  closedir(d);
  if (*count) qsort(names, *count, sizeof *names, by_name);
  return names;
}

static void put_file(struct text* t, const char* path) {
  const int fd = open(path, O_RDONLY | O_NOFOLLOW);
  if (fd < 0) {
    put(t, ", \"read_errno\": %d", errno);
    return;
  }
  struct text content = {0};
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) append(&content, buf, (size_t)n);
  if (n < 0) put(t, ", \"read_errno\": %d", errno);
  close(fd);
  put(t, ", \"bytes\": %zu", content.len);
  put_bytes(t, content.data ? content.data : "", (long)content.len);
  free(content.data);
}

static void put_tree(struct text* t, const char* dir, int* first) {
  DIR* d = opendir(dir);
  if (!d) return;
  size_t count = 0;
  char** names = sorted_names(d, &count);
  for (size_t k = 0; k < count; ++k) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, names[k]);
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    put(t, "%s{\"path\": \"%s\"", *first ? "" : ", ", path + 2); /* without "./" */
    *first = 0;
    put_stat(t, &st);
    if (S_ISREG(st.st_mode)) put_file(t, path);
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      const ssize_t n = readlink(path, target, sizeof target - 1);
      put(t, ", \"target\": \"%.*s\"", (int)(n > 0 ? n : 0), target);
    }
    put(t, "}");
    if (S_ISDIR(st.st_mode)) put_tree(t, path, first);
    free(names[k]);
  }
  free(names);
}

/* ---- mmap reads, which may fault ---- */

static sigjmp_buf fault_jump;
static void on_fault(int sig) { siglongjmp(fault_jump, sig); }

/* The bytes of [off, off + len) of fd's file through a read-only shared mapping, up to the
 * file's size as fstat reports it (past it the pages would fault). */
static void mmap_read(struct text* t, int fd, size_t len, off_t off) {
  errno = SENTINEL;
  void* map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);
  const int err = errno;
  begin(t, "mmap", map == MAP_FAILED ? -1 : 0, err);
  if (map == MAP_FAILED) return;
  struct stat st;
  size_t visible = 0;
  if (fstat(fd, &st) == 0 && st.st_size > off)
    visible = (size_t)(st.st_size - off) < len ? (size_t)(st.st_size - off) : len;
  char* copy = malloc(visible + 1);
  struct sigaction fault = {.sa_handler = on_fault}, old_bus, old_segv;
  sigaction(SIGBUS, &fault, &old_bus);
  sigaction(SIGSEGV, &fault, &old_segv);
  const int sig = sigsetjmp(fault_jump, 1);
  if (sig == 0) {
    memcpy(copy, map, visible);
    put(t, ", \"n\": %zu", visible);
    put_bytes(t, copy, (long)visible);
  } else {
    put(t, ", \"fault\": %d", sig);
  }
  sigaction(SIGBUS, &old_bus, NULL);
  sigaction(SIGSEGV, &old_segv, NULL);
  free(copy);
  munmap(map, len);
}

/* ---- calls with an invalid path pointer (the kernel answers EFAULT) ---- */

static long efault_call(const char* call) {
  struct stat st;
  struct statx stx;
  if (!strcmp(call, "open")) return open(BAD_POINTER, O_RDONLY);
  if (!strcmp(call, "creat")) return open(BAD_POINTER, O_WRONLY | O_CREAT, 0644);
  if (!strcmp(call, "stat")) return stat(BAD_POINTER, &st);
  if (!strcmp(call, "lstat")) return lstat(BAD_POINTER, &st);
  if (!strcmp(call, "statx")) return statx(AT_FDCWD, BAD_POINTER, 0, STATX_BASIC_STATS, &stx);
  if (!strcmp(call, "unlink")) return unlink(BAD_POINTER);
  if (!strcmp(call, "rename")) return rename(BAD_POINTER, "efault");
  if (!strcmp(call, "truncate")) return truncate(BAD_POINTER, 0);
  if (!strcmp(call, "chmod")) return chmod(BAD_POINTER, 0644);
  if (!strcmp(call, "utimensat")) return utimensat(AT_FDCWD, BAD_POINTER, NULL, 0);
  if (!strcmp(call, "mkdir")) return mkdir(BAD_POINTER, 0755);
  if (!strcmp(call, "fopen")) return fopen(BAD_POINTER, "r") ? 0 : -1;
  fprintf(stderr, "fsexec: efault: unknown call %s\n", call);
  exit(2);
}

/* ---- which file a descriptor names (FSEXEC_TRACE_INODES=1, for crash checks) ---- */

static int trace_inodes;

/* The inode behind slot `name` (h3 or s1), and how many other descriptors and streams of this
 * process name it; 0 when the slot holds nothing. */
static unsigned long long slot_inode(const char* name, int* others) {
  struct stat st, other;
  const int stream = name[0] == 's';
  const int k = slot(name, stream ? MAX_STREAMS : MAX_HANDLES);
  const int fd = stream ? (streams[k] ? fileno(streams[k]) : -1) : handles[k];
  *others = 0;
  if (fd < 0 || fstat(fd, &st) != 0) return 0;
  for (int j = 0; j < MAX_HANDLES + MAX_STREAMS; ++j) {
    const int is_stream = j >= MAX_HANDLES, m = is_stream ? j - MAX_HANDLES : j;
    if (is_stream == stream && m == k) continue;
    const int f = is_stream ? (streams[m] ? fileno(streams[m]) : -1) : handles[m];
    if (f >= 0 && fstat(f, &other) == 0 && other.st_ino == st.st_ino && other.st_dev == st.st_dev)
      ++*others;
  }
  return (unsigned long long)st.st_ino;
}

/* ---- one call of this process ---- */

static void spawn_worker(int proc, int* cmd, struct reader** res, pid_t* pid);

/* Performs the call `a[0]` with arguments a[1..] in this process; the JSON line goes to t. */
static void perform(char** a, int n, struct text* t) {
  const char* op = a[0];
  int others = 0;
  const int traced = trace_inodes && n > 1 && (a[1][0] == 'h' || a[1][0] == 's') &&
                     strcmp(op, "open") && strcmp(op, "openat") && strcmp(op, "creat") &&
                     strcmp(op, "fopen") && strcmp(op, "dup");
  const unsigned long long inode = traced ? slot_inode(a[1], &others) : 0;
  long ret = 0;
  int err = 0;
  struct stat st;
#define CALL(expr)      \
  do {                  \
    errno = SENTINEL;   \
    ret = (long)(expr); \
    err = errno;        \
  } while (0)
#define NEED(k)                                                         \
  do {                                                                  \
    if (n < (k) + 1) {                                                  \
      fprintf(stderr, "fsexec: %s needs %d arguments\n", op, (int)(k)); \
      exit(2);                                                          \
    }                                                                   \
  } while (0)
  if (!strcmp(op, "open") || !strcmp(op, "openat") || !strcmp(op, "creat")) {
    /* open H PATH FLAGS MODE | openat H DIRH PATH FLAGS MODE | creat H PATH MODE; a
     * descriptor H held is closed first */
    const int h = slot(a[1], MAX_HANDLES);
    const int dir = !strcmp(op, "openat") && n > 2 && strcmp(a[2], "cwd") ? fd_of(a[2]) : AT_FDCWD;
    if (handles[h] >= 0) close(handles[h]);
    handles[h] = -1;
    int fd;
    if (!strcmp(op, "open")) {
      NEED(4);
      CALL(fd = open(a[2], (int)flags(a[3], open_flag_names), (mode_t)num(a[4])));
    } else if (!strcmp(op, "openat")) {
      NEED(5);
      CALL(fd = openat(dir, a[3], (int)flags(a[4], open_flag_names), (mode_t)num(a[5])));
    } else {
      NEED(3);
      CALL(fd = creat(a[2], (mode_t)num(a[3])));
    }
    if (fd >= 0) handles[h] = fd;
    begin(t, op, fd < 0 ? -1 : 0, err);
  } else if (!strcmp(op, "close")) {
    NEED(1);
    const int h = slot(a[1], MAX_HANDLES);
    CALL(close(handles[h]));
    handles[h] = -1;
    begin(t, op, ret, err);
  } else if (!strcmp(op, "write") || !strcmp(op, "pwrite")) {
    /* write H SIZE SEED | pwrite H SIZE OFFSET SEED */
    const int p = op[0] == 'p';
    NEED(p ? 4 : 3);
    const size_t size = (size_t)num(a[2]);
    char* buf = pattern(size, num(a[p ? 4 : 3]));
    if (p)
      CALL(pwrite(fd_of(a[1]), buf, size, (off_t)num(a[3])));
    else
      CALL(write(fd_of(a[1]), buf, size));
    free(buf);
    begin(t, op, ret, err);
  } else if (!strcmp(op, "writev") || !strcmp(op, "pwritev")) {
    /* writev H SIZES SEED | pwritev H SIZES OFFSET SEED */
    const int p = op[0] == 'p';
    NEED(p ? 4 : 3);
    struct iovec iov[16];
    const int count = vectors(a[2], num(a[p ? 4 : 3]), 1, iov, 16);
    if (p)
      CALL(pwritev(fd_of(a[1]), iov, count, (off_t)num(a[3])));
    else
      CALL(writev(fd_of(a[1]), iov, count));
    free_vectors(iov, count);
    begin(t, op, ret, err);
  } else if (!strcmp(op, "read") || !strcmp(op, "pread")) {
    /* read H SIZE | pread H SIZE OFFSET */
    const int p = op[0] == 'p';
    NEED(p ? 3 : 2);
    const size_t size = (size_t)num(a[2]);
    char* buf = calloc(size + 1, 1);
    if (p)
      CALL(pread(fd_of(a[1]), buf, size, (off_t)num(a[3])));
    else
      CALL(read(fd_of(a[1]), buf, size));
    begin(t, op, ret, err);
    put_bytes(t, buf, ret);
    free(buf);
  } else if (!strcmp(op, "readv") || !strcmp(op, "preadv")) {
    /* readv H SIZES | preadv H SIZES OFFSET: the pieces' bytes hashed one after the other */
    const int p = op[0] == 'p';
    NEED(p ? 3 : 2);
    struct iovec iov[16];
    const int count = vectors(a[2], 0, 0, iov, 16);
    if (p)
      CALL(preadv(fd_of(a[1]), iov, count, (off_t)num(a[3])));
    else
      CALL(readv(fd_of(a[1]), iov, count));
    begin(t, op, ret, err);
    struct text all = {0};
    long left = ret;
    for (int k = 0; k < count && left > 0; ++k) {
      const long take = left < (long)iov[k].iov_len ? left : (long)iov[k].iov_len;
      append(&all, iov[k].iov_base, (size_t)take);
      left -= take;
    }
    put_bytes(t, all.data ? all.data : "", ret);
    free(all.data);
    free_vectors(iov, count);
  } else if (!strcmp(op, "lseek")) {
    NEED(3); /* lseek H OFFSET WHENCE */
    CALL(lseek(fd_of(a[1]), (off_t)num(a[2]), (int)flags(a[3], whence_names)));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "ftruncate")) {
    NEED(2);
    CALL(ftruncate(fd_of(a[1]), (off_t)num(a[2])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "truncate")) {
    NEED(2);
    CALL(truncate(a[1], (off_t)num(a[2])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "fsync")) {
    NEED(1);
    CALL(fsync(fd_of(a[1])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "fdatasync")) {
    NEED(1);
    CALL(fdatasync(fd_of(a[1])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "sync")) {
    errno = SENTINEL;
    sync();
    err = errno;
    begin(t, op, 0, err);
  } else if (!strcmp(op, "dup")) {
    NEED(2); /* dup NEW OLD; a descriptor NEW held is closed first (unless it is OLD) */
    const int h = slot(a[1], MAX_HANDLES), old = fd_of(a[2]);
    if (handles[h] >= 0 && handles[h] != old) close(handles[h]);
    handles[h] = -1;
    int fd;
    CALL(fd = dup(old));
    if (fd >= 0) handles[h] = fd;
    begin(t, op, fd < 0 ? -1 : 0, err);
  } else if (!strcmp(op, "dup2")) {
    NEED(2); /* dup2 OLD NEW: onto NEW's descriptor, or 200 + NEW's slot when it is closed */
    const int h = slot(a[2], MAX_HANDLES);
    const int target = handles[h] >= 0 ? handles[h] : DUP2_BASE + h;
    int fd;
    CALL(fd = dup2(fd_of(a[1]), target));
    if (fd >= 0) handles[h] = fd;
    begin(t, op, fd < 0 ? -1 : 0, err);
  } else if (!strcmp(op, "setfl")) {
    NEED(2); /* setfl H FLAGS: F_SETFL (O_APPEND, O_NONBLOCK) */
    CALL(fcntl(fd_of(a[1]), F_SETFL, (int)flags(a[2], open_flag_names)));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "rename")) {
    NEED(2);
    CALL(rename(a[1], a[2]));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "renameat2")) {
    NEED(3);
    CALL(renameat2(AT_FDCWD, a[1], AT_FDCWD, a[2], (unsigned)flags(a[3], rename_flag_names)));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "unlink")) {
    NEED(1);
    CALL(unlink(a[1]));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "link")) {
    NEED(2);
    CALL(link(a[1], a[2]));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "symlink")) {
    NEED(2);
    CALL(symlink(a[1], a[2]));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "readlink")) {
    NEED(1);
    char target[PATH_MAX];
    CALL(readlink(a[1], target, sizeof target - 1));
    begin(t, op, ret, err);
    put(t, ", \"target\": \"%.*s\"", (int)(ret > 0 ? ret : 0), target);
  } else if (!strcmp(op, "mkdir")) {
    NEED(2);
    CALL(mkdir(a[1], (mode_t)num(a[2])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "rmdir")) {
    NEED(1);
    CALL(rmdir(a[1]));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "chmod")) {
    NEED(2);
    CALL(chmod(a[1], (mode_t)num(a[2])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "fchmod")) {
    NEED(2);
    CALL(fchmod(fd_of(a[1]), (mode_t)num(a[2])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "chown")) {
    NEED(3);
    CALL(chown(a[1], (uid_t)num(a[2]), (gid_t)num(a[3])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "fchown")) {
    NEED(3);
    CALL(fchown(fd_of(a[1]), (uid_t)num(a[2]), (gid_t)num(a[3])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "utimensat") || !strcmp(op, "futimens")) {
    /* utimensat PATH ATIME MTIME FLAGS | futimens H ATIME MTIME */
    const int by_path = op[0] == 'u';
    NEED(by_path ? 4 : 3);
    const struct timespec times[2] = {time_arg(a[2]), time_arg(a[3])};
    if (by_path)
      CALL(utimensat(AT_FDCWD, a[1], times, (int)flags(a[4], at_flag_names)));
    else
      CALL(futimens(fd_of(a[1]), times));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "stat") || !strcmp(op, "lstat") || !strcmp(op, "fstat") ||
             !strcmp(op, "fstatat")) {
    NEED(1);
    memset(&st, 0, sizeof st);
    if (!strcmp(op, "stat"))
      CALL(stat(a[1], &st));
    else if (!strcmp(op, "lstat"))
      CALL(lstat(a[1], &st));
    else if (!strcmp(op, "fstat"))
      CALL(fstat(fd_of(a[1]), &st));
    else
      CALL(fstatat(AT_FDCWD, a[1], &st, AT_SYMLINK_NOFOLLOW));
    begin(t, op, ret, err);
    if (ret == 0) put_stat(t, &st);
  } else if (!strcmp(op, "statx")) {
    NEED(2); /* statx PATH FLAGS */
    struct statx stx;
    memset(&stx, 0, sizeof stx);
    CALL(statx(AT_FDCWD, a[1], (int)flags(a[2], at_flag_names), STATX_BASIC_STATS, &stx));
    begin(t, op, ret, err);
    if (ret == 0) {
      memset(&st, 0, sizeof st);
      st.st_mode = stx.stx_mode;
      st.st_size = (off_t)stx.stx_size;
      st.st_nlink = stx.stx_nlink;
      st.st_uid = stx.stx_uid;
      st.st_gid = stx.stx_gid;
      st.st_ino = stx.stx_ino;
      st.st_mtim.tv_sec = stx.stx_mtime.tv_sec;
      st.st_mtim.tv_nsec = stx.stx_mtime.tv_nsec;
      st.st_atim.tv_sec = stx.stx_atime.tv_sec;
      st.st_atim.tv_nsec = stx.stx_atime.tv_nsec;
      put_stat(t, &st);
    }
  } else if (!strcmp(op, "mmap")) {
    NEED(3); /* mmap H LENGTH OFFSET: a read-only shared mapping, read */
    mmap_read(t, fd_of(a[1]), (size_t)num(a[2]), (off_t)num(a[3]));
  } else if (!strcmp(op, "sendfile")) {
    NEED(4); /* sendfile OUT IN OFFSET COUNT; OFFSET -1: at IN's file offset */
    off_t off = (off_t)num(a[3]);
    CALL(sendfile(fd_of(a[1]), fd_of(a[2]), off < 0 ? NULL : &off, (size_t)num(a[4])));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "copy_file_range")) {
    NEED(3); /* copy_file_range IN OUT COUNT, at both file offsets */
    CALL(copy_file_range(fd_of(a[1]), NULL, fd_of(a[2]), NULL, (size_t)num(a[3]), 0));
    begin(t, op, ret, err);
  } else if (!strcmp(op, "fopen")) {
    NEED(3); /* fopen S PATH MODE; a stream S held is closed first */
    const int s = slot(a[1], MAX_STREAMS);
    if (streams[s]) fclose(streams[s]);
    FILE* f;
    CALL((f = fopen(a[2], a[3])) ? 0 : -1);
    streams[s] = f;
    begin(t, op, ret, err);
  } else if (!strcmp(op, "fwrite")) {
    NEED(3); /* fwrite S SIZE SEED */
    FILE* f = streams[slot(a[1], MAX_STREAMS)];
    const size_t size = (size_t)num(a[2]);
    char* buf = pattern(size, num(a[3]));
    CALL(f ? fwrite(buf, 1, size, f) : 0);
    free(buf);
    begin(t, op, f ? ret : -1, err);
  } else if (!strcmp(op, "fread")) {
    NEED(2); /* fread S SIZE */
    FILE* f = streams[slot(a[1], MAX_STREAMS)];
    const size_t size = (size_t)num(a[2]);
    char* buf = calloc(size + 1, 1);
    CALL(f ? fread(buf, 1, size, f) : 0);
    begin(t, op, f ? ret : -1, err);
    put_bytes(t, buf, ret);
    free(buf);
  } else if (!strcmp(op, "fseek")) {
    NEED(3); /* fseek S OFFSET WHENCE */
    FILE* f = streams[slot(a[1], MAX_STREAMS)];
    CALL(f ? fseeko(f, (off_t)num(a[2]), (int)flags(a[3], whence_names)) : -1);
    begin(t, op, ret, err);
  } else if (!strcmp(op, "fflush")) {
    NEED(1);
    FILE* f = streams[slot(a[1], MAX_STREAMS)];
    CALL(f ? fflush(f) : -1);
    begin(t, op, ret, err);
  } else if (!strcmp(op, "fclose")) {
    NEED(1);
    const int s = slot(a[1], MAX_STREAMS);
    CALL(streams[s] ? fclose(streams[s]) : -1);
    streams[s] = NULL;
    begin(t, op, ret, err);
  } else if (!strcmp(op, "readfile")) {
    NEED(1); /* readfile PATH: open read-only, read to the end, close (what `cat` does) */
    begin(t, op, 0, 0);
    put_file(t, a[1]);
  } else if (!strcmp(op, "listdir")) {
    NEED(1);
    DIR* d;
    CALL((d = opendir(a[1])) ? 0 : -1);
    begin(t, op, ret, err);
    if (d) {
      size_t count = 0;
      char** names = sorted_names(d, &count);
      put(t, ", \"names\": [");
      for (size_t k = 0; k < count; ++k) {
        put(t, "%s\"%s\"", k ? ", " : "", names[k]);
        free(names[k]);
      }
      put(t, "]");
      free(names);
    }
  } else if (!strcmp(op, "efault")) {
    NEED(1); /* efault CALL: CALL with the path pointer 0xdeadc0de */
    CALL(efault_call(a[1]));
    begin(t, op, ret < 0 ? -1 : 0, err);
  } else if (!strcmp(op, "tree")) {
    begin(t, op, 0, 0);
    put(t, ", \"entries\": [");
    int first = 1;
    put_tree(t, ".", &first);
    put(t, "]");
  } else if (!strcmp(op, "spawn")) {
    NEED(1); /* spawn Q: fork and exec a fresh fsexec as process Q */
    const int q = (int)num(a[1]);
    if (q < 0 || q >= MAX_PROCS || route[q] >= 0) {
      begin(t, op, -1, EEXIST);
    } else {
      spawn_worker(q, &children[q].cmd, &children[q].res, &children[q].pid);
      route[q] = q;
      begin(t, op, 0, 0);
    }
  } else {
    fprintf(stderr, "fsexec: unknown call %s\n", op);
    exit(2);
  }
  if (traced) put(t, ", \"fino\": %llu, \"others\": %d", inode, others);
  put(t, "}");
#undef CALL
#undef NEED
}

/* ---- processes ---- */

static void worker_loop(int id, int cmd_fd, int res_fd);

/* Moves a descriptor out of the way of the program's own numbers (pipes stay above 900). */
static int high(int fd) {
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 900);
  close(fd);
  return moved;
}

static void spawn_worker(int proc, int* cmd, struct reader** res, pid_t* pid) {
  int down[2], up[2];
  if (pipe2(down, O_CLOEXEC) || pipe2(up, O_CLOEXEC)) abort();
  const pid_t child = fork();
  if (child < 0) abort();
  if (child == 0) {
    /* the worker's ends, above the program's numbers, the only pipes the exec keeps */
    const int c = fcntl(down[0], F_DUPFD, 950), r = fcntl(up[1], F_DUPFD, 950);
    char id[16], cs[16], rs[16];
    snprintf(id, sizeof id, "%d", proc);
    snprintf(cs, sizeof cs, "%d", c);
    snprintf(rs, sizeof rs, "%d", r);
    execl(program, program, "--worker", id, cs, rs, (char*)NULL);
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  *cmd = high(down[1]);
  *res = calloc(1, sizeof **res);
  (*res)->fd = high(up[0]);
  *pid = child;
}

static void fork_worker(int q, struct text* t) {
  int down[2], up[2];
  if (pipe2(down, O_CLOEXEC) || pipe2(up, O_CLOEXEC)) abort();
  errno = SENTINEL;
  const pid_t child = fork();
  const int err = errno;
  if (child == 0) {
    /* The child keeps the parent's descriptors and streams, and none of its pipes. */
    for (int k = 0; k < MAX_PROCS; ++k) {
      if (children[k].pid > 0) {
        close(children[k].cmd);
        close(children[k].res->fd);
      }
    }
    close(out_fd);
    close(in_fd);
    close(down[1]);
    close(up[0]);
    for (int k = 0; k < MAX_PROCS; ++k) {
      children[k].pid = 0;
      route[k] = -1;
    }
    worker_loop(q, high(down[0]), high(up[1]));
    exit(0);
  }
  close(down[0]);
  close(up[1]);
  begin(t, "fork", child < 0 ? -1 : 0, err);
  put(t, ", \"child\": %d}", q);
  if (child > 0) {
    children[q].pid = child;
    children[q].cmd = high(down[1]);
    children[q].res = calloc(1, sizeof *children[q].res);
    children[q].res->fd = high(up[0]);
    route[q] = q;
  }
}

/* How a process ended, for the result of `exit` (and of a call it died in). */
static void put_ended(struct text* t, int status) {
  if (WIFSIGNALED(status))
    put(t, ", \"signal\": %d", WTERMSIG(status));
  else
    put(t, ", \"status\": %d", WEXITSTATUS(status));
}

static void forget(int child) {
  if (children[child].cmd >= 0) close(children[child].cmd);
  close(children[child].res->fd);
  free(children[child].res);
  children[child].pid = 0;
  for (int k = 0; k < MAX_PROCS; ++k)
    if (route[k] == child) route[k] = -1;
}

/* Handles one line of the sequence: performed here, or passed down to the child that leads to
 * its process. The result line is appended to t. */
static void handle(const char* line, struct text* t) {
  char copy[4096];
  snprintf(copy, sizeof copy, "%s", line);
  char* a[MAX_ARGS + 2];
  int n = 0;
  char* save = NULL;
  for (char* w = strtok_r(copy, " \t", &save); w && n < MAX_ARGS + 2;
       w = strtok_r(NULL, " \t", &save))
    a[n++] = w;
  if (n < 2) {
    fprintf(stderr, "fsexec: bad line: %s\n", line);
    exit(2);
  }
  const int proc = (int)num(a[0]);
  if (proc == self) {
    if (!strcmp(a[1], "fork")) {
      const int q = n > 2 ? (int)num(a[2]) : -1;
      if (q < 0 || q >= MAX_PROCS || route[q] >= 0) {
        begin(t, "fork", -1, EEXIST);
        put(t, "}");
      } else {
        fork_worker(q, t);
      }
    } else if (!strcmp(a[1], "exit")) {
      /* exit of this process is done by its parent, which waits for it */
      fprintf(stderr, "fsexec: a process cannot be told to exit by itself\n");
      exit(2);
    } else {
      perform(a + 1, n - 1, t);
    }
    return;
  }
  const int via = proc >= 0 && proc < MAX_PROCS ? route[proc] : -1;
  if (via < 0) {
    t->len = 0;
    put(t, "{\"p\": %d, \"op\": \"%s\", \"ret\": -1, \"errno\": 0, \"noproc\": 1}", proc, a[1]);
    return;
  }
  struct child* c = &children[via];
  char request[4200];
  const int len = snprintf(request, sizeof request, "%s\n", line);
  write_all(c->cmd, request, (size_t)len);
  if (via == proc && !strcmp(a[1], "exit")) {
    close(c->cmd);
    c->cmd = -1;
    int status = 0;
    waitpid(c->pid, &status, 0);
    put(t, "{\"p\": %d, \"op\": \"exit\", \"ret\": 0, \"errno\": 0", proc);
    put_ended(t, status);
    put(t, "}");
    forget(via);
    return;
  }
  struct text reply = {0};
  if (!read_line(c->res, &reply)) {
    /* the process died in the call */
    int status = 0;
    if (via == proc) waitpid(c->pid, &status, 0);
    put(t, "{\"p\": %d, \"op\": \"%s\", \"ret\": -1, \"errno\": 0, \"died\": 1", proc, a[1]);
    if (via == proc) put_ended(t, status);
    put(t, "}");
    if (via == proc) forget(via);
    free(reply.data);
    return;
  }
  put(t, "%s", reply.data);
  /* a process started below `via` is reached through it */
  if ((!strcmp(a[1], "fork") || !strcmp(a[1], "spawn")) && strstr(reply.data, "\"ret\": 0"))
    route[num(a[2])] = via;
  if (!strcmp(a[1], "exit")) route[proc] = -1;
  free(reply.data);
}

static void worker_loop(int id, int cmd_fd, int res_fd) {
  self = id;
  out_fd = res_fd;
  in_fd = cmd_fd;
  struct reader in = {.fd = cmd_fd};
  struct text line = {0}, t = {0};
  while (read_line(&in, &line)) {
    const int target = (int)num(line.data);
    char op[64] = "";
    sscanf(line.data, "%*s %63s", op);
    if (target == self && !strcmp(op, "exit")) break;
    t.len = 0;
    handle(line.data, &t);
    put(&t, "\n");
    write_all(out_fd, t.data, t.len);
  }
  /* Children first: every process this one started ends before it. */
  for (int k = 0; k < MAX_PROCS; ++k) {
    if (children[k].pid > 0) {
      close(children[k].cmd);
      waitpid(children[k].pid, NULL, 0);
    }
  }
  exit(0);
}

int main(int argc, char** argv) {
  program = "/proc/self/exe";
  char exe[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = '\0';
    program = strdup(exe);
  }
  umask(022);
  reset_state();
  trace_inodes = getenv("FSEXEC_TRACE_INODES") != NULL;
  if (argc == 5 && !strcmp(argv[1], "--worker")) {
    worker_loop((int)num(argv[2]), (int)num(argv[3]), (int)num(argv[4]));
    return 0;
  }
  int step = 0, arg = 1;
  if (arg < argc && !strcmp(argv[arg], "--step")) {
    step = 1;
    ++arg;
  }
  if (arg + 2 != argc) {
    fprintf(stderr, "usage: fsexec [--step] DIRECTORY SEQUENCE\n");
    return 2;
  }
  struct reader in = {.fd = open(argv[arg + 1], O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0 || chdir(argv[arg]) != 0) {
    fprintf(stderr, "fsexec: %s: %s\n", in.fd < 0 ? argv[arg + 1] : argv[arg], strerror(errno));
    return 2;
  }
  /* The coordinator: starts process 0, then passes on one line of the sequence at a time. */
  spawn_worker(0, &children[0].cmd, &children[0].res, &children[0].pid);
  route[0] = 0;
  struct reader go = {.fd = STDIN_FILENO};
  struct text line = {0}, t = {0}, answer = {0};
  while (read_line(&in, &line)) {
    if (line.len == 0 || line.data[0] == '#') continue;
    t.len = 0;
    handle(line.data, &t);
    put(&t, "\n");
    write_all(STDOUT_FILENO, t.data, t.len);
    if (step && !read_line(&go, &answer)) break;
  }
  for (int k = 0; k < MAX_PROCS; ++k) {
    if (children[k].pid > 0) {
      close(children[k].cmd);
      waitpid(children[k].pid, NULL, 0);
    }
  }
  return 0;
}
