#include "core/listen_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace crucible {

Status check_listen(const std::string& bind, int port, const std::string& who) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (fd < 0 || ::inet_pton(AF_INET, bind.c_str(), &a.sin_addr) != 1) {
    if (fd >= 0) ::close(fd);
    return Status::invalid(who + " " + bind + " is not an IPv4 address to listen on");
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int err = errno;
  ::close(fd);
  if (rc != 0)
    return Status::invalid(who + " cannot listen on " + bind + ":" + std::to_string(port) + ": " +
                           std::strerror(err));
  return Status::ok();
}

}  // namespace crucible
