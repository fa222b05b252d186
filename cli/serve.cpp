// `glassbox serve`: one model loaded once, a pipeline (core's build_pipeline) per request, llama.cpp's
// /completion and OpenAI's /v1/* shapes over cpp-httplib, a glassbox.trace/2 file per request.
#include "serve.hpp"
#include "serve_batch.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <cstring>
#include <fcntl.h>
#include <httplib.h>
#include <map>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "glassbox/beam_search.hpp"
#include "glassbox/chat_template.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/kv_pool.hpp"
#include "glassbox/run_spec.hpp"
#include "glassbox/speculative.hpp"
#include "glassbox/structured_input.hpp"
#include "glassbox/thread_group.hpp"
#include "glassbox/traces/html.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/writer.hpp"
#include "interrupt.hpp"
#include "serve_page.hpp"
#include "session.hpp"

namespace glassbox::cli {

namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// Every JSON body is written with invalid UTF-8 (half a character in a byte token) replaced, never thrown on.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A request refused: its HTTP status and OpenAI's error type (llama.cpp's server uses the same names).
// The HTTP worker threads, started before the server listens so that a thread the system refuses is
// a one-line error naming --parallel (httplib's own pool starts them inside listen(), on the listener
// thread, where a refusal was std::terminate). httplib gets a thin TaskQueue over it per listen().
class HttpThreads {
 public:
  HttpThreads(int n, const std::string& what) : threads_(what, [this] { shutdown(); }) {
    for (int i = 0; i < n; ++i) threads_.start([this] { work(); });
  }
  ~HttpThreads() { shutdown(); }
  // A job goes to the worker that went idle last, whose stack, thread-local scratch buffers (the
  // kernels') and caches are the warmest; only when every worker is busy does it wait in the queue.
  // (Handed to the longest idle, as a shared condition variable does, one request after another
  // would each start on a cold thread: measured on synth256-q8_0, a served decode ~8% slower than run's.)
  void enqueue(std::function<void()> fn) {
    std::unique_lock<std::mutex> lock(mu_);
    if (idle_.empty()) {
      jobs_.push_back(std::move(fn));
      return;
    }
    Worker* w = idle_.back();
    idle_.pop_back();
    w->job = std::move(fn);
    lock.unlock();
    w->cv.notify_one();
  }
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      for (Worker* w : idle_) w->cv.notify_one();
    }
    threads_.join();
  }
  // What httplib owns and deletes after each listen(): it forwards to the pool.
  struct Queue : httplib::TaskQueue {
    HttpThreads* pool;
    explicit Queue(HttpThreads* p) : pool(p) {}
    void enqueue(std::function<void()> fn) override { pool->enqueue(std::move(fn)); }
    void shutdown() override { pool->shutdown(); }
  };

 private:
  struct Worker {
    std::condition_variable cv;
    std::function<void()> job;  // handed over by enqueue()
  };
  void work() {
    Worker me;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!jobs_.empty()) {
          fn = std::move(jobs_.front());
          jobs_.pop_front();
        } else {
          if (stop_) return;  // stopping, and nothing left
          idle_.push_back(&me);
          me.cv.wait(lock, [&] { return me.job || stop_; });
          if (!me.job) {  // stopping: off the idle list, then the queue's last jobs
            idle_.erase(std::find(idle_.begin(), idle_.end(), &me));
            continue;
          }
          fn = std::move(me.job);
          me.job = nullptr;
        }
      }
      fn();
    }
  }
  std::mutex mu_;
  std::deque<std::function<void()>> jobs_;  // waiting for a worker (every one busy)
  std::vector<Worker*> idle_;               // waiting for a job, the last to go idle at the back
  bool stop_ = false;
  ThreadGroup threads_;  // last: joined (by its destructor, or shutdown) before the queue goes
};


// ---- connections: glassbox's own keep-alive loop around httplib's request parser ----
// Debian's httplib (0.11.4) gives each request of a connection a fresh read buffer (a pipelined request
// read ahead with the one before it was dropped), reads a request header with a timeout per read only
// (a client that sends a byte now and then holds a worker thread for ever) and knows nothing of who is
// connected. Its per-connection entry point is a virtual member, so the loop below replaces it:
// one buffer per connection, a deadline for the whole request (header and body), and a bound on the
// connections of one client address still sending their request (beyond it the oldest is closed).

// The connections still sending their request (or waiting between requests), oldest first.
class Incomplete {
 public:
  Incomplete(int per_client, int total) : per_client_(per_client), total_(total) {}
  // Registers a connection; closes (shutdown) the oldest of the same address beyond the per-client
  // bound, and the oldest of all beyond the total. Returns its ticket for leave().
  std::uint64_t enter(int fd, const std::string& addr) {
    std::lock_guard lock(m_);
    const std::uint64_t t = ++next_;
    open_.emplace(t, Entry{fd, addr});
    int& n = per_addr_[addr];
    ++n;
    while (n > per_client_) {
      for (auto it = open_.begin(); it != open_.end(); ++it)
        if (it->second.addr == addr) {
          evict(it);
          break;
        }
    }
    while (static_cast<int>(open_.size()) > total_) evict(open_.begin());
    return t;
  }
  // The connection's request is read (or it is closing): no longer evictable. Its fd may then close.
  void leave(std::uint64_t ticket) {
    std::lock_guard lock(m_);
    auto it = open_.find(ticket);
    if (it == open_.end()) return;  // evicted meanwhile
    if (--per_addr_[it->second.addr] == 0) per_addr_.erase(it->second.addr);
    open_.erase(it);
  }
  std::uint64_t evicted() const { return evicted_; }

 private:
  struct Entry {
    int fd;
    std::string addr;
  };
  void evict(std::map<std::uint64_t, Entry>::iterator it) {
    ::shutdown(it->second.fd, SHUT_RDWR);  // its owner's poll/read returns at once; the owner closes the fd
    if (--per_addr_[it->second.addr] == 0) per_addr_.erase(it->second.addr);
    open_.erase(it);
    ++evicted_;
  }
  std::mutex m_;
  std::map<std::uint64_t, Entry> open_;  // by ticket: oldest first
  std::map<std::string, int> per_addr_;
  std::uint64_t next_ = 0;
  std::atomic<std::uint64_t> evicted_{0};
  int per_client_, total_;
};

// The connection the current HTTP thread serves (handlers run on it): its socket, whether the reply
// must close it (a body left unread), and its ticket in Incomplete while its request is being read.
struct Connection {
  int fd = -1;
  Incomplete* incomplete = nullptr;
  std::uint64_t ticket = 0;
  bool registered = false;
  bool must_close = false;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // The request is read: the connection can no longer be evicted, nor its reads cut by the deadline.
  void request_read() {
    if (registered) incomplete->leave(ticket);
    registered = false;
    deadline = std::chrono::steady_clock::time_point::max();
  }
};
thread_local Connection* t_conn = nullptr;

// True when the peer has closed its end (or the socket failed): a request whose client hung up.
bool peer_gone(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL | POLLRDHUP)) return true;
  char c;
  return (p.revents & POLLIN) && ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// A socket stream that keeps one read buffer for the whole connection (pipelined requests survive) and
