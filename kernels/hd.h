// FUSERANK_HD marks small functions that run both on the host and on the device, so the
// arithmetic a kernel depends on is unit-tested on the CPU and called unchanged on the
// GPU. This header includes nothing from CUDA: plain C++ code may include it.
#ifndef FUSERANK_KERNELS_HD_H_
#define FUSERANK_KERNELS_HD_H_

#if defined(__CUDACC__)
#define FUSERANK_HD __host__ __device__ __forceinline__
#else
#define FUSERANK_HD inline
#endif

#endif  // FUSERANK_KERNELS_HD_H_
