#pragma once
// How libharmonia speaks to the user: one line on stderr per distinct message, whatever layer
// it comes from.

#include <string>

namespace harmonia::bbio {

/// Reports a problem once per message on stderr ("libharmonia: ..."), using the real write.
void report(const std::string& message);

}  // namespace harmonia::bbio
