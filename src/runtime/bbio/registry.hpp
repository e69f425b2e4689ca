#pragma once
// Which application descriptors are staged, and the library-wide state: configuration, the
// staged files, flush-everything for fork, exec and exit.

#include <string>

#include "runtime/bbio/config.hpp"
#include "runtime/bbio/staged_file.hpp"

namespace harmonia::bbio {

/// The staged file behind `fd`, or nullptr (the fast path of every wrapper: one atomic load).
StagedFile* staged(int fd);

/// After the real open returned `fd`: stage it if it is a regular file opened for writing whose
/// path the configuration wants.
void consider(int fd, int flags);
/// Stage `fd` whatever its path (BBIO_Enable). Returns 0 or -1 with errno.
int stage_fd(int fd);
/// `new_fd` now refers to the same open file as `fd` (dup family).
void alias(int fd, int new_fd);
/// `fd` is being closed: forget it; flushes and releases the staged file with its last
/// descriptor. Returns 0, or -1 with errno if that flush failed.
int forget(int fd);
/// Flush and stop staging the file behind `fd` (all its descriptors). Returns 0 or -1.
int unstage(int fd);
/// Flush every staged file; returns 0 or -1 (errno from the first failure).
int flush_all();
/// Flush and stop staging every file; with `final`, stage nothing from now on.
int unstage_all(bool final);

/// Replace the configuration (BBIO_Init); files already staged keep their storage.
void set_config(const Config& config);
/// The current configuration (read from the environment on first use).
Config current_config();

}  // namespace harmonia::bbio
