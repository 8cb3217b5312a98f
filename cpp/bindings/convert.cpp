#include "convert.hpp"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "dmlops/core/error.hpp"
#include "dmlops/core/scratch.hpp"

namespace dmlops::bindings {

DataType data_type_of(const py::array& array, const std::string& what) {
  const py::dtype dtype = array.dtype();
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  const char order = dtype.byteorder();
  if (order == '>') fail<DTypeError>(what, " has non-native byte order ('", py::str(dtype).cast<std::string>(), "')");
  switch (kind) {
    case 'b': return DataType::UInt8;  // bool: stored as UINT8, stays bool in outputs
    case 'f':
      if (size == 2) return DataType::Float16;
      if (size == 4) return DataType::Float32;
      if (size == 8) return DataType::Float64;
      break;
    case 'i':
      if (size == 1) return DataType::Int8;
      if (size == 2) return DataType::Int16;
      if (size == 4) return DataType::Int32;
      if (size == 8) return DataType::Int64;
      break;
    case 'u':
      if (size == 1) return DataType::UInt8;
      if (size == 2) return DataType::UInt16;
      if (size == 4) return DataType::UInt32;
      if (size == 8) return DataType::UInt64;
      break;
  }
  fail<DTypeError>(what, " has dtype ", py::str(dtype).cast<std::string>(),
                   "; supported: float16/32/64, int8/16/32/64, uint8/16/32/64 and bool");
}

TensorView view_of(const py::handle& obj, const std::string& what, bool writable) {
  if (!py::isinstance<py::array>(obj))
    fail<DTypeError>(what, " must be a numpy.ndarray, not ", py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  const auto array = py::reinterpret_borrow<py::array>(obj);
  TensorView view;
  view.dtype = data_type_of(array, what);
  if (array.ndim() > kMaxRank) fail(what, " has ", array.ndim(), " dimensions; tensors have 1 to ", kMaxRank);
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    view.sizes.push_back(array.shape(d));
    view.byte_strides.push_back(array.strides(d));
  }
  if (writable && !array.writeable()) fail(what, " is read-only");
  validate_view(view, what.c_str());
  view.data = const_cast<void*>(array.data());
  return view;
}

Dims dims_of(const py::handle& obj, const std::string& what) {
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj))
    fail<DTypeError>(what, " must be a sequence of integers");
  const auto seq = py::reinterpret_borrow<py::sequence>(obj);
  if (seq.size() > static_cast<std::size_t>(kMaxRank))
    fail(what, " has ", seq.size(), " entries; at most ", kMaxRank);
  Dims dims;
  for (const auto item : seq) {
    if (!py::isinstance<py::int_>(item) || py::isinstance<py::bool_>(item))
      fail<DTypeError>(what, " must contain integers, got ", py::repr(item).cast<std::string>());
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(item.ptr(), &overflow);
    if (overflow) fail(what, " entry ", py::repr(item).cast<std::string>(), " does not fit in 64 bits");
    dims.push_back(v);
  }
  return dims;
}

std::vector<float> floats_of(const py::handle& obj, const std::string& what) {
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj))
    fail<DTypeError>(what, " must be a sequence of numbers");
  const auto seq = py::reinterpret_borrow<py::sequence>(obj);
  if (seq.size() > static_cast<std::size_t>(kMaxRank))
    fail(what, " has ", seq.size(), " entries; at most ", kMaxRank);
  std::vector<float> values;
  for (const auto item : seq) {
    if (py::isinstance<py::bool_>(item) || !(py::isinstance<py::int_>(item) || py::isinstance<py::float_>(item)))
      fail<DTypeError>(what, " must contain numbers, got ", py::repr(item).cast<std::string>());
    const double v = item.cast<double>();
    const auto f = static_cast<float>(v);
    if (std::isfinite(v) && !std::isfinite(f))
      fail(what, " entry ", py::repr(item).cast<std::string>(), " is too large for a FLOAT");
    values.push_back(f);
  }
  return values;
}

TensorDesc tensor_desc_of(const py::handle& obj, const std::string& what) {
  const auto fields = obj.cast<py::tuple>();
  TensorDesc desc;
  desc.dtype = parse_data_type(fields[0].cast<std::string>());
  desc.sizes = dims_of(fields[1], what + " sizes");
  if (!fields[2].is_none()) desc.strides = dims_of(fields[2], what + " strides");
  return desc;
}

Number number_of(const py::handle& obj, const std::string& what) {
  if (py::isinstance<py::bool_>(obj)) return Number::from_int(obj.cast<bool>() ? 1 : 0);
  if (py::isinstance<py::int_>(obj)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (!overflow) return Number::from_int(v);
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(obj.ptr());
      if (!PyErr_Occurred()) return Number::from_uint(u);
      PyErr_Clear();
    }
    fail(what, " ", py::repr(obj).cast<std::string>(), " does not fit in any 64-bit integer type");
  }
  if (py::isinstance<py::float_>(obj)) return Number::from_float(obj.cast<double>());
  fail<DTypeError>(what, " must be an int, float or bool, not ",
                   py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
}

namespace {

// Read once: sysconf(_SC_PHYS_PAGES) is a sysinfo system call, a tenth of a small call's time.
std::uint64_t physical_memory_bytes() {
  static const std::uint64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return std::uint64_t{UINT64_MAX};  // unknown: numpy's own limits apply
    return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
  }();
  return bytes;
}

