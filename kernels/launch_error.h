// What every launcher does around its <<<>>>: cudaGetLastError() reports the first error
// since it was last called, so a launcher that only called it after its launch would
// return an earlier, already handled failure as its own and fail a healthy batch. Each
// launcher clears the stale error first (a sticky error, such as an illegal address,
// stays: the context is lost and every later call reports it).
#ifndef FUSERANK_KERNELS_LAUNCH_ERROR_H_
#define FUSERANK_KERNELS_LAUNCH_ERROR_H_

#include <cuda_runtime_api.h>

namespace fuserank::kernels {

inline void ClearStaleLaunchError() { static_cast<void>(cudaGetLastError()); }

}  // namespace fuserank::kernels

#endif  // FUSERANK_KERNELS_LAUNCH_ERROR_H_
