// Storage that comes and goes: see param_storage.hpp.
#include "engine/model/param_storage.hpp"

#include "common/error.hpp"

namespace muster::engine::model {

void free_storage(const torch::Tensor& t) {
  auto* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

void borrow_storage(const torch::Tensor& t, const torch::Tensor& from) {
  const auto nbytes = static_cast<std::size_t>(t.numel() * t.element_size());
  MUSTER_CHECK(from.nbytes() >= nbytes && from.device() == t.device(), errc::internal,
               "a storage of {} B on {} borrowed from {} B on {}", nbytes, t.device().str(),
               from.nbytes(), from.device().str());
  auto* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(from.data_ptr(), from.device()));
  storage->set_nbytes(nbytes);
}

bool materialised(const torch::Tensor& t) {
  return t.numel() == 0 || t.storage().nbytes() > 0;
}

}  // namespace muster::engine::model