// The memory of large results, kept when the array that held it is freed, for the next result
// of about its size. A fresh allocation of that size is mapped from the OS, which then faults
// in and zeroes every page on first touch, and unmaps it when freed: a 1x16x32^3 3x3x3 unfold
// (47 MB) took 8.0 ms into a new array and 2.9 ms into an existing one, a 10M-element float64
// pad 17.6-18.2 ms and 11.4-12.0 ms (2-core Xeon, 1 thread). ONNX Runtime's sessions reuse
// their outputs' memory in the same way.
class ResultBlocks {
 public:
  // Smaller results are left to numpy: glibc's malloc keeps blocks under 32 MiB in its heap
  // after the first, and reuses them.
  static constexpr std::size_t kMinBytes = std::size_t{8} << 20;

  // Never destroyed: arrays (and their capsules) may outlive the static destructors at exit.
  static ResultBlocks& instance() {
    static ResultBlocks* blocks = new ResultBlocks;
    return *blocks;
  }

  // A cached block of at least `bytes` and at most twice that, else a new one.
  BlockCache::Block take(std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    return cache_.take(bytes, 2 * bytes);
  }
  void give(BlockCache::Block block) noexcept {
    const std::lock_guard lock(mutex_);
    cache_.give(block);
  }
  std::size_t release() noexcept {
    const std::lock_guard lock(mutex_);
    return cache_.release();
  }
  std::size_t cached_bytes() {
    const std::lock_guard lock(mutex_);
    return cache_.bytes();
  }

 private:
  // An eighth of the machine's memory, at most 1 GiB; the oldest blocks go first.
  ResultBlocks()
      : cache_(static_cast<std::size_t>(std::min<std::uint64_t>(physical_memory_bytes() / 8, std::uint64_t{1} << 30)),
               BlockCache::Evict::Oldest) {}

  std::mutex mutex_;
  BlockCache cache_;
};

// A large result's array: a view of a block of ResultBlocks, which a capsule (its base) gives
// back when the array is freed.
py::array cached_result(const py::dtype& dtype, const std::vector<py::ssize_t>& shape, std::size_t bytes) {
  const BlockCache::Block block = ResultBlocks::instance().take(bytes);
  std::unique_ptr<BlockCache::Block> owned(new (std::nothrow) BlockCache::Block(block));
  if (!owned) {
    ResultBlocks::instance().give(block);
    throw std::bad_alloc();
  }
  const py::capsule base(owned.get(), [](void* p) {
    const std::unique_ptr<BlockCache::Block> o(static_cast<BlockCache::Block*>(p));
    ResultBlocks::instance().give(*o);
  });
  owned.release();  // the capsule owns it now
  return py::array(dtype, shape, {}, block.data, base);
}

}  // namespace

std::size_t release_result_memory() { return ResultBlocks::instance().release(); }
std::size_t cached_result_bytes() { return ResultBlocks::instance().cached_bytes(); }

py::array output_array(const py::object& like, const TensorDesc& desc, const py::object& out, const std::string& op) {
  if (!out.is_none()) return py::reinterpret_borrow<py::array>(out);
  const py::dtype dtype = py::reinterpret_borrow<py::array>(like).dtype();
  // validate_tensor_desc has bounded the product by 2^63 bytes, so this does not overflow.
  const std::uint64_t bytes = static_cast<std::uint64_t>(desc.element_count()) * static_cast<std::uint64_t>(dtype.itemsize());
  const std::uint64_t memory = physical_memory_bytes();
  if (bytes > memory)
    fail(op, ": the output ", desc.sizes, " of ", py::str(dtype).cast<std::string>(), " needs ", bytes,
         " bytes, more than this machine's memory (", memory, " bytes); pass out= (e.g. a numpy.memmap) to write it");
  const std::vector<py::ssize_t> shape(desc.sizes.begin(), desc.sizes.end());
  if (bytes >= ResultBlocks::kMinBytes) return cached_result(dtype, shape, static_cast<std::size_t>(bytes));
  // On a cache line of its own: numpy's allocations start 16 bytes into one, and then every
  // vector store of a row splits across two lines (1x1 64>256@56 at 1 thread took 0.97 ms with
  // such an output, 0.86-0.88 with an aligned one, on a 2-core Xeon). The array is a view of a
  // buffer 63 bytes longer, which its `base` keeps alive.
  constexpr std::uintptr_t kLine = 64;
  const py::array_t<std::uint8_t> buffer(static_cast<py::ssize_t>(bytes + kLine - 1));
  const auto start = reinterpret_cast<std::uintptr_t>(buffer.data());
  void* data = reinterpret_cast<void*>((start + kLine - 1) / kLine * kLine);
  return py::array(dtype, shape, {}, data, buffer);
}

std::string bool_named(const std::string& message) {
  const auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  static const std::string word = "uint8";
  std::string result;
  std::size_t from = 0;
  for (std::size_t at = message.find(word); at != std::string::npos; at = message.find(word, at + 1)) {
    const std::size_t end = at + word.size();
    if ((at > 0 && is_word(message[at - 1])) || (end < message.size() && is_word(message[end]))) continue;
    result.append(message, from, at - from).append("bool");
    from = end;
  }
  return result.append(message, from, std::string::npos);
}

py::tuple to_tuple(const Dims& dims) {
  py::tuple t(dims.size());
  for (int i = 0; i < dims.size(); ++i) t[i] = dims[i];
  return t;
}

py::dict plan_dict(const KernelPlan& plan) {
  py::dict tiles;
  for (const auto& [name, value] : plan.tiles) tiles[py::str(name)] = value;
  py::dict d;
  d["algorithm"] = plan.algorithm;
  d["reason"] = plan.reason;
  d["isa"] = plan.isa;
  d["rewrite"] = plan.rewrite;
  d["tiles"] = tiles;
  d["tasks"] = plan.tasks;
  d["threads"] = plan.threads;
  return d;
}

}  // namespace dmlops::bindings