// cuts reads at the connection's deadline.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(Connection& c, const std::atomic<socket_t>& svr_sock, int read_idle_s, int write_s)
      : c_(c), svr_sock_(svr_sock), read_idle_ms_(read_idle_s * 1000), write_ms_(write_s * 1000) {}
  bool buffered() const { return off_ < buf_.size(); }
  // Waits up to `ms` for the next request's first byte (or the end); false: nothing came, or `stop`.
  bool wait_readable(int ms, const std::atomic<int>& svr_sock) {
    if (buffered()) return true;
    for (int waited = 0; waited < ms; waited += 200) {
      if (svr_sock.load() == INVALID_SOCKET) return false;
      pollfd p{c_.fd, POLLIN, 0};
      const int r = ::poll(&p, 1, std::min(200, ms - waited));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
    return false;
  }
  // Data within the read timeout, and before the request's deadline; in slices, so that a stopping
  // server does not wait for a slow client.
  bool is_readable() const override {
    if (buffered()) return true;
    const int ms = wait_ms(read_idle_ms_);
    if (ms < 0) return false;  // past the request's deadline
    for (int waited = 0;; waited += 200) {
      if (svr_sock_.load() == INVALID_SOCKET) return false;
      pollfd p{c_.fd, POLLIN, 0};
      const int r = ::poll(&p, 1, std::max(0, std::min(200, ms - waited)));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
      if (waited + 200 >= ms) return false;
    }
  }
  bool is_writable() const override {
    pollfd p{c_.fd, POLLOUT, 0};
    return ::poll(&p, 1, write_ms_) > 0 && !(p.revents & (POLLHUP | POLLERR | POLLNVAL)) && !peer_gone(c_.fd);
  }
  ssize_t read(char* ptr, std::size_t size) override {
    if (!buffered()) {
      if (!is_readable()) return -1;  // idle past the read timeout, or past the request's deadline
      buf_.resize(16384);
      ssize_t n;
      do n = ::recv(c_.fd, buf_.data(), buf_.size(), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) {
        buf_.clear();
        off_ = 0;
        return n;
      }
      buf_.resize(static_cast<std::size_t>(n));
      off_ = 0;
    }
    const std::size_t k = std::min(size, buf_.size() - off_);
    std::memcpy(ptr, buf_.data() + off_, k);
    off_ += k;
    // The request line and header: at most kMaxHeaderBytes (httplib bounds each line, not their number).
    for (std::size_t i = 0; i < k && in_header_; ++i) {
      tail_ = (tail_ << 8) | static_cast<unsigned char>(ptr[i]);
      if (tail_ == 0x0D0A0D0A || (tail_ & 0xFFFF) == 0x0A0A) in_header_ = false;
      else if (++header_bytes_ > kMaxHeaderBytes) return -1;
    }
    return static_cast<ssize_t>(k);
  }
  static constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
  // A new request begins: its header is counted afresh.
  void begin_request() {
    in_header_ = true;
    header_bytes_ = 0;
    tail_ = 0;
  }
  ssize_t write(const char* ptr, std::size_t size) override {
    pollfd p{c_.fd, POLLOUT, 0};
    if (::poll(&p, 1, write_ms_) <= 0) return -1;
    ssize_t n;
    do n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  socket_t socket() const override { return c_.fd; }

  void address(bool local, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    ip.clear();
    port = -1;
    if ((local ? ::getsockname : ::getpeername)(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(serv);
    }
  }

 private:
  int wait_ms(int idle) const {
    const auto now = std::chrono::steady_clock::now();
    if (c_.deadline == std::chrono::steady_clock::time_point::max()) return idle;
    if (now >= c_.deadline) return -1;
    return static_cast<int>(std::min<std::int64_t>(idle, std::chrono::duration_cast<std::chrono::milliseconds>(c_.deadline - now).count() + 1));
  }
  Connection& c_;
  const std::atomic<socket_t>& svr_sock_;
  int read_idle_ms_, write_ms_;
  std::string buf_;
  std::size_t off_ = 0;
  bool in_header_ = true;
  std::size_t header_bytes_ = 0;
  std::uint32_t tail_ = 0;  // the last four bytes read, to see the header's end
};

struct ConnectionLimits {
  int request_timeout_s = 15;  // header and body of one request, from its first byte
  int keep_alive_s = 5;        // between two requests of a connection
  int read_idle_s = 10;        // one read (after the request is read: a streamed reply's writes use write_s)
  int write_s = 5;
  int max_requests = 100;      // per connection, then Connection: close
};

class HttpServer final : public httplib::Server {
 public:
  HttpServer(Incomplete& inc, ConnectionLimits lim) : incomplete_(inc), lim_(lim) {}
  ~HttpServer() override {
    if (placeholder_ >= 0) ::close(placeholder_);
  }
  // The fuzz target: `bytes` as one connection's data, served on this thread as if accepted (the server
  // is not listening); what it answered.
  std::string feed(std::string_view bytes) {
    if (placeholder_ < 0) {
      placeholder_ = ::socket(AF_INET, SOCK_STREAM, 0);  // the loop runs while the listening socket is valid
      svr_sock_ = placeholder_;
    }
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return {};
    std::string answer;
    std::thread client([&] {
      for (std::size_t at = 0; at < bytes.size();) {
        const ssize_t n = ::send(sv[1], bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::shutdown(sv[1], SHUT_WR);
      char buf[65536];
      for (ssize_t n; (n = ::recv(sv[1], buf, sizeof(buf), 0)) > 0;) answer.append(buf, static_cast<std::size_t>(n));
      ::close(sv[1]);
    });
    process_and_close_socket(sv[0]);
    client.join();
    return answer;
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    Connection conn;
    conn.fd = sock;
    conn.incomplete = &incomplete_;
    t_conn = &conn;
    ConnStream strm(conn, svr_sock_, lim_.read_idle_s, lim_.write_s);
    std::string addr;
    int port = 0;
    strm.address(false, addr, port);
    bool ret = false;
    for (int count = 0; svr_sock_ != INVALID_SOCKET && count < lim_.max_requests; ++count) {
      conn.ticket = incomplete_.enter(sock, addr);
      conn.registered = true;
      conn.must_close = false;
      conn.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(lim_.request_timeout_s);
      if (!strm.wait_readable(1000 * (count == 0 ? lim_.request_timeout_s : lim_.keep_alive_s), svr_sock_)) break;
      conn.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(lim_.request_timeout_s);
      strm.begin_request();
      bool closed = false;
      ret = process_request(strm, count + 1 == lim_.max_requests, closed, nullptr);
      conn.request_read();
      if (!ret || closed || conn.must_close) break;
    }
    conn.request_read();
    t_conn = nullptr;
    if (conn.must_close) linger(sock);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ret;
  }
  // A reply sent before the request's body was read: closing at once with unread bytes would reset the
  // connection (RST), and a client still sending would never read the reply. So the write side closes
  // first and what comes is read and dropped, for at most 2 s and 64 MiB.
  static void linger(int sock) {
    ::shutdown(sock, SHUT_WR);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    std::size_t dropped = 0;
    char buf[65536];
    while (dropped < (64u << 20)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      if (left <= 0) break;
      pollfd p{sock, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      const ssize_t n = ::recv(sock, buf, sizeof(buf), 0);
      if (n <= 0) break;
      dropped += static_cast<std::size_t>(n);
    }
  }
  Incomplete& incomplete_;
  ConnectionLimits lim_;
  int placeholder_ = -1;
};

// The reply closes the connection: the request's body was not (all) read, so what follows on the
// socket is not a request.
void close_after(httplib::Response& res) {
  if (t_conn) t_conn->must_close = true;
  res.set_header("Connection", "close");
}

struct HttpError : std::runtime_error {
  int status;
  std::string type;
  HttpError(int s, const std::string& msg, std::string t = "invalid_request_error")
      : std::runtime_error(msg), status(s), type(std::move(t)) {}
};

// Folders whose paths an error message must not show (where the plugin modules are installed): set once
// before the server listens.
std::vector<std::string> g_private_dirs;

// What a client sees of an error message: the plugin folders' paths removed (a module is named by its
// file's name), and at most kMaxMessage bytes (a message that quotes the request quotes a short part
// of it, never the whole: a 1 MB prompt in a parse error is not sent back).
constexpr std::size_t kMaxMessage = 400;
std::string client_message(std::string m) {
  for (const auto& d : g_private_dirs) {
    if (d.size() < 2) continue;
    for (std::size_t at; (at = m.find(d)) != std::string::npos;) m.erase(at, d.size());
  }
  if (m.size() > kMaxMessage) {
    const std::size_t total = m.size();
    std::size_t cut = kMaxMessage;
    while (cut > 0 && (static_cast<unsigned char>(m[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    m.resize(cut);
    m += "... (" + std::to_string(total) + " bytes in all)";
  }
  return m;
}

std::string error_body(int status, const std::string& message, const std::string& type) {
  return dump(Json{{"error", {{"code", status}, {"message", client_message(message)}, {"type", type}}}});
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& type) {
  res.status = status;
  res.set_content(error_body(status, message, type), "application/json; charset=utf-8");
}

// A generation ended early from outside: the client went away, or the server is stopping (signal != 0).
struct Cancelled {
  int signal = 0;
};

std::string json_type(const nlohmann::json& j) { return j.type_name(); }

// ---- typed request fields: a wrong type or a value out of range is a 400 naming the field ----
const nlohmann::json* field(const nlohmann::json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}
double get_number(const nlohmann::json& body, const char* key, double def, double lo, double hi) {
  const auto* v = field(body, key);
  if (!v) return def;
  if (!v->is_number()) throw HttpError(400, std::string("'") + key + "': expected a number, got " + json_type(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    std::ostringstream m;
    m << "'" << key << "' = " << v->dump() << " is out of range (expected " << lo << " .. " << hi << ")";
    throw HttpError(400, m.str());
  }
  return x;
}
long long get_int(const nlohmann::json& body, const char* key, long long def, long long lo, long long hi) {
  const auto* v = field(body, key);
  if (!v) return def;
  if (!v->is_number_integer())
    throw HttpError(400, std::string("'") + key + "': expected an integer, got " + (v->is_number() ? "a fraction" : json_type(*v)));
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    throw HttpError(400, std::string("'") + key + "' = " + v->dump() + " is out of range (expected " + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
  const long long x = v->get<long long>();
  if (x < lo || x > hi)
    throw HttpError(400, std::string("'") + key + "' = " + v->dump() + " is out of range (expected " + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
  return x;
}
bool get_bool(const nlohmann::json& body, const char* key, bool def) {
  const auto* v = field(body, key);
  if (!v) return def;
  if (!v->is_boolean()) throw HttpError(400, std::string("'") + key + "': expected true or false, got " + json_type(*v));
  return v->get<bool>();
}
std::optional<std::string> get_string(const nlohmann::json& body, const char* key) {
  const auto* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw HttpError(400, std::string("'") + key + "': expected a string, got " + json_type(*v));
  return v->get<std::string>();
}

std::string number_text(double x) { return nlohmann::json(x).dump(); }

std::string random_id(std::size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += alnum[rng() % 62];
  return s;
}

Json byte_array(std::string_view s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(c);
  return b;
}

// llama.cpp's validate_utf8: the text cut before an incomplete UTF-8 sequence at its end.
std::string_view cut_incomplete_utf8(std::string_view s) {
  for (std::size_t back = 1; back <= 4 && back <= s.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const std::size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? s.substr(0, s.size() - back) : s;
  }
  return s;
}

// Stop words. The earliest one that ends after `before` (the text's length before the newest piece: one that
// ended earlier would have stopped the run then): its offset and the word.
std::optional<std::pair<std::size_t, std::string>> first_stop_word(const std::string& text, std::size_t before,
                                                                   const std::vector<std::string>& words) {
  std::optional<std::pair<std::size_t, std::string>> hit;
  for (const auto& w : words) {
    const std::size_t f = text.find(w, before >= w.size() ? before - w.size() + 1 : 0);
    if (f != std::string::npos && (!hit || f < hit->first)) hit = {f, w};
  }
  return hit;
}
// The length of the longest end of `text` that begins a stop word: a stream holds it back.
std::size_t stop_word_prefix_at_end(const std::string& text, const std::vector<std::string>& words) {
  std::size_t longest = 0;
  for (const auto& w : words)
    for (std::size_t n = std::min(w.size() - 1, text.size()); n > longest; --n)
      if (text.compare(text.size() - n, n, w, 0, n) == 0) {
        longest = n;
        break;
      }
  return longest;
}

// What /tokenize and /detokenize show for a token: its text, and a control or unknown token by its name
// ("<s>"; llama2.c's tokenizer.bin spells BOS "\n<s>\n", GGUF vocabularies "<s>").
std::string shown_piece(const Tokenizer& tok, std::int32_t id) {
  const TokenType t = tok.token_type(id);
  if (t != TokenType::Control && t != TokenType::Unknown) return std::string(tok.decode(-1, id));
  std::string_view p = tok.piece(id);
  while (!p.empty() && std::isspace(static_cast<unsigned char>(p.front()))) p.remove_prefix(1);
  while (!p.empty() && std::isspace(static_cast<unsigned char>(p.back()))) p.remove_suffix(1);
  return std::string(p);
}

bool valid_utf8(std::string_view s) {
  try {
    (void)nlohmann::json(std::string(s)).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// ---- slots: --parallel requests decode, --queue wait, the rest get 503 ----
// With a shared KV pool (--kv-pool), a slot goes to a request only with the blocks it can ever hold reserved:
// the queue waits for both, so that no admitted request finds the pool empty.
class Slots {
 public:
  Slots(int parallel, int queue) : queue_(queue) {
    for (int i = parallel - 1; i >= 0; --i) ids_.push_back(i);
    for (int i = 0; i < parallel; ++i) copies_.push_back(std::make_unique<traces::StepCopies>());
  }
  // The trace writer's step copies of slot `id`, kept from one request to the next (writer.hpp), so that
  // a request's steps allocate nothing once the slot has served one: for its holder alone.
  traces::StepCopies& step_copies(int id) { return *copies_.at(static_cast<std::size_t>(id)); }
  // The shared KV pool whose blocks admission reserves (null: none). Set before the first acquire.
  void use_pool(SharedKvPool* pool) { pool_ = pool; }
  // A slot id with `blocks` of the pool reserved for it, or -1 when the queue is full (503) or the server is
  // stopping. Reservations change only here, under the lock.
  int acquire(const std::atomic<int>& stopping, int blocks = 0) {
    std::unique_lock lock(m_);
    const auto fits = [&] { return !ids_.empty() && (!pool_ || pool_->reserved() + blocks <= pool_->total()); };
    if (!fits() && waiting_ >= queue_) return -1;
    ++waiting_;
    cv_.wait(lock, [&] { return fits() || stopping.load() != 0; });
    --waiting_;
    if (stopping.load() != 0) return -1;
    if (pool_ && blocks > 0) pool_->reserve(blocks);
    const int id = ids_.back();
    ids_.pop_back();
    return id;
  }
  // Slot `id` and its reserved blocks are free again (its KV store must have given its blocks back).
  void release(int id, int blocks = 0) {
    {
      std::lock_guard lock(m_);
      ids_.push_back(id);
      if (pool_ && blocks > 0) pool_->unreserve(blocks);
    }
    // Every waiter: which one fits now depends on the blocks each needs.
    if (pool_) cv_.notify_all();
    else cv_.notify_one();
  }
  void wake_all() { cv_.notify_all(); }
  int waiting() {
    std::lock_guard lock(m_);
    return waiting_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<int> ids_;
  int waiting_ = 0;
  int queue_;
  std::vector<std::unique_ptr<traces::StepCopies>> copies_;  // (parallel)
  SharedKvPool* pool_ = nullptr;
};

struct SlotGuard {
  SlotGuard(Slots& s, int i, int b = 0) : slots(s), id(i), blocks(b) {}
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;
  ~SlotGuard() { slots.release(id, blocks); }
  Slots& slots;
  int id;
  int blocks;  // of the shared KV pool, reserved for the slot's request
};

// A request's pipeline with its slot: the pipeline (and its KV store's blocks) goes first, then the slot and
// its reservation, whoever drops the last reference (the stream's provider holds both).
struct AdmittedPipeline {
  std::shared_ptr<SlotGuard> guard;
  std::unique_ptr<Pipeline> pipeline;  // declared last: destroyed first
};

// The traces of served requests: --trace-dir, or a private temporary folder of which the newest
// trace_keep are kept (the older ones are deleted as new ones are written).
// A trace's id is TAG-N-RANDOM: this process's tag (6 random letters and digits, drawn at start), the
// request's number, 8 random letters and digits; so replicas sharing one --trace-dir do not pick the same
// name (two would need the same tag, number and random part: about 1 in 10^25; docs/serve.md, "Several replicas").
class TraceStore {
 public:
  TraceStore(const std::string& dir, int keep) : keep_(dir.empty() ? keep : 0), tag_(random_id(6)) {
    if (!dir.empty()) {
      dir_ = dir;
      shared_ = true;
      std::error_code ec;
      fs::create_directories(dir_, ec);
      if (!fs::is_directory(dir_)) throw ConfigError("--trace-dir " + dir + ": cannot create the folder");
    } else {
      std::string tmpl = (fs::temp_directory_path() / "glassbox-serve-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) throw OutputError("cannot create a temporary folder for traces in " + fs::temp_directory_path().string());
      dir_ = tmpl;
      owned_ = true;
    }
  }
  ~TraceStore() {
    std::error_code ec;
    if (owned_) fs::remove_all(dir_, ec);
  }
  // Whether `id` has the form make() gives (TAG-N-RANDOM), the only names ever looked up: no dot, no
  // slash, so never a path outside the folder nor a writer's temporary file.
  static bool valid_id(std::string_view id) {
    const auto alnum = [](std::string_view s, std::size_t n) {
      return s.size() == n && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) != 0; });
    };
    const auto a = id.find('-'), b = a == std::string_view::npos ? a : id.find('-', a + 1);
    if (b == std::string_view::npos) return false;
    const std::string_view n = id.substr(a + 1, b - a - 1);
    return alnum(id.substr(0, a), 6) && !n.empty() && n.size() <= 20 &&
           std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c) != 0; }) && alnum(id.substr(b + 1), 8);
  }
  // A new trace's id and path. Without --trace-dir only ids made here are ever served; with it, any file
  // of the folder named by valid_id (another replica's trace too: the folder is the replicas' own), never
  // a file of another name.
  std::pair<std::string, std::string> make() {
    std::lock_guard lock(m_);
    const std::string id = tag_ + "-" + std::to_string(++count_) + "-" + random_id(8);
    if (!shared_) made_.insert(id);
    if (keep_ > 0) {
      ids_.push_back(id);
      while (static_cast<int>(ids_.size()) > keep_) {
        std::error_code ec;
        fs::remove(path(ids_.front()), ec);
        made_.erase(ids_.front());
        ids_.pop_front();
      }
    }
    return {id, path(id)};
  }
  // The trace's text; nullopt when the id is not of the valid form, or (private folder) not one this
  // server made, or its file is not there yet (a trace is renamed into place when it is complete: one in
  // progress, here or in another replica, is not found), is gone, is not a regular file or is a symbolic
  // link (opened with O_NOFOLLOW: a link put in its place is not followed).
  std::optional<std::string> read(const std::string& id) const {
    if (!valid_id(id)) return std::nullopt;
    if (!shared_) {
      std::lock_guard lock(m_);
      if (!made_.count(id)) return std::nullopt;
    }
    const int fd = ::open(path(id).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    struct FdCloser {
      int fd;
      ~FdCloser() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    std::string text;
    text.reserve(static_cast<std::size_t>(st.st_size));
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return std::nullopt;
      if (n == 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    return text;
  }
  std::string path(const std::string& id) const { return (dir_ / (id + ".jsonl")).string(); }

 private:
  fs::path dir_;
  bool owned_ = false;
  bool shared_ = false;  // --trace-dir: any valid id found in the folder is served
  int keep_;
  std::string tag_;      // this process's part of every id it makes
  mutable std::mutex m_;
  std::deque<std::string> ids_;
  std::set<std::string> made_;  // without --trace-dir: every id made (and not yet deleted)
  std::uint64_t count_ = 0;
};

struct Metrics {
  std::atomic<std::uint64_t> prompt_tokens{0}, predicted_tokens{0}, requests{0}, rejected{0}, cancelled{0};
  std::atomic<std::uint64_t> prompt_us{0}, predicted_us{0};
  std::atomic<int> processing{0};
  std::atomic<std::int64_t> kv_tokens{0};
};

// What one generation request asks for, whichever endpoint it came to.
struct GenRequest {
  enum class Api { Llama, OpenAiText, OpenAiChat } api = Api::Llama;
  std::string prompt;                  // the text (the header's prompt)
  std::vector<std::int32_t> ids;       // its encoding (chat: the template's)
  RunSpec spec;
  std::string chain;                   // the sampler chain, as glassbox writes it
  std::vector<std::string> stop;      // stop words: the text ends before the first one generated
  int n_predict = 0;
  int n_probs = 0;
  bool post = false;                   // post_sampling_probs
  bool stream = false;
  bool return_tokens = false;
  bool steps = false;                  // glassbox extension: stage distributions and KV state per streamed chunk
  int beam_width = 0;                  // glassbox extension: beam search with this many beams (0: sample with the chain)
  double length_penalty = 1.0;         //   its length penalty (docs/beam-search.md)
  TraceLevel level = TraceLevel::Basic;
};

// Who a generation request is, once admitted: its slot, its trace, and the names its API's answers carry.
struct RequestIds {
  GenRequest::Api api;
  bool chat;  // OpenAI's chat completion
  int slot;
  std::string trace_id, trace_path, trace_url;
  std::string cmpl_id;  // OpenAI's "id" ("chatcmpl-…", "cmpl-…"); empty for llama.cpp's API
  std::time_t created;
};

// What a finished generation produced, for its answer.
struct Reply {
  const std::string& content;              // the text (cut before a stop word)
  const std::vector<std::int32_t>& ids;    // the tokens generated, stop tokens included
  const Json& entries;                     // the per-token probability entries (n_probs)
  const std::string& stopping_word;
};

class StepCollector;

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : opt_(o), incomplete_(o.client_connections, kIncompleteTotal),
        svr_(incomplete_, ConnectionLimits{.request_timeout_s = o.request_timeout}), slots_(o.parallel, o.queue),
        traces_(o.trace_dir, o.trace_keep) {
    alias_ = o.alias.empty() ? fs::path(o.model).filename().string() : o.alias;
  }
  void run();
  // The fuzz target's server (RequestFuzzer): routes and model, not listening; a generation request
  // stops where it would wait for a slot.
  void prepare_dry();
  std::string feed(std::string_view bytes) { return svr_.feed(bytes); }

 private:
  void load();
  void routes();
  void guard_routes();
  void token_routes();
  void trace_routes();
  std::string metrics_text();
  GenRequest parse(const nlohmann::json& body, GenRequest::Api api);
  std::vector<PluginSpec> chain_from_fields(const nlohmann::json& body, GenRequest::Api api, std::string& text);
  std::optional<PluginSpec> grammar_from_fields(const nlohmann::json& body, GenRequest::Api api);
  void refuse_server_files(const std::vector<PluginSpec>& chain);
  void generate(const std::string& body, httplib::Response& res, GenRequest::Api api);
  int pool_blocks(const GenRequest& r) const;
  Json finished_object(const GenRequest& r, const RequestIds& who, const Pipeline& p, const Summary& sum, const StepCollector& collect,
                       const Reply& reply, const std::vector<std::string>& notes);
  Summary decode(const GenRequest& r, Pipeline& p, const GenerateOptions& g, TraceSink& sinks, StepCollector& collect,
                 std::vector<std::string>& notes, bool paced, const StreamFn& on_piece, BatchLoop::Waiter*& waiter);
  Json piece_event(const RequestIds& who, const std::string& piece, std::int32_t id, const Json& entry, const Json& step, bool& role_sent);
  // A request's beam search (glassbox.beam_width): one K/V store per beam, the first the pipeline's.
  Summary beam_search(const GenRequest& r, Pipeline& p, const GenerateOptions& g, TraceSink& sinks, const StreamFn& on_piece,
                      std::function<void()> poll);
  // The draft's pipeline and the speculative engine over both, for a request (--draft-model); null with a
  // note in `notes` when its chain or attention module cannot be speculated (it then decodes plainly).
  struct Speculation;
  std::unique_ptr<Speculation> speculative(const GenRequest& r, Pipeline& p, std::vector<std::string>& notes);
  std::string receive(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
  nlohmann::json read_body(const std::string& body);
  void ready_or_503() {
    if (!loaded_) throw HttpError(503, "Loading model", "unavailable_error");
  }

  // Connections still sending their request, of all clients together: beyond it the oldest is closed.
  static constexpr int kIncompleteTotal = 128;
  ServeOptions opt_;
  Incomplete incomplete_;
  HttpServer svr_;
  std::unique_ptr<HttpThreads> http_threads_;  // the HTTP workers (started before listening)
  int listen_fd_ = -1;                          // the socket httplib listens on (its backlog raised)
  std::shared_ptr<const LoadedModel> model_;
  std::shared_ptr<const LoadedModel> draft_;  // --draft-model (null: none)
  std::atomic<bool> loaded_{false};
  std::atomic<int> stopping_{0};
  std::atomic<bool> finished_{false};  // the listener has returned
  Slots slots_;
  TraceStore traces_;
  Metrics metrics_;
  std::string alias_;
  std::time_t started_ = std::time(nullptr);
  int context_ = 0;
  bool dry_ = false;
  std::shared_ptr<SharedKvPool> kv_pool_;  // --attention paged: the blocks every request's store takes (null: none)
  Config batch_config_;                // the batch's activations are over it (declared before batch_: outlives it)
  std::unique_ptr<BatchLoop> batch_;   // continuous batching (null: --parallel 1, --no-batch, --pace)
};

// A POST body, read through httplib's content reader so that every encoding (Content-Length, chunked,
// none) obeys --max-body: past it the reading stops, the reply is a 413 and the connection closes.
std::string Server::receive(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
  if (req.is_multipart_form_data()) {
    close_after(res);
    throw HttpError(400, "expected a JSON body (Content-Type: application/json), got a multipart form");
  }
  std::string body;
  bool over = false;
  const bool ok = reader([&](const char* data, std::size_t n) {
    if (body.size() + n > opt_.max_body) {
      over = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  const std::string over_msg = "the request body is over the server's limit of " + std::to_string(opt_.max_body) + " bytes (--max-body)";
  if (over || (!ok && res.status == 413)) {
    close_after(res);
    throw HttpError(413, over_msg);
  }
  if (!ok) {
    close_after(res);
    throw HttpError(400, "the request body could not be read (cut short, too slow, or a malformed chunked encoding)");
  }
  if (t_conn) t_conn->request_read();
  return body;
}

nlohmann::json Server::read_body(const std::string& body) {
  try {
    return parse_json_input<InputError>(body, "request body");
  } catch (const InputError& e) {
    throw HttpError(400, e.what());
  }
}

// DRY's sequence breakers (`dry_sequence_breakers`: llama.cpp's list of strings), as the stage's
// '|'-separated parameter, escaped.
std::string dry_breakers_field(const nlohmann::json& body) {
  std::string breakers = "\\n|:|\"|*";
  if (const auto* b = field(body, "dry_sequence_breakers")) {
    if (!b->is_array()) throw HttpError(400, "'dry_sequence_breakers': expected an array of strings, got " + json_type(*b));
    if (b->size() > 64) throw HttpError(400, "'dry_sequence_breakers': at most 64 breakers, got " + std::to_string(b->size()));
    breakers.clear();
    for (const auto& e : *b) {
      if (!e.is_string() || e.get_ref<const std::string&>().empty())
        throw HttpError(400, "'dry_sequence_breakers': expected non-empty strings, got " + (e.is_string() ? std::string("an empty one") : json_type(e)));
      if (!breakers.empty()) breakers += '|';
      for (const char c : e.get_ref<const std::string&>()) {
        if (c == '\n') breakers += "\\n";
        else if (c == '\t') breakers += "\\t";
        else if (c == '\r') breakers += "\\r";
        else if (c == '\\') breakers += "\\\\";
        else if (c == '|') breakers += "\\|";
        else breakers += c;
      }
    }
  }
  return breakers;
}

// `samplers`: the order of llama.cpp's stages (its names and their aliases), or its default order.
std::vector<std::string> sampler_order_field(const nlohmann::json& body) {
  std::vector<std::string> order = {"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"};
  if (const auto* s = field(body, "samplers")) {
    if (!s->is_array()) throw HttpError(400, "'samplers': expected an array of sampler names, got " + json_type(*s));
    order.clear();
    for (const auto& n : *s) {
      if (!n.is_string()) throw HttpError(400, "'samplers': expected sampler names (strings), got " + json_type(n));
      std::string name = n.get<std::string>();
      if (name == "top-k") name = "top_k";
      if (name == "top-p" || name == "nucleus") name = "top_p";
      if (name == "min-p") name = "min_p";
      if (name == "typical_p" || name == "typ-p" || name == "typical") name = "typ_p";
      if (name == "temp") name = "temperature";
      if (name == "top-n-sigma") name = "top_n_sigma";
      static const std::set<std::string> known = {"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"};
      if (!known.count(name))
        throw HttpError(400, "'samplers': unknown sampler '" + name + "' (this server knows penalties, dry, top_n_sigma, top_k, typ_p, top_p, "
                             "min_p, xtc, temperature; any glassbox chain can be given as \"sampler\")");
      order.push_back(name);
    }
  }
  return order;
}

// `logit_bias` as a logit-bias stage: [[id, bias], ...] or {"id": bias}; a bias of false bans the token
// (llama.cpp's spelling). None when the field is absent or empty.
std::optional<PluginSpec> logit_bias_field(const nlohmann::json& body) {
  const auto* lb = field(body, "logit_bias");
  if (!lb) return std::nullopt;
  std::string bias;
  auto add = [&](const nlohmann::json& id, const nlohmann::json& b) {
    long long t = -1;
    if (id.is_number_integer()) t = id.get<long long>();
    else if (id.is_string()) {
      try {
        t = std::stoll(id.get<std::string>());
      } catch (const std::exception&) {
        throw HttpError(400, "'logit_bias': token id '" + id.get<std::string>() + "' is not a number");
      }
    } else throw HttpError(400, "'logit_bias': expected token ids, got " + json_type(id));
    if (t < 0) throw HttpError(400, "'logit_bias': token id " + std::to_string(t) + " is negative");
    std::string v;
    if (b.is_boolean() && !b.get<bool>()) v = "-inf";
    else if (b.is_number()) v = number_text(b.get<double>());
    else throw HttpError(400, "'logit_bias': expected a number or false as the bias of token " + std::to_string(t));
    bias += (bias.empty() ? "" : ";") + std::to_string(t) + "=" + v;
  };
  if (lb->is_array()) {
    for (const auto& e : *lb) {
      if (!e.is_array() || e.size() != 2) throw HttpError(400, "'logit_bias': expected [token id, bias] pairs");
      add(e[0], e[1]);
    }
  } else if (lb->is_object()) {
    for (auto it = lb->begin(); it != lb->end(); ++it) add(nlohmann::json(it.key()), it.value());
  } else {
    throw HttpError(400, "'logit_bias': expected an array of [id, bias] pairs or an object, got " + json_type(*lb));
  }
  if (bias.empty()) return std::nullopt;
  return PluginSpec{"logit-bias", {{"", bias}}};
}

std::vector<PluginSpec> Server::chain_from_fields(const nlohmann::json& body, GenRequest::Api api, std::string& text) {
  // The glassbox extension: a chain as `--sampler` takes it, which wins over the individual fields.
  if (auto s = get_string(body, "sampler")) {
    text = *s;
    std::vector<PluginSpec> chain;
    try {
      chain = parse_plugin_chain(*s, "sampler");
    } catch (const Error& e) {
      throw HttpError(400, std::string("'sampler': ") + e.what());
    }
    refuse_server_files(chain);
    return chain;
  }
  // llama.cpp's fields and defaults (top_k 40, top_p 0.95, min_p 0.05, temperature 0.8, in the order of
  // `samplers`: llama.cpp's penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature);
  // temperature <= 0 is greedy, as llama.cpp's server takes it. A field whose stage is off at its
  // default adds no stage. OpenAI's presence_penalty and frequency_penalty are the same stages.
  const double temperature = get_number(body, "temperature", 0.8, -1e9, 1e9);
  const long long top_k = get_int(body, "top_k", 40, 0, 1 << 30);
  const double top_p = get_number(body, "top_p", 0.95, 0, 1);
  const double min_p = get_number(body, "min_p", 0.05, 0, 1);
  const double typical_p = get_number(body, "typical_p", 1.0, 0, 1);
  const double repeat_penalty = get_number(body, "repeat_penalty", 1.0, 0, 1e9);
  if (!(repeat_penalty > 0)) throw HttpError(400, "'repeat_penalty' = 0 is out of range (expected > 0; 1 is off)");
  const long long repeat_last_n = get_int(body, "repeat_last_n", 64, -1, 1 << 20);
  const double presence_penalty = get_number(body, "presence_penalty", 0.0, -1e9, 1e9);
  const double frequency_penalty = get_number(body, "frequency_penalty", 0.0, -1e9, 1e9);
  const double dry_multiplier = get_number(body, "dry_multiplier", 0.0, 0, 1e9);
  const double dry_base = get_number(body, "dry_base", 1.75, 1, 1e9);
  const long long dry_allowed = get_int(body, "dry_allowed_length", 2, 0, 1 << 20);
  const long long dry_last_n = get_int(body, "dry_penalty_last_n", -1, -1, 1 << 20);
  const double xtc_probability = get_number(body, "xtc_probability", 0.0, 0, 1);
  const double xtc_threshold = get_number(body, "xtc_threshold", 0.1, 0, 1);
  const double top_n_sigma = get_number(body, "top_n_sigma", -1.0, -1e9, 1e9);
  const double dynatemp_range = get_number(body, "dynatemp_range", 0.0, 0, 1e9);
  const double dynatemp_exponent = get_number(body, "dynatemp_exponent", 1.0, 0, 1e9);
  const long long mirostat = get_int(body, "mirostat", 0, 0, 2);
  const double mirostat_tau = get_number(body, "mirostat_tau", 5.0, 0, 1e9);
  const double mirostat_eta = get_number(body, "mirostat_eta", 0.1, 0, 1);
  if (mirostat == 1) throw HttpError(400, "'mirostat' = 1: Mirostat (version 1) is not implemented here; 'mirostat': 2 (version 2) is");
  if (get_int(body, "min_keep", 0, 0, 1 << 30) > 1)
    throw HttpError(400, "'min_keep' above 1 is not supported (every truncation stage here keeps at least the most likely token)");
  const std::string breakers = dry_breakers_field(body);
  const std::vector<std::string> order = sampler_order_field(body);
  std::vector<PluginSpec> chain;
  if (auto bias = logit_bias_field(body)) chain.push_back(std::move(*bias));
  auto temperature_stage = [&] {
    if (dynatemp_range > 0)
      chain.push_back({"dynamic-temperature", {{"temperature", number_text(temperature)}, {"range", number_text(dynatemp_range)},
                                               {"exponent", number_text(dynatemp_exponent)}}});
    else chain.push_back({"temperature", {{"", number_text(temperature)}}});
  };
  if (temperature <= 0) {
    chain.push_back({"greedy", {}});
  } else if (mirostat == 2) {
    // llama.cpp's chain under mirostat: temperature, then Mirostat v2 (which selects); the other stages are not used.
    temperature_stage();
    chain.push_back({"mirostat-v2", {{"tau", number_text(mirostat_tau)}, {"eta", number_text(mirostat_eta)}}});
  } else {
    for (const auto& n : order) {
      if (n == "penalties") {
        const std::string last_n = std::to_string(repeat_last_n);
        if (repeat_penalty != 1) chain.push_back({"repetition-penalty", {{"penalty", number_text(repeat_penalty)}, {"last_n", last_n}}});
        if (frequency_penalty != 0) chain.push_back({"frequency-penalty", {{"penalty", number_text(frequency_penalty)}, {"last_n", last_n}}});
        if (presence_penalty != 0) chain.push_back({"presence-penalty", {{"penalty", number_text(presence_penalty)}, {"last_n", last_n}}});
      }
      if (n == "dry" && dry_multiplier > 0)
        chain.push_back({"dry", {{"multiplier", number_text(dry_multiplier)}, {"base", number_text(dry_base)},
                                 {"allowed_length", std::to_string(dry_allowed)}, {"last_n", std::to_string(dry_last_n)}, {"breakers", breakers}}});
      if (n == "top_n_sigma" && top_n_sigma >= 0) chain.push_back({"top-n-sigma", {{"", number_text(top_n_sigma)}}});
      if (n == "top_k" && top_k > 0) chain.push_back({"top-k", {{"", std::to_string(top_k)}}});
      if (n == "typ_p" && typical_p < 1) chain.push_back({"typical-p", {{"", number_text(typical_p)}}});
      // top_p 0: llama.cpp keeps the most likely token alone (the first one reaches a mass >= 0); the
      // top-p stage takes p in (0, 1], so that is written as what it does, top-k 1.
      if (n == "top_p" && top_p <= 0) chain.push_back({"top-k", {{"", "1"}}});
      else if (n == "top_p" && top_p < 1) chain.push_back({"top-p", {{"", number_text(top_p)}}});
      if (n == "min_p" && min_p > 0) chain.push_back({"min-p", {{"", number_text(min_p)}}});
      if (n == "xtc" && xtc_probability > 0)
        chain.push_back({"xtc", {{"probability", number_text(xtc_probability)}, {"threshold", number_text(xtc_threshold)}}});
      if (n == "temperature") temperature_stage();
    }
  }
  (void)api;
  // As --sampler takes it: NAME or NAME:VALUE (the main parameter), NAME:KEY=VALUE otherwise.
  for (const auto& s : chain) {
    text += (text.empty() ? "" : ",") + s.name;
    for (const auto& [k, v] : s.params) text += ":" + (k.empty() ? v : k + "=" + v);
  }
  return chain;
}

// A parameter that names a file (`file`, or a name ending in `_file`: grammar's file and schema_file) would
// have the server read a path of the client's choosing and quote it in errors; a request gives the text
// instead (grammar:gbnf=..., or the `grammar` and `json_schema` fields).
void Server::refuse_server_files(const std::vector<PluginSpec>& chain) {
  for (const auto& spec : chain) {
    Params p;
    try {
      p = model_->registry->resolve(PluginKind::Sampler, spec);
    } catch (const Error& e) {
      throw HttpError(400, std::string("'sampler': ") + e.what());
    }
    for (const auto& [name, value] : p.values()) {
      const bool names_a_file = name == "file" || (name.size() > 5 && name.ends_with("_file"));
      if (names_a_file && std::holds_alternative<std::string>(value) && !std::get<std::string>(value).empty())
        throw HttpError(400, "'sampler': " + spec.name + "'s parameter '" + name +
                                 "' names a file on the server, which a request may not read; give the text instead" +
                                 (spec.name == "grammar" ? " (the \"grammar\" or \"json_schema\" field, or grammar:gbnf=...)" : std::string()));
    }
  }
}

// llama.cpp's `grammar` (GBNF text) and `json_schema` (a schema object), and OpenAI's `response_format`
// ({"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema": {...}}}): a grammar stage
// first in the chain, as `glassbox run --grammar` / `--json-schema` put it.
std::optional<PluginSpec> Server::grammar_from_fields(const nlohmann::json& body, GenRequest::Api api) {
  std::optional<PluginSpec> g;
  auto set = [&](const char* what, const char* param, std::string text) {
    if (g) throw HttpError(400, std::string("'") + what + "': a request takes one grammar (grammar, json_schema or response_format)");
    g = PluginSpec{"grammar", {{param, std::move(text)}}};
  };
  if (const auto* gr = field(body, "grammar")) {
    if (!gr->is_string()) throw HttpError(400, "'grammar': expected GBNF text (a string), got " + json_type(*gr));
    if (!gr->get<std::string>().empty()) set("grammar", "gbnf", gr->get<std::string>());
  }
  if (const auto* js = field(body, "json_schema")) {
    if (js->is_string()) set("json_schema", "json_schema", js->get<std::string>());
    else if (js->is_object()) set("json_schema", "json_schema", js->dump());
    else throw HttpError(400, "'json_schema': expected a JSON schema (an object), got " + json_type(*js));
  }
  if (const auto* rf = field(body, "response_format"); rf && api != GenRequest::Api::Llama) {
    if (!rf->is_object()) throw HttpError(400, "'response_format': expected an object {\"type\": ...}, got " + json_type(*rf));
    const auto type = get_string(*rf, "type").value_or("text");
    if (type == "json_object") {
      const auto* schema = field(*rf, "schema");
      set("response_format", "json_schema", schema ? schema->dump() : std::string("{\"type\":\"object\"}"));
    } else if (type == "json_schema") {
      const auto* wrap = field(*rf, "json_schema");
      const auto* schema = wrap && wrap->is_object() ? field(*wrap, "schema") : nullptr;
      if (!schema || !schema->is_object())
        throw HttpError(400, "'response_format': type json_schema needs \"json_schema\": {\"schema\": {...}}");
      set("response_format", "json_schema", schema->dump());
    } else if (type != "text") {
      throw HttpError(400, "'response_format': type '" + type + "' (expected text, json_object or json_schema)");
    }
  }
  return g;
}

// Fields llama.cpp or OpenAI honour that this server does not implement: with a value that would change
// the answer, a 400 naming the field (never a 200 that silently ignored it).
void refuse_unsupported(const nlohmann::json& body) {
  auto refuse = [](const std::string& key, const std::string& why) { throw HttpError(400, "'" + key + "': " + why); };
  if (const auto* n = field(body, "n"); n && !(n->is_number_integer() && n->get<long long>() == 1))
    refuse("n", n->dump().substr(0, 40) + ": one choice per request (n other than 1 is not supported; send the request n times, with different seeds)");
  if (const auto* b = field(body, "best_of"); b && !(b->is_number_integer() && b->get<long long>() == 1))
    refuse("best_of", "best_of other than 1 is not supported");
  if (const auto* e = field(body, "echo"); e && !(e->is_boolean() && !e->get<bool>()))
    refuse("echo", "echoing the prompt is not supported (the prompt is in the trace's header and in the \"prompt\" field of /completion)");
  if (const auto* s = field(body, "suffix"); s && !(s->is_string() && s->get_ref<const std::string&>().empty()))
    refuse("suffix", "insertion (a suffix after the completion) is not supported");
  for (const char* k : {"tools", "functions"})
    if (const auto* t = field(body, k); t && !(t->is_array() && t->empty())) refuse(k, "tool and function calling is not supported");
  for (const char* k : {"tool_choice", "function_call"})
    if (const auto* t = field(body, k); t && !(t->is_string() && t->get_ref<const std::string&>() == "none"))
      refuse(k, "tool and function calling is not supported (only \"none\")");
  if (const auto* t = field(body, "logprobs"); t && t->is_number_integer() && t->get<long long>() < 0) refuse("logprobs", "expected 0 or more");
  if (const auto* t = field(body, "tfs_z"); t && !(t->is_number() && t->get<double>() == 1.0))
    refuse("tfs_z", "tail-free sampling is not implemented (llama.cpp removed it too)");
  if (const auto* t = field(body, "penalize_nl"); t && !(t->is_boolean() && !t->get<bool>()))
    refuse("penalize_nl", "is not supported (llama.cpp removed it)");
  if (const auto* t = field(body, "grammar_lazy"); t && !(t->is_boolean() && !t->get<bool>()))
    refuse("grammar_lazy", "lazy grammars (triggered by a word) are not supported");
  for (const char* k : {"grammar_triggers", "preserved_tokens", "lora"})
    if (const auto* t = field(body, k); t && !(t->is_array() && t->empty())) refuse(k, "is not supported");
  if (const auto* t = field(body, "n_indent"); t && !(t->is_number_integer() && t->get<long long>() == 0)) refuse("n_indent", "is not supported");
  if (const auto* t = field(body, "t_max_predict_ms"); t && !(t->is_number() && t->get<double>() == 0))
    refuse("t_max_predict_ms", "a time limit on the prediction is not supported (use n_predict)");
  if (const auto* t = field(body, "n_cmpl"); t && !(t->is_number_integer() && t->get<long long>() == 1)) refuse("n_cmpl", "one completion per request");
}

GenRequest Server::parse(const nlohmann::json& body, GenRequest::Api api) {
  if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object, got " + json_type(body));
  GenRequest r;
  r.api = api;
  refuse_unsupported(body);
  const Tokenizer& tok = *model_->tokenizer;
  if (api == GenRequest::Api::OpenAiChat) {
    const auto* m = field(body, "messages");
    if (!m || !m->is_array() || m->empty()) throw HttpError(400, "'messages': expected a non-empty array of {role, content}");
    std::vector<ChatMessage> msgs;
    for (const auto& e : *m) {
      if (!e.is_object()) throw HttpError(400, "'messages': expected objects {role, content}, got " + json_type(e));
      const auto role = get_string(e, "role");
      const auto content = get_string(e, "content");
      if (!role || (*role != "system" && *role != "user" && *role != "assistant"))
        throw HttpError(400, "'messages': role must be system, user or assistant");
      msgs.push_back({*role, content.value_or("")});
    }
    ChatFormat fmt = detect_chat_format(tok.chat_template());
    if (fmt == ChatFormat::None) fmt = ChatFormat::Plain;  // as `glassbox chat`: "User: …\nAssistant:"
    r.prompt = render_chat(fmt, msgs);
    r.ids = encode_chat(tok, fmt, msgs);
  } else {
    const auto* p = field(body, "prompt");
    if (!p) throw HttpError(400, "'prompt' is missing");
    if (p->is_string()) {
      r.prompt = p->get<std::string>();
      r.ids = tok.encode(r.prompt, tok.add_bos(), false);
    } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
      r.prompt = (*p)[0].get<std::string>();  // OpenAI's list of one prompt
      r.ids = tok.encode(r.prompt, tok.add_bos(), false);
    } else if (p->is_array()) {
      // A list of prompts (strings only, or lists): llama.cpp and OpenAI answer each; one per request here.
      bool any_string = false, any_number = false, any_list = false;
      for (const auto& e : *p) any_string |= e.is_string(), any_number |= e.is_number(), any_list |= e.is_array();
      if (any_list || (any_string && !any_number))
        throw HttpError(400, "'prompt': a list of " + std::to_string(p->size()) +
                                 " prompts is not supported (one prompt per request: a string, or one list of token ids and strings)");
      // llama.cpp's token prompts: ids as they are, or ids mixed with strings ([12, " world", 34]); a
      // string encodes with BOS only when it comes first (llama.cpp's tokenize_mixed). One prompt per request.
      const int V = tok.vocab_size();
      for (std::size_t i = 0; i < p->size(); ++i) {
        const auto& e = (*p)[i];
        if (e.is_number_integer()) {
          const long long id = e.get<long long>();
          if (e.is_number_unsigned() ? e.get<std::uint64_t>() >= static_cast<std::uint64_t>(V) : id < 0 || id >= V)
            throw HttpError(400, "'prompt'[" + std::to_string(i) + "] = " + e.dump() + ": token id outside the vocabulary (0 .. " +
                                     std::to_string(V - 1) + ")");
          r.ids.push_back(static_cast<std::int32_t>(id));
        } else if (e.is_string()) {
          const auto more = tok.encode(e.get<std::string>(), i == 0 && tok.add_bos(), false);
          r.ids.insert(r.ids.end(), more.begin(), more.end());
        } else {
          throw HttpError(400, "'prompt'[" + std::to_string(i) + "]: expected a token id or a string, got " + json_type(e) +
                                   " (one prompt per request)");
        }
      }
      // The header's prompt text: the ids decoded, control tokens by name.
      for (std::size_t i = 0; i < r.ids.size(); ++i) {
        const TokenType t = tok.token_type(r.ids[i]);
        r.prompt += t == TokenType::Control || t == TokenType::Unknown ? shown_piece(tok, r.ids[i])
                                                                      : std::string(tok.decode(i ? r.ids[i - 1] : -1, r.ids[i]));
      }
    } else {
      throw HttpError(400, "'prompt': expected a string or an array of token ids, got " + json_type(*p));
    }
  }
  if (r.ids.empty()) throw HttpError(400, "the prompt encodes to no tokens (this vocabulary adds no BOS): give some text");
  if (static_cast<int>(r.ids.size()) >= context_)
    throw HttpError(400, "the prompt is " + std::to_string(r.ids.size()) + " tokens, which does not fit the context of " +
                             std::to_string(context_) + " positions (leave room for at least one generated token)");
  // n_predict (llama.cpp) or max_tokens (OpenAI); -1: as many as the context holds, up to --max-predict.
  // Both names on every endpoint (llama.cpp's server takes both; n_predict first).
  long long n = get_int(body, "max_tokens", -1, -1, opt_.max_predict);
  if (api == GenRequest::Api::OpenAiChat && field(body, "max_completion_tokens")) n = get_int(body, "max_completion_tokens", -1, -1, opt_.max_predict);
  if (field(body, "n_predict")) n = get_int(body, "n_predict", -1, -1, opt_.max_predict);
  r.n_predict = static_cast<int>(n < 0 ? std::min<long long>(opt_.max_predict, context_) : n);
  // Stop words: llama.cpp's array, or OpenAI's string or array (at most 16, each 1 .. 256 bytes).
  if (const auto* st = field(body, "stop")) {
    auto add = [&](const nlohmann::json& w) {
      if (!w.is_string()) throw HttpError(400, "'stop': expected strings, got " + json_type(w));
      const std::string& t = w.get_ref<const std::string&>();
      if (t.empty() || t.size() > 256) throw HttpError(400, "'stop': a stop word must be 1 to 256 bytes, got " + std::to_string(t.size()));
      r.stop.push_back(t);
    };
    if (st->is_array()) {
      if (st->size() > 16) throw HttpError(400, "'stop': at most 16 stop words, got " + std::to_string(st->size()));
      for (const auto& w : *st) add(w);
    } else {
      add(*st);
    }
  }
  r.stream = get_bool(body, "stream", false);
  r.post = get_bool(body, "post_sampling_probs", false);
  if (api == GenRequest::Api::Llama) {
    r.n_probs = static_cast<int>(get_int(body, "n_probs", 0, 0, opt_.max_probs));
    r.return_tokens = get_bool(body, "return_tokens", false);
  } else if (api == GenRequest::Api::OpenAiText) {
    r.n_probs = static_cast<int>(get_int(body, "logprobs", 0, 0, opt_.max_probs));
  } else {
    const bool lp = get_bool(body, "logprobs", false);
    const long long top = get_int(body, "top_logprobs", 20, 0, opt_.max_probs);
    if (field(body, "top_logprobs") && !lp) throw HttpError(400, "'top_logprobs' needs \"logprobs\": true");
    r.n_probs = lp ? static_cast<int>(top) : 0;
  }
  // llama.cpp's seed -1 (or none) is a random one; any other must be a 64-bit unsigned integer.
  if (const auto* s = field(body, "seed")) {
    if (s->is_number_integer() && !s->is_number_unsigned() && s->get<long long>() == -1) {
    } else if (s->is_number_unsigned()) {
      r.spec.seed = s->get<std::uint64_t>();
    } else if (s->is_number_integer()) {
      throw HttpError(400, "'seed' = " + s->dump() + " is out of range (expected 0 .. 18446744073709551615, or -1 for a random one)");
    } else {
      throw HttpError(400, "'seed': expected an integer in 0 .. 18446744073709551615 (or -1), got " + s->dump());
    }
  }
  r.spec.ignore_eos = get_bool(body, "ignore_eos", false);
  r.spec.context = context_;
  r.spec.attention = opt_.attention;  // --attention: every request the same module (a shared pool needs one block size)
  r.spec.sampler = chain_from_fields(body, api, r.chain);
  if (auto g = grammar_from_fields(body, api)) r.spec.extra_stages.push_back(std::move(*g));
  if (const auto* ex = field(body, "glassbox")) {
    if (!ex->is_object()) throw HttpError(400, "'glassbox': expected an object, got " + json_type(*ex));
    r.steps = get_bool(*ex, "steps", false);
    // Beam search (docs/beam-search.md): ranks continuations by the model's own log-probabilities, so a field
    // that sets the sampler chain would be ignored: refused instead, naming it (as run refuses --sampler).
    r.beam_width = static_cast<int>(get_int(*ex, "beam_width", 0, 0, 64));
    if (field(*ex, "length_penalty") && r.beam_width == 0) throw HttpError(400, "'glassbox.length_penalty' applies to beam search only: add 'beam_width'");
    r.length_penalty = get_number(*ex, "length_penalty", 1.0, -10, 10);
    if (r.beam_width > 0) {
      for (const char* k : {"sampler", "samplers", "temperature", "top_k", "top_p", "min_p", "typical_p", "min_keep", "repeat_penalty",
                            "repeat_last_n", "presence_penalty", "frequency_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
                            "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold", "top_n_sigma",
                            "dynatemp_range", "dynatemp_exponent", "mirostat", "mirostat_tau", "mirostat_eta", "logit_bias", "grammar",
                            "json_schema", "response_format"})
        if (field(body, k))
          throw HttpError(400, std::string("'") + k + "' sets the sampler chain, which beam search does not use (it ranks the model's own " +
                                   "log-probabilities): drop it, or drop 'glassbox.beam_width'");
      r.spec.sampler = {PluginSpec{"greedy", {}}};
      r.spec.extra_stages.clear();
      r.chain = "greedy";
    }
  }
  if (auto t = get_string(body, "trace")) {
    if (*t == "basic") r.level = TraceLevel::Basic;
    else if (*t == "full") r.level = TraceLevel::Full;
    else throw HttpError(400, "'trace' = '" + *t + "' (expected basic or full)");
  }
  return r;
}

// Builds each step's probability entry (llama.cpp's raw or post-sampling shape) and, for the stream,
// the glassbox step record; checks between steps whether the request is to stop.
class StepCollector final : public TraceSink {
 public:
  StepCollector(const Tokenizer& tok, const GenRequest& r, std::function<std::optional<Cancelled>()> stop, Metrics& m)
      : tok_(tok), r_(r), stop_(std::move(stop)), metrics_(m) {}
  void header(const RunHeader&) override {}
  void step(const StepEvent& e) override {
    if (auto c = stop_()) throw *c;
    const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
    Json entry;
    if (r_.n_probs > 0) {
      const std::string text(e.token_text);
      if (!r_.post) {
        // log Σ exp(logits), from the chosen token when listed (its logprob is exact), else from the first.
        double lse = 0;
        if (!e.top.empty()) {
          lse = e.top[0].logit - std::log(static_cast<double>(e.top[0].prob));
          for (const auto& t : e.top)
            if (t.id == e.token) lse = static_cast<double>(t.logit) - e.logprob;
        }
        Json top = Json::array();
        for (std::size_t i = 0; i < e.top.size() && static_cast<int>(i) < r_.n_probs; ++i) {
          const auto& t = e.top[i];
          const std::string s(tok_.decode(prev, t.id));
          top.push_back({{"id", t.id}, {"token", std::string(cut_incomplete_utf8(s))}, {"bytes", byte_array(s)},
                         {"logprob", t.id == e.token ? e.logprob : static_cast<float>(t.logit - lse)}});
        }
        entry = {{"id", e.token}, {"token", std::string(cut_incomplete_utf8(text))}, {"bytes", byte_array(text)},
                 {"logprob", e.logprob}, {"top_logprobs", top}};
      } else {
        Json top = Json::array();
        if (!e.stages.empty())
          for (std::size_t i = 0; i < e.stages.back().top.size() && static_cast<int>(i) < r_.n_probs; ++i) {
            const auto& t = e.stages.back().top[i];
            const std::string s(tok_.decode(prev, t.id));
            top.push_back({{"id", t.id}, {"token", std::string(cut_incomplete_utf8(s))}, {"bytes", byte_array(s)}, {"prob", t.prob}});
          }
        entry = {{"id", e.token}, {"token", std::string(cut_incomplete_utf8(text))}, {"bytes", byte_array(text)},
                 {"prob", e.chain_prob}, {"top_probs", top}};
      }
    }
    pending_entry = std::move(entry);
    tokens.push_back(e.token);
    if (r_.steps) {
      auto list = [&](std::span<const TokenProb> top) {
        Json a = Json::array();
        for (std::size_t i = 0; i < top.size() && i < 10; ++i)
          a.push_back({{"id", top[i].id}, {"token", std::string(tok_.decode(prev, top[i].id))}, {"prob", top[i].prob}});
        return a;
      };
      Json stages = Json::array();
      for (const auto& st : e.stages)
        stages.push_back({{"name", st.name}, {"kept", st.kept}, {"mass", st.mass}, {"entropy", st.entropy}, {"top", list(st.top)}});
      Json s = {{"step", e.step}, {"pos", e.pos}, {"id", e.token}, {"entropy", e.entropy}, {"prob", e.prob},
                {"chain_prob", e.chain_prob}, {"top", list(e.top)}, {"stages", stages}, {"ms", e.ms}};
      if (e.kv) s["kv"] = {{"module", e.kv->module}, {"tokens", e.kv->tokens}, {"capacity", e.kv->capacity}, {"bytes", e.kv->bytes}};
      if (e.batch > 1) s["batch"] = e.batch;  // the requests whose step shared this pass (the trace's `batch`)
      if (e.prefix_reused > 0) s["prefix_reused"] = e.prefix_reused;
      pending_step = std::move(s);
    }
    if (e.kv) {
      metrics_.kv_tokens += e.kv->tokens - kv_tokens_;
      kv_tokens_ = e.kv->tokens;
    }
    if (first_ms < 0) first_ms = elapsed_ms();
  }
  void summary(const Summary&) override {}
  ~StepCollector() override { metrics_.kv_tokens -= kv_tokens_; }
  // Whether the request is to stop (the server stopping, the client gone): what each step checks.
  std::optional<Cancelled> stop() const { return stop_(); }
  double elapsed_ms() const { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count(); }

  Json pending_entry, pending_step;
  std::vector<std::int32_t> tokens;  // every chosen id, stop tokens included
  double first_ms = -1;

 private:
  const Tokenizer& tok_;
  const GenRequest& r_;
  std::function<std::optional<Cancelled>()> stop_;
  Metrics& metrics_;
  std::int64_t kv_tokens_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// A reply's text as it is generated. Stop words end it: the text before the first one stays. A stream holds
// back an end of the text that could still become one (llama.cpp does the same), so no client ever sees part
// of a stop word. Batched, the pieces are made on the batch's thread and sent from the request's (the
// waiter's errands): the batch never waits on a client's socket; a client gone is seen at the next piece.
class ReplyText {
 public:
  // `emit(piece, id, entry, step)` sends a chunk and returns false when the client is gone (null: no stream).
  using Emit = std::function<bool(const std::string&, std::int32_t, const Json&, const Json&)>;
  ReplyText(const Emit& emit, const std::vector<std::string>& stop, std::atomic<bool>& client_gone)
      : emit_(emit), stop_(stop), client_gone_(client_gone) {}
  // One generated piece (its step just recorded by `collect`); throws StopGeneration at a stop word,
  // Cancelled when the client is gone.
  void add(std::string_view piece, const StepCollector& collect) {
    const std::size_t before = content.size();
    content += piece;
    if (const auto hit = first_stop_word(content, before, stop_)) {
      // The token that completes a stop word ends the run uncounted (as chat's turn marker): its text
      // before the word stays, without a probability entry of its own.
      content.resize(hit->first);
      stopping_word = hit->second;
      if (sent_ < content.size()) send(content.size(), collect.tokens.back(), Json(), Json());
      throw StopGeneration{};
    }
    const std::size_t release = std::max(sent_, content.size() - stop_word_prefix_at_end(content, stop_));
    if (!collect.pending_entry.is_null()) entries.push_back(collect.pending_entry);
    send(release, collect.tokens.back(), collect.pending_entry, collect.pending_step);
  }
  // Text held back for a stop word that never came: the stream's last piece (the trace is complete by now;
  // a client gone at this point only misses it).
  void flush(const StepCollector& collect) {
    if (emit_ && sent_ < content.size()) (void)emit_(content.substr(sent_), collect.tokens.empty() ? -1 : collect.tokens.back(), Json(), Json());
  }

  std::string content;
  std::string stopping_word;
  Json entries = Json::array();              // the per-token probability entries (n_probs)
  BatchLoop::Waiter* waiter = nullptr;       // set when the run decodes in the slots' batch

 private:
  void send(std::size_t upto, std::int32_t id, const Json& entry, const Json& step) {
    if (emit_ && waiter) {
      if (client_gone_) throw Cancelled{0};
      waiter->post([emit = &emit_, gone = &client_gone_, piece = content.substr(sent_, upto - sent_), id, entry, step] {
        if (!*gone && !(*emit)(piece, id, entry, step)) *gone = true;
      });
    } else if (emit_ && !emit_(content.substr(sent_, upto - sent_), id, entry, step)) {
      client_gone_ = true;
      throw Cancelled{0};
    }
    sent_ = upto;
  }
  const Emit& emit_;
  const std::vector<std::string>& stop_;
  std::atomic<bool>& client_gone_;
  std::size_t sent_ = 0;  // bytes of `content` sent
};

std::string stop_type(const Summary& s) {
  if (s.stop_reason == "stop_token") return "eos";
  if (s.stop_reason == "max_tokens" || s.stop_reason == "context_full") return "limit";
  if (s.stop_reason == "stop_text") return "word";
  return "none";
}

struct Server::Speculation {
  std::unique_ptr<Pipeline> draft;
  SpeculativeEngine engine;
  Speculation(std::unique_ptr<Pipeline> d, Pipeline& p, const std::string& draft_path, int k)
      : draft(std::move(d)),
        engine(*p.model, *p.tokenizer, *p.attention, *p.sampler, DraftModel{*draft->model, *draft->attention, *draft->sampler, draft_path}, k) {}
};

std::unique_ptr<Server::Speculation> Server::speculative(const GenRequest& r, Pipeline& p, std::vector<std::string>& notes) {
  // The draft runs the request's chain over its own model, with the target's seed (as run's --draft-model)
  // and its own context: the rounds stop where the shorter of the two ends.
  RunSpec ds = r.spec;
  ds.seed = p.seed;
  ds.context = 0;
  std::vector<std::string> ignored;  // the chain's warnings are the request's, already given
  try {
    return std::make_unique<Speculation>(build_pipeline(draft_, ds, ignored), p, draft_->path.string(), opt_.draft_tokens);
  } catch (const ConfigError& e) {
    notes.push_back(std::string("speculative decoding not used for this request (it decoded without the draft): ") + e.what());
    return nullptr;
  }
}

Summary Server::beam_search(const GenRequest& r, Pipeline& p, const GenerateOptions& g, TraceSink& sinks, const StreamFn& on_piece,
                            std::function<void()> poll) {
  const BeamOptions bo{r.beam_width, r.length_penalty, r.spec.ignore_eos, std::move(poll)};
  return glassbox::beam_search(*p.model, *p.tokenizer, *p.attention, *p.registry, r.spec.attention, model_->path.string(), r.ids, r.prompt, g,
                               bo, RunHeader(p.header), sinks, on_piece);
}

// The finished response object, in the shape of the API that asked: llama.cpp's /completion, or OpenAI's
// completion or chat completion (a stream's last event, or the whole answer); the counters in /metrics too.
Json Server::finished_object(const GenRequest& r, const RequestIds& who, const Pipeline& p, const Summary& sum, const StepCollector& collect,
                             const Reply& reply, const std::vector<std::string>& notes) {
  const int prompt_n = static_cast<int>(r.ids.size());
  metrics_.prompt_tokens += static_cast<std::uint64_t>(prompt_n);
  metrics_.predicted_tokens += static_cast<std::uint64_t>(sum.generated);
  const double total_ms = collect.elapsed_ms();
  const double predicted_ms = std::max(0.0, total_ms - sum.ttft_ms);
  metrics_.prompt_us += static_cast<std::uint64_t>(sum.ttft_ms * 1000);
  metrics_.predicted_us += static_cast<std::uint64_t>(predicted_ms * 1000);
  Json timings = {{"prompt_n", prompt_n}, {"prompt_ms", sum.ttft_ms},
                  {"prompt_per_token_ms", prompt_n ? sum.ttft_ms / prompt_n : 0.0},
                  {"prompt_per_second", sum.ttft_ms > 0 ? 1000.0 * prompt_n / sum.ttft_ms : 0.0},
                  {"predicted_n", sum.generated}, {"predicted_ms", predicted_ms},
                  {"predicted_per_token_ms", sum.generated ? predicted_ms / sum.generated : 0.0},
                  {"predicted_per_second", predicted_ms > 0 ? 1000.0 * sum.generated / predicted_ms : 0.0}};
  Json gb = {{"trace_url", who.trace_url}, {"seed", p.seed}, {"sampler", r.chain}, {"stop_reason", sum.stop_reason},
            {"decode_tok_s", sum.decode_tok_s}};
  // What `glassbox run` would warn about on stderr (a stage that changes nothing, a stage after the
  // selecting one): the client has no stderr, so the response says it.
  if (!notes.empty()) gb["warnings"] = notes;
  const std::string finish = sum.stop_reason == "stop_token" || sum.stop_reason == "stop_text" ? "stop" : "length";
  Json usage = {{"completion_tokens", sum.generated}, {"prompt_tokens", prompt_n}, {"total_tokens", prompt_n + sum.generated}};
  if (who.api == GenRequest::Api::Llama) {
    Json j = {{"index", 0}, {"content", r.stream ? std::string() : reply.content}, {"tokens", Json::array()}, {"id_slot", who.slot},
              {"stop", true}, {"model", alias_}, {"tokens_predicted", sum.generated}, {"tokens_evaluated", prompt_n},
              {"prompt", r.prompt}, {"truncated", false}, {"stop_type", stop_type(sum)}, {"stopping_word", reply.stopping_word},
              {"tokens_cached", 0}, {"timings", timings}};
    if (r.return_tokens && !r.stream) j["tokens"] = reply.ids;
    if (r.n_probs > 0 && !r.stream) j["completion_probabilities"] = reply.entries;
    j["glassbox"] = gb;
    return j;
  }
  Json choice = {{"index", 0}};
  if (r.stream) {
    if (who.chat) choice["delta"] = Json::object();
    else choice["text"] = "";
    choice["logprobs"] = nullptr;
  } else {
    if (who.chat) choice["message"] = {{"role", "assistant"}, {"content", reply.content}};
    else choice["text"] = reply.content;
    choice["logprobs"] = r.n_probs > 0 ? Json{{"content", reply.entries}} : Json(nullptr);
  }
  choice["finish_reason"] = finish;
  return Json{{"choices", Json::array({choice})}, {"created", who.created}, {"model", alias_},
              {"system_fingerprint", "glassbox-" GLASSBOX_VERSION},
              {"object", who.chat ? (r.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
              {"usage", usage}, {"id", who.cmpl_id}, {"timings", timings}, {"glassbox", gb}};
}

// The request's decoding strategy, chosen as run chooses it: beam search (glassbox.beam_width), speculative
// decoding (--draft-model, when the chain allows it), or the engine's sampled loop — in the slots' shared
// batch when there is one (no pace, no beams, no draft), else alone. `waiter` is set to the batch's waiter
// for this run (its pieces are then sent from the request's thread).
Summary Server::decode(const GenRequest& r, Pipeline& p, const GenerateOptions& g, TraceSink& sinks, StepCollector& collect,
                       std::vector<std::string>& notes, bool paced, const StreamFn& on_piece, BatchLoop::Waiter*& waiter) {
  const Tokenizer& tok = *p.tokenizer;
  if (batch_ && !paced && r.beam_width == 0 && !draft_) {
    // ---- continuous batching: this run joins the slots' batch and decodes in its shared passes ----
    return batch_->generate({*p.model, tok, *p.attention, p.sampler.get()}, r.ids, r.prompt, g, RunHeader(p.header), sinks,
                            [&](std::string_view piece, BatchLoop::Waiter& w) {
                              waiter = &w;
                              on_piece(piece);
                            });
  }
  if (r.beam_width > 0)
    return beam_search(r, p, g, sinks, on_piece, [&] {
      if (auto c = collect.stop()) throw *c;  // a search emits its steps at its end: poll between steps
    });
  if (auto spec = draft_ ? speculative(r, p, notes) : nullptr) {
    RunHeader h(p.header);
    h.speculative = SpeculativeSetup{draft_->path.string(), draft_->tokenizer_path, opt_.draft_tokens};
    return spec->engine.generate(r.ids, r.prompt, g, std::move(h), sinks, on_piece);
  }
  Engine engine(*p.model, tok, *p.attention, *p.sampler);
  return engine.generate(r.ids, r.prompt, g, RunHeader(p.header), sinks, on_piece);
}

// One streamed piece as an event of the API that asked: llama.cpp's `{content, tokens, stop: false}`, or
// OpenAI's chunk (a chat's first one carries delta.role: its client's stream helpers need it).
Json Server::piece_event(const RequestIds& who, const std::string& piece, std::int32_t id, const Json& entry, const Json& step, bool& role_sent) {
  Json j;
  if (who.api == GenRequest::Api::Llama) {
    j = {{"index", 0}, {"content", piece}, {"tokens", Json::array({id})}, {"stop", false}};
    if (!entry.is_null()) j["completion_probabilities"] = Json::array({entry});
  } else {
    Json choice = {{"finish_reason", nullptr}, {"index", 0}};
    if (who.chat && !role_sent) choice["delta"] = {{"role", "assistant"}, {"content", piece}};
    else if (who.chat) choice["delta"] = {{"content", piece}};
    else choice["text"] = piece;
    role_sent = true;
    if (!entry.is_null()) choice["logprobs"] = {{"content", Json::array({entry})}};
    j = {{"choices", Json::array({choice})}, {"created", who.created}, {"id", who.cmpl_id}, {"model", alias_},
         {"object", who.chat ? "chat.completion.chunk" : "text_completion"}};
  }
  if (!step.is_null()) j["glassbox"] = {{"step", step}};
  return j;
}

// With a shared KV pool, the blocks a request can ever hold: its prompt and n_predict (and a draft's round
// beyond them), at most the context (0 without a pool). A request the whole pool cannot hold is refused now
// (400), not queued forever.
int Server::pool_blocks(const GenRequest& r) const {
  if (!kv_pool_) return 0;
  const std::int64_t spec_ahead = draft_ ? opt_.draft_tokens + 1 : 0;
  const std::int64_t positions = std::min<std::int64_t>(static_cast<std::int64_t>(r.ids.size()) + r.n_predict + spec_ahead, context_);
  const int blocks = kv_pool_->blocks_for(positions);
  if (blocks > kv_pool_->total())
    throw HttpError(400, "the request may hold " + std::to_string(positions) + " KV positions (prompt " + std::to_string(r.ids.size()) +
                             " + n_predict " + std::to_string(r.n_predict) + "), " + std::to_string(blocks) + " blocks of " +
                             std::to_string(kv_pool_->block_positions()) + ", but the server's KV pool has " +
                             std::to_string(kv_pool_->total()) + " blocks in all (--kv-pool): ask for fewer tokens");
  return blocks;
}

void Server::generate(const std::string& body, httplib::Response& res, GenRequest::Api api) {
  ready_or_503();
  auto r = std::make_shared<GenRequest>(parse(read_body(body), api));
  const int conn_fd = t_conn ? t_conn->fd : -1;  // to see a client that hangs up (the stream's writes see it too)
  std::vector<std::string> warnings;
  // A request's own error is its 400; but a grammar walk stopped by SIGINT/SIGTERM (building the chain walks
  // the grammar's first step, which a huge grammar makes long) is the shutdown's doing: 503, as between steps.
  auto refused = [](const std::exception& e) {
    if (const int s = interrupt_signal()) return HttpError(503, "the server is stopping (" + signal_name(s) + ")", "unavailable_error");
    return HttpError(400, e.what());
  };
  try {
    check_run_spec(*model_->registry, r->spec, warnings);  // names and parameters, before waiting for a slot
  } catch (const Error& e) {
    throw refused(e);
  }
  if (dry_) {
    res.set_content(R"({"parsed":true})", "application/json; charset=utf-8");
    return;
  }
  const int blocks = pool_blocks(*r);
  const int slot = slots_.acquire(stopping_, blocks);
  if (slot < 0) {
    ++metrics_.rejected;
    throw HttpError(503, stopping_ ? "the server is stopping" : "the server is busy: every slot is decoding (or the KV pool is promised away) and the queue is full; try again later",
                    "unavailable_error");
  }
  auto guard = std::make_shared<SlotGuard>(slots_, slot, blocks);
  // The pipeline (activations, KV store) only once a slot is ours: a queue of waiting requests holds no memory.
  std::shared_ptr<Pipeline> p;
  try {
    auto held = std::make_shared<AdmittedPipeline>(AdmittedPipeline{guard, build_pipeline(model_, r->spec, warnings, kv_pool_)});
    p = std::shared_ptr<Pipeline>(held, held->pipeline.get());
  } catch (const Error& e) {
    throw refused(e);
  }
  ++metrics_.requests;
  // (Named copies, not a structured binding: clang 14, the sanitizer build's compiler, cannot capture one.)
  const auto made = traces_.make();
  const bool chat = api == GenRequest::Api::OpenAiChat;
  const RequestIds who{api, chat, slot, made.first, made.second, "/traces/" + made.first,
                       (api == GenRequest::Api::Llama ? "" : chat ? "chatcmpl-" : "cmpl-") + random_id(32), std::time(nullptr)};

  // Runs the generation; `emit(piece, id, entry, step)` is called for each generated piece (stream: sends
  // a chunk and returns false when the client is gone). Returns the finished response object.
  auto run = [this, r, p, who, conn_fd, warnings](const ReplyText::Emit& emit) -> Json {
    const Tokenizer& tok = *p->tokenizer;
    std::vector<std::string> notes = warnings;  // and what this run adds (a draft it could not use)
    ++metrics_.processing;
    struct Done {
      std::atomic<int>& n;
      ~Done() { --n; }
    } done{metrics_.processing};
    GenerateOptions g;
    g.max_tokens = r->n_predict;
    g.watch.level = r->level;
    g.watch.top_k = std::max(10, r->n_probs);  // stages and distribution recorded: the trace and n_probs read them
    g.seed = p->seed;
    traces::JsonlWriter writer(who.trace_path, tok, false, trace_writer_thread(r->level), traces::LogitsEncoding::Base64, {},
                               OutputFile::Live::Allowed, &slots_.step_copies(who.slot));
    std::atomic<bool> client_gone{false};
    StepCollector collect(tok, *r, [&]() -> std::optional<Cancelled> {
      if (int s = stopping_.load()) return Cancelled{s};
      if (client_gone || peer_gone(conn_fd)) {
        client_gone = true;
        return Cancelled{0};
      }
      return std::nullopt;
    }, metrics_);
    TeeSink sinks;
    sinks.add(&writer);
    sinks.add(&collect);
    const auto pace = std::chrono::microseconds(static_cast<std::int64_t>(opt_.pace_ms * 1000));
    Summary sum;
    ReplyText text(emit, r->stop, client_gone);
    try {
      const StreamFn on_piece = [&](std::string_view piece) {
        if (pace.count() > 0) {
          const auto until = std::chrono::steady_clock::now() + pace;
          while (std::chrono::steady_clock::now() < until && !stopping_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (int s = stopping_.load()) throw Cancelled{s};
        text.add(piece, collect);
      };
      sum = decode(*r, *p, g, sinks, collect, notes, pace.count() > 0, on_piece, text.waiter);
    } catch (const Cancelled& c) {
      ++metrics_.cancelled;
      try {
        if (c.signal) writer.interrupted(signal_name(c.signal));
        else writer.error("the client disconnected");
      } catch (const std::exception&) {
      }
      throw;
    } catch (const std::exception& e) {
      if (const int s = interrupt_signal()) {
        // A grammar walk that stopped for SIGINT/SIGTERM: the request is cancelled by the shutdown, as
        // between steps, not refused for its grammar.
        ++metrics_.cancelled;
        try {
          writer.interrupted(signal_name(s));
        } catch (const std::exception&) {
        }
        throw Cancelled{s};
      }
      try {
        writer.error(e.what());
      } catch (const std::exception&) {
      }
      throw;
    }
    text.flush(collect);
    // The ids generated (stop tokens included, as llama.cpp's return_tokens), from the trace's own record.
    return finished_object(*r, who, *p, sum, collect, Reply{text.content, collect.tokens, text.entries, text.stopping_word}, notes);
  };
  res.status = 200;
  if (!r->stream) {
    Json j;
    try {
      j = run(nullptr);
    } catch (const ConfigError& e) {
      throw refused(e);  // the request's own grammar or sampler: its limits, or no token fits
    } catch (const Cancelled& c) {
      if (c.signal) throw HttpError(503, "the server is stopping (" + signal_name(c.signal) + ")", "unavailable_error");
      throw;  // the client is gone: no one reads an answer
    }
    res.set_content(dump(j), "application/json; charset=utf-8");
    return;
  }
  // SSE: one `data: {...}` event per piece, the finished object last (OpenAI's endpoints then `data: [DONE]`).
  res.set_chunked_content_provider("text/event-stream", [this, run, r, guard, who](std::size_t, httplib::DataSink& sink) {
    auto send = [&sink](const std::string& event) { return sink.is_writable() && sink.write(event.data(), event.size()); };
    bool role_sent = false;  // OpenAI's first chat chunk carries delta.role (its client's stream helpers need it)
    try {
      Json last = run([&](const std::string& piece, std::int32_t id, const Json& entry, const Json& step) {
        return send("data: " + dump(piece_event(who, piece, id, entry, step, role_sent)) + "\n\n");
      });
      if (who.chat && !role_sent) last["choices"][0]["delta"] = {{"role", "assistant"}};
      send("data: " + dump(last) + "\n\n");
      if (who.api != GenRequest::Api::Llama) send("data: [DONE]\n\n");
    } catch (const Cancelled&) {
    } catch (const ConfigError& e) {
      send("error: " + error_body(400, e.what(), "invalid_request_error") + "\n\n");
    } catch (const std::exception& e) {
      send("error: " + error_body(500, e.what(), "server_error") + "\n\n");
    }
    sink.done();
    return true;
  });
}

void Server::routes() {
  guard_routes();
  // The model and the page.
  svr_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!loaded_) return send_error(res, 503, "Loading model", "unavailable_error");
    res.set_content(R"({"status":"ok"})", "application/json; charset=utf-8");
  });
  svr_.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(std::string(kServePageHtml), "text/html; charset=utf-8"); });
  svr_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    ready_or_503();
    const Config& c = model_->config;
    Json m = {{"id", alias_}, {"object", "model"}, {"created", started_}, {"owned_by", "glassbox"},
              {"meta", {{"n_vocab", c.vocab_size}, {"n_ctx_train", c.seq_len}, {"n_ctx", context_}, {"n_embd", c.dim},
                        {"n_layer", c.n_layers}, {"size", model_->source->file().size()}}}};
    res.set_content(dump(Json{{"object", "list"}, {"data", Json::array({m})}}), "application/json; charset=utf-8");
  });
  svr_.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    ready_or_503();
    const std::string id = req.matches[1].str();
    if (id != alias_) {
      res.status = 404;
      res.set_content(dump(Json{{"error", {{"code", "model_not_found"}, {"message", client_message("The model '" + id + "' does not exist (this server has '" + alias_ + "')")},
                                           {"type", "invalid_request_error"}, {"param", nullptr}}}}),
                      "application/json; charset=utf-8");
      return;
    }
    res.set_content(dump(Json{{"id", alias_}, {"object", "model"}, {"created", started_}, {"owned_by", "glassbox"}}), "application/json; charset=utf-8");
  });
  // The generation endpoints: llama.cpp's and OpenAI's.
  // POST bodies go through the content reader (receive(): --max-body for every transfer encoding).
  using Reader = httplib::ContentReader;
  for (const auto& [path, api] : {std::pair{"/completion", GenRequest::Api::Llama}, {"/completions", GenRequest::Api::Llama},
                                  {"/v1/completions", GenRequest::Api::OpenAiText}, {"/v1/chat/completions", GenRequest::Api::OpenAiChat}})
    svr_.Post(path, [this, api = api](const httplib::Request& q, httplib::Response& s, const Reader& rd) { generate(receive(q, s, rd), s, api); });
  token_routes();
  trace_routes();
  svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { res.set_content(metrics_text(), "text/plain; version=0.0.4"); });
}

// What every request passes through before its endpoint: the errors' JSON shape, the body and API-key
// checks (before any body is read), and --cors.
void Server::guard_routes() {
  // Every handler's refusal is a JSON error in OpenAI's shape; anything unexpected is a 500 of the same shape.
  svr_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const HttpError& e) {
      send_error(res, e.status, e.what(), e.type);
    } catch (const std::exception& e) {
      send_error(res, 500, e.what(), "server_error");
    } catch (...) {
      send_error(res, 500, "unknown error", "server_error");
    }
  });
  // Statuses httplib sets itself (413 for a body over the limit, 404, 400 for a malformed request) get the same body.
  svr_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const int s = res.status;
    if (s == 400 || s == 413 || s == 414 || s == 431) close_after(res);  // what follows on the socket is not a request
    const std::string msg = s == 413 ? "the request body is over the server's limit (--max-body)"
                            : s == 404 ? "no such endpoint"
                                       : "the request could not be read (HTTP status " + std::to_string(s) + ")";
    send_error(res, s, msg, s == 404 ? "not_found_error" : s >= 500 ? "server_error" : "invalid_request_error");
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Before any body is read (httplib would read one into memory, chunked ones without a bound): a body
    // only for the POST endpoints, which read it themselves within --max-body.
    static const std::set<std::string> posts = {"/completion", "/completions", "/v1/completions", "/v1/chat/completions",
                                                "/tokenize", "/detokenize"};
    const bool has_body = req.has_header("Transfer-Encoding") || (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
    if (req.method == "POST" && !posts.count(req.path)) {
      close_after(res);
      send_error(res, 404, "no such endpoint", "not_found_error");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "POST" && req.has_header("Content-Length")) {
      // Over --max-body by its own account: refused before a byte of it is read (and the connection closed).
      const std::string& v = req.get_header_value("Content-Length");
      if (v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos || std::stoull(v.empty() ? "0" : v) > opt_.max_body) {
        close_after(res);
        send_error(res, 413, "the request body is over the server's limit of " + std::to_string(opt_.max_body) + " bytes (--max-body)",
                   "invalid_request_error");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (has_body && req.method != "POST") {
      close_after(res);
      send_error(res, 400, "a " + req.method + " request carries no body", "invalid_request_error");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "OPTIONS" && !opt_.cors.empty()) return httplib::Server::HandlerResponse::Unhandled;  // CORS preflight: no key
    if (opt_.api_key.empty() || req.path == "/health" || req.path == "/") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + opt_.api_key) return httplib::Server::HandlerResponse::Unhandled;
    if (req.method == "POST") close_after(res);  // its body is not read
    send_error(res, 401, "Invalid API Key", "authentication_error");
    return httplib::Server::HandlerResponse::Handled;
  });
  // --cors ORIGIN: every answer allows that origin (a page served elsewhere may call the API), and a
  // preflight OPTIONS request is answered without the API key (the browser sends none).
  if (!opt_.cors.empty()) {
    svr_.set_default_headers({{"Access-Control-Allow-Origin", opt_.cors}, {"Vary", "Origin"}});
    svr_.Options(".*", [](const httplib::Request&, httplib::Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
    });
  }

}

// POST /tokenize and /detokenize (llama.cpp's), with the served model's vocabulary.
void Server::token_routes() {
  using Reader = httplib::ContentReader;
  svr_.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res, const Reader& rd) {
    ready_or_503();
    const auto body = read_body(receive(req, res, rd));
    if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object");
    const std::string content = get_string(body, "content").value_or("");
    const bool special = get_bool(body, "add_special", false), pieces = get_bool(body, "with_pieces", false);
    const Tokenizer& tok = *model_->tokenizer;
    const auto ids = tok.encode(content, special && tok.add_bos(), false);
    Json out = Json::array();
    for (auto id : ids) {
      if (!pieces) {
        out.push_back(id);
        continue;
      }
      const std::string piece = shown_piece(tok, id);
      out.push_back({{"id", id}, {"piece", valid_utf8(piece) ? Json(piece) : byte_array(piece)}});
    }
    res.set_content(dump(Json{{"tokens", out}}), "application/json; charset=utf-8");
  });
  svr_.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res, const Reader& rd) {
    ready_or_503();
    const auto body = read_body(receive(req, res, rd));
    if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object");
    const auto* t = field(body, "tokens");
    const Tokenizer& tok = *model_->tokenizer;
    std::string text;
    if (t) {
      if (!t->is_array()) throw HttpError(400, "'tokens': expected an array of token ids, got " + json_type(*t));
      for (const auto& v : *t) {
        if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() >= tok.vocab_size())
          throw HttpError(400, "'tokens': " + v.dump() + " is not a token id of this vocabulary (0 .. " + std::to_string(tok.vocab_size() - 1) + ")");
        const auto id = v.get<std::int32_t>();
        text += shown_piece(tok, id);
      }
    }
    res.set_content(dump(Json{{"content", text}}), "application/json; charset=utf-8");
  });
}

// GET /traces/ID (the request's JSONL trace) and /traces/ID/view (the step viewer, for the class-room page's link).
void Server::trace_routes() {
  svr_.Get(R"(/traces/([A-Za-z0-9-]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const auto text = traces_.read(req.matches[1].str());
    if (!text) return send_error(res, 404, "no trace " + req.matches[1].str() + " (unknown, not finished, or no longer kept)", "not_found_error");
    res.set_content(*text, "application/x-ndjson; charset=utf-8");
  });
  svr_.Get(R"(/traces/([A-Za-z0-9-]+)/view)", [this](const httplib::Request& req, httplib::Response& res) {
    const auto text = traces_.read(req.matches[1].str());
    if (!text)
      return send_error(res, 404, "no trace " + req.matches[1].str() + " (unknown, not finished, or no longer kept)", "not_found_error");
    try {
      std::istringstream in(*text);
      res.set_content(traces::trace_html(traces::parse_trace(in, req.matches[1].str() + ".jsonl")), "text/html; charset=utf-8");
    } catch (const Error& e) {
      send_error(res, 409, std::string("the trace cannot be shown: ") + e.what(), "invalid_request_error");
    }
  });
}

// GET /metrics: Prometheus text (llama.cpp's names, under glassbox:).
std::string Server::metrics_text() {
  std::ostringstream m;
  auto metric = [&](const char* name, const char* type, const char* help, double v) {
    m << "# HELP glassbox:" << name << " " << help << "\n# TYPE glassbox:" << name << " " << type << "\nglassbox:" << name << " " << v << "\n";
  };
  metric("prompt_tokens_total", "counter", "Prompt tokens processed.", static_cast<double>(metrics_.prompt_tokens));
  metric("prompt_seconds_total", "counter", "Prompt (prefill) time.", metrics_.prompt_us / 1e6);
  metric("tokens_predicted_total", "counter", "Generated tokens.", static_cast<double>(metrics_.predicted_tokens));
  metric("tokens_predicted_seconds_total", "counter", "Generation (decode) time.", metrics_.predicted_us / 1e6);
  metric("requests_total", "counter", "Generation requests started.", static_cast<double>(metrics_.requests));
  metric("requests_rejected_total", "counter", "Generation requests refused with 503 (queue full).", static_cast<double>(metrics_.rejected));
  metric("requests_cancelled_total", "counter", "Generations cancelled (client gone, or shutdown).", static_cast<double>(metrics_.cancelled));
  metric("requests_processing", "gauge", "Requests decoding now.", metrics_.processing.load());
  metric("requests_deferred", "gauge", "Requests waiting for a slot.", slots_.waiting());
  metric("connections_closed_unfinished_total", "counter",
         "Connections closed while still sending a request, past --client-connections or the total bound.", static_cast<double>(incomplete_.evicted()));
  metric("kv_cache_tokens", "gauge", "KV positions held by the requests decoding now.", static_cast<double>(metrics_.kv_tokens.load()));
  metric("batch_passes_total", "counter", "Batched decode passes (one forward over every slot waiting for a token).",
         batch_ ? static_cast<double>(batch_->passes()) : 0.0);
  metric("batch_rows_total", "counter", "Tokens decoded in batched passes (÷ batch_passes_total: the mean batch).",
         batch_ ? static_cast<double>(batch_->rows()) : 0.0);
  metric("batch_runs", "gauge", "Requests in the running batch now (decoding or prefilling a block per step).",
         batch_ ? static_cast<double>(batch_->active()) : 0.0);
  const PrefixCache::Stats pc = batch_ ? batch_->prefix_stats() : PrefixCache::Stats{};
  metric("prefix_cache_hits_total", "counter", "Prompts that copied a shared prefix's K/V instead of prefilling it (--prefix-cache).",
         static_cast<double>(pc.hits));
  metric("prefix_cache_lookups_total", "counter", "Prompts looked up in the prefix cache.", static_cast<double>(pc.lookups));
  metric("prefix_cache_tokens_reused_total", "counter", "Prompt positions whose K/V were copied, not computed.",
         static_cast<double>(pc.reused_positions));
  metric("prefix_cache_entries", "gauge", "Prompts whose K/V the prefix cache holds now.", static_cast<double>(pc.entries));
  metric("prefix_cache_bytes", "gauge", "Bytes of K/V the prefix cache holds now (at most --prefix-cache MiB).", static_cast<double>(pc.bytes));
  metric("kv_blocks_total", "gauge", "Blocks in the shared KV pool (--kv-pool; 0: the attention module keeps no shared blocks).",
         kv_pool_ ? static_cast<double>(kv_pool_->total()) : 0.0);
  metric("kv_blocks_used", "gauge", "Blocks of the shared KV pool holding a request's K/V now.", kv_pool_ ? static_cast<double>(kv_pool_->used()) : 0.0);
  metric("kv_blocks_reserved", "gauge", "Blocks of the shared KV pool promised to the requests admitted (what each can ever hold).",
         kv_pool_ ? static_cast<double>(kv_pool_->reserved()) : 0.0);
  metric("kv_cache_usage_ratio", "gauge", "KV positions held / (slots × context).",
         context_ ? static_cast<double>(metrics_.kv_tokens.load()) / (static_cast<double>(opt_.parallel) * context_) : 0.0);
  return m.str();
}

void Server::load() {
  std::vector<std::string> warnings;
  auto registry = load_registry(opt_.plugin_path, warnings);
  ModelSpec ms;
  ms.model = opt_.model;
  if (!opt_.tokenizer.empty()) ms.tokenizer.params.emplace_back("path", opt_.tokenizer);
  ms.model_hash = true;
  model_ = load_model(registry, ms);
  // The context of every request, checked once (a request's pipeline uses the same).
  RunSpec probe;
  probe.context = opt_.context;
  probe.sampler = {{"greedy", {}}};
  probe.attention = opt_.attention;
  auto p = build_pipeline(model_, probe, warnings);
  context_ = p->config.seq_len;
  for (const auto& w : warnings) warn(w);
  // The shared KV pool: an attention module that keeps its K/V in blocks joins it (the probe's store, built
  // over it, fixes its block size and allocates it); one that does not (kv-cache, sliding-window, recompute)
  // keeps its own store per request, and then --kv-pool has nothing to size.
  {
    auto pool = std::make_shared<SharedKvPool>(static_cast<std::size_t>(opt_.kv_pool_mib) << 20, opt_.parallel, context_);
    std::vector<std::string> ignored;
    build_pipeline(model_, probe, ignored, pool);
    if (pool->total() > 0) {
      kv_pool_ = std::move(pool);
      slots_.use_pool(kv_pool_.get());
    } else if (opt_.kv_pool_mib > 0) {
      throw ConfigError("--kv-pool " + std::to_string(opt_.kv_pool_mib) + ": attention '" + opt_.attention.to_string() +
                        "' keeps no blocks to share (a shared pool is for a paged module, e.g. --attention paged:16)");
    }
  }
  if (!model_->tokenizer) throw ConfigError("--model " + opt_.model + ": serving needs a vocabulary");
  // Speculative decoding's draft, loaded once and checked as run checks it: the same vocabulary.
  if (!opt_.draft_model.empty()) {
    ModelSpec ds;
    ds.model = opt_.draft_model;
    if (!opt_.draft_tokenizer.empty()) ds.tokenizer.params.emplace_back("path", opt_.draft_tokenizer);
    else if (!is_gguf(opt_.draft_model) && !model_->tokenizer_path.empty()) ds.tokenizer.params.emplace_back("path", model_->tokenizer_path);
    draft_ = load_model(registry, ds);
    if (!draft_->tokenizer) throw ConfigError("--draft-model " + opt_.draft_model + ": the draft needs a vocabulary (--draft-tokenizer)");
    check_draft_vocabulary(*model_->tokenizer, model_->config.vocab_size, model_->path.string(), *draft_->tokenizer,
                           draft_->config.vocab_size, draft_->path.string());
  }
  // Continuous batching: the slots' decode steps in one pass over the weights (--no-batch, --pace: each alone).
  if (opt_.parallel > 1 && opt_.batch && opt_.pace_ms == 0 && !dry_) {
    batch_config_ = p->config;
    batch_ = std::make_unique<BatchLoop>(batch_config_, model_->source->weights(), opt_.parallel,
                                         static_cast<std::size_t>(opt_.prefix_cache_mib) << 20);
  }
}

void Server::prepare_dry() {
  routes();
  load();
  loaded_ = true;
  dry_ = true;
}

void Server::run() {
  if (opt_.parallel < 1 || opt_.parallel > 256) throw ConfigError("--parallel " + std::to_string(opt_.parallel) + " (expected 1..256)");
  if (opt_.queue < 0 || opt_.queue > 4096) throw ConfigError("--queue " + std::to_string(opt_.queue) + " (expected 0..4096)");
  if (opt_.port < 0 || opt_.port > 65535) throw ConfigError("--port " + std::to_string(opt_.port) + " (expected 0..65535)");
  if (opt_.threads > 0) kernels::set_threads(opt_.threads);
  routes();
  // Enough HTTP threads for every slot, every queued request, every connection still sending its request
  // (at most kIncompleteTotal: beyond, the oldest is closed) and a few more for /health, /metrics and traces.
  const int http_threads = opt_.parallel + opt_.queue + kIncompleteTotal + 8;
  http_threads_ = std::make_unique<HttpThreads>(
      http_threads, "--parallel " + std::to_string(opt_.parallel) + " (" + std::to_string(http_threads) + " HTTP threads)");
  svr_.new_task_queue = [this] { return new HttpThreads::Queue(http_threads_.get()); };
  svr_.set_payload_max_length(opt_.max_body);
  svr_.set_keep_alive_timeout(5);
  svr_.set_read_timeout(10);
  svr_.set_write_timeout(5);
  // Plugin folders never appear in an error message (client_message()).
  for (const auto& d : Registry::search_path(opt_.plugin_path)) {
    std::error_code ec;
    g_private_dirs.push_back((d / "").string());
    const auto c = fs::weakly_canonical(d, ec);
    if (!ec) g_private_dirs.push_back((c / "").string());
  }  // a client that never reads: its request is cancelled after 5 s without progress
  // Debian's httplib (0.11.4, a compiled library) listens with a backlog of 5: sixteen clients connecting at
  // once overflowed it (TcpExtListenOverflows) and some saw their connection closed before an answer. The
  // socket it binds is remembered here and its backlog raised to SOMAXCONN (listen() again on a listening
  // socket changes only the backlog).
  // httplib's default options add SO_REUSEPORT, with which a second server on the same port shares it
  // (the kernel splits the connections between the two): only SO_REUSEADDR here, so a port in use is refused.
  svr_.set_socket_options([this](int s) {
    int yes = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd_ = s;
  });
  errno = 0;
  const int port = opt_.port == 0 ? svr_.bind_to_any_port(opt_.host) : (svr_.bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port < 0) {
    const int err = errno;
    if (err == EADDRINUSE)
      throw ConfigError("--port " + std::to_string(opt_.port) + ": the port is already in use on " + opt_.host + " (another server?)");
    throw ConfigError("--host " + opt_.host + " --port " + std::to_string(opt_.port) + ": cannot listen there (" +
                      (err ? std::string(std::strerror(err)) : std::string("not an address of this machine")) + ")");
  }
  if (listen_fd_ >= 0 && ::listen(listen_fd_, SOMAXCONN) != 0)
    throw ConfigError("--port " + std::to_string(port) + ": cannot set the listening socket's backlog: " + std::strerror(errno));
  install_interrupt_handlers();
  ThreadGroup background("serve", [this] { svr_.stop(); });  // the listener and the signal watcher
  background.start([this] {
    svr_.listen_after_bind();
    finished_ = true;
  });
  // stop() does nothing to a server not yet listening: wait until it is (a failed load then stops it).
  for (int i = 0; i < 5000 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::cerr << "glassbox serve: listening on http://" << opt_.host << ":" << port << " (loading the model)" << std::endl;
  // SIGINT/SIGTERM: stop accepting, cancel what is in flight (each trace ends in an interrupted line), return.
  background.start([this] {
    while (!finished_) {
      if (int s = interrupt_signal()) {
        stopping_ = s;
        slots_.wake_all();
        svr_.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  try {
    load();
  } catch (...) {
    stopping_ = SIGTERM;
    svr_.stop();
    background.join();
    throw;
  }
  loaded_ = true;
  std::cerr << "glassbox serve: ready: " << alias_ << ", " << opt_.parallel << " slot(s) of " << context_ << " positions" << std::endl;
  background.join();
  if (stopping_) std::cerr << "glassbox serve: stopped by " << signal_name(stopping_) << std::endl;
}

}  // namespace

void run_server(const ServeOptions& opt) {
  Server s(opt);
  s.run();
}

struct RequestFuzzer::Impl {
  Server server;
  explicit Impl(const ServeOptions& o) : server(o) { server.prepare_dry(); }
};
RequestFuzzer::RequestFuzzer(const ServeOptions& opt) : impl_(std::make_unique<Impl>(opt)) {}
RequestFuzzer::~RequestFuzzer() = default;
std::string RequestFuzzer::feed(std::string_view bytes) { return impl_->server.feed(bytes); }

}  // namespace glassbox::cli
