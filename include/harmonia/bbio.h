/* libharmonia: stage an application's writes in RAM or on a node-local device and flush them to
 * their files when told (the BBIO interface of Kougkas et al., e-Science 2016, section IV-B).
 *
 * Every function returns 0 on success and -1 on failure with errno set; no C++ exception ever
 * crosses this interface. The library is usable linked or through LD_PRELOAD (see
 * docs/staging-library.md for the environment variables). */
#ifndef HARMONIA_BBIO_H
#define HARMONIA_BBIO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Called before any non-empty flush of `fd`, whatever triggered it. */
typedef void (*BBIO_Callback)(int fd);

/** Configure staging: `path` is a directory for on-disk logs (NULL: RAM); `size` is the most a
 *  single file may hold staged before it is flushed (0: the default). Replaces the environment's
 *  configuration; files already staged are flushed first. */
int BBIO_Init(const char* path, size_t size);
/** Stage writes to `fd` (a regular file open for writing). */
int BBIO_Enable(int fd);
/** Stop staging `fd`, flushing what it holds first. */
int BBIO_Disable(int fd);
/** Write everything staged for `fd` to its file; returns when the data is written. */
int BBIO_Flush(int fd);
/** Flush every staged file and stop staging. */
int BBIO_Finalize(void);
/** Install (or with NULL, remove) the callback run before each non-empty flush of `fd`. */
int BBIO_On_flush(int fd, BBIO_Callback cb);

/** Mark the start and end of an I/O phase (for the coordination service and phase traces).
 *  `name` may be NULL; `expected_bytes` may be 0 when unknown. Phases do not nest. */
int harmonia_io_begin(const char* name, size_t expected_bytes);
int harmonia_io_end(void);

#ifdef __cplusplus
}
#endif

#endif /* HARMONIA_BBIO_H */
