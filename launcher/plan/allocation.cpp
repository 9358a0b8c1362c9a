// Parsing AReaL allocation strings: see allocation.hpp.
#include "launcher/plan/allocation.hpp"

#include <fmt/format.h>

#include <cctype>
#include <limits>
#include <vector>

#include "common/error.hpp"

namespace muster::launcher::plan {
namespace {

// A cursor over the text with whitespace already removed; `text` keeps the original for errors.
class cursor {
 public:
  explicit cursor(std::string_view text) : text_(text) {
    for (std::size_t i = 0; i < text.size(); ++i)
      if (!std::isspace(static_cast<unsigned char>(text[i]))) {
        chars_.push_back(text[i]);
        columns_.push_back(static_cast<int>(i) + 1);
      }
  }
  bool done() const { return pos_ >= chars_.size(); }
  char peek() const { return done() ? '\0' : chars_[pos_]; }
  char next() { return chars_[pos_++]; }
  bool eat(std::string_view word) {
    if (std::string_view(chars_).substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  std::string_view rest() const { return std::string_view(chars_).substr(pos_); }
  int column() const {
    return done() ? static_cast<int>(text_.size()) + 1 : columns_[pos_];
  }
  [[noreturn]] void fail(std::string_view what) const {
    MUSTER_THROW(errc::config,
                 "parallel.allocation: \"{}\": column {}: {}; e.g. \"megatron:d4t2p2\" or "
                 "\"megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)\"",
                 text_, column(), what);
  }

 private:
  std::string_view text_;
  std::string chars_;
  std::vector<int> columns_;
  std::size_t pos_ = 0;
};

// "d, t, p or c".
std::string spelled(std::string_view letters) {
  std::string out;
  for (std::size_t i = 0; i < letters.size(); ++i) {
    if (i > 0) out += (i + 1 == letters.size()) ? " or " : ", ";
    out += letters[i];
  }
  return out;
}

int read_size(cursor& in, char letter) {
  if (!std::isdigit(static_cast<unsigned char>(in.peek())))
    in.fail(fmt::format("'{}' needs a size after it, e.g. {}2", letter, letter));
  long long value = 0;
  while (std::isdigit(static_cast<unsigned char>(in.peek()))) {
    value = value * 10 + (in.next() - '0');
    if (value > std::numeric_limits<int>::max()) in.fail("size too large");
  }
  if (value < 1) in.fail(fmt::format("{}{}: sizes start at 1", letter, value));
  return static_cast<int>(value);
}

// Reads letter+size pairs until the end, '|' or ')'. `letters` are the dimensions allowed here
// and `slots` where each one's size goes.
void read_dims(cursor& in, std::string_view letters, int* const* slots, std::string_view half) {
  bool any = false;
  while (!in.done() && in.peek() != '|' && in.peek() != ')') {
    char letter = in.peek();
    auto at = letters.find(letter);
    if (at == std::string_view::npos) {
      if (in.rest().starts_with("ffn:")) in.fail("expected '|' before \"ffn:\"");
      if (letter == 'e' && half == "attn")
        in.fail("'e' is allowed only in the ffn half: experts are not part of the attention mesh");
      if (letter == 'c' && half == "ffn")
        in.fail("'c' is allowed only in the attn half: context parallelism splits attention");
      in.fail(fmt::format("'{}' is not a dimension here; use {}", letter, spelled(letters)));
    }
    in.next();
    int size = read_size(in, letter);
    if (*slots[at] != 0) in.fail(fmt::format("'{}' is given twice", letter));
    *slots[at] = size;
    any = true;
  }
  if (!any) in.fail(fmt::format("no dimensions{}", half.empty() ? "" : fmt::format(" in the {} half", half)));
}

void read_folded(cursor& in, allocation& a) {
  bool paren = in.eat("(");
  if (!in.eat("attn:")) in.fail("expected \"attn:\" to start the folded form");
  int* attn_slots[] = {&a.d, &a.t, &a.p, &a.c};
  read_dims(in, "dtpc", attn_slots, "attn");
  if (!in.eat("|")) in.fail("expected '|' between the attn and ffn halves");
  if (!in.eat("ffn:")) in.fail("expected \"ffn:\" after '|'");
  int* ffn_slots[] = {&a.ffn_d, &a.ffn_t, &a.ffn_p, &a.ffn_e};
  read_dims(in, "dtpe", ffn_slots, "ffn");
  if (paren && !in.eat(")")) in.fail("expected ')' to close the folded form");
  a.folded = true;
}

}  // namespace

allocation parse_allocation(std::string_view text) {
  cursor in(text);
  allocation a;
  if (text.find('+') != std::string_view::npos)
    MUSTER_THROW(errc::config,
                 "parallel.allocation: \"{}\": muster plans one training component; give only "
                 "the training part (the one after '+', e.g. \"megatron:d4t2\")",
                 text);
  for (std::string_view backend : {"megatron", "fsdp", "archon"})
    if (in.eat(std::string(backend) + ":")) a.backend = backend;
  for (std::string_view inference : {"sglang", "vllm"})
    if (in.rest().starts_with(inference))
      in.fail(fmt::format("{} is an inference backend; give the training component "
                          "(megatron:, fsdp: or archon:)", inference));
  if (in.peek() == '(' || in.rest().starts_with("attn:")) {
    read_folded(in, a);
  } else {
    int* slots[] = {&a.d, &a.t, &a.p, &a.c, &a.e};
    read_dims(in, "dtpce", slots, "");
  }
  if (!in.done()) in.fail(fmt::format("unexpected '{}'", in.peek()));
  if (a.backend == "fsdp" && (a.e > 1 || a.ffn_e > 1))
    MUSTER_THROW(errc::config,
                 "parallel.allocation: \"{}\": the fsdp backend has no expert parallelism; use "
                 "\"megatron:\" for e > 1",
                 text);
  return a;
}

std::string format_allocation(std::string_view backend, int dp, int tp, int pp, int cp, int edp,
                              int etp, int ep) {
  auto dims = [](std::initializer_list<std::pair<char, int>> sizes) {
    std::string out;
    for (auto [letter, size] : sizes)
      if (size != 1 || letter == 'd') out += fmt::format("{}{}", letter, size);
    return out;
  };
  std::string prefix = backend.empty() ? "" : fmt::format("{}:", backend);
  // Unfolded strings mean ETP = 1 and EDP = world / (EP * PP), which is what the sizes give
  // whenever ETP = 1.
  if (etp == 1)
    return prefix + dims({{'d', dp}, {'p', pp}, {'t', tp}, {'c', cp}, {'e', ep}});
  return fmt::format("{}(attn:{}|ffn:{})", prefix, dims({{'d', dp}, {'p', pp}, {'t', tp}, {'c', cp}}),
                     dims({{'d', edp}, {'p', pp}, {'t', etp}, {'e', ep}}));
}

}  // namespace muster::launcher::plan
