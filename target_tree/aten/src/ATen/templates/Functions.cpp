#include <array>

#include <ATen/Functions.h>
#include <ATen/Utils.h>
#include <c10/core/Allocator.h>

namespace at {

// Out-of-line pieces of at::TensorMaker (declared in ATen/ops/from_blob.h).

std::size_t TensorMaker::computeStorageSize() const noexcept {
  const std::size_t elem_bytes = opts_.dtype().itemsize();
  std::size_t nbytes = 0;
  if (strides_) {
    nbytes = detail::computeStorageNbytes(sizes_, *strides_, elem_bytes);
  } else {
    std::size_t count = 1;
    for (const std::int64_t extent : sizes_) {
      count *= static_cast<std::size_t>(extent);
    }
    nbytes = count * elem_bytes;
  }
  if (storage_offset_) {
    nbytes += static_cast<std::size_t>(*storage_offset_) * elem_bytes;
  }
  return nbytes;
}

IntArrayRef TensorMaker::makeTempSizes() const noexcept {
  // An all-zero shape whose rank matches the requested memory format.
  static std::int64_t zero_shape[5] = {0, 0, 0, 0, 0};
  std::size_t rank = 1;
  if (opts_.has_memory_format()) {
    switch (*opts_.memory_format_opt()) {
      case MemoryFormat::ChannelsLast:
        rank = 4;
        break;
      case MemoryFormat::ChannelsLast3d:
        rank = 5;
        break;
      default:
        break;
    }
  }
  return IntArrayRef(zero_shape, rank);
}

} // namespace at
