// Whether a TCP listener could bind bind:port (IPv4), asked before handing
// the address to an HTTP library that reports a busy port vaguely or not at
// all (prometheus-cpp's CivetServer: "null context"; cpp-httplib: false).
// Binds a socket once (SO_REUSEADDR, as the libraries do) and closes it.
// Invalid, starting with `who` ("[metrics]"), naming the address and the
// OS's reason. Port 0 (any free port) always binds.
#pragma once
#include <string>

#include "core/status.h"

namespace crucible {

Status check_listen(const std::string& bind, int port, const std::string& who);

}  // namespace crucible
