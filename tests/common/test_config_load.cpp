// Tests of config loading over a schema (common/config_load.hpp), with a test-only config that
// holds every value type.
#include <catch2/catch.hpp>

#include "common/config_load.hpp"
#include "common/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/expect_error.hpp"

namespace {

struct sample_config {
  struct {
    bool flag = false;
    int count = 3;
    std::int64_t bytes = 1 << 20;
    double ratio = 0.5;
    std::string name = "x";
    std::vector<std::string> hosts;
  } a;
  struct {
    struct {
      int depth = 1;
    } inner;
  } b;
};

#define FIELD(member, key) MUSTER_CONFIG_FIELD(sample_config, member, key, "doc of " key)
const muster::config::field<sample_config> kSchema[] = {
    FIELD(a.flag, "a.flag"),   FIELD(a.count, "a.count"), FIELD(a.bytes, "a.bytes"),
    FIELD(a.ratio, "a.ratio"), FIELD(a.name, "a.name"),   FIELD(a.hosts, "a.hosts"),
    FIELD(b.inner.depth, "b.inner.depth"),
};
#undef FIELD

struct loaded {
  sample_config config;
  muster::config::sources where;
};

loaded load(const std::string& text, const std::vector<std::string>& overrides = {}) {
  loaded out;
  auto fields = muster::config::bind_fields(out.config, kSchema);
  muster::config::load_text(text, "job.toml", fields, out.where);
  for (const auto& o : overrides) muster::config::apply_override(o, fields, out.where);
  return out;
}

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  INFO("config text: " << text);
  return muster::test::expect_error(muster::errc::config, [&] { load(text, overrides); });
}

}  // namespace

TEST_CASE("config keeps defaults for keys the file does not set", "[config]") {
  auto l = load("[a]\ncount = 7\n");
  CHECK(l.config.a.count == 7);
  CHECK(l.config.a.name == "x");
  CHECK(l.config.a.ratio == 0.5);
  CHECK(l.where.at("a.count") == "job.toml:2:9");
  CHECK(l.where.count("a.name") == 0);
}

TEST_CASE("config reads every value type and nested sections", "[config]") {
  auto l = load(R"(
[a]
flag = true
count = -2
bytes = 17179869184
ratio = 1          # an integer is accepted where a number is expected
name = "moe"
hosts = ["n1", "n2"]
[b.inner]
depth = 4
)");
  CHECK(l.config.a.flag);
  CHECK(l.config.a.count == -2);
  CHECK(l.config.a.bytes == 17179869184LL);
  CHECK(l.config.a.ratio == 1.0);
  CHECK(l.config.a.name == "moe");
  CHECK(l.config.a.hosts == std::vector<std::string>{"n1", "n2"});
  CHECK(l.config.b.inner.depth == 4);
  CHECK(load("a = { count = 9 }\n").config.a.count == 9);
  CHECK(load("b.inner.depth = 5\n").config.b.inner.depth == 5);
}

TEST_CASE("config names the place, key and a near miss for an unknown key", "[config]") {
  auto msg = error_of("[a]\ncount = 1\ncuont = 2\n");
  CHECK_THAT(msg, Catch::StartsWith("job.toml:3:1: unknown key 'a.cuont'"));
  CHECK_THAT(msg, Catch::Contains("did you mean 'a.count'?"));
  CHECK_THAT(error_of("[zzz]\nq = 1\n"), Catch::StartsWith("job.toml:1:2: unknown section 'zzz'"));
  CHECK_THAT(error_of("[a]\nq = 1\n"), Catch::Contains("unknown key 'a.q'; known keys: a.flag, a.count"));
  CHECK_THAT(error_of("[zzz]\nq = 1\n"), Catch::EndsWith("unknown section 'zzz'; known sections: "
                                                         "a, b.inner (a key is written inside its "
                                                         "section, or as section.key on the "
                                                         "command line)"));
  // a misspelled section, and a key written outside its section
  CHECK_THAT(error_of("[ab]\nq = 1\n"), Catch::EndsWith("unknown section 'ab'; did you mean [a]?"));
  // a [section] header is a section's near miss before a key's ("b.innr" is nearer a key)
  CHECK_THAT(error_of("[b.innr]\nq = 1\n"),
             Catch::EndsWith("unknown section 'b.innr'; did you mean [b.inner]?"));
  CHECK_THAT(error_of("depth = 4\n"),
             Catch::EndsWith("unknown key 'depth'; did you mean 'b.inner.depth'?"));
  CHECK_THAT(error_of("", {"depth=4"}), Catch::Contains("did you mean 'b.inner.depth'?"));
  CHECK_THAT(error_of("zz.q = 1\n"),
             Catch::Contains("unknown section 'zz'; known sections: a, b.inner"));
  CHECK_THAT(error_of("[a.count]\nx = 1\n"), Catch::Contains("job.toml:1:1"));
}

