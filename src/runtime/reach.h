// Asking the network whether a silent rank's host is still there, to tell a
// dead process from a lost host (runtime/attempt_outcome.h).
//
// A UDP datagram to a port nobody listens on comes back as an ICMP "port
// unreachable" from the host's kernel: the host is up and the process that
// held the port is gone. Nothing coming back means the link or the host is
// down. The rank's own port is asked from the supervisor's heartbeat socket
// (the peer the rank's connected socket accepts, so a live rank would not
// answer with an error), whose errors arrive through IP_RECVERR's queue.
#pragma once
#include <sys/socket.h>

#include <string>
#include <vector>

#include "runtime/attempt_outcome.h"

namespace crucible::runtime {

// How long an address gets to answer (a LAN's round trip is far below it).
inline constexpr double kReachTimeout_s = 0.5;

// Makes `fd` (an unconnected UDP socket) queue the ICMP errors of what it
// sends (IP_RECVERR), for probe_ranks.
void enable_send_errors(int fd);
// Empties `fd`'s error queue: the destinations whose datagrams came back
// refused (each host's kernel answers at most about once a second per peer:
// ICMP rate limiting, so every answer counts).
std::vector<sockaddr_storage> take_send_errors(int fd);
// Whether `a` and `b` are the same IPv4 address and port.
bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b);

// Sends one datagram from `fd` to each address and waits up to `timeout_s`
// for the hosts' answers: kAnswers where an error came back (the port is
// closed), kNoAnswer where nothing did. Errors queued before the call are
// the caller's (take_send_errors).
std::vector<Reach> probe_ranks(int fd, const std::vector<sockaddr_storage>& addrs, double timeout_s);

// Whether `host` (a name or an address) answers at all: a datagram to its
// discard port comes back refused from a live host. False when it cannot be
// resolved or nothing answers within `timeout_s`.
bool host_answers(const std::string& host, double timeout_s);

// The numeric address of a socket address ("10.0.0.2"); "" for other families.
std::string address_text(const sockaddr_storage& a);

}  // namespace crucible::runtime
