#pragma once
// What every interposed function shares: the export macro, the exception boundary, and the
// "settle, run the real call, take back the position" shape of calls that must see the file.

#include <cerrno>
#include <mutex>

#include "runtime/bbio/staged_file.hpp"

#define HARMONIA_EXPORT extern "C" __attribute__((visibility("default")))

namespace harmonia::bbio {

/// Runs `body` (which returns -1/errno on failure) and turns exceptions into EIO. When it
/// succeeds, errno is left as the program set it: the library's own calls on the way (a stat, a
/// lookup that found nothing) must not show through, as some programs read errno after
/// successful calls (netCDF after a read).
template <class Body>
auto guarded(Body body) -> decltype(body()) {
  const int program_errno = errno;
  try {
    const auto result = body();
    if (result != static_cast<decltype(result)>(-1)) errno = program_errno;
    return result;
  } catch (...) {
    errno = EIO;
    return static_cast<decltype(body())>(-1);
  }
}

/// Under the file's lock, `staged_call()`; or `plain_call()` when the file stopped being staged
/// while this thread waited for the lock (another thread's fork, exec or close wrote it out and
/// released it): its bytes are in the file then, and the call goes to the file as without the
/// library. Exceptions become EIO.
template <class Staged, class Plain>
auto staged_or_plain(StagedFile* file, Staged staged_call, Plain plain_call)
    -> decltype(plain_call()) {
  return guarded([&]() -> decltype(plain_call()) {
    std::unique_lock lock(file->mutex);
    if (file->released()) {
      lock.unlock();
      return plain_call();
    }
    return staged_call();
  });
}

/// Settle, let the real call run on the file, then take back the position and size it may have
/// changed (the file's mutex held).
template <class Call>
auto settled_then(StagedFile* file, Call call) -> decltype(call()) {
  if (file->settle() != 0) return -1;
  const auto result = call();
  const int saved = errno;
  file->adopt_file_offset();
  errno = saved;
  return result;
}

/// settled_then under the file's lock (the call alone if the file was released meanwhile),
/// with exceptions turned into EIO.
template <class Call>
auto flushed_then(StagedFile* file, Call call) -> decltype(call()) {
  return staged_or_plain(
      file, [&] { return settled_then(file, call); }, call);
}

}  // namespace harmonia::bbio
