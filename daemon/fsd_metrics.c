/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsd_metrics.c: GET /metrics in the Prometheus text exposition format
 * (0.0.4), on nng's HTTP server, off unless `metrics_listen` is set.
 *
 * Every sample comes from the X-macro lists in proto/fs_counters.h, the same
 * lists the stats reply and `fsctl stats` are generated from, so a counter
 * added there shows up here by itself.  Names: foresight_<counter> (daemon),
 * foresight_card_<counter>{card}, foresight_layer_<counter>{layer},
 * foresight_client_<counter>{client,name} (client = its row, as `id` in
 * `fsctl clients`, reused after a detach, so every client series also
 * carries the engine's name).  A counter whose help says "(gauge" is a
 * gauge, every other one a counter with the `_total` suffix; a counter named
 * *_ns is exposed in seconds (*_seconds[_total]), Prometheus' base unit, and
 * one named *_bytes keeps its unit in the name (*_bytes_total).  Not
 * counters: a client's pid and uid are labels of foresight_client_info
 * {client,name,pid,uid} 1, and its dev_seen_ns (a CLOCK_MONOTONIC instant)
 * is foresight_client_dev_seen_age_seconds, the time since.  Capacity:
 * foresight_card_slots{card} and foresight_card_slot_bytes{card}.  Totals
 * and hit rates are not exposed: they are sums and ratios of these samples
 * (sum(), rate()); docs/grafana/foresight.json is a dashboard of them.
 *
 * Threads: nng's HTTP server calls the handler on nng's own threads, so the
 * handler reads only what any thread may read: the counters (relaxed atomic
 * loads, as fsd_stats.c does), the client-active bitmap and the current
 * epoch (acquire loads), and settings fixed at start (cards, layers,
 * max_clients, the model's name, the backend).  Never the client table: the
 * loop thread owns it; it hands each row's name, pid and uid over at attach
 * and detach (fsd_metrics_client), under `mlock`.  nng does not wait for a
 * running handler when a server stops, so a scrape renders under `mlock`
 * and checks its endpoint's `stopped` flag: once fsd_metrics_stop returns,
 * no scrape reads the daemon region, which main() then unmaps.
 *
 * Requests are hostile until proven otherwise: nng matches only GET (and
 * HEAD) of the exact path /metrics (404/405 for the rest), bounds the
 * request header, and the handler refuses any request body (400).  The
 * endpoint has no authentication, so it binds loopback addresses only unless
 * `metrics_allow_remote` is set.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "fs_counters.h"
#include "fs_time.h"
#include "fsd_backend.h"
#include "fsd_loop.h"

/* A body larger than this is refused (500) rather than grown without end:
 * 1024 layers x 6 counters and 64 clients render in well under 1 MiB. */
#define METRICS_MAX_BODY (8u << 20)

struct metrics_ep {
	struct fsd *d;
	nng_http_server *srv;
	int stopped; /* under mlock: set before the server stops */
	char listen[sizeof(((struct fsd_config *)0)->metrics_listen)];
};

static pthread_mutex_t mlock = PTHREAD_MUTEX_INITIALIZER;
static struct metrics_ep *cur; /* loop thread only */

/* The clients' labels, copied by the loop thread (under mlock). */
static struct {
	int on;
	char name[sizeof(((struct fsd_client *)0)->name)];
	long pid, uid;
} client_label[64];

void fsd_metrics_client(struct fsd *d, uint32_t row, int on)
{
	if (row >= 64)
		return;
	pthread_mutex_lock(&mlock);
	client_label[row].on = on;
	if (on) {
		const struct fsd_client *c = &d->clients[row];
		memcpy(client_label[row].name, c->name, sizeof(client_label[row].name));
		client_label[row].name[sizeof(client_label[row].name) - 1] = 0;
		client_label[row].pid = (long)c->pid;
		client_label[row].uid = (long)c->uid;
	}
	pthread_mutex_unlock(&mlock);
}

/* ---- the address ------------------------------------------------------- */

int fsd_metrics_url(const char *listen, int allow_remote, char *url, size_t len, char *err, size_t errlen)
{
	char host[64];
	const char *port;
	int v6 = listen[0] == '[';
	if (v6) {
		const char *rb = strchr(listen, ']');
		if (!rb || rb[1] != ':' || (size_t)(rb - listen - 1) >= sizeof(host)) {
			snprintf(err, errlen, "'%s' is not [IPv6]:PORT", listen);
			return -1;
		}
		memcpy(host, listen + 1, (size_t)(rb - listen - 1));
		host[rb - listen - 1] = 0;
		port = rb + 2;
	} else {
		const char *colon = strrchr(listen, ':');
		if (!colon || (size_t)(colon - listen) >= sizeof(host)) {
			snprintf(err, errlen, "'%s' is not IP:PORT (e.g. 127.0.0.1:9464)", listen);
			return -1;
		}
		memcpy(host, listen, (size_t)(colon - listen));
		host[colon - listen] = 0;
		port = colon + 1;
	}
	size_t np = strlen(port);
	unsigned long pn = 0;
	for (size_t i = 0; i < np; i++) {
		if (port[i] < '0' || port[i] > '9') {
			np = 0;
			break;
		}
		pn = pn * 10 + (unsigned long)(port[i] - '0');
		if (pn > 65535)
			break;
	}
	if (np == 0 || np > 5 || pn > 65535) {
		snprintf(err, errlen, "'%s': the port must be 0..65535 (0: any free port)", listen);
		return -1;
	}
	/* An IP literal, not a name: what is bound is then what was checked. */
	unsigned char a[16];
	if (inet_pton(v6 ? AF_INET6 : AF_INET, host, a) != 1) {
		snprintf(err, errlen, "'%s': '%s' is not an %s address (host names are not accepted)", listen,
			 host, v6 ? "IPv6" : "IPv4");
		return -1;
	}
	static const unsigned char lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	int loopback = v6 ? memcmp(a, lo6, 16) == 0 || (memcmp(a, mapped, 12) == 0 && a[12] == 127) :
			    a[0] == 127;
	if (!loopback && !allow_remote) {
		snprintf(err, errlen,
			 "'%s' is not a loopback address: the endpoint has no authentication; set "
			 "metrics_allow_remote to serve it beyond this host",
			 listen);
		return -1;
	}
	if (snprintf(url, len, "http://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) >= (int)len) {
		snprintf(err, errlen, "'%s': too long", listen);
		return -1;
	}
	return 0;
}

/* ---- the text ---------------------------------------------------------- */

struct buf {
	char *p;
	size_t n, cap;
	int bad; /* out of memory or over METRICS_MAX_BODY */
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	for (int tries = 0; !b->bad && tries < 2; tries++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->bad = 1;
			return;
		}
		if (b->p && (size_t)n < b->cap - b->n) {
			b->n += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap : 64 << 10;
		while (cap - b->n <= (size_t)n)
			cap *= 2;
		char *np = cap <= METRICS_MAX_BODY ? realloc(b->p, cap) : NULL;
		if (!np) {
			b->bad = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
}

/* A label value or HELP text, escaped as the format asks (HELP: \\ and \n;
 * label values also "). */
static void put_escaped(struct buf *b, const char *s, int quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			put(b, "\\\\");
		else if (*s == '\n')
			put(b, "\\n");
		else if (*s == '"' && quote)
			put(b, "\\\"");
		else
			put(b, "%c", *s);
	}
}

static int ends_ns(const char *name)
{
	size_t n = strlen(name);
	return n > 3 && strcmp(name + n - 3, "_ns") == 0;
}

/* One family's HELP and TYPE lines; its name (without labels) in `metric`. */
static void family(struct buf *b, const char *scope, const char *name, const char *help, char *metric,
		   size_t len)
{
	int gauge = strstr(help, "(gauge") != NULL; /* "(gauge)", "(gauge, ...)" */
	int ns = ends_ns(name);
	size_t nl = strlen(name);
	snprintf(metric, len, "foresight_%s%s%.*s%s%s", scope, scope[0] ? "_" : "", (int)(nl - (ns ? 3 : 0)),
		 name, ns ? "_seconds" : "", gauge ? "" : "_total");
	put(b, "# HELP %s ", metric);
	/* The lists count *_ns in nanoseconds; here they are seconds. */
	int renamed = ns && strncmp(help, "nanoseconds ", 12) == 0;
	if (renamed) {
		put(b, "seconds ");
		help += 12;
	}
	put_escaped(b, help, 0);
	if (ns && !renamed)
		put(b, " (here in seconds)");
	put(b, "\n# TYPE %s %s\n", metric, gauge ? "gauge" : "counter");
}

static void sample(struct buf *b, const char *metric, const char *label, uint32_t id, const char *name,
		   const uint64_t *p)
{
	uint64_t v = fs_load_relaxed(p);
	if (label && strcmp(label, "client") == 0 && id < 64) {
		put(b, "%s{client=\"%u\",name=\"", metric, id);
		put_escaped(b, client_label[id].name, 1);
		put(b, "\"} ");
	} else if (label) {
		put(b, "%s{%s=\"%u\"} ", metric, label, id);
	} else {
		put(b, "%s ", metric);
	}
	if (ends_ns(name))
		put(b, "%llu.%09llu\n", (unsigned long long)(v / 1000000000u),
		    (unsigned long long)(v % 1000000000u));
	else
		put(b, "%llu\n", (unsigned long long)v);
}

/* One client counter's family: label-only figures (pid, uid) are left to
 * foresight_client_info; dev_seen_ns, an instant, becomes an age. */
static void client_family(struct buf *b, struct fsd *d, uint64_t active, uint64_t now, unsigned idx,
			  const char *cname, const char *help)
{
	const struct fsd_config *cfg = &d->cfg;
	char m[128];
	if (idx == FS_CCL_pid || idx == FS_CCL_uid)
		return;
	if (idx == FS_CCL_dev_seen_ns) {
		put(b,
		    "# HELP foresight_client_dev_seen_age_seconds seconds since a device-ring record was last "
		    "consumed (absent: none yet)\n"
		    "# TYPE foresight_client_dev_seen_age_seconds gauge\n");
		for (uint32_t r = 0; r < cfg->max_clients && r < 64; r++) {
			uint64_t t = fs_load_relaxed(&d->counters_client[(uint64_t)r * FS_N_CLIENT + idx]);
			if ((active & (1ull << r)) && client_label[r].on && t && t <= now) {
				put(b, "foresight_client_dev_seen_age_seconds{client=\"%u\",name=\"", r);
				put_escaped(b, client_label[r].name, 1);
				put(b, "\"} %.6f\n", (double)(now - t) / 1e9);
			}
		}
		return;
	}
	family(b, "client", cname, help, m, sizeof(m));
	for (uint32_t r = 0; r < cfg->max_clients && r < 64; r++)
		if (active & (1ull << r))
			sample(b, m, "client", r, cname,
			       &d->counters_client[(uint64_t)r * FS_N_CLIENT + idx]);
}

static void render(struct fsd *d, struct buf *b)
{
	const struct fsd_config *cfg = &d->cfg;
	char m[128];

	put(b, "# HELP foresight_build_info foresightd's version, backend and served model (always 1)\n"
	       "# TYPE foresight_build_info gauge\nforesight_build_info{version=\"");
	put_escaped(b, FSD_VERSION, 1);
	put(b, "\",backend=\"");
	put_escaped(b, d->backend->name, 1);
	put(b, "\",model=\"");
	put_escaped(b, cfg->model, 1);
	put(b, "\"} 1\n");
	put(b,
	    "# HELP foresight_uptime_seconds seconds since foresightd started\n"
	    "# TYPE foresight_uptime_seconds gauge\nforesight_uptime_seconds %.3f\n",
	    (double)(fs_now_ns() - d->start_ns) / 1e9);
	put(b,
	    "# HELP foresight_epoch the newest published residency epoch\n"
	    "# TYPE foresight_epoch gauge\nforesight_epoch %llu\n",
	    (unsigned long long)FS_CUR_EPOCH(fs_load_acquire(&d->dh->current)));

#define X(name, help)                             \
	family(b, "", #name, help, m, sizeof(m)); \
	sample(b, m, NULL, 0, #name, &d->counters_daemon[FS_C_##name]);
	FS_COUNTERS_DAEMON(X)
#undef X

#define X(name, help)                                 \
	family(b, "card", #name, help, m, sizeof(m)); \
	for (uint32_t i = 0; i < cfg->cards; i++)     \
		sample(b, m, "card", i, #name, &d->counters_card[(uint64_t)i * FS_N_CARD + FS_CC_##name]);
	FS_COUNTERS_CARD(X)
#undef X

	put(b, "# HELP foresight_card_slots slots of the card's pool: its capacity in experts\n"
	       "# TYPE foresight_card_slots gauge\n");
	for (uint32_t i = 0; i < cfg->cards; i++)
		put(b, "foresight_card_slots{card=\"%u\"} %u\n", i, cfg->slots);
	put(b, "# HELP foresight_card_slot_bytes bytes of one slot (the largest expert, page-aligned)\n"
	       "# TYPE foresight_card_slot_bytes gauge\n");
	for (uint32_t i = 0; i < cfg->cards; i++)
		put(b, "foresight_card_slot_bytes{card=\"%u\"} %llu\n", i, (unsigned long long)d->slot_bytes);

#define X(name, help)                                  \
	family(b, "layer", #name, help, m, sizeof(m)); \
	for (uint32_t l = 0; l < cfg->layers; l++)     \
		sample(b, m, "layer", l, #name, &d->counters_layer[(uint64_t)l * FS_N_LAYER + FS_CL_##name]);
	FS_COUNTERS_LAYER(X)
#undef X

	/* The rows in use, as the loop thread published them (the same rows
	 * `fsctl clients` lists, give or take an attach in flight). */
	const struct fs_counters_hdr *ch = (const struct fs_counters_hdr *)((const char *)d->dh +
									    d->dh->off_counters);
	uint64_t active = fs_load_acquire(&ch->client_active);
	put(b, "# HELP foresight_client_info an attached engine: its row, name, pid and uid (always 1)\n"
	       "# TYPE foresight_client_info gauge\n");
	for (uint32_t r = 0; r < cfg->max_clients && r < 64; r++)
		if ((active & (1ull << r)) && client_label[r].on) {
			put(b, "foresight_client_info{client=\"%u\",name=\"", r);
			put_escaped(b, client_label[r].name, 1);
			put(b, "\",pid=\"%ld\",uid=\"%ld\"} 1\n", client_label[r].pid, client_label[r].uid);
		}
	uint64_t now = fs_now_ns();
#define X(name, help) client_family(b, d, active, now, FS_CCL_##name, #name, help);
	FS_COUNTERS_CLIENT(X)
#undef X
}

/* ---- the server -------------------------------------------------------- */

static void on_metrics(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct metrics_ep *ep = nng_http_handler_get_data(h);
	struct buf b = {0};
	uint16_t status = NNG_HTTP_STATUS_OK;

	pthread_mutex_lock(&mlock);
	if (ep->stopped)
		status = NNG_HTTP_STATUS_SERVICE_UNAVAILABLE;
	else
		render(ep->d, &b);
	pthread_mutex_unlock(&mlock);
	if (b.bad)
		status = NNG_HTTP_STATUS_INTERNAL_SERVER_ERROR;

	nng_http_res *res = NULL;
	int r;
	if (status != NNG_HTTP_STATUS_OK) {
		r = nng_http_res_alloc_error(&res, status);
	} else if ((r = nng_http_res_alloc(&res)) == 0) {
		if ((r = nng_http_res_set_header(res, "Content-Type",
						 "text/plain; version=0.0.4; charset=utf-8")) == 0 &&
		    (r = nng_http_res_set_header(res, "Cache-Control", "no-store")) == 0)
			r = nng_http_res_copy_data(res, b.p, b.n);
		if (r != 0) {
			nng_http_res_free(res);
			res = NULL;
		}
	}
	free(b.p);
	if (r != 0) {
		nng_aio_finish(aio, r); /* nng closes the connection */
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static void ep_free(void *arg)
{
	free(arg);
}

/* Start serving `url`; 0 or a negative errno (logged). */
static int ep_open(struct fsd *d, const char *listen, const char *url, struct metrics_ep **out)
{
	struct metrics_ep *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->d = d;
	snprintf(ep->listen, sizeof(ep->listen), "%s", listen);

	nng_url *u = NULL;
	nng_http_server *srv = NULL;
	nng_http_handler *h = NULL;
	const char *what = "url";
	int r = nng_url_parse(&u, url);
	if (r == 0) {
		what = "server";
		r = nng_http_server_hold(&srv, u);
		nng_url_free(u);
	}
	if (r == 0) {
		what = "handler";
		if ((r = nng_http_handler_alloc(&h, "/metrics", on_metrics)) == 0 &&
		    (r = nng_http_handler_set_data(h, ep, ep_free)) != 0) {
			nng_http_handler_free(h);
			h = NULL;
		}
		if (r != 0)
			nng_http_server_release(srv);
	}
	if (r != 0) {
		free(ep);
		fsd_log(FSD_ERR, "metrics: %s: %s: %s", listen, what, nng_strerror(r));
		return -EINVAL;
	}
	ep->srv = srv;
	/* From here the handler owns ep: nng frees it when the handler goes,
	 * after its last callback.  A GET carries no body: any Content-Length
	 * above 0 is answered 400. */
	if ((r = nng_http_handler_collect_body(h, true, 0)) != 0 ||
	    (r = nng_http_server_add_handler(srv, h)) != 0) {
		nng_http_handler_free(h);
	} else {
		what = "listen";
		r = nng_http_server_start(srv); /* on failure the release below frees the handler */
	}
	if (r != 0) {
		nng_http_server_release(srv);
		fsd_log(FSD_ERR,
			"metrics: %s: %s: %s (under foresightd.service the network is off: see foresightd(8), "
			"METRICS)",
			listen, what, nng_strerror(r));
		return r == NNG_EADDRINUSE ? -EADDRINUSE : r == NNG_EPERM ? -EPERM : -EIO;
	}
	nng_sockaddr sa;
	unsigned port = 0;
	if (nng_http_server_get_addr(srv, &sa) == 0)
		port = ntohs(sa.s_family == NNG_AF_INET6 ? sa.s_in6.sa_port : sa.s_in.sa_port);
	const char *colon = strrchr(url, ':');
	fsd_log(FSD_INFO, "metrics: serving %.*s:%u/metrics", colon ? (int)(colon - url) : 0, url, port);
	*out = ep;
	return 0;
}

static void ep_close(struct metrics_ep *ep)
{
	pthread_mutex_lock(&mlock);
	ep->stopped = 1; /* no scrape renders after this */
	pthread_mutex_unlock(&mlock);
	fsd_log(FSD_INFO, "metrics: %s stopped", ep->listen);
	nng_http_server_stop(ep->srv);
	nng_http_server_release(ep->srv); /* ep may be freed from here on */
}

int fsd_metrics_start(struct fsd *d, const char *listen, int allow_remote)
{
	if (strcmp(cur ? cur->listen : "", listen) == 0)
		return 0; /* unchanged (allow_remote only matters to a new address) */
	struct metrics_ep *ep = NULL;
	if (listen[0]) {
		char url[128], err[256];
		if (fsd_metrics_url(listen, allow_remote, url, sizeof(url), err, sizeof(err)) < 0) {
			fsd_log(FSD_ERR, "metrics: %s", err);
			return -EINVAL;
		}
		int r = ep_open(d, listen, url, &ep);
		if (r < 0)
			return r;
	}
	struct metrics_ep *old = cur;
	cur = ep;
	if (old)
		ep_close(old);
	return 0;
}

void fsd_metrics_stop(struct fsd *d)
{
	(void)d;
	if (cur)
		ep_close(cur);
	cur = NULL;
}
