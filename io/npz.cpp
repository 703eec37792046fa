#include "io/npz.hpp"

#include <zip.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

#include "io/file_kind.hpp"
#include "io/memory_info.hpp"
#include "io/npy.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

using Archive = std::unique_ptr<zip_t, decltype(&zip_discard)>;
using Member = std::unique_ptr<zip_file_t, decltype(&zip_fclose)>;

[[noreturn]] void fail(const std::string& name, std::string_view what) {
  throw InputError(detail::concat(name, ": ", what));
}

Archive open_archive(const std::filesystem::path& file) {
  require_regular_file(file, "a NumPy .npz archive");
  int code = 0;
  zip_t* za = zip_open(file.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (za == nullptr) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    const std::string why = zip_error_strerror(&error);
    zip_error_fini(&error);
    fail(file.string(), detail::concat("not a readable .npz (zip) archive: ", why));
  }
  return Archive(za, zip_discard);
}

// The arrays an archive holds, for messages: "x, y".
std::string member_list(zip_t* za) {
  std::string out;
  const zip_int64_t n = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < n && i < 20; ++i) {
    std::string_view name = zip_get_name(za, static_cast<zip_uint64_t>(i), 0);
    if (name.ends_with(".npy")) name.remove_suffix(4);
    out += detail::concat(out.empty() ? "" : ", ", name);
  }
  return n > 20 ? out + ", ..." : out;
}

// The index of the member that holds `member` (x.npy, or a member named exactly so).
zip_uint64_t locate(zip_t* za, const std::filesystem::path& file, const std::string& member) {
  if (member.empty()) {
    if (zip_get_num_entries(za, 0) != 1) {
      fail(file.string(), detail::concat("an .npz archive of ", zip_get_num_entries(za, 0),
                                         " arrays (", member_list(za), "); name one, as ",
                                         file.string(), ":x"));
    }
    return 0;
  }
  for (const std::string& name : {member + ".npy", member}) {
    const zip_int64_t index = zip_name_locate(za, name.c_str(), 0);
    if (index >= 0) return static_cast<zip_uint64_t>(index);
  }
  fail(file.string(), detail::concat("holds no array '", member, "' (it holds ",
                                     member_list(za), ")"));
}

// Reads exactly n bytes (or fewer only at the member's end); a libzip error (a CRC mismatch at the
// end, a truncated archive) fails naming the member.
std::size_t read_some(zip_file_t* f, const std::string& name, void* out, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    const zip_int64_t r = zip_fread(f, static_cast<char*>(out) + got, n - got);
    if (r < 0) fail(name, detail::concat("cannot be read: ", zip_error_strerror(zip_file_get_error(f))));
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

class NpzSource final : public ArraySource {
 public:
  NpzSource(std::string name, NpyHeader header, Archive archive, Member member,
            std::vector<std::byte> inflated)
      : ArraySource(name, header.shape),
        header_(std::move(header)),
        archive_(std::move(archive)),
        member_(std::move(member)),
        inflated_(std::move(inflated)) {}

  bool holds_floats() const override { return header_.holds_floats(); }
  void read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const override {
    read(begin, count, out.size(), [&](const std::byte* data) {
      convert_npy_elements(header_, data, out);
    });
  }
  void read_rows(std::int64_t begin, std::int64_t count,
                 std::span<std::int64_t> out) const override {
    read(begin, count, out.size(), [&](const std::byte* data) {
      convert_npy_elements(header_, data, out, name(), begin);
    });
  }

 private:
  // The raw bytes of rows [begin, begin + count) for convert(data).
  template <class Convert>
  void read(std::int64_t begin, std::int64_t count, std::size_t out_size, Convert&& convert) const {
    if (begin < 0 || count < 0 || begin > rows() || count > rows() - begin) {
      fail(name(), detail::concat("rows ", begin, "..", begin + count, " asked of ", rows()));
    }
    const auto per_row = static_cast<std::size_t>(row_elements());
    if (out_size != static_cast<std::size_t>(count) * per_row) {
      throw Error(detail::concat(name(), ": ", count, " rows of ", per_row,
                                 " elements into a buffer of ", out_size));
    }
    if (out_size == 0) return;
    const std::size_t row_bytes = per_row * header_.item_bytes;
    const std::size_t offset =
        static_cast<std::size_t>(header_.data_offset) + static_cast<std::size_t>(begin) * row_bytes;
    const std::size_t bytes = static_cast<std::size_t>(count) * row_bytes;
    if (member_ == nullptr) {
      convert(inflated_.data() + offset);
      return;
    }
    // One reader at a time: the simulated ranks share a streamed source, and a libzip file is
    // one position.
    std::vector<std::byte> buffer(bytes);
    {
      const std::lock_guard<std::mutex> held(mutex_);
      if (zip_fseek(member_.get(), static_cast<zip_int64_t>(offset), SEEK_SET) != 0 ||
          read_some(member_.get(), name(), buffer.data(), bytes) != bytes) {
        fail(name(), detail::concat("cannot read rows ", begin, "..", begin + count, ": ",
                                    zip_error_strerror(zip_file_get_error(member_.get()))));
      }
    }
    convert(buffer.data());
  }

  NpyHeader header_;
  Archive archive_;
  Member member_;                    // a stored member, read in place; null when inflated
  std::vector<std::byte> inflated_;  // a deflated member's bytes, whole
  mutable std::mutex mutex_;
};

}  // namespace

