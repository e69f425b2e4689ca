#pragma once
// The files behind the process's descriptors, as last looked at: what staging asks before it
// takes a file that exists ("is it open through another descriptor?"). Looking at every
// descriptor on each such open would cost a process holding 10,000 descriptors 10 ms an open,
// under the registry's lock. Instead the file behind a number is looked at (fstat) once, and again
// only after a call the library sees opened, closed or replaced that number; poll(2) tells which
// numbers not remembered open at the bottom of the table are open now, so a descriptor the
// library did not see opened (libc's own opens, one received over a socket, a raw system call),
// which takes the lowest free number, is looked at too. Left unseen: a number closed and opened
// again, both by calls the library does not see, between two looks; and one put high by a call it
// does not see.

#include <sys/types.h>

namespace harmonia::bbio::open_files {

/// A call the library sees opened, closed or replaced descriptor `fd`: what it refers to is
/// looked at again. Lock-free and async-signal-safe; a no-op until the first look.
void changed(int fd) noexcept;
/// changed() for every descriptor in [first, last].
void changed_range(unsigned first, unsigned last) noexcept;
/// Whether a descriptor of this process other than `fd` refers to the file (`device`, `inode`).
/// true when the process's descriptors cannot be listed (the careful answer).
bool others_refer_to(int fd, dev_t device, ino_t inode);

}  // namespace harmonia::bbio::open_files
