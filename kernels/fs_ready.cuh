/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs_ready.cuh: the device side of a slot's ready word.
 *
 * An engine's kernel that wants to use a slot mid-window (residency only
 * grows within a window) tests the slot's ready word for the generation its
 * epoch table names.  `ready` is the card's ready-word array as the engine's
 * device sees it: register fs_card_ready_words() with
 * cudaHostRegister(..., cudaHostRegisterMapped | cudaHostRegisterReadOnly)
 * and take cudaHostGetDevicePointer of it.  The copy stream writes the word
 * after the bytes have landed (cuStreamWriteValue32), so a kernel that sees
 * the generation, then fences, reads the new bytes.
 */
#ifndef FS_READY_CUH
#define FS_READY_CUH

#include <stdint.h>

__device__ __forceinline__ bool fs_slot_ready_dev(const uint32_t *ready, uint32_t slot, uint32_t gen)
{
	uint32_t v = *(const volatile uint32_t *)&ready[slot];
	/* Order the word's read before any read of the slot's bytes. */
	__threadfence_system();
	return v == gen && gen != 0u;
}

#endif /* FS_READY_CUH */
