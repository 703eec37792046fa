#pragma once
// Editing real HDF5 files in place to make them hostile, for the tests of io/h5.hpp's readers
// (tests/test_h5_hostile_*.cpp): open under io/'s HDF5 lock, replace a dataset by one stored
// elsewhere or of another type, rewrite attributes, flip a bit.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "checkpoint_test_util.hpp"
#include "distributed/residency.hpp"
#include "distributed/units.hpp"
#include "expect_error.hpp"
#include "file_damage.hpp"
#include "io/checkpoint_format.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/h5.hpp"
#include "io/params_file.hpp"
#include "io_test_files.hpp"
#include "train/checkpointing.hpp"
#include "train/export.hpp"
#include "train/model_description.hpp"
#include "train/presets.hpp"
#include "train/saved_model.hpp"


namespace noeira::testing::h5edit {

using io::h5::Handle;
using testing::TempDir;


using io::h5::Handle;
using testing::TempDir;

// Expects `f` to throw an InputError of one line that names every fragment.
inline void expect_refused(const std::function<void()>& f,
                           const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an InputError naming " << fragments.front();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments) {
      EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
    }
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  }
}

// ---- Editing an HDF5 file in place ----

// The file open for writing, under io/'s HDF5 lock, closed at scope exit.
class Edit {
 public:
  explicit Edit(const std::filesystem::path& file)
      : held_(io::h5::lock()), fapl_(io::h5::file_access(file)) {
    f_ = Handle(H5Fopen(file.c_str(), H5F_ACC_RDWR, fapl_.get()), H5Fclose);
    if (f_.get() < 0) throw std::runtime_error("cannot open " + file.string() + " to edit it");
  }
  hid_t get() const { return f_.get(); }

 private:
  io::h5::Lock held_;
  Handle fapl_;
  Handle f_;
};

inline void check(herr_t status, const char* what) {
  if (status < 0) throw std::runtime_error(std::string("HDF5 call failed: ") + what);
}

inline Handle open_object(hid_t f, const std::string& path) {
  Handle obj(H5Oopen(f, path.c_str(), H5P_DEFAULT), H5Oclose);
  if (obj.get() < 0) throw std::runtime_error("no object " + path);
  return obj;
}

inline void remove_link(hid_t f, const std::string& path) {
  check(H5Ldelete(f, path.c_str(), H5P_DEFAULT), "H5Ldelete");
}

inline void remove_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) > 0) check(H5Adelete(obj, name), "H5Adelete");
}

// An attribute of any type and shape (rank 0: scalar), replacing one of the same name.
inline void put_attr(hid_t obj, const char* name, hid_t file_type, hid_t mem_type,
                     const void* data, std::vector<hsize_t> dims = {}) {
  remove_attr(obj, name);
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle attr(H5Acreate2(obj, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  check(static_cast<herr_t>(attr.get() < 0 ? -1 : 0), "H5Acreate2");
  check(H5Awrite(attr.get(), mem_type, data), "H5Awrite");
}

inline void put_i64(hid_t obj, const char* name, std::int64_t v) {
  put_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
inline void put_f64(hid_t obj, const char* name, double v) {
  put_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}
inline void put_u32(hid_t obj, const char* name, std::uint32_t v) {
  put_attr(obj, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, &v);
}
inline void put_string(hid_t obj, const char* name, const std::string& v) {
  remove_attr(obj, name);
  io::h5::write_string_attr(obj, name, v, "edited file");
}
inline void put_i64_array(hid_t obj, const char* name, const std::vector<std::int64_t>& v) {
  remove_attr(obj, name);
  io::h5::write_i64_array_attr(obj, name, v, "edited file");
}

// A float32-valued dataset at `path` (the old link removed first): its element type, its shape,
// its creation properties; written from `values` (converted to `type`) unless `values` is null.
inline Handle make_dataset(hid_t f, const std::string& path, hid_t type, const Shape& shape,
                           hid_t dcpl, const std::vector<float>* values) {
  if (H5Lexists(f, path.c_str(), H5P_DEFAULT) > 0) remove_link(f, path);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  check(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
  Handle ds(H5Dcreate2(f, path.c_str(), type, space.get(), lcpl.get(), dcpl, H5P_DEFAULT),
            H5Dclose);
  check(static_cast<herr_t>(ds.get() < 0 ? -1 : 0), "H5Dcreate2");
  if (values != nullptr) {
    check(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values->data()),
          "H5Dwrite");
  }
  return ds;
}

inline Handle plist(hid_t cls) { return Handle(H5Pcreate(cls), H5Pclose); }

inline void write_floats(const std::filesystem::path& file, const std::vector<float>& values) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
}

// An HDF5 file holding `values` as the float32 dataset "/src" of `shape`: a virtual dataset's
// source, or an external link's target.
inline void write_source(const std::filesystem::path& file, const Shape& shape,
                         const std::vector<float>& values) {
  io::h5::Lock held = io::h5::lock();
  Handle f(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  make_dataset(f.get(), "src", H5T_IEEE_F32LE, shape, H5P_DEFAULT, &values);
}

// Creation properties of a virtual dataset of `shape` whose every element comes from "/src" of
// `source` (which may not exist).
inline Handle virtual_dcpl(const std::filesystem::path& source, const Shape& shape) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle dcpl = plist(H5P_DATASET_CREATE);
  check(H5Pset_virtual(dcpl.get(), space.get(), source.c_str(), "/src", space.get()),
        "H5Pset_virtual");
  return dcpl;
}

// Creation properties of a dataset whose bytes are those of `external` (raw float32).
inline Handle external_dcpl(const std::filesystem::path& external, std::size_t elements) {
  Handle dcpl = plist(H5P_DATASET_CREATE);
  check(H5Pset_external(dcpl.get(), external.c_str(), 0,
                        static_cast<hsize_t>(elements * sizeof(float))),
        "H5Pset_external");
  return dcpl;
}

// What a plain HDF5 reader (no checks) gets from a dataset: the proof that a crafted file is
// what it claims (a virtual dataset really reads its source, an external file really is read).
inline std::vector<float> plain_read(const std::filesystem::path& file,
                                     const std::string& path, std::size_t n) {
  io::h5::Lock held = io::h5::lock();
  Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  Handle ds(H5Dopen2(f.get(), path.c_str(), H5P_DEFAULT), H5Dclose);
  std::vector<float> out(n, -1.0f);
  if (ds.get() < 0 ||
      H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) {
    out.clear();
  }
  return out;
}

// Inverts one bit of the byte at `at`.
inline void flip_bit(const std::filesystem::path& file, std::int64_t at) {
  testing::xor_byte(file, at, 0x10);
}

}  // namespace noeira::testing::h5edit
