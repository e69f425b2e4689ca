#pragma once
// Which application descriptors are staged, and the library-wide state: configuration, the
// staged files, flush-everything for fork, exec and exit.

#include <sys/stat.h>

#include <string>

#include "runtime/bbio/config.hpp"
#include "runtime/bbio/staged_file.hpp"

namespace harmonia::bbio {

/// The staged file behind `fd`, or nullptr (the fast path of every wrapper: one atomic load).
StagedFile* staged(int fd);

/// Whether an open with `flags` that creates its file would be staged here if the path is
/// wanted: it writes, and staging is on and not over.
bool stages_new_files(int flags);
/// After the real open returned `fd`: stage it if it is a regular file opened for writing whose
/// path the configuration wants. A second open file description of a file this process stages
/// (another open of the same file, for reading or writing) sends that file to plain I/O first.
/// `created`: this open created the file, so no other descriptor of the process can refer to it.
void consider(int fd, int flags, bool created);
/// Whether this process stages any file now: the fast path of the calls that name a file by
/// path or touch a descriptor that is not staged (one atomic load).
bool any_staged();
/// The staged file with this identity, or nullptr. Lock its mutex before using it.
StagedFile* staged_inode(dev_t device, ino_t inode);
/// The staged file `path` (relative to `dirfd`) names, or nullptr; `flags` may hold
/// AT_SYMLINK_NOFOLLOW.
StagedFile* staged_path(int dirfd, const char* path, int flags);
/// Sends the file with this identity to plain I/O: every staged file of it is settled (staged
/// bytes written, buffer nodes drained) and stops being staged, and the file is never staged again
/// in this process (mmap, a second open, asynchronous I/O). Returns 0, or -1 with errno if its
/// bytes could not be written (it then stays staged).
int plain_io(dev_t device, ino_t inode);
/// plain_io for the file behind `fd`, staged or not.
int plain_io_fd(int fd);
/// Before a real open of `path` (relative to `dirfd`, open(2) `flags`): a file this process
/// stages goes to plain I/O first, so that the new descriptor (and O_TRUNC) sees its bytes in
/// program order. Returns 0, or -1 with errno when those bytes could not be written.
int before_open(int dirfd, const char* path, int flags);
/// The absolute path, its symbolic links resolved, that `path` names relative to `dirfd`
/// (AT_FDCWD: the working directory; "": the file `dirfd` is open on, as with AT_EMPTY_PATH);
/// "" when there is none (no such file, a deleted directory, a directory out of reach).
std::string resolved_path(int dirfd, const char* path);
/// Close-to-open coherence: before this process opens the existing regular file `st` at `path`
/// (relative to `dirfd`; "": the file `dirfd` is open on), or changes it by path or through a
/// descriptor, every other process writes out what it stages
/// of it, and the buffer nodes drain what they hold of it, through the scheduler daemon. 0, or
/// -1 with EIO when some of its bytes stayed on a buffer node that is down.
int settle_elsewhere(int dirfd, const char* path, const struct stat64& st);
/// The program `path`, which the kernel refused to execute as open for writing (ETXTBSY): when
/// it is beneath the buffer root, the buffer nodes drain what they hold of it, through the
/// scheduler daemon, and so close the descriptor they write it through. Whether it is beneath
/// the root (then the exec is worth trying again); a failed drain is left to that exec.
bool settle_program(const char* path);
/// Another process is about to open a file (the daemon's SettleOrder): every staged file of it
/// here is settled, so that the opener sees its bytes; it stays staged. The file is known by its
/// identity when `same_host`, else by its absolute path.
void settle_for_reader(const std::string& path, bool same_host, dev_t device, ino_t inode);
/// forget() for every staged descriptor in [first, last] (close_range, closefrom); 0 or -1.
int forget_range(unsigned first, unsigned last);
/// Stage `fd` whatever its path (BBIO_Enable). Returns 0 or -1 with errno.
int stage_fd(int fd);
/// `new_fd` now refers to the same open file as `fd` (dup family).
void alias(int fd, int new_fd);
/// `fd` is being closed: forget it; flushes and releases the staged file with its last
/// descriptor. Returns 0, or -1 with errno if that flush failed.
int forget(int fd);
/// Whether a file left staging while the program kept it open (its descriptor parked).
bool any_parked();
/// close(fd) of a descriptor that is not staged, then our parked descriptors of its file: the
/// program's close has dropped its POSIX locks on the file, ours may go too.
int close_unparking(int fd);
/// Flush and stop staging the file behind `fd` (all its descriptors). Returns 0 or -1.
int unstage(int fd);
/// Flush every staged file; returns 0 or -1 (errno from the first failure).
int flush_all();
/// Flush and stop staging every file; with `final`, stage nothing from now on.
int unstage_all(bool final);
/// exit(): write out what the program's streams over staged files still buffer, as libc would
/// a moment later, but while those files are still staged (libc flushes streams only after the
/// library's destructors). Defined with the streams, in stdio.cpp.
void flush_streams_at_exit();

/// Replace the configuration (BBIO_Init); files already staged keep their storage.
void set_config(const Config& config);
/// The current configuration (read from the environment on first use).
Config current_config();

}  // namespace harmonia::bbio
