#include "io/text.hpp"

#include <algorithm>
#include <array>

#include "io/file_kind.hpp"
#include "io/gzfile.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kExpected = "a text file or a directory of them";

// The directory rules of text.hpp: which entries are not part of the corpus.
bool left_out(const fs::path& name) {
  const std::string s = name.filename().string();
  return s.empty() || s.front() == '.' || name.extension() == ".dat" || name.extension() == ".u8";
}

[[noreturn]] void too_large(const std::string& corpus, std::uint64_t max_bytes) {
  throw InputError(detail::concat(corpus, ": the text corpus is larger than ", max_bytes,
                                  " bytes, more than this reader holds in memory (it keeps the "
                                  "whole text, and its token ids)"));
}

// A compressed file that yields more than the whole corpus may hold (a gzip bomb, or a corpus
// past the reader's size), refused by its own name as soon as its bytes pass the cap.
[[noreturn]] void decompresses_too_far(const fs::path& file, std::uint64_t max_bytes) {
  throw InputError(detail::concat(file.string(), ": decompressed, larger than ", max_bytes,
                                  " bytes, the most a text corpus may hold (a gzip bomb?)"));
}

// A gzip file whose trailer claims more than the corpus has room for: decompressed and counted
// without being kept, and refused once it passes `room`; a trailer that lied (damaged) lets it be
// read as any other file.
void refuse_if_past(GzFile& f, std::uint64_t room, std::uint64_t max_bytes) {
  std::array<char, 1 << 16> chunk;
  for (std::uint64_t total = 0;;) {
    const std::size_t got = f.read_some(chunk.data(), chunk.size());
    if (got == 0) return;
    total += got;
    if (total > room) decompresses_too_far(f.path(), max_bytes);
  }
}

// Appends the file's bytes to out, refusing to let the corpus pass max_bytes. The size is only
// hinted ahead (the file may be compressed): the cap is checked as the bytes arrive.
void append_file(std::string& out, GzFile& f, const std::string& corpus,
                 std::uint64_t max_bytes) {
  std::array<char, 1 << 16> chunk;
  for (;;) {
    const std::size_t got = f.read_some(chunk.data(), chunk.size());
    if (got == 0) return;
    if (out.size() + got > max_bytes) {
      if (f.compressed()) decompresses_too_far(f.path(), max_bytes);
      too_large(corpus, max_bytes);
    }
    out.append(chunk.data(), got);
  }
}

}  // namespace

std::filesystem::path default_text_corpus() { return "/usr/share/games/fortunes"; }

std::vector<std::filesystem::path> corpus_files(const std::filesystem::path& path) {
  const fs::file_type type = file_type_of(path);
  if (type == fs::file_type::not_found) {
    throw InputError(
        detail::concat(path.string(), ": not found, expected a text file or a directory of them"));
  }
  if (type == fs::file_type::regular) return {path};
  if (type != fs::file_type::directory) refuse_file_kind(path, type, kExpected);
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path entry = it->path();
    if (left_out(entry)) continue;
    const fs::file_type entry_type = file_type_of(entry);
    if (entry_type == fs::file_type::directory) continue;
    if (entry_type != fs::file_type::regular) refuse_file_kind(entry, entry_type, kExpected);
    files.push_back(entry);
  }
  if (ec) throw InputError(detail::concat(path.string(), ": cannot list (", ec.message(), ")"));
  // Byte order of the names, whatever order the file system lists them in.
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().string() < b.filename().string();
  });
  return files;
}

TextCorpus read_text_corpus(const std::filesystem::path& path, std::uint64_t max_bytes) {
  TextCorpus corpus;
  corpus.name = path.string();
  corpus.files = corpus_files(path);
  // What the files say they hold, before a byte is kept, so that the text is allocated once at
  // its size (grown, a string holds up to twice its bytes while it moves). A plain file's size
  // is exact: past the cap, it is refused at once. A gzip file's ISIZE may lie (a damaged
  // trailer): past the cap, the file is counted through first (a gzip bomb costs time, not
  // memory); within it, ISIZE only sizes the allocation, which pages in as the text arrives.
  std::uint64_t hinted = 0;
  for (const fs::path& file : corpus.files) {
    GzFile f(file);
    const std::uint64_t left = max_bytes - hinted;
    if (f.size_hint() > left) {
      if (!f.compressed()) too_large(corpus.name, max_bytes);
      refuse_if_past(f, left, max_bytes);
      continue;
    }
    const auto most = static_cast<std::uint64_t>(std::max<std::int64_t>(f.max_data_bytes(), 0));
    hinted += std::min({f.size_hint(), most, left});
  }
  corpus.text.reserve(hinted);
  for (const fs::path& file : corpus.files) {
    corpus.starts.push_back(corpus.text.size());
    GzFile f(file);
    append_file(corpus.text, f, corpus.name, max_bytes);
  }
  if (corpus.text.empty()) {
    throw InputError(detail::concat(corpus.name, ": empty text corpus (", corpus.files.size(),
                                    " file(s) read, no bytes)"));
  }
  return corpus;
}

}  // namespace noeira::io
