// stdio on staged files. glibc's FILE writes through its own internal write, not through the
// interposed one, so a FILE opened for writing on a staged file is built with fopencookie over
// the staged descriptor: every stdio function (fwrite, fputs, fputc, fprintf, fflush, fclose,
// ...) then reaches the staging code through the cookie, with libc's own buffering unchanged.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/bbio/open_files.hpp"
#include "runtime/bbio/registry.hpp"
#include "runtime/bbio/wrappers.hpp"
#include "storage/real.hpp"

using namespace harmonia::bbio;
using harmonia::storage::real;

extern "C" {
int dup3(int, int, int);
ssize_t read(int, void*, size_t);
ssize_t write(int, const void*, size_t);
off64_t lseek64(int, off64_t, int);
int close(int);
int open(const char*, int, ...);
}

namespace {

/// A cookie stream's descriptor, and the buffer libc's own stream would have had.
struct StreamCookie {
  int fd;
  std::vector<char> buffer;
  FILE* stream = nullptr;
};

/// Every cookie stream not yet closed, for flush_streams_at_exit. Never destroyed: streams are
/// still closed (by libc's own cleanup) after the library's destructors have run.
struct OpenStreams {
  std::mutex mutex;
  std::set<FILE*> streams;
};

OpenStreams& open_streams() {
  static auto* const streams = new OpenStreams;
  return *streams;
}

int fd_of(void* cookie) { return static_cast<StreamCookie*>(cookie)->fd; }

ssize_t cookie_read(void* cookie, char* buf, size_t size) { return read(fd_of(cookie), buf, size); }

ssize_t cookie_write(void* cookie, const char* buf, size_t size) {
  // The stream must not see a negative count: 0 reports the error (errno is set).
  const ssize_t n = write(fd_of(cookie), buf, size);
  return n < 0 ? 0 : n;
}

int cookie_seek(void* cookie, off64_t* position, int whence) {
  const off64_t at = lseek64(fd_of(cookie), *position, whence);
  if (at < 0) return -1;
  *position = at;
  return 0;
}

int cookie_close(void* cookie) {
  // libc is done with the stream's buffer once it calls this (it was the program's, to libc).
  const std::unique_ptr<StreamCookie> owned(static_cast<StreamCookie*>(cookie));
  {
    OpenStreams& open = open_streams();
    const std::lock_guard lock(open.mutex);
    open.streams.erase(owned->stream);
  }
  return close(owned->fd);
}

/// open(2) flags for an fopen mode; -1 for modes we leave to libc (unknown letters, ",ccs=").
int flags_for(const char* mode) {
  int flags;
  switch (mode[0]) {
    case 'r':
      flags = O_RDONLY;
      break;
    case 'w':
      flags = O_WRONLY | O_CREAT | O_TRUNC;
      break;
    case 'a':
      flags = O_WRONLY | O_CREAT | O_APPEND;
      break;
    default:
      return -1;
  }
  for (const char* p = mode + 1; *p; ++p) {
    switch (*p) {
      case '+':
        flags = (flags & ~O_ACCMODE) | O_RDWR;
        break;
      case 'b':
        break;
      case 'x':
        flags |= O_EXCL;
        break;
      case 'e':
        flags |= O_CLOEXEC;
        break;
      case 'm':
        break;  // mmap reads: a hint
      default:
        return -1;
    }
  }
  return flags;
}

FILE* cookie_stream(int fd, const char* mode) {
  const cookie_io_functions_t io{cookie_read, cookie_write, cookie_seek, cookie_close};
  // libc buffers a file's stream by its st_blksize (BUFSIZ at most), a cookie stream by
  // BUFSIZ: the same size keeps when the bytes reach the file (a write of a whole buffer or
  // more goes at once) as it would be without the library.
  struct stat64 st {};
  const std::size_t size =
      real().fstat64(fd, &st) == 0 && st.st_blksize > 0 && st.st_blksize < BUFSIZ
          ? static_cast<std::size_t>(st.st_blksize)
          : BUFSIZ;
  auto cookie = std::make_unique<StreamCookie>(StreamCookie{fd, std::vector<char>(size)});
  FILE* stream = fopencookie(cookie.get(), mode, io);
  if (!stream) return nullptr;
  StreamCookie* owned = cookie.release();  // the stream's now: cookie_close frees it
  owned->stream = stream;
  {
    OpenStreams& open = open_streams();
    const std::lock_guard lock(open.mutex);
    open.streams.insert(stream);
  }
  // Where it cannot be set, libc's own buffer serves.
  (void)setvbuf(stream, owned->buffer.data(), _IOFBF, size);
  // fileno() of a cookie stream is -1; programs that fsync(fileno(f)) need the real one.
  stream->_fileno = fd;
  return stream;
}

/// open(2) flags for a mode, counting modes left to libc as writing (the careful guess).
int flags_or_writing(const char* mode) {
  const int flags = flags_for(mode);
  return flags < 0 ? O_RDWR : flags;
}

FILE* open_stream(const char* path, const char* mode,
                  FILE* (*real_fopen)(const char*, const char*)) {
  const int flags = flags_for(mode);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
    // libc opens it with its internal open: a file staged here must be in the file first.
    if (guarded([&] { return before_open(AT_FDCWD, path, flags_or_writing(mode)); }) != 0)
      return nullptr;
    FILE* stream = real_fopen(path, mode);
    if (stream) open_files::changed(fileno(stream));
    return stream;
  }
  const int fd = open(path, flags, 0666);
  if (fd < 0) return nullptr;
  FILE* stream = staged(fd) ? cookie_stream(fd, mode) : real().fdopen(fd, mode);
  if (!stream) {
    const int saved = errno;
    close(fd);
    errno = saved;
  }
  return stream;
}

}  // namespace

