#include "storage/real.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

namespace harmonia::storage {

namespace {
RealFunctions functions;
pthread_once_t resolved = PTHREAD_ONCE_INIT;
thread_local bool resolving = false;

void resolve() {
  resolving = true;
#define HARMONIA_RESOLVE(name, ret, params) \
  functions.name = reinterpret_cast<ret(*) params>(dlsym(RTLD_NEXT, #name));
  HARMONIA_WRAPPED(HARMONIA_RESOLVE)
#undef HARMONIA_RESOLVE
  // Without these the process cannot do I/O at all; nothing sensible can follow.
  if (!functions.write || !functions.open || !functions.close) std::abort();
  resolving = false;
}
}  // namespace

const RealFunctions& real() {
  pthread_once(&resolved, resolve);
  return functions;
}

bool resolving_real() { return resolving; }

ssize_t pwritev_all(int fd, const struct iovec* iov, int count, off64_t offset) {
  std::vector<struct iovec> rest(iov, iov + count);
  size_t first = 0;
  ssize_t written = 0;
  while (first < rest.size()) {
    const int batch = static_cast<int>(std::min<size_t>(rest.size() - first, IOV_MAX));
    const ssize_t n = real().pwritev64(fd, rest.data() + first, batch, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    written += n;
    offset += n;
    auto left = static_cast<size_t>(n);
    while (left > 0 && first < rest.size()) {
      const size_t take = std::min(left, rest[first].iov_len);
      rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + take;
      rest[first].iov_len -= take;
      left -= take;
      if (rest[first].iov_len == 0) ++first;
    }
    while (first < rest.size() && rest[first].iov_len == 0) ++first;
  }
  return written;
}

}  // namespace harmonia::storage
