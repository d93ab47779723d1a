#include "server/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace paceline::server {
namespace {

// A datagram socket bound to a filesystem path or an abstract name (given
// as "@name"), standing in for systemd's notify socket. Sets $NOTIFY_SOCKET
// to that name for its lifetime.
class FakeNotifySocket {
 public:
  explicit FakeNotifySocket(const std::string& name) : name_(name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    socklen_t len = offsetof(sockaddr_un, sun_path) + name.size();
    if (name[0] == '@') {
      addr.sun_path[0] = '\0';
    } else {
      ++len;
      unlink(name.c_str());
    }
    bound_ = fd_ >= 0 &&
             bind(fd_, reinterpret_cast<const sockaddr*>(&addr), len) == 0;
    setenv("NOTIFY_SOCKET", name.c_str(), 1);
  }
  ~FakeNotifySocket() {
    unsetenv("NOTIFY_SOCKET");
    if (fd_ >= 0) close(fd_);
    if (name_[0] != '@') unlink(name_.c_str());
  }
  FakeNotifySocket(const FakeNotifySocket&) = delete;
  FakeNotifySocket& operator=(const FakeNotifySocket&) = delete;

  bool bound() const { return bound_; }
  int fd() const { return fd_; }

  // The next datagram, or "<nothing>" when none is waiting.
  std::string Receive() const {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) return "<nothing>";
    return std::string(buf, static_cast<size_t>(n));
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool bound_ = false;
};

std::string TempSocketPath() {
  const char* dir = std::getenv("TMPDIR");
  return absl::StrCat(dir != nullptr && *dir ? dir : "/tmp",
                      "/paceline_sd_notify_test_", getpid(), ".sock");
}

TEST(SdNotifyTest, SendsOneDatagramToAPathSocket) {
  FakeNotifySocket sock(TempSocketPath());
  ASSERT_TRUE(sock.bound()) << std::strerror(errno);
  ASSERT_TRUE(SdNotify("READY=1").ok());
  EXPECT_EQ(sock.Receive(), "READY=1");
  ASSERT_TRUE(SdNotify("STATUS=serving 2 models\nSTOPPING=1").ok());
  EXPECT_EQ(sock.Receive(), "STATUS=serving 2 models\nSTOPPING=1");
  EXPECT_EQ(sock.Receive(), "<nothing>");
}

TEST(SdNotifyTest, SendsToAnAbstractSocket) {
  FakeNotifySocket sock(absl::StrCat("@paceline_sd_notify_test_", getpid()));
  ASSERT_TRUE(sock.bound()) << std::strerror(errno);
  ASSERT_TRUE(SdNotify("READY=1").ok());
  EXPECT_EQ(sock.Receive(), "READY=1");
}

TEST(SdNotifyTest, UnsetOrEmptyVariableDoesNothing) {
  FakeNotifySocket sock(absl::StrCat("@paceline_sd_notify_unset_", getpid()));
  ASSERT_TRUE(sock.bound()) << std::strerror(errno);
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(SdNotify("READY=1").ok());
  setenv("NOTIFY_SOCKET", "", 1);
  EXPECT_TRUE(SdNotify("READY=1").ok());
  EXPECT_EQ(sock.Receive(), "<nothing>");
}

TEST(SdNotifyTest, BadSocketNamesFail) {
  setenv("NOTIFY_SOCKET", "relative/notify", 1);
  EXPECT_EQ(SdNotify("READY=1").code(), absl::StatusCode::kInvalidArgument);
  setenv("NOTIFY_SOCKET", ("/" + std::string(200, 'x')).c_str(), 1);
  EXPECT_EQ(SdNotify("READY=1").code(), absl::StatusCode::kInvalidArgument);
  setenv("NOTIFY_SOCKET", "/nonexistent/paceline/notify", 1);
  EXPECT_EQ(SdNotify("READY=1").code(), absl::StatusCode::kUnavailable);
  unsetenv("NOTIFY_SOCKET");
}

}  // namespace
}  // namespace paceline::server
