#pragma once
/// @file The signals an epoll-driven daemon stops on.

namespace harmonia::common {

/// Blocks SIGINT and SIGTERM (the caller's epoll loop reads them from the returned descriptor
/// and shuts down cleanly) and ignores SIGPIPE (a peer that hung up is an error on its socket,
/// not the end of the daemon). Returns a non-blocking, close-on-exec signalfd for SIGINT and
/// SIGTERM, or -1 with errno set.
int stop_signals();

}  // namespace harmonia::common
