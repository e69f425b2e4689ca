#pragma once
/// @file Paths resolved beneath a directory with no symbolic link followed (docs/security.md,
/// "Paths and fences"): harmonia-bbd's store, drains and fences, libharmonia's fences and
/// harmonia-recover's logs open every path below their root this way, by descriptor, so a link
/// planted or swapped in by another user can never take them outside it.
///
/// Only system calls (no libc function libharmonia interposes), so libharmonia can use it too.

#include <sys/types.h>

#include <string>
#include <utility>

namespace harmonia::common {

/// Whether `path` can name something beneath a directory: not empty, not absolute, no ".."
/// part and no NUL byte.
bool relative_beneath(const std::string& path);

/// Opens `path` beneath the directory `dirfd` (O_CLOEXEC always): openat2(2) with
/// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or, where the kernel has no openat2 (ENOSYS), one
/// openat(2) per part, each with O_NOFOLLOW from the descriptor of the part before. The
/// descriptor, or -1 with errno: EXDEV for a name that would leave (absolute, a ".." part),
/// ELOOP for a symbolic link anywhere on the way, the last part included.
int open_beneath(int dirfd, const std::string& path, int flags, mode_t mode = 0);

/// mkdir -p of `dir` beneath `dirfd`, each new directory made with mkdirat(2) relative to its
/// parent's descriptor and opened as above; a directory it makes gets exactly `mode` (set with
/// fchmod through its descriptor, whatever the umask), existing ones keep theirs. The descriptor
/// of `dir` (opened O_DIRECTORY | `flags`; `dirfd` itself duplicated when `dir` is empty), or -1
/// with errno as open_beneath's.
int make_dirs_beneath(int dirfd, const std::string& dir, mode_t mode, int flags);

/// "DIRECTORY" and "NAME" of "DIRECTORY/NAME" ("" and `path` without a slash).
std::pair<std::string, std::string> split_last(const std::string& path);

/// "PATH: REASON" for `error` from the calls above, saying why a path was refused.
std::string beneath_error(const std::string& path, int error);

/// close(2) by system call (never libharmonia's close wrapper); keeps errno.
void close_fd(int fd);

/// For tests: false makes open_beneath take the O_NOFOLLOW walk as if openat2 were missing.
void use_openat2(bool use);

}  // namespace harmonia::common
