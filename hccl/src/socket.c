/* TCP helpers: every blocking step is bounded by a deadline and polls an
 * abort word, so a silent or dead peer becomes an error, never a hang. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hpu/env.h"
#include "internal.h"
#include "wait_policy.h"

const char *hccl_addr_str(const struct sockaddr_in *a, char *buf, size_t len) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
  snprintf(buf, len, "%s:%d", ip, ntohs(a->sin_port));
  return buf;
}

/* HCCL_SOCKET_IFNAME names the interface (a leading '^' excludes); otherwise
 * the first interface that is up and not loopback, else loopback. */
hcclResult_t hccl_sock_pick_addr(struct sockaddr_in *addr) {
  const char *want = getenv("HCCL_SOCKET_IFNAME");
  int exclude = want && want[0] == '^';
  if (exclude) want++;
  struct ifaddrs *ifs = NULL, *it;
  if (getifaddrs(&ifs) != 0) return hccl_err(hcclSystemError, "getifaddrs: %s", strerror(errno));
  struct sockaddr_in lo = {0}, pick = {0};
  int have_lo = 0, have = 0;
  for (it = ifs; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || !(it->ifa_flags & IFF_UP)) continue;
    int match = want && *want ? strncmp(it->ifa_name, want, strlen(want)) == 0 : -1;
    if (match == 0 && !exclude) continue;
    if (match == 1 && exclude) continue;
    if (it->ifa_flags & IFF_LOOPBACK) {
      if (!have_lo) { memcpy(&lo, it->ifa_addr, sizeof lo); have_lo = 1; }
      if (match == 1 && !exclude && !have) { memcpy(&pick, it->ifa_addr, sizeof pick); have = 1; }
      continue;
    }
    if (!have) { memcpy(&pick, it->ifa_addr, sizeof pick); have = 1; }
  }
  freeifaddrs(ifs);
  if (!have && !have_lo) {
    if (want && *want) return hccl_err(hcclSystemError, "no IPv4 interface matches HCCL_SOCKET_IFNAME=%s", getenv("HCCL_SOCKET_IFNAME"));
    lo.sin_family = AF_INET;
    lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    have_lo = 1;
  }
  *addr = have ? pick : lo;
  addr->sin_port = 0;
  return hcclSuccess;
}

/* "host:port" with a numeric or resolvable IPv4 host. */
hcclResult_t hccl_sock_parse(const char *hp, struct sockaddr_in *addr) {
  char host[256];
  const char *colon = strrchr(hp, ':');
  if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof host)
    return hccl_err(hcclInvalidArgument, "bad address '%s' (expected host:port)", hp);
  memcpy(host, hp, (size_t)(colon - hp));
  host[colon - hp] = 0;
  long long port;
  if (hpu_parse_int("port", colon + 1, 1, 65535, &port) != HPU_SUCCESS)
    return hccl_err(hcclInvalidArgument, "bad port in '%s': %s", hp, hpu_last_error());
  memset(addr, 0, sizeof *addr);
  addr->sin_family = AF_INET;
  addr->sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &addr->sin_addr) == 1) return hcclSuccess;
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_INET;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
    return hccl_err(hcclInvalidArgument, "cannot resolve host '%s'", host);
  addr->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return hcclSuccess;
}

void hccl_sock_tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

hcclResult_t hccl_sock_listen(const struct sockaddr_in *addr, int *fd, struct sockaddr_in *bound) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return hccl_err(hcclSystemError, "socket: %s", strerror(errno));
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  char ab[64];
  if (bind(s, (const struct sockaddr *)addr, sizeof *addr) != 0) {
    int e = errno;
    close(s);
    return hccl_err(hcclSystemError, "bind %s: %s", hccl_addr_str(addr, ab, sizeof ab), strerror(e));
  }
  if (listen(s, 512) != 0 || set_nonblock(s) != 0) {
    int e = errno;
    close(s);
    return hccl_err(hcclSystemError, "listen: %s", strerror(e));
  }
  if (bound) {
    socklen_t l = sizeof *bound;
    getsockname(s, (struct sockaddr *)bound, &l);
  }
  *fd = s;
  return hcclSuccess;
}

