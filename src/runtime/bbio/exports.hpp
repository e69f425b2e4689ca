#pragma once
// What libharmonia.so exports besides the interposed libc calls (HARMONIA_WRAPPED in
// storage/real.hpp): wrappers with no real function of their own to resolve (the execl family
// collects its varargs and calls the real execve or execvp; vfork is the library's fork) and
// the C API of include/harmonia/bbio.h with the phase declarations. The linker version script
// is generated from both lists at build time (version_script.cpp), and the link fails when a
// listed name has no definition (--no-undefined-version), so a list and the wrappers cannot
// drift apart.

// X(name)
#define HARMONIA_EXPORTED(X) \
  X(execl)                   \
  X(execlp)                  \
  X(execle)                  \
  X(vfork)                   \
  X(BBIO_Init)               \
  X(BBIO_Enable)             \
  X(BBIO_Disable)            \
  X(BBIO_Flush)              \
  X(BBIO_Finalize)           \
  X(BBIO_On_flush)           \
  X(harmonia_io_begin)       \
  X(harmonia_io_end)         \
  X(harmonia_io_begin_)      \
  X(harmonia_io_end_)