HARMONIA_EXPORT FILE* fopen(const char* path, const char* mode) {
  return open_stream(path, mode, real().fopen);
}

HARMONIA_EXPORT FILE* fopen64(const char* path, const char* mode) {
  return open_stream(path, mode, real().fopen64);
}

namespace {

/// Whether `stream` is a cookie stream (ours): glibc keeps a stream's function table right after
/// its FILE, and every cookie stream shares one.
bool is_cookie_stream(FILE* stream) {
  const auto table_of = [](FILE* s) {
    return *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(s) + sizeof(FILE));
  };
  static void* const cookie_table = [&] {
    FILE* probe =
        fopencookie(nullptr, "r", cookie_io_functions_t{nullptr, nullptr, nullptr, nullptr});
    void* table = probe ? table_of(probe) : nullptr;
    if (probe) fclose(probe);
    return table;
  }();
  return cookie_table && table_of(stream) == cookie_table;
}

// libio's stream state bits (glibc's libio.h; part of the FILE layout since glibc 2.1).
constexpr int kNoReads = 0x0004, kNoWrites = 0x0008, kEofSeen = 0x0010, kErrSeen = 0x0020,
              kAppending = 0x1000;

/// freopen of a cookie stream (glibc's own freopen writes through the stream's wide-character
/// state, which cookie streams do not have, and crashes): the new file is opened through the
/// interposed open and put under the stream's descriptor, so the FILE stays the same object.
FILE* reopen_cookie_stream(const char* path, const char* mode, FILE* stream) {
  (void)fflush(stream);  // as freopen: a failure is ignored
  const int fd = fileno(stream);
  const int flags = flags_for(mode);
  std::string target = path ? path : "";
  if (!path) {
    char link[64], resolved[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, resolved, sizeof(resolved) - 1);
    if (n > 0) target.assign(resolved, static_cast<size_t>(n));
  }
  const int opened = flags < 0 || target.empty() ? -1 : open(target.c_str(), flags, 0666);
  if (opened < 0 || dup3(opened, fd, flags & O_CLOEXEC) < 0) {
    const int saved = flags < 0 ? EINVAL : errno;
    if (opened >= 0) close(opened);
    fclose(stream);  // freopen closes the stream when it fails
    errno = saved;
    return nullptr;
  }
  close(opened);
  stream->_flags &= ~(kNoReads | kNoWrites | kEofSeen | kErrSeen | kAppending);
  if ((flags & O_ACCMODE) == O_RDONLY) stream->_flags |= kNoWrites;
  if ((flags & O_ACCMODE) == O_WRONLY) stream->_flags |= kNoReads;
  if (flags & O_APPEND) stream->_flags |= kAppending;
  stream->_offset = -1;  // unknown: asked of the cookie's seek
  stream->_mode = 0;     // orientation unbound, as after freopen
  return stream;
}

