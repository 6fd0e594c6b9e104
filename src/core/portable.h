/* Marks small functions shared by the CPU backend (C) and the CUDA backend
 * (compiled by nvcc for host and device): the spec's rules live in one place. */
#ifndef DML_CORE_PORTABLE_H
#define DML_CORE_PORTABLE_H

#if defined(__CUDACC__)
#define DML_HOST_DEVICE static inline __host__ __device__
#else
#define DML_HOST_DEVICE static inline
#endif

#endif
