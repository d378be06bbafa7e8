// Small process helpers shared by the supervisor and its ranks.
#pragma once
#include <sys/types.h>

#include <string>

namespace crucible {

// True while process `pid` of this machine exists and has not exited: a
// zombie (exited, not yet reaped by its parent) counts as gone, so a watcher
// does not depend on when the parent reaps.
bool process_alive(pid_t pid);

// The path of this program (/proc/self/exe), to start more copies of it;
// "crucible" (looked up in PATH) if it cannot be read.
std::string self_executable();

// This machine's host name.
std::string host_name();

}  // namespace crucible
