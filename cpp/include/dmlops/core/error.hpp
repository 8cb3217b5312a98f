// Errors thrown by dmlops. The binding layer maps them onto Python exceptions:
// InvalidArgument -> ValueError (shapes, sizes, parameters, modes),
// DTypeError      -> TypeError  (dtypes).
// Messages name the operator, the field and the rule broken, e.g.
//   "Padding1: end_padding has 3 entries but the input has 4 dimensions".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace dmlops {

struct InvalidArgument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct DTypeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Streams all arguments into one message: fail<InvalidArgument>(op, ": ", field, " has ", n, ...).
template <class Error = InvalidArgument, class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream message;
  (message << ... << std::forward<Parts>(parts));
  throw Error(message.str());
}

}  // namespace dmlops