/// freopen closes the stream's descriptor and opens the new file with libc's internal calls,
/// out of our sight: the staged file behind the stream is written and forgotten first, the file
/// about to be opened leaves staging, and the reopened file is plain I/O for good.
FILE* reopen_stream(const char* path, const char* mode, FILE* stream,
                    FILE* (*real_freopen)(const char*, const char*, FILE*)) {
  if (stream && is_cookie_stream(stream)) return reopen_cookie_stream(path, mode, stream);
  if (stream) {
    (void)fflush(stream);
    const int fd = fileno(stream);
    if (staged(fd) && guarded([&] { return forget(fd); }) != 0)
      report(std::string("freopen: staged writes of descriptor ") + std::to_string(fd) +
             " could not be written (" + std::strerror(errno) + ")");
  }
  if (path && guarded([&] { return before_open(AT_FDCWD, path, flags_or_writing(mode)); }) != 0)
    return nullptr;
  FILE* reopened = real_freopen(path, mode, stream);
  if (reopened) {
    open_files::changed(fileno(reopened));
    const int saved = errno;
    (void)guarded([&] { return plain_io_fd(fileno(reopened)); });
    errno = saved;
  }
  return reopened;
}

}  // namespace

HARMONIA_EXPORT FILE* freopen(const char* path, const char* mode, FILE* stream) {
  return reopen_stream(path, mode, stream, real().freopen);
}

HARMONIA_EXPORT FILE* freopen64(const char* path, const char* mode, FILE* stream) {
  return reopen_stream(path, mode, stream, real().freopen64);
}

namespace {

/// `close(stream)`, libc's, which closes the stream's descriptor `fd` with its own call, out of
/// the library's sight: the number is looked at again (open_files).
template <class Stream, class Close>
int closing_stream(Stream* stream, int fd, Close close) {
  const int closed = close(stream);
  open_files::changed(fd);
  return closed;
}

/// The descriptor under `stream`, or -1 (a cookie stream has none); errno is kept.
int descriptor_of(FILE* stream) {
  const int saved = errno;
  const int fd = stream ? fileno(stream) : -1;
  errno = saved;
  return fd;
}

}  // namespace

HARMONIA_EXPORT int fclose(FILE* stream) {
  return closing_stream(stream, descriptor_of(stream), real().fclose);
}

HARMONIA_EXPORT int pclose(FILE* stream) {
  return closing_stream(stream, descriptor_of(stream), real().pclose);
}

HARMONIA_EXPORT int closedir(DIR* directory) {
  // libc answers a null stream with EINVAL; its declaration says non-null, so the test reads
  // the pointer through a volatile the compiler cannot reason away.
  DIR* volatile given = directory;
  const int saved = errno;
  const int fd = given ? dirfd(directory) : -1;
  errno = saved;
  return closing_stream(directory, fd, real().closedir);
}

HARMONIA_EXPORT FILE* fdopen(int fd, const char* mode) {
  if (!staged(fd) || flags_for(mode) < 0) return real().fdopen(fd, mode);
  return cookie_stream(fd, mode);
}

namespace harmonia::bbio {

void flush_streams_at_exit() {
  OpenStreams& open = open_streams();
  // Not waited for either: a child forked while another thread held it would wait forever.
  const std::unique_lock lock(open.mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (FILE* stream : open.streams) {
    // A stream another thread holds is left to libc's own flush, as it would be without the
    // library: waiting for it could hang the exit (a thread blocked reading holds its lock).
    if (ftrylockfile(stream) != 0) continue;
    (void)fflush_unlocked(stream);
    funlockfile(stream);
  }
}

}  // namespace harmonia::bbio
