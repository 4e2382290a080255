/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_arena_keep.c: keep the arena across a restart of the daemon.
 *
 * Once the arena is built the daemon hands its memfd to systemd's file
 * descriptor store (sd_notify "FDSTORE=1\nFDNAME=arena" with the fd attached,
 * FileDescriptorStoreMax= in the unit).  When the daemon dies, by a crash,
 * kill -9 or a restart, systemd keeps the memfd, and with it the arena's
 * pages; the next start receives it as LISTEN_FDS/LISTEN_FDNAMES (fd 3 on).
 * It is reused only when it is exactly the arena this start would build:
 * magic, version, size and seals, the layout (layers, experts, offsets),
 * the source (synthetic: generator seed and sizes; GGUF: the model file's
 * identity, an FNV-1a 64 of its path, size, mtime, inode and device,
 * recorded in the header's `seed`), every index entry in bounds, and the
 * checksums of a sample of blobs.  Otherwise it is dropped from the store
 * (FDSTOREREMOVE=1) and the arena is built anew.
 *
 * Engines map the arena read-only; a restarted daemon that hands them the
 * same memfd is recognised by inode (client/fs_attach.c): nothing is mapped
 * twice, nothing is read from the disk again.  Outside systemd the same
 * protocol can be spoken by anything that keeps the fd (tests/fault does).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_arena.h"
#include "fs_counters.h"
#include "fs_time.h"
#include "fsd.h"

#define KEEP_NAME "arena"
#define KEEP_SAMPLES 16u
#define KEEP_SAMPLE_BYTES (32ull << 20) /* checksum at most this much: a restart stays fast */

static int kept_fd = -1;
static int kept_parsed;
static int kept_reused;

/* sd_listen_fds_with_names(3), unset_environment = 1, keeping only ours. */
static void parse_listen_fds(void)
{
	if (kept_parsed)
		return;
	kept_parsed = 1;
	const char *pid = getenv("LISTEN_PID"), *nfds = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	if (!nfds || !*nfds)
		return;
	int ours = !pid || !*pid || strtol(pid, NULL, 10) == (long)getpid();
	long n = strtol(nfds, NULL, 10);
	char buf[1024] = "";
	snprintf(buf, sizeof(buf), "%s", names ? names : "");
	char *save = NULL, *name = strtok_r(buf, ":", &save);
	for (long i = 0; ours && i < n && i < 64; i++) {
		int fd = 3 + (int)i;
		if (kept_fd < 0 && name && strcmp(name, KEEP_NAME) == 0 && fcntl(fd, F_GETFD) >= 0) {
			kept_fd = fd;
			fcntl(fd, F_SETFD, FD_CLOEXEC);
		} else if (fcntl(fd, F_GETFD) >= 0) {
			fsd_log(FSD_WARN, "fd store: closing fd %d (%s): not ours", fd,
				name ? name : "unnamed");
			close(fd);
		}
		name = strtok_r(NULL, ":", &save);
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

uint64_t fsd_arena_file_identity(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return 0;
	uint64_t v[5] = {(uint64_t)st.st_size,
			 (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec,
			 (uint64_t)st.st_ino, (uint64_t)st.st_dev, FS_ARENA_GGUF};
	uint64_t h = fs_fnv1a64(path, strlen(path));
	const unsigned char *b = (const unsigned char *)v;
	for (size_t i = 0; i < sizeof(v); i++) {
		h ^= b[i];
		h *= FS_FNV64_PRIME;
	}
	return h ? h : 1; /* 0 means "none" */
}

/* Why the kept arena is not the one wanted, or NULL when it is. */
static const char *mismatch(const struct fs_arena_hdr *h, uint64_t bytes, const struct fsd_arena_want *w)
{
	if (h->magic != FS_ARENA_MAGIC || h->version != FS_PROTO_VERSION)
		return "magic or layout version";
	/* A hugetlb arena is rounded up to whole huge pages: larger is fine. */
	if (h->arena_bytes != bytes || bytes < w->arena_bytes)
		return "size";
	if (h->source != w->source)
		return "source (synthetic vs model file)";
	if (h->layers != w->layers || h->experts != w->experts || h->experts_used != w->experts_used ||
	    h->max_expert_bytes != w->max_expert_bytes)
		return "model dimensions";
	if (h->off_index != w->off_index || h->off_data != w->off_data)
		return "layout";
	if (h->seed != w->seed)
		return w->source == FS_ARENA_GGUF ? "model file (path, size, mtime or inode changed)" :
						    "generator seed";
	if (memchr(h->model, 0, sizeof(h->model)) == NULL || strcmp(h->model, w->model) != 0)
		return "model name";
	uint64_t n = (uint64_t)h->layers * h->experts;
	if (h->off_index > bytes || n > (bytes - h->off_index) / sizeof(struct fs_arena_entry))
		return "index out of bounds";
	const struct fs_arena_entry *e = (const void *)((const char *)h + h->off_index);
	for (uint64_t i = 0; i < n; i++)
		if (e[i].offset > bytes || e[i].bytes > bytes - e[i].offset ||
		    !fs_arena_parts_ok(h, bytes, &e[i]))
			return "an index entry out of bounds";
	/* A sample of blobs against their checksums (a torn or scribbled arena). */
	uint64_t budget = KEEP_SAMPLE_BYTES;
	for (uint64_t k = 0; k < KEEP_SAMPLES && n > 0; k++) {
		uint64_t i = k == KEEP_SAMPLES - 1 ? n - 1 : k * n / KEEP_SAMPLES;
		if (e[i].bytes > budget)
			break;
		budget -= e[i].bytes;
		if (fs_fnv1a64((const char *)h + e[i].offset, (size_t)e[i].bytes) != e[i].checksum)
			return "a blob's checksum";
	}
	return NULL;
}

static void drop_kept(const char *why)
{
	fsd_log(FSD_WARN, "fd store: the kept arena does not match (%s): building a new one", why);
	close(kept_fd);
	kept_fd = -1;
	fsd_notify("FDSTOREREMOVE=1\nFDNAME=" KEEP_NAME);
}

int fsd_arena_keep_take(struct fsd *d, const struct fsd_arena_want *w)
{
	parse_listen_fds();
	if (kept_fd < 0)
		return 0;
	uint64_t t0 = fs_now_ns();
	struct stat st;
	int seals = fcntl(kept_fd, F_GET_SEALS);
	if (fstat(kept_fd, &st) < 0 || st.st_size < (off_t)sizeof(struct fs_arena_hdr) || seals < 0 ||
	    (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
		drop_kept("not a sealed memfd");
		return 0;
	}
	struct fs_shm shm;
	/* Mapped as a built arena is (read-write: the CUDA backend registers
	 * it with the driver); the daemon never writes it after the build. */
	int r = fs_shm_map_fd(&shm, kept_fd, sizeof(struct fs_arena_hdr), 1);
	if (r < 0) {
		shm.fd = -1;
		fs_shm_close(&shm);
		drop_kept(strerror(-r));
		return 0;
	}
	const char *why = mismatch(shm.base, shm.bytes, w);
	if (why) {
		shm.fd = -1; /* drop_kept closes it */
		fs_shm_close(&shm);
		drop_kept(why);
		return 0;
	}
	if (mlock(shm.base, shm.bytes) < 0) {
		if (w->must_lock) {
			fsd_log(FSD_ERR,
				"arena: mlock of %zu bytes failed (%s): raise LimitMEMLOCK or grant CAP_IPC_LOCK; "
				"or start foresightd with --allow-unlocked to serve it unlocked",
				shm.bytes, strerror(errno));
			fs_shm_close(&shm);
			kept_fd = -1;
			return -EPERM;
		}
		fsd_log(FSD_WARN, "arena: mlock of %zu bytes failed (%s): continuing unlocked", shm.bytes,
			strerror(errno));
	}
	d->arena_shm = shm;
	d->arena = shm.base;
	kept_fd = -1; /* d->arena_shm owns it now */
	d->arena_ro_fd = fs_shm_ro_fd(&d->arena_shm);
	if (d->arena_ro_fd < 0)
		return d->arena_ro_fd;
	kept_reused = 1;
	fsd_log(FSD_INFO,
		"arena: reused from the fd store (%.1f MiB, %s, checked in %.1f ms): nothing read from the "
		"model file",
		(double)shm.bytes / 1048576.0, w->source == FS_ARENA_GGUF ? "model file" : "synthetic",
		(double)(fs_now_ns() - t0) / 1e6);
	return 1;
}

void fsd_arena_keep_store(struct fsd *d)
{
	parse_listen_fds(); /* a kept fd we did not take must not linger */
	if (kept_fd >= 0) {
		close(kept_fd);
		kept_fd = -1;
	}
	if (d->counters_daemon)
		fs_store_relaxed(&d->counters_daemon[FS_C_arena_reused], (uint64_t)kept_reused);
	if (d->arena_shm.fd < 0)
		return;
	int r = fsd_notify_fds("FDSTORE=1\nFDNAME=" KEEP_NAME, &d->arena_shm.fd, 1);
	if (r > 0)
		fsd_log(FSD_INFO, "fd store: the arena memfd is kept across restarts");
	else if (r < 0)
		fsd_log(FSD_WARN, "fd store: FDSTORE=1 failed: %s (a restart will load the arena again)",
			strerror(-r));
}
