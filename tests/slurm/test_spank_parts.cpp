// The SPANK plugin's parts that need no Slurm (slurm/spank/): its JSON reader against
// nlohmann's writer, --muster-policy, the env request as the daemon parses it, the daemon's own
// reply as the plugin reads it, plugstack.conf's arguments, and the socket client against a
// real unix socket that answers, stays silent, or is not there.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu_policy.hpp"
#include "daemon/env_request.hpp"
#include "tests/support/seed.hpp"
#include "tests/support/temp_dir.hpp"

extern "C" {
#include "muster_client.h"
#include "muster_config.h"
#include "muster_env.h"
#include "muster_json.h"
}

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Our reader's tree as nlohmann JSON (numbers as doubles), to compare with the source.
json to_nlohmann(const muster_json& v) {
  switch (v.type) {
    case MUSTER_JSON_NULL:
      return nullptr;
    case MUSTER_JSON_BOOL:
      return bool(v.boolean);
    case MUSTER_JSON_NUMBER:
      return v.number;
    case MUSTER_JSON_STRING:
      return std::string(v.string);
    case MUSTER_JSON_ARRAY: {
      json out = json::array();
      for (std::size_t i = 0; i < v.count; ++i) out.push_back(to_nlohmann(v.items[i]));
      return out;
    }
    case MUSTER_JSON_OBJECT: {
      json out = json::object();
      for (std::size_t i = 0; i < v.count; ++i) out[v.keys[i]] = to_nlohmann(v.items[i]);
      return out;
    }
  }
  return "?";
}

// Parses with muster_json; the error text when it fails.
std::string parse_error(const std::string& text) {
  muster_json doc;
  char err[256];
  if (muster_json_parse(text.data(), text.size(), &doc, err, sizeof err) == 0) {
    muster_json_free(&doc);
    return "";
  }
  return err;
}

json parsed(const std::string& text) {
  muster_json doc;
  char err[256];
  INFO(text);
  REQUIRE(muster_json_parse(text.data(), text.size(), &doc, err, sizeof err) == 0);
  auto out = to_nlohmann(doc);
  muster_json_free(&doc);
  return out;
}

std::string random_string(std::mt19937& rng) {
  // ASCII (quotes, backslashes, controls), 2-, 3- and 4-byte characters
  static const std::vector<std::string> pieces = {"a",    "Z", "\"", "\\", "/", "\n", "\t", "\x01",
                                                  "\x1f", " ", "é",  "€",  "𝄞", "中", "0"};
  std::string s;
  for (int n = int(rng() % 12); n > 0; --n) s += pieces[rng() % pieces.size()];
  return s;
}

json random_json(std::mt19937& rng, int depth) {
  switch (depth > 4 ? rng() % 4 : rng() % 6) {
    case 0:
      return nullptr;
    case 1:
      return bool(rng() % 2);
    case 2:
      return double(int(rng() % 200001) - 100000) / 8.0;
    case 3:
      return random_string(rng);
    case 4: {
      json a = json::array();
      for (int n = int(rng() % 5); n > 0; --n) a.push_back(random_json(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int n = int(rng() % 5); n > 0; --n) o[random_string(rng)] = random_json(rng, depth + 1);
      return o;
    }
  }
}

muster_policy policy_of(const char* text) {
  muster_policy p;
  char err[512];
  INFO(text);
  REQUIRE(muster_policy_parse(text, &p, err, sizeof err) == 0);
  return p;
}

std::string policy_error(const char* text) {
  muster_policy p;
  char err[512] = "";
  if (muster_policy_parse(text, &p, err, sizeof err) == 0) return "(accepted)";
  return err;
}

// A listening unix socket in a temporary folder, answering (or not) from a thread.
struct fake_daemon {
  muster::test::temp_dir dir{"spank-client"};
  std::string path = (dir / "d.sock").string();
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  std::thread thread;
  fake_daemon() {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::copy(path.begin(), path.end(), a.sun_path);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
  }
  // Accepts one connection, reads a line, and sends `reply` (nothing when empty) after `delay`.
  void answer(std::string reply, std::chrono::milliseconds delay = 0ms) {
    thread = std::thread([this, reply, delay] {
      const int c = ::accept(fd, nullptr, nullptr);
      if (c < 0) return;
      std::string got;
      char buf[4096];
      while (got.find('\n') == std::string::npos) {
        const auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, std::size_t(n));
      }
      received = got;
      std::this_thread::sleep_for(delay);
      if (!reply.empty()) ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(c);
    });
  }
  ~fake_daemon() {
    if (thread.joinable()) thread.join();
    ::close(fd);
  }
  std::string received;
};

}  // namespace

