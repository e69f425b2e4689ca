#include "common/signals.hpp"

#include <sys/signalfd.h>

#include <csignal>

namespace harmonia::common {

int stop_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

}  // namespace harmonia::common
