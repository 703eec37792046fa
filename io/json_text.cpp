#include "io/json_text.hpp"

#include <algorithm>
#include <unordered_set>
#include <vector>

namespace noeira::io {

namespace {

using DomParser = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;

// nlohmann's DOM builder, with its errors kept rather than thrown and every object's keys
// checked for repeats. sax_parse calls through the derived type, so these hide the base's.
class CheckedDom : public DomParser {
 public:
  explicit CheckedDom(nlohmann::json& out) : DomParser(out, /*allow_exceptions=*/false) {}

  bool start_object(std::size_t elements) {
    keys_.emplace_back();
    return DomParser::start_object(elements);
  }
  bool end_object() {
    keys_.pop_back();
    return DomParser::end_object();
  }
  bool key(std::string& name) {
    if (!keys_.back().insert(name).second) {
      problem = JsonProblem{"a key given twice", 0, 0, name};
      return false;
    }
    return DomParser::key(name);
  }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& e) {
    // 406: a number past double's range ("1e400"); every other error is the syntax's.
    problem = JsonProblem{e.id == 406 ? "a number out of range" : "not valid JSON", 0, 0,
                          last_token};
    position_ = position;
    return false;
  }

  std::optional<JsonProblem> problem;
  std::size_t position() const { return position_; }

 private:
  std::size_t position_ = 0;  // of a parse error: the characters read, the offending one too
  std::vector<std::unordered_set<std::string>> keys_;
};

}  // namespace

std::optional<JsonProblem> parse_json(std::string_view text, nlohmann::json& out) {
  CheckedDom dom(out);
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &dom);
  if (ok && !dom.problem) return std::nullopt;
  JsonProblem p = dom.problem.value_or(JsonProblem{"not valid JSON", 0, 0, ""});
  if (dom.position() > 0) {
    // The position counts the characters read: the offending token's last one, or one past the
    // text where it ended early (then there is no token to show).
    const std::size_t at = std::min(dom.position() - 1, text.size());
    if (at == text.size()) p.token.clear();
    const std::string_view before = text.substr(0, at);
    p.line = 1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
    const std::size_t line_start = before.rfind('\n');
    p.column = 1 + at - (line_start == std::string_view::npos ? 0 : line_start + 1);
    // Where the token starts, when it is the text just read (nlohmann shows control characters
    // as <U+000A> and the like).
    const std::size_t n = p.token.size();
    if (n > 0 && n <= p.column && text.substr(at + 1 - n, n) == p.token) p.column -= n - 1;
  }
  return p;
}

}  // namespace noeira::io