TEST_CASE("the plugin's JSON reader reads what nlohmann writes, strings decoded exactly",
          "[spank]") {
  const auto seed = muster::test::test_seed();
  INFO("seed " << seed << " (MUSTER_TEST_SEED replays it)");
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  for (int i = 0; i < 500; ++i) {
    const json doc = random_json(rng, 0);
    for (const int indent : {-1, 2}) {
      const auto text = doc.dump(indent);
      INFO(text);
      CHECK(parsed(text) == doc);
    }
  }
  CHECK(parsed(R"("\u00e9\u20ac\ud834\udd1e\/")") == json("é€𝄞/"));
  CHECK(parsed(" [1e3, -0.5, 0, 12E-1] ") == json({1000.0, -0.5, 0.0, 1.2}));
  CHECK(parsed(R"({"a":1,"a":2})").size() == 1);  // nlohmann keeps one; we return the first
}

TEST_CASE("the plugin's JSON reader refuses broken text and says where", "[spank]") {
  CHECK_THAT(parse_error(R"({"ok":true} x)"), Catch::Contains("at byte 12: text after the value"));
  CHECK_THAT(parse_error(R"({"ok":tru})"), Catch::Contains("expected true"));
  CHECK_THAT(parse_error(R"(["abc)"), Catch::Contains("unterminated string"));
  CHECK_THAT(parse_error(R"({"a" 1})"), Catch::Contains("expected ':'"));
  CHECK_THAT(parse_error(R"([1,])"), Catch::Contains("expected a value"));
  CHECK_THAT(parse_error(R"("\ud834x")"), Catch::Contains("without its low half"));
  CHECK_THAT(parse_error(R"("\udd1e")"), Catch::Contains("without its high half"));
  CHECK_THAT(parse_error(R"("a\u0000b")"), Catch::Contains("\\u0000"));
  CHECK_THAT(parse_error("\"tab\there\""), Catch::Contains("control character 0x09"));
  CHECK_THAT(parse_error("01"), Catch::Contains("text after the value"));
  CHECK_THAT(parse_error(std::string(40, '[') + std::string(40, ']')),
             Catch::Contains("nested deeper than 32"));
  CHECK_THAT(parse_error(""), Catch::Contains("found the end"));
  const muster_json* none = nullptr;
  CHECK(muster_json_get(none, "x") == nullptr);
}

TEST_CASE("the option --muster-policy reads a layout and names the bad item and the accepted forms",
          "[spank]") {
  const auto p = policy_of("tp=2,ep=8,sharding=optim_grads_params,nccl_ub,cuda_graphs=off");
  CHECK(p.tp == 2);
  CHECK(p.cp == 0);
  CHECK(p.ep == 8);
  CHECK(std::string(p.sharding) == "optim_grads_params");
  CHECK(p.nccl_ub == 1);
  CHECK(p.cuda_graphs == 0);
  CHECK(p.expandable_segments == -1);
  const auto none = policy_of("");
  CHECK(none.tp == 0);
  CHECK(none.nccl_ub == -1);
  CHECK(policy_of(nullptr).memory_tight == -1);

  CHECK(policy_error("tpp=2") ==
        "unknown key \"tpp\" in \"tpp=2\"; keys: tp, cp, ep, sharding, nccl_ub, "
        "fsdp_double_buffer, tp_comm_overlap, ep_comm_overlap, expandable_segments, "
        "cuda_graphs, memory_tight");
  CHECK(policy_error("tp=0") == "tp=\"0\" in \"tp=0\" is not a count from 1 to 4096 (e.g. tp=2)");
  CHECK_THAT(policy_error("ep=2x"), Catch::Contains("not a count"));
  CHECK_THAT(policy_error("tp="), Catch::Contains("not a count"));
  CHECK_THAT(policy_error("sharding=full"), Catch::Contains("not one of no_shard, optim"));
  CHECK_THAT(policy_error("nccl_ub=maybe"), Catch::Contains("not on or off"));
}

TEST_CASE(
    "the env request is one line the daemon's parser takes, with the CUDA and NCCL "
    "variables only",
    "[spank]") {
  const auto p = policy_of("tp=2,cp=2,sharding=optim,expandable_segments,memory_tight=0");
  std::vector<const char*> env = {"PATH=/bin",
                                  "CUDA_DEVICE_MAX_CONNECTIONS=1",
                                  "NCCL_SOCKET_IFNAME=\"odd\\name\"\t",
                                  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False",
                                  "TORCH_NCCL_TRACE_BUFFER_SIZE=10",
                                  "TORCH_HOME=/x",
                                  "NCCL_BROKEN",
                                  nullptr};
  char* line = muster_env_request("4242", "batch", &p, 4, const_cast<char* const*>(env.data()));
  REQUIRE(line != nullptr);
  std::string text(line);
  std::free(line);
  REQUIRE(text.back() == '\n');
  CHECK(text.find('\n') == text.size() - 1);
  const auto request = json::parse(text);
  CHECK(request["request"] == "env");
  CHECK(request["job"]["id"] == "4242");
  CHECK(request["job"]["step"] == "batch");
  CHECK(request["job"]["tp"] == 2);
  CHECK(request["job"]["cp"] == 2);
  CHECK_FALSE(request["job"].contains("ep"));
  CHECK(request["job"]["gpus"] == 4);
  CHECK(request["job"]["sharding"] == "optim");
  CHECK(request["job"]["memory_tight"] == false);
  CHECK(request["job"]["features"] == json({{"expandable_segments", true}}));
  CHECK(request["env"] == json({{"CUDA_DEVICE_MAX_CONNECTIONS", "1"},
                                {"NCCL_SOCKET_IFNAME", "\"odd\\name\"\t"},
                                {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"},
                                {"TORCH_NCCL_TRACE_BUFFER_SIZE", "10"}}));

  // what the daemon makes of it
  const muster::daemon::node_context node{};
  const auto input = muster::daemon::parse_env_request(request, node);
  CHECK(input.tp == 2);
  CHECK(input.expandable_segments);
  CHECK(input.node.gpus == 4);
  CHECK(muster::daemon::env_job_of(request)->step == "batch");

  // no job: not job-scoped; no GPU count: the daemon takes the node's
  const auto bare = policy_of("");
  line = muster_env_request(nullptr, "0", &bare, -1, nullptr);
  const auto unscoped = json::parse(line);
  std::free(line);
  CHECK(unscoped["job"] == json({{"features", json::object()}}));
  CHECK_FALSE(muster::daemon::env_job_of(unscoped));
  CHECK(muster::daemon::parse_env_request(unscoped, node).tp == 1);
}

TEST_CASE("CUDA_VISIBLE_DEVICES counts the GPUs a task sees", "[spank]") {
  CHECK(muster_visible_gpus("0,1,2,3") == 4);
  CHECK(muster_visible_gpus("GPU-8f1e,GPU-77aa") == 2);
  CHECK(muster_visible_gpus("3") == 1);
  CHECK(muster_visible_gpus("") == 0);
  CHECK(muster_visible_gpus("NoDevFiles") == 0);
  CHECK(muster_visible_gpus(nullptr) == 0);
  CHECK(muster_visible_gpus("0,,1,") == 2);
}

TEST_CASE("the plugin reads the daemon's own env reply: sets, unsets and refusals", "[spank]") {
  muster::gpu_policy_input in;
  in.node.gpus = 8;
  in.node.compute_major = 9;
  in.sharding = "optim_grads_params";
  in.env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1";
  const auto result = muster::decide_gpu_policy(in);
  const std::string line = "{\"version\":1,\"ok\":true," + muster::daemon::env_reply(result) + "}";
  muster_env_reply reply;
  char err[256];
  INFO(line);
  REQUIRE(muster_env_reply_parse(line.data(), line.size(), &reply, err, sizeof err) == 0);
  CHECK(reply.ok == 1);
  CHECK(reply.num_errors == 0);
  std::size_t num_set = 0, num_unset = 0;
  for (const auto& d : result.env) (d.value ? num_set : num_unset)++;
  REQUIRE(reply.num_changes == result.env.size());
  REQUIRE(num_unset == 1);
  bool unset_seen = false, order_seen = false;
  for (std::size_t i = 0; i < reply.num_changes; ++i) {
    const auto& c = reply.changes[i];
    if (std::string(c.variable) == "CUDA_DEVICE_MAX_CONNECTIONS") {
      unset_seen = c.value == nullptr && std::string(c.rule) == "cuda-max-connections-fsdp";
      CHECK(i == num_set);  // the unsets come after the sets
    }
    if (std::string(c.variable) == "CUDA_DEVICE_ORDER")
      order_seen = c.value && std::string(c.value) == "PCI_BUS_ID";
  }
  CHECK(unset_seen);
  CHECK(order_seen);
  muster_env_reply_free(&reply);

  // a refused combination
  in.nccl_ub = true;
  in.expandable_segments = true;
  const std::string refused = "{\"version\":1,\"ok\":true," +
                              muster::daemon::env_reply(muster::decide_gpu_policy(in)) + "}";
  REQUIRE(muster_env_reply_parse(refused.data(), refused.size(), &reply, err, sizeof err) == 0);
  REQUIRE(reply.num_errors >= 1);
  CHECK_THAT(reply.errors[0], Catch::StartsWith("nccl-ub-expandable-segments: "));
  muster_env_reply_free(&reply);

  // an error reply, and replies that are not one
  const std::string denied =
      R"({"version":1,"ok":false,"error":{"code":"denied","message":"job 7 belongs to uid 1000"}})";
  REQUIRE(muster_env_reply_parse(denied.data(), denied.size(), &reply, err, sizeof err) == 0);
  CHECK(reply.ok == 0);
  CHECK(std::string(reply.error_code) == "denied");
  CHECK(std::string(reply.error_message) == "job 7 belongs to uid 1000");
  muster_env_reply_free(&reply);
  for (const std::string bad :
       {"not json", R"({"version":1})", R"({"ok":true,"set":[]})",
        R"({"ok":true,"set":[{"variable":"X"}],"unset":[],"errors":[]})", R"({"ok":false})"}) {
    INFO(bad);
    CHECK(muster_env_reply_parse(bad.data(), bad.size(), &reply, err, sizeof err) == -1);
    CHECK(std::string(err).size() > 10);
    muster_env_reply_free(&reply);
  }
}

TEST_CASE("plugstack.conf arguments: defaults, each key, and errors naming key and value",
          "[spank]") {
  muster_config c;
  char err[512] = "";
  CHECK(muster_config_parse(0, nullptr, &c, err, sizeof err) == 0);
  CHECK(std::string(c.socket) == "/run/muster/musterd.sock");
  CHECK(c.timeout_ms == 1000);
  CHECK(c.record_timeout_ms == 4000);
  CHECK(c.required == 0);
  std::vector<std::string> words = {"socket=/tmp/x.sock", "timeout_ms=250", "record_timeout_ms=0",
                                    "required"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  REQUIRE(muster_config_parse(int(argv.size()), argv.data(), &c, err, sizeof err) == 0);
  CHECK(std::string(c.socket) == "/tmp/x.sock");
  CHECK(c.timeout_ms == 250);
  CHECK(c.record_timeout_ms == 0);
  CHECK(c.required == 1);
  auto refused = [&](std::string word) {
    char* one = word.data();
    return muster_config_parse(1, &one, &c, err, sizeof err) == -1 ? std::string(err) : "";
  };
  CHECK(refused("socket=relative.sock") ==
        "socket: invalid value: \"relative.sock\" (an absolute path under 108 bytes, e.g. "
        "socket=/run/muster/musterd.sock)");
  CHECK_THAT(refused("socket=/" + std::string(120, 'x')), Catch::Contains("under 108 bytes"));
  CHECK(refused("timeout_ms=0") ==
        "timeout_ms: invalid value: \"0\" (1 to 60000, e.g. timeout_ms=1000)");
  CHECK(refused("required=yes") == "required: invalid value: \"yes\" (0 or 1)");
  CHECK_THAT(refused("record_timeout_ms=-1"),
             Catch::StartsWith("record_timeout_ms: invalid value"));
  CHECK(refused("sokcet=/x") ==
        "unknown argument \"sokcet=/x\" in plugstack.conf; known: socket=, timeout_ms=, "
        "record_timeout_ms=, required=");
}

TEST_CASE("the plugin's client gets a reply, and gives up on a silent or missing daemon in time",
          "[spank]") {
  char err[512] = "";
  {
    fake_daemon d;
    d.answer("{\"ok\":true}\nextra");
    char* reply =
        muster_daemon_ask(d.path.c_str(), "{\"request\":\"env\"}\n", 2000, err, sizeof err);
    INFO(err);
    REQUIRE(reply != nullptr);
    CHECK(std::string(reply) == "{\"ok\":true}");
    std::free(reply);
    d.thread.join();
    CHECK(d.received == "{\"request\":\"env\"}\n");
  }
  {
    fake_daemon d;  // listens, never accepts: a hung daemon
    const auto start = std::chrono::steady_clock::now();
    CHECK(muster_daemon_ask(d.path.c_str(), "{}\n", 300, err, sizeof err) == nullptr);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(std::string(err) == "no answer from " + d.path + " within 300 ms");
    CHECK(took >= 290ms);
    CHECK(took < 2s);
  }
  {
    fake_daemon d;
    d.answer("", 0ms);  // reads the request, closes without a word
    CHECK(muster_daemon_ask(d.path.c_str(), "{}\n", 2000, err, sizeof err) == nullptr);
    CHECK(std::string(err) == d.path + " closed the connection before answering");
  }
  CHECK(muster_daemon_ask("/nonexistent/musterd.sock", "{}\n", 300, err, sizeof err) == nullptr);
  CHECK(std::string(err) ==
        "cannot connect to /nonexistent/musterd.sock: No such file or directory");
}

TEST_CASE("etc's plugstack.conf.d snippet loads the plugin with arguments its parser takes",
          "[spank]") {
  const auto text = muster::test::read_file(std::string(MUSTER_SOURCE_DIR) +
                                            "/etc/slurm/plugstack.conf.d/muster.conf");
  std::vector<std::string> words;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    REQUIRE(words.empty());  // one plugin line
    std::istringstream in(line);
    for (std::string word; in >> word;) words.push_back(word);
  }
  REQUIRE(words.size() >= 2);
  CHECK(words[0] == "required");
  CHECK_THAT(words[1], Catch::EndsWith("/spank_muster.so"));
  std::vector<char*> argv;
  for (std::size_t i = 2; i < words.size(); ++i) argv.push_back(words[i].data());
  muster_config c;
  char err[512] = "";
  INFO(err);
  CHECK(muster_config_parse(int(argv.size()), argv.data(), &c, err, sizeof err) == 0);
  CHECK(std::string(c.socket) == MUSTER_DEFAULT_SOCKET);
}
