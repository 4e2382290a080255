/* SPDX-License-Identifier: Apache-2.0 */
/* fsl_cuda.h: the provider's CUDA runtime (fsl_cuda.cu). */
#ifndef FSL_CUDA_H
#define FSL_CUDA_H

#include "fsl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill *out with the CUDA runtime for CUDA device `device`: 0. */
int fsl_cuda_gpu(struct fsl_gpu *out, int device);

#ifdef __cplusplus
}
#endif

#endif /* FSL_CUDA_H */