static int remaining_ms(int64_t deadline) {
  int64_t left = deadline - hccl_now_ns();
  if (left <= 0) return 0;
  left = left / 1000000 + 1;
  return left > HCCL_SOCK_POLL_MAX_MS ? HCCL_SOCK_POLL_MAX_MS : (int)left;   /* wake up often enough to see aborts */
}

/* Retries refused connections until the deadline (the peer may not listen yet). */
hcclResult_t hccl_sock_connect(const struct sockaddr_in *addr, int64_t deadline, int *fd) {
  char ab[64];
  int delay_us = HCCL_CONNECT_RETRY_FIRST_US;
  for (;;) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return hccl_err(hcclSystemError, "socket: %s", strerror(errno));
    int rc = connect(s, (const struct sockaddr *)addr, sizeof *addr);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      for (;;) {
        struct pollfd p = {s, POLLOUT, 0};
        int ms = remaining_ms(deadline);
        if (ms == 0) { err = ETIMEDOUT; break; }
        int pr = poll(&p, 1, ms);
        if (pr > 0) {
          socklen_t l = sizeof err;
          getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
          break;
        }
        if (pr < 0 && errno != EINTR) { err = errno; break; }
      }
    }
    if (err == 0) {
      hccl_sock_tune(s);
      *fd = s;
      return hcclSuccess;
    }
    close(s);
    if ((err == ECONNREFUSED || err == ECONNRESET || err == EAGAIN || err == ENETUNREACH ||
         err == EHOSTUNREACH) && hccl_now_ns() < deadline) {
      usleep((useconds_t)delay_us);
      if (delay_us < HCCL_CONNECT_RETRY_CAP_US) delay_us *= 2;
      continue;
    }
    return hccl_err(hcclRemoteError, "connect to %s: %s", hccl_addr_str(addr, ab, sizeof ab),
                    err == ETIMEDOUT ? "timed out" : strerror(err));
  }
}

hcclResult_t hccl_sock_accept(int lfd, int64_t deadline, int *fd) {
  for (;;) {
    int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (s >= 0) {
      hccl_sock_tune(s);
      *fd = s;
      return hcclSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return hccl_err(hcclSystemError, "accept: %s", strerror(errno));
    int ms = remaining_ms(deadline);
    if (ms == 0) return hccl_err(hcclRemoteError, "timed out waiting for a connection");
    struct pollfd p = {lfd, POLLIN, 0};
    poll(&p, 1, ms);
  }
}

static hcclResult_t sock_xfer(int fd, void *buf, size_t n, int64_t deadline, const atomic_int *abort_flag,
                              int sending) {
  char *p = buf;
  while (n > 0) {
    ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
      continue;
    }
    if (k == 0 && !sending) return hccl_err(hcclRemoteError, "connection closed by peer");
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return hccl_err(hcclRemoteError, "%s: %s", sending ? "send" : "recv", strerror(errno));
    if (abort_flag && atomic_load(abort_flag)) return hccl_err(hcclRemoteError, "aborted");
    int ms = remaining_ms(deadline);
    if (ms == 0) return hccl_err(hcclRemoteError, "timed out on a socket %s", sending ? "send" : "receive");
    struct pollfd pf = {fd, (short)(sending ? POLLOUT : POLLIN), 0};
    poll(&pf, 1, ms);
  }
  return hcclSuccess;
}

hcclResult_t hccl_sock_send_all(int fd, const void *buf, size_t n, int64_t deadline, const atomic_int *abort_flag) {
  return sock_xfer(fd, (void *)buf, n, deadline, abort_flag, 1);
}
hcclResult_t hccl_sock_recv_all(int fd, void *buf, size_t n, int64_t deadline, const atomic_int *abort_flag) {
  return sock_xfer(fd, buf, n, deadline, abort_flag, 0);
}