TEST_CASE("a JSON file where the job file goes is named as the model's config.json", "[config]") {
  CHECK_THAT(error_of("{\n  \"hidden_size\": 4096\n}\n"),
             Catch::StartsWith("job.toml:1:1: invalid TOML: ") &&
                 Catch::EndsWith("; this is JSON, not a job file: a Hugging Face config.json is "
                                 "given as model.config_json=FILE after a job file "
                                 "(etc/examples/job.toml lists every key)"));
  CHECK_THAT(error_of("[a\n"), Catch::StartsWith("job.toml:1:") && !Catch::Contains("JSON"));
}

TEST_CASE("config names the expected type and the value for a wrong type", "[config]") {
  auto msg = error_of("[a]\ncount = \"four\"\n");
  CHECK(msg ==
        "job.toml:2:9: a.count: expected an integer, got the string \"four\" which has the wrong "
        "type; write it like `a.count = 3`");
  CHECK_THAT(error_of("a.flag = 1\n"), Catch::Contains("expected a boolean (true or false), got the integer 1"));
  CHECK_THAT(error_of("a.ratio = \"0.5\"\n"), Catch::Contains("expected a number"));
  CHECK_THAT(error_of("a.hosts = [1, 2]\n"), Catch::Contains("expected an array of strings, got an array"));
  CHECK_THAT(error_of("a.count = 3000000000\n"), Catch::Contains("out of range"));
  CHECK_THAT(error_of("a.name = { x = 1 }\n"), Catch::Contains("got a table"));
}

TEST_CASE("config reports TOML syntax errors with file, line and column", "[config]") {
  auto msg = error_of("[a]\ncount = = 3\n");
  CHECK_THAT(msg, Catch::StartsWith("job.toml:2:"));
  CHECK_THAT(msg, Catch::Contains("invalid TOML"));
  CHECK_THAT(error_of("[a]\ncount = 1\ncount = 2\n"), Catch::Contains("job.toml:3:"));
  // a leading zero (TOML refuses it): the key, and how to write it for the key's type
  CHECK_THAT(error_of("[a]\nname = 0660  # a mode\n"),
             Catch::StartsWith("job.toml:2:") &&
                 Catch::EndsWith("; a.name is a string: quote it, name = \"0660\""));
  CHECK_THAT(error_of("a.count = 007\n"),
             Catch::EndsWith("; a.count: write it without the leading zeros, a.count = 7"));
  CHECK_THAT(error_of("[b]\nnope = 00\n"),
             Catch::EndsWith("; b.nope: quote it if it is text (\"00\"), or write 0 for a number"));
}

TEST_CASE("config overrides apply on top of the file with the same type checks", "[config]") {
  auto l = load("[a]\ncount = 7\n", {"a.count=9", "a.name=pretrain", "a.flag=true",
                                      "a.hosts=[\"h1\"]", "a.ratio=0.25", "b.inner.depth=2"});
  CHECK(l.config.a.count == 9);
  CHECK(l.config.a.name == "pretrain");
  CHECK(l.config.a.flag);
  CHECK(l.config.a.hosts == std::vector<std::string>{"h1"});
  CHECK(l.config.a.ratio == 0.25);
  CHECK(l.config.b.inner.depth == 2);
  CHECK(l.where.at("a.count") == "command line 'a.count=9'");
  CHECK(load("", {"a.name=\"quoted\""}).config.a.name == "quoted");
  CHECK(load("", {"a.name=123"}).config.a.name == "123");
  CHECK(load("", {"a.name="}).config.a.name.empty());
}

TEST_CASE("config rejects malformed, unknown and mistyped overrides", "[config]") {
  CHECK_THAT(error_of("", {"a.count"}), Catch::Contains("an override is written section.key=value"));
  CHECK_THAT(error_of("", {"=4"}), Catch::Contains("an override is written"));
  CHECK_THAT(error_of("", {"a.cont=4"}), Catch::Contains("command line 'a.cont=4': unknown key 'a.cont'; did you mean 'a.count'?"));
  CHECK(error_of("", {"a.count=four"}) ==
        "command line 'a.count=four': a.count: expected an integer, got 'four'; write it like a.count=3");
  CHECK_THAT(error_of("", {"a.flag=yes"}), Catch::Contains("expected a boolean"));
  CHECK_THAT(error_of("", {"a.count=1.5"}), Catch::Contains("got the number 1.5"));
}

