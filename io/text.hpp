#pragma once
// A plain-text corpus as bytes, for language modelling: one file, or the text files of one
// directory concatenated in a fixed order, so that the corpus (and with it the split, the
// vocabulary and every training window) is the same on every machine. Tokenizing is
// train/tokenizer.hpp's; this file only reads.
//
// A directory contributes its regular files (symbolic links to them included) in the byte order
// of their names, each read once, as they are, with nothing between them. Left out:
//   - `*.dat` (the fortune program's random-access indexes: binary),
//   - `*.u8` (in Debian's fortunes package, links to the file without the suffix: a second copy),
//   - names starting with '.' (editor and system files),
//   - subdirectories (not descended into: the corpus is what the directory itself holds).
// Anything else that is not a regular file (a FIFO, a socket, a device) is refused: reading it
// would block or never end. Files may be gzip-compressed (read through zlib) or plain.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace noeira::io {

// The largest corpus the reader takes, and the bound on what a compressed file may decompress
// to: the whole text lives in memory, and then again as 4-byte token ids (about 5 bytes per byte
// of text at the peak). A corpus past this wants a streaming reader.
inline constexpr std::uint64_t kMaxCorpusBytes = std::uint64_t{1} << 30;  // 1 GiB

// Debian's `fortunes` package (about 2.6 MB of English once each file is read once).
std::filesystem::path default_text_corpus();

struct TextCorpus {
  std::string name;                          // the path given, for messages
  std::vector<std::filesystem::path> files;  // what was read, in order
  std::vector<std::uint64_t> starts;         // where each file's bytes begin in `text`
  std::string text;                          // the bytes of every file, concatenated
};

// The files a corpus path stands for, in reading order (the rules above). A path that is neither
// a regular file nor a directory, and a directory entry that is neither a regular file nor a
// directory, is an InputError naming it.
std::vector<std::filesystem::path> corpus_files(const std::filesystem::path& path);

// Reads the corpus, allocating its text once (at the size the files tell). An InputError naming
// the path for: a missing or unreadable path, the cases of corpus_files, an empty corpus, and a
// corpus of more than max_bytes bytes; naming the file for a compressed file that decompresses
// past that (a gzip whose trailer says so is counted through, not kept: a gzip bomb costs time,
// not memory).
TextCorpus read_text_corpus(const std::filesystem::path& path,
                            std::uint64_t max_bytes = kMaxCorpusBytes);

}  // namespace noeira::io
