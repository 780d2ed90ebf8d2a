// The sizes of every array of an engine::Batch, taken before a request is appended to it,
// so that a decode that fails part way can put the batch back exactly as it was.
#ifndef FUSERANK_SERVER_BATCH_MARK_H_
#define FUSERANK_SERVER_BATCH_MARK_H_

#include <cstddef>

#include "engine/batch.h"

namespace fuserank::server {

struct BatchMark {
  explicit BatchMark(const engine::Batch& b)
      : requests(b.candidate_begin.size()),
        top_k(b.top_k.size()),
        user_bags(b.user.bag_begin.size()),
        user_rows(b.user.rows.size()),
        user_keys(b.user.keys.size()),
        item_bags(b.item.bag_begin.size()),
        item_rows(b.item.rows.size()),
        item_keys(b.item.keys.size()),
        user_dense(b.user_dense.size()),
        item_dense(b.item_dense.size()) {}

  void Restore(engine::Batch* b) const {
    b->candidate_begin.resize(requests);
    b->top_k.resize(top_k);
    b->user.bag_begin.resize(user_bags);
    b->user.rows.resize(user_rows);
    b->user.weights.resize(user_rows);
    b->user.keys.resize(user_keys);
    b->item.bag_begin.resize(item_bags);
    b->item.rows.resize(item_rows);
    b->item.weights.resize(item_rows);
    b->item.keys.resize(item_keys);
    b->user_dense.resize(user_dense);
    b->item_dense.resize(item_dense);
  }

  size_t requests, top_k, user_bags, user_rows, user_keys, item_bags, item_rows, item_keys,
      user_dense, item_dense;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_BATCH_MARK_H_
