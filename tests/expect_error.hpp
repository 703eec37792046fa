#pragma once
// The check of an error path: the call throws an exception of the expected type whose one-line
// message contains every fragment (the file, the tensor, the value, what was expected).
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "kernels/error.hpp"

namespace noeira::testing {

template <class E, class F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments) {
      EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
    }
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  }
}

// The user's mistakes: a file, a flag, a value.
template <class F>
void expect_input_error(F&& f, std::initializer_list<std::string> fragments) {
  expect_error<InputError>(std::forward<F>(f), fragments);
}

}  // namespace noeira::testing