std::unique_ptr<ArraySource> open_npz_source(const std::filesystem::path& file,
                                             const std::string& member) {
  Archive archive = open_archive(file);
  const zip_uint64_t index = locate(archive.get(), file, member);
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(archive.get(), index, 0, &st) != 0) {
    fail(file.string(), zip_error_strerror(zip_get_error(archive.get())));
  }
  std::string name = detail::concat(file.string(), ":", st.name);
  if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) != 0 && st.encryption_method != ZIP_EM_NONE) {
    fail(name, "is encrypted");
  }
  const bool stored = st.comp_method == ZIP_CM_STORE;
  // A deflated member is held whole: one larger than half the memory available would take the
  // machine down (or is a zip bomb), where the same array stored streams.
  if (!stored && static_cast<double>(st.size) > 0.5 * memory_available_bytes()) {
    fail(name, detail::concat("is deflated to ", st.comp_size, " bytes from ", st.size,
                              ", more than half the memory available to inflate; save it with "
                              "numpy.savez (stored), which noeira reads row by row"));
  }
  if (!stored && st.comp_method != ZIP_CM_DEFLATE) {
    fail(name, detail::concat("is compressed by method ", st.comp_method,
                              " (noeira reads stored and deflated members, as numpy.savez and "
                              "savez_compressed write them)"));
  }
  const auto open_member = [&] {
    zip_file_t* f = zip_fopen_index(archive.get(), index, 0);
    if (f == nullptr) {
      fail(name, detail::concat("cannot be opened: ",
                                zip_error_strerror(zip_get_error(archive.get()))));
    }
    return Member(f, zip_fclose);
  };
  // Every byte once, in order: libzip checks the CRC-32 at the end. A deflated member's bytes are
  // kept; a stored one's are passed over and read again in place.
  Member sequential = open_member();
  std::vector<std::byte> inflated;
  std::size_t at = 0;
  const auto read = [&](char* out, std::size_t n) {
    const std::size_t got = read_some(sequential.get(), name, out, n);
    if (!stored) inflated.insert(inflated.end(), reinterpret_cast<std::byte*>(out),
                                 reinterpret_cast<std::byte*>(out) + got);
    at += got;
    return got;
  };
  NpyHeader header = read_npy_header(name, read, st.size);
  std::vector<char> piece(std::size_t{1} << 20);
  // The size is the archive's word: a lying one must not reserve memory it does not fill (the
  // bytes read grow the buffer; a member longer than it says is refused below).
  if (!stored) inflated.reserve(std::min<std::size_t>(st.size, std::size_t{1} << 28));
  while (at < st.size) {
    if (read(piece.data(), piece.size()) == 0) fail(name, "is shorter than its directory says");
  }
  // The read past the end is the one at which libzip compares the CRC-32.
  if (read_some(sequential.get(), name, piece.data(), 1) != 0) {
    fail(name, "is longer than its directory says");
  }
  sequential.reset();
  Member in_place = stored ? open_member() : Member(nullptr, zip_fclose);
  return std::make_unique<NpzSource>(std::move(name), std::move(header), std::move(archive),
                                     std::move(in_place), std::move(inflated));
}

}  // namespace noeira::io
