// Storage that comes and goes: see param_storage.hpp.
#include "engine/model/param_storage.hpp"

namespace muster::engine::model {

void free_storage(const torch::Tensor& t) {
  auto* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

void allocate_storage(const torch::Tensor& t, std::size_t nbytes) {
  auto* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(nbytes));
  storage->set_nbytes(nbytes);
}

bool materialised(const torch::Tensor& t) {
  return t.numel() == 0 || t.storage().nbytes() > 0;
}

}  // namespace muster::engine::model
