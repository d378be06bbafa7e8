#include "runtime/reach.h"

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.h"

namespace crucible::runtime {

namespace {

double mono_s() { return now_ns() * 1e-9; }

// One queued error: the destination of the datagram that caused it. False
// when the queue is empty.
bool next_error(int fd, sockaddr_storage& dest) {
  char data[64], control[512];
  iovec iov{data, sizeof data};
  msghdr m{};
  m.msg_name = &dest;
  m.msg_namelen = sizeof dest;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  return ::recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) >= 0;
}

}  // namespace

bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != AF_INET || b.ss_family != AF_INET) return false;
  const auto& x = reinterpret_cast<const sockaddr_in&>(a);
  const auto& y = reinterpret_cast<const sockaddr_in&>(b);
  return x.sin_addr.s_addr == y.sin_addr.s_addr && x.sin_port == y.sin_port;
}

void enable_send_errors(int fd) {
  int on = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_RECVERR, &on, sizeof on);
}

std::vector<sockaddr_storage> take_send_errors(int fd) {
  std::vector<sockaddr_storage> out;
  for (sockaddr_storage dest{}; next_error(fd, dest); dest = {}) out.push_back(dest);
  return out;
}

std::vector<Reach> probe_ranks(int fd, const std::vector<sockaddr_storage>& addrs, double timeout_s) {
  std::vector<Reach> out(addrs.size(), Reach::kNoAnswer);
  static const char kProbe[] = "{\"t\":\"probe\"}";
  for (const sockaddr_storage& a : addrs)
    ::sendto(fd, kProbe, sizeof kProbe - 1, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&a),
             a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  const double deadline = mono_s() + timeout_s;
  size_t answered = 0;
  while (answered < addrs.size()) {
    const double left = deadline - mono_s();
    if (left <= 0) break;
    pollfd p{fd, 0, 0};  // POLLERR is reported whatever the events asked
    ::poll(&p, 1, std::max(1, int(left * 1000)));
    sockaddr_storage dest{};
    while (next_error(fd, dest))
      for (size_t i = 0; i < addrs.size(); ++i)
        if (out[i] == Reach::kNoAnswer && same_endpoint(dest, addrs[i])) {
          out[i] = Reach::kAnswers;
          ++answered;
        }
  }
  return out;
}

bool host_answers(const std::string& host, double timeout_s) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return false;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  bool answered = false;
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    // A connected socket reports the host's "port unreachable" as ECONNREFUSED.
    const double deadline = mono_s() + timeout_s;
    (void)::send(fd, "?", 1, MSG_DONTWAIT);
    while (!answered && mono_s() < deadline) {
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, std::max(1, int((deadline - mono_s()) * 1000)));
      char c;
      const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
      answered = n >= 0 || errno == ECONNREFUSED;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return answered;
}

std::string address_text(const sockaddr_storage& a) {
  if (a.ss_family != AF_INET) return "";
  char buf[INET_ADDRSTRLEN] = {0};
  const auto& in = reinterpret_cast<const sockaddr_in&>(a);
  return ::inet_ntop(AF_INET, &in.sin_addr, buf, sizeof buf) ? buf : "";
}

}  // namespace crucible::runtime