TEST_CASE("config prints TOML that loads back to the same values", "[config]") {
  auto l = load("a.flag = true\na.ratio = 2\na.name = \"q\\\"uote\\n\"\na.hosts = [\"x\", \"y\"]\n");
  auto fields = muster::config::bind_fields(l.config, kSchema);
  std::string text = muster::config::to_toml(fields, true);
  CHECK_THAT(text, Catch::Contains("[a]\n# doc of a.flag\nflag = true\n"));
  CHECK_THAT(text, Catch::Contains("ratio = 2.0\n"));
  CHECK_THAT(text, Catch::Contains("[b.inner]\n# doc of b.inner.depth\ndepth = 1\n"));
  auto again = load(text);
  CHECK(again.config.a.flag);
  CHECK(again.config.a.ratio == 2.0);
  CHECK(again.config.a.name == "q\"uote\n");
  CHECK(again.config.a.hosts == l.config.a.hosts);
}

TEST_CASE("config accepts an empty array and prints it back loadable", "[config]") {
  auto l = load("a.hosts = [\"x\"]\n", {"a.hosts=[]"});
  CHECK(l.config.a.hosts.empty());
  CHECK(load("a.hosts = []\n").config.a.hosts.empty());
  sample_config defaults;  // a.hosts defaults to an empty list
  auto text = muster::config::to_toml(muster::config::bind_fields(defaults, kSchema), false);
  CHECK_THAT(text, Catch::Contains("hosts = []\n"));
  CHECK(load(text).config.a.hosts.empty());
}

TEST_CASE("config reading a missing file names the file and the reason", "[config]") {
  sample_config c;
  muster::config::sources where;
  auto fields = muster::config::bind_fields(c, kSchema);
  muster::test::temp_dir dir;
  CHECK_THAT(muster::test::expect_error(
                 muster::errc::config,
                 [&] { muster::config::load_file(dir / "nope.toml", fields, where); }),
             Catch::Contains("nope.toml: no such file; give the path of a TOML job file, e.g. "
                             "etc/examples/job.toml"));
  CHECK_THAT(muster::test::expect_error(muster::errc::config,
                                        [&] { muster::config::load_file(dir.path(), fields, where); }),
             Catch::Contains("not a regular file (a directory?)"));
  // another caller's file is named as its own, with its own usual path
  const muster::config::file_kind daemon{"musterd's config file", "musterd's configuration",
                                         "usually /etc/muster/musterd.toml"};
  const auto other = muster::test::expect_error(muster::errc::config, [&] {
    muster::config::load_file(dir / "nope.toml", fields, where, daemon);
  });
  CHECK_THAT(other, Catch::StartsWith("musterd's config file ") &&
                        Catch::EndsWith("nope.toml: no such file; give the path of musterd's "
                                        "configuration, usually /etc/muster/musterd.toml"));
  CHECK_THAT(
      muster::test::expect_error(
          muster::errc::config,
          [&] { muster::config::load_file(dir.path(), fields, where, daemon); }),
      Catch::Contains("give the path of musterd's configuration") && !Catch::Contains("job file"));
  muster::test::write_file(dir / "ok.toml", "a.count = 11\n");
  muster::config::load_file(dir / "ok.toml", fields, where);
  CHECK(c.a.count == 11);
  CHECK_THAT(where.at("a.count"), Catch::EndsWith("ok.toml:1:11"));
}

TEST_CASE("config prints one key's value, a section's keys, and where each value came from",
          "[config]") {
  auto l = load("[a]\ncount = 7\nname = \"two words\"\n", {"a.hosts=[\"x\", \"y\"]"});
  auto fields = muster::config::bind_fields(l.config, kSchema);
  using muster::config::value_text;
  CHECK(value_text(fields, "a.count") == "7\n");
  CHECK(value_text(fields, "a.name") == "two words\n");  // bare, for $(muster config --get)
  CHECK(value_text(fields, "a.hosts") == "[\"x\", \"y\"]\n");
  CHECK(value_text(fields, "a.count", &l.where) == "7  # job.toml:2:9\n");
  CHECK(value_text(fields, "a.hosts", &l.where) ==
        "[\"x\", \"y\"]  # command line 'a.hosts=[\"x\", \"y\"]'\n");
  CHECK(value_text(fields, "a.flag", &l.where) == "false  # default\n");
  CHECK(value_text(fields, "b.inner") == "depth = 1\n");  // a section: its keys
  CHECK_THAT(value_text(fields, "a", &l.where),
             Catch::StartsWith("flag = false  # default\ncount = 7  # job.toml:2:9\n"));
  CHECK(muster::test::expect_error(muster::errc::config, [&] { value_text(fields, "a.cont"); }) ==
        "config --get: unknown key 'a.cont'; did you mean 'a.count'?");
  CHECK_THROWS(value_text(fields, ""));

  const auto text = muster::config::to_toml(fields, false, &l.where);
  CHECK_THAT(text, Catch::Contains("\ncount = 7  # job.toml:2:9\n") &&
                       Catch::Contains("\nratio = 0.5  # default\n"));
  CHECK(load(text).config.a.count == 7);  // the comments load back
}
