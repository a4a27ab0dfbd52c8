// mha::PagedSequences: a paged cache's sequence bookkeeping, read from and
// done on its block manager (cache/paged_block_manager.h).

#include "mha/paged_sequences.h"

#include "cache/paged_block_manager.h"

namespace mha {

int64_t PagedSequences::add_sequence() { return table_->add_sequence(); }

int64_t PagedSequences::fork(int64_t id) { return table_->fork(id); }

void PagedSequences::release(int64_t id) { table_->release(id); }

bool PagedSequences::contains(int64_t id) const { return table_->contains(id); }

std::vector<int64_t> PagedSequences::sequence_ids() const { return table_->ids(); }

int64_t PagedSequences::length(int64_t id) const { return table_->sequence(id).length(); }

int64_t PagedSequences::num_free_blocks() const { return table_->num_free_blocks(); }

int64_t PagedSequences::num_blocks() const { return table_->num_blocks(); }

int64_t PagedSequences::block_size() const { return table_->block_size(); }

}  // namespace mha
