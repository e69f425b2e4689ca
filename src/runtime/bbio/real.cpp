#include "runtime/bbio/real.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <cstdlib>

namespace harmonia::bbio {

namespace {
RealFunctions functions;
pthread_once_t resolved = PTHREAD_ONCE_INIT;

void resolve() {
#define HARMONIA_RESOLVE(name, ret, params) \
  functions.name = reinterpret_cast<ret(*) params>(dlsym(RTLD_NEXT, #name));
  HARMONIA_WRAPPED(HARMONIA_RESOLVE)
#undef HARMONIA_RESOLVE
  // Without these the process cannot do I/O at all; nothing sensible can follow.
  if (!functions.write || !functions.open || !functions.close) std::abort();
}
}  // namespace

const RealFunctions& real() {
  pthread_once(&resolved, resolve);
  return functions;
}

}  // namespace harmonia::bbio
