/*
 * rsockets: the socket API of <rdma/rsocket.h> over RDMA CM connections,
 * speaking rdma-core's rsocket protocol so that a program here talks to
 * one on Linux (stream sockets; datagram rsockets are not built).
 *
 * The protocol, as rdma-core's librdmacm defines it:
 * - Connection. rconnect and raccept exchange struct conn_data in the REQ
 *   and REP private data: the receive credits (receive WRs), where the
 *   peer may write SGEs to grant its buffer (target SGL, 2 entries) and
 *   its iomap table, and the first half of its receive buffer.
 * - Data. The sender RDMA WRITEs with immediate into the part of the
 *   receiver's buffer the receiver granted; the immediate is
 *   op << 29 | length. Each message takes one receive WR at the receiver
 *   (a message credit) and one entry of its message queue.
 * - Credits. The receiver grants a half of its buffer again once the
 *   program has read it (an RDMA WRITE of the SGE into the sender's target
 *   SGL, with immediate SGL | new credit limit), or only message credits
 *   (a zero-length WRITE with immediate). Four control messages may be in
 *   flight; the send queue keeps WRs for them.
 * - Control. DISCONNECT, SHUTDOWN (no more writes) and KEEPALIVE travel as
 *   zero-length WRITEs with immediate CTRL | code.
 * - iomap. riomap publishes a region in the peer's iomap table (a WRITE of
 *   {offset, sge} with immediate IOMAP_SGL | index); riowrite WRITEs into a
 *   region the peer published, with no message.
 *
 * An rsocket's descriptor is its CM event channel's (an epoll fd): unique
 * in the process and pollable. Everything an rsocket waits for is one of
 * two descriptors, its CM channel and, once connected, its completion
 * channel: blocking calls and rpoll poll() them. Connection requests are
 * accepted when the program calls raccept (no service thread), so a
 * connecting peer waits for raccept, not only for the listen backlog.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <alloca.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

/* Protocol constants (rdma-core's values: the peer may be rdma-core). */
enum {
	RS_VERSION = 1,
	RS_FLAG_NET = 1 << 0,   /* the sender is big-endian */
	RS_FLAG_IOMAP = 1 << 1, /* the sender has an iomap table after its SGL */
	RS_SGL_SIZE = 2,
	RS_CTRL_WINDOW = 4, /* control messages in flight; a power of 2 */
	RS_SNDLOWAT = 2048,
	RS_OLAP_START = 2048,
	RS_MAX_TRANSFER = 65536,
	RS_QP_MIN = 16,
	RS_QP_MAX = 0xFFFE,
	RS_MAX_CTRL_MSG = 16, /* an SGE */
};

enum rs_op { OP_DATA = 0, OP_WRITE = 2, OP_SGL = 4, OP_IOMAP_SGL = 6, OP_CTRL = 7 };
enum rs_ctrl { CTRL_DISCONNECT = 0, CTRL_KEEPALIVE = 1, CTRL_SHUTDOWN = 2 };

#define MSG(op, data) (((uint32_t)(op) << 29) | ((uint32_t)(data) & 0x1FFFFFFF))
#define MSG_OP(m) ((m) >> 29)
#define MSG_DATA(m) ((m) & 0x1FFFFFFF)
#define WRID_RECV (1ULL << 63)

/* The SGE and iomap entry as they lie in memory and on the wire (host
 * order in the target tables, big-endian in conn_data). */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

struct conn_data {
	uint8_t version;
	uint8_t flags;
	uint16_t credits; /* big-endian */
	uint8_t reserved[3];
	uint8_t target_iomap_size; /* scaled: rs_scale */
	struct rs_sge target_sgl;  /* big-endian fields */
	struct rs_sge data_buf;
};

/* States: a bit set, ordered passive < opening < connected. */
enum {
	RS_INIT = 0,
	RS_BOUND = 0x0001,
	RS_LISTENING = 0x0002,
	RS_OPENING = 0x0004,
	RS_RESOLVING_ADDR = RS_OPENING | 0x0010,
	RS_RESOLVING_ROUTE = RS_OPENING | 0x0020,
	RS_CONNECTING = RS_OPENING | 0x0040,
	RS_ACCEPTING = RS_OPENING | 0x0080,
	RS_CONNECTED = 0x0100,
	RS_WRITABLE = 0x0200,
	RS_READABLE = 0x0400,
	RS_CONNECT_RDWR = RS_CONNECTED | RS_READABLE | RS_WRITABLE,
	RS_CONNECT_ERROR = 0x0800,
	RS_DISCONNECTED = 0x1000,
	RS_ERROR = 0x2000,
};

/* A region riomap registered: published in the peer's table (index >= 0)
 * or local only. */
struct iomap_mr {
	struct iomap_mr *next;
	struct ibv_mr *mr;
	uint64_t offset;
	int index;
	int sent;
};

struct rmsg {
	uint32_t len; /* a DATA message's bytes not yet read */
};

struct rsock {
	int fd; /* the CM channel's descriptor: the socket's number */
	int domain;
	int state;
	int err;      /* SO_ERROR, also why a connect failed */
	int nonblock; /* O_NONBLOCK */
	int fdflags;  /* F_SETFD's */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_storage dst;

	/* options */
	uint64_t so_opts, tcp_opts, ipv6_opts;
	int tos;
	unsigned keepalive_time; /* seconds */
	int keepalive;
	uint64_t keepalive_due; /* ms, CLOCK_MONOTONIC */
	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size, sq_inline;
	uint16_t target_iomap_size;

	/* completions */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	int armed;
	unsigned unacked;
	uint64_t cm_due; /* µs: a connected socket's next look at its CM events */
	pthread_mutex_t slock, rlock, cqlock, waitlock, maplock;

	/* sending */
	uint32_t ctrl_seqno, ctrl_max;
	uint16_t sseq_no, sseq_comp;
	int sqe_avail;
	int swap; /* the peer's byte order differs: SGEs we write are swapped */
	struct rs_sge remote_sgl;  /* the peer's target SGL */
	int remote_sge;            /* the entry our next grant goes to */
	struct rs_sge remote_iomap; /* the peer's iomap table */
	void *target;               /* our target SGL and iomap table, written by the peer */
	struct ibv_mr *target_mr;
	volatile struct rs_sge *target_sgl;
	volatile struct rs_iomap *target_iomap;
	int target_sge;
	uint8_t *sbuf;
	struct ibv_mr *smr;
	uint32_t sbuf_avail;
	uint32_t shead; /* offset of the next byte staged in sbuf */

	/* receiving */
	uint8_t *rbuf;
	struct ibv_mr *rmr;
	uint32_t rbuf_avail;    /* read by the program, not yet granted again */
	uint32_t rbuf_free_off; /* the half to grant next */
	uint32_t rbuf_off;      /* the next byte to read */
	uint32_t rbuf_unread;   /* arrived, not yet read */
	uint16_t rseq_no, rseq_comp;
	struct rmsg *rmsg;
	int rmsg_head, rmsg_tail;

	/* iomap */
	struct iomap_mr *iomaps;
	struct iomap_mr **remote_slots; /* remote_iomap.length, the published ones */
};

/* Defaults, as rdma-core's, overridable by files in /etc/rdma/rsocket. */
static uint16_t def_inline = 64, def_sqsize = 384, def_rqsize = 384, def_iomap_size;
static uint32_t def_mem = 1 << 17, def_wmem = 1 << 17, polling_time = 10;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsock **table;
static int table_len;

#define ERR(e) (errno = (e), -1)

static int rs_scale(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (1 << (bits - 1)) | (value >> bits);
}

static int rs_unscale(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (value & ~(1 << (bits - 1))) << bits;
}

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void read_conf(const char *name, const char *fmt, void *v)
{
	char path[128];
	snprintf(path, sizeof path, "/etc/rdma/rsocket/%s", name);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, fmt, v) != 1) {
			/* a bad file keeps the default */
		}
		fclose(f);
	}
}

static void conf(void)
{
	read_conf("polling_time", "%u", &polling_time);
	read_conf("inline_default", "%hu", &def_inline);
	read_conf("sqsize_default", "%hu", &def_sqsize);
	read_conf("rqsize_default", "%hu", &def_rqsize);
	read_conf("mem_default", "%u", &def_mem);
	read_conf("wmem_default", "%u", &def_wmem);
	read_conf("iomap_size", "%hu", &def_iomap_size);
	if (def_mem < 1)
		def_mem = 1;
	if (def_wmem < RS_SNDLOWAT)
		def_wmem = RS_SNDLOWAT << 1;
	def_iomap_size = (uint16_t)rs_unscale(rs_scale(def_iomap_size, 8), 8);
}

static void configure(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, conf);
}

/* --- the table of sockets, by descriptor --- */

static int table_put(struct rsock *rs)
{
	pthread_mutex_lock(&table_lock);
	if (rs->fd >= table_len) {
		int n = rs->fd + 64;
		struct rsock **t = realloc(table, n * sizeof *t);
		if (!t) {
			pthread_mutex_unlock(&table_lock);
			return ERR(ENOMEM);
		}
		memset(t + table_len, 0, (n - table_len) * sizeof *t);
		table = t;
		table_len = n;
	}
	table[rs->fd] = rs;
	pthread_mutex_unlock(&table_lock);
	return 0;
}

static struct rsock *lookup(int fd)
{
	struct rsock *rs = NULL;
	pthread_mutex_lock(&table_lock);
	if (fd >= 0 && fd < table_len)
		rs = table[fd];
	pthread_mutex_unlock(&table_lock);
	return rs;
}

static void table_del(struct rsock *rs)
{
	pthread_mutex_lock(&table_lock);
	if (rs->fd >= 0 && rs->fd < table_len && table[rs->fd] == rs)
		table[rs->fd] = NULL;
	pthread_mutex_unlock(&table_lock);
}

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* alloc makes a socket, with from's options (a listener's, for the
 * sockets it accepts) or the defaults, on a channel of its own. */
static struct rsock *alloc(struct rsock *from, int domain)
{
	struct rsock *rs = calloc(1, sizeof *rs);
	if (!rs)
		return NULL;
	rs->ch = rdma_create_event_channel();
	if (!rs->ch) {
		free(rs);
		return NULL;
	}
	/* The library waits with poll(), never in rdma_get_cm_event. */
	set_nonblock(rs->ch->fd);
	rs->fd = rs->ch->fd;
	rs->domain = domain;
	if (from) {
		rs->sbuf_size = from->sbuf_size;
		rs->rbuf_size = from->rbuf_size;
		rs->sq_inline = from->sq_inline;
		rs->sq_size = from->sq_size;
		rs->rq_size = from->rq_size;
		rs->target_iomap_size = from->target_iomap_size;
		rs->so_opts = from->so_opts;
		rs->tcp_opts = from->tcp_opts;
		rs->ipv6_opts = from->ipv6_opts;
		rs->nonblock = from->nonblock;
		rs->keepalive = from->keepalive;
		rs->keepalive_time = from->keepalive_time;
	} else {
		rs->sbuf_size = def_wmem;
		rs->rbuf_size = def_mem;
		rs->sq_inline = def_inline;
		rs->sq_size = def_sqsize;
		rs->rq_size = def_rqsize;
		rs->target_iomap_size = def_iomap_size;
	}
	rs->ctrl_max = RS_CTRL_WINDOW;
	pthread_mutex_init(&rs->slock, NULL);
	pthread_mutex_init(&rs->rlock, NULL);
	pthread_mutex_init(&rs->cqlock, NULL);
	pthread_mutex_init(&rs->waitlock, NULL);
	pthread_mutex_init(&rs->maplock, NULL);
	return rs;
}

static void keepalive_remove(struct rsock *rs);

/* release frees everything of a socket, its CM id last but one (its DREQ
 * goes if still connected) and its channel last. */
static void release(struct rsock *rs)
{
	keepalive_remove(rs);
	table_del(rs);
	if (rs->state == RS_LISTENING) {
		/* Requests never accepted are refused, not left to time out. */
		struct rdma_cm_event *ev;
		while (!rdma_get_cm_event(rs->ch, &ev)) {
			struct rdma_cm_id *id = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->id : NULL;
			if (id)
				rdma_reject(id, NULL, 0);
			rdma_ack_cm_event(ev);
			if (id)
				rdma_destroy_id(id);
		}
	}
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	for (struct iomap_mr *m = rs->iomaps, *n; m; m = n) {
		n = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
	free(rs->remote_slots);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->target_mr)
		ibv_dereg_mr(rs->target_mr);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cc)
		ibv_destroy_comp_channel(rs->cc);
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->target);
	free(rs->rmsg);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	free(rs);
}

/* --- the connection's resources --- */

static void *zalloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n))
		return NULL;
	memset(p, 0, n);
	return p;
}

static int post_recv(struct rsock *rs)
{
	struct ibv_recv_wr wr = {.wr_id = WRID_RECV}, *bad;
	return ibv_post_recv(rs->id->qp, &wr, &bad) ? ERR(ENOMEM) : 0;
}

/* create_ep makes the socket's CQ, QP and buffers and posts its receives. */
static int create_ep(struct rsock *rs)
{
	struct ibv_device_attr da;
	uint16_t max = RS_QP_MAX;
	if (!ibv_query_device(rs->id->verbs, &da) && da.max_qp_wr < max)
		max = (uint16_t)da.max_qp_wr;
	rs->sq_size = rs->sq_size > max ? max : rs->sq_size < RS_QP_MIN ? RS_QP_MIN : rs->sq_size;
	rs->rq_size = rs->rq_size > max ? max : rs->rq_size < RS_QP_MIN ? RS_QP_MIN : rs->rq_size;

	rs->cc = ibv_create_comp_channel(rs->id->verbs);
	if (!rs->cc)
		return -1;
	set_nonblock(rs->cc->fd);
	rs->cq = ibv_create_cq(rs->id->verbs, rs->sq_size + rs->rq_size, rs, rs->cc, 0);
	if (!rs->cq)
		return -1;
	struct ibv_qp_init_attr a = {
		.qp_context = rs,
		.send_cq = rs->cq,
		.recv_cq = rs->cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = rs->sq_size, .max_recv_wr = rs->rq_size, .max_send_sge = 2,
			.max_recv_sge = 1, .max_inline_data = rs->sq_inline},
	};
	if (rdma_create_qp(rs->id, NULL, &a))
		return -1;
	rs->sq_inline = a.cap.max_inline_data;

	rs->rmsg = calloc(rs->rq_size + 1, sizeof *rs->rmsg);
	/* The send buffer, then (when control SGEs cannot go inline) a slot
	 * per control message in flight. */
	size_t slen = rs->sbuf_size + (rs->sq_inline < RS_MAX_CTRL_MSG ? RS_MAX_CTRL_MSG * RS_CTRL_WINDOW : 0);
	size_t tlen = sizeof(struct rs_sge) * RS_SGL_SIZE + sizeof(struct rs_iomap) * rs->target_iomap_size;
	rs->sbuf = zalloc(slen);
	rs->target = zalloc(tlen);
	rs->rbuf = zalloc(rs->rbuf_size);
	if (!rs->rmsg || !rs->sbuf || !rs->target || !rs->rbuf)
		return ERR(ENOMEM);
	rs->smr = ibv_reg_mr(rs->id->pd, rs->sbuf, slen, IBV_ACCESS_LOCAL_WRITE);
	rs->target_mr = ibv_reg_mr(rs->id->pd, rs->target, tlen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	rs->rmr = ibv_reg_mr(rs->id->pd, rs->rbuf, rs->rbuf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->smr || !rs->target_mr || !rs->rmr)
		return -1;
	rs->target_sgl = rs->target;
	if (rs->target_iomap_size)
		rs->target_iomap = (struct rs_iomap *)((struct rs_sge *)rs->target + RS_SGL_SIZE);

	rs->sbuf_avail = rs->sbuf_size;
	/* The first half goes in conn_data; the second is granted at once. */
	rs->rbuf_free_off = rs->rbuf_size >> 1;
	rs->rbuf_avail = rs->rbuf_size >> 1;
	rs->sqe_avail = rs->sq_size - rs->ctrl_max;
	rs->rseq_comp = rs->rq_size >> 1;
	for (int i = 0; i < rs->rq_size; i++)
		if (post_recv(rs))
			return -1;
	return 0;
}

static void put_conn_data(struct rsock *rs, struct conn_data *c)
{
	memset(c, 0, sizeof *c);
	c->version = RS_VERSION;
	c->flags = RS_FLAG_IOMAP | (__BYTE_ORDER == __BIG_ENDIAN ? RS_FLAG_NET : 0);
	c->credits = htobe16(rs->rq_size);
	c->target_iomap_size = (uint8_t)rs_scale(rs->target_iomap_size, 8);
	c->target_sgl.addr = htobe64((uintptr_t)rs->target);
	c->target_sgl.length = htobe32(RS_SGL_SIZE);
	c->target_sgl.key = htobe32(rs->target_mr->rkey);
	c->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	c->data_buf.length = htobe32(rs->rbuf_size >> 1);
	c->data_buf.key = htobe32(rs->rmr->rkey);
}

/* take_conn_data reads the peer's conn_data: 0, or -1 (not an rsocket's). */
static int take_conn_data(struct rsock *rs, const void *priv, size_t len)
{
	struct conn_data c;
	if (!priv || len < sizeof c)
		return ERR(EPROTO);
	memcpy(&c, priv, sizeof c);
	if (c.version != RS_VERSION)
		return ERR(ENOTSUP);
	rs->remote_sgl.addr = be64toh(c.target_sgl.addr);
	rs->remote_sgl.length = be32toh(c.target_sgl.length);
	rs->remote_sgl.key = be32toh(c.target_sgl.key);
	if (!rs->remote_sgl.length || rs->remote_sgl.length > 64)
		return ERR(EPROTO);
	rs->remote_sge = 1;
	rs->swap = !!(c.flags & RS_FLAG_NET) != (__BYTE_ORDER == __BIG_ENDIAN);
	if (c.flags & RS_FLAG_IOMAP) {
		rs->remote_iomap.addr = rs->remote_sgl.addr + sizeof(struct rs_sge) * rs->remote_sgl.length;
		rs->remote_iomap.length = rs_unscale(c.target_iomap_size, 8);
		rs->remote_iomap.key = rs->remote_sgl.key;
	}
	rs->target_sgl[0].addr = be64toh(c.data_buf.addr);
	rs->target_sgl[0].length = be32toh(c.data_buf.length);
	rs->target_sgl[0].key = be32toh(c.data_buf.key);
	rs->sseq_comp = be16toh(c.credits);
	return 0;
}

/* --- posting --- */

static int post(struct rsock *rs, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int r = ibv_post_send(rs->id->qp, wr, &bad);
	return r ? ERR(r) : 0;
}

/* post_msg sends a message with no data (credits, control). */
static int post_msg(struct rsock *rs, uint32_t msg)
{
	struct ibv_send_wr wr = {.wr_id = msg, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .imm_data = htobe32(msg)};
	return post(rs, &wr);
}

static int post_write(struct rsock *rs, struct ibv_sge *sgl, int n, uint32_t wrid, uint32_t msg, int imm, int flags,
		      uint64_t addr, uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = wrid,
		.sg_list = sgl,
		.num_sge = n,
		.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
		.send_flags = flags,
		.imm_data = htobe32(msg),
		.wr.rdma = {.remote_addr = addr, .rkey = rkey},
	};
	return post(rs, &wr);
}

static uint32_t sbuf_left(struct rsock *rs) { return rs->sbuf_size - rs->shead; }

/* stage copies len bytes of src (gather: an iovec walk) into the send
 * buffer's ring at shead, giving one or two SGEs. */
struct gather {
	const struct iovec *iov;
	int iovcnt;
	size_t off;
};

static void gather_copy(struct gather *g, uint8_t *dst, size_t len)
{
	while (len) {
		size_t n = g->iov->iov_len - g->off;
		if (n > len)
			n = len;
		memcpy(dst, (const uint8_t *)g->iov->iov_base + g->off, n);
		dst += n;
		len -= n;
		g->off += n;
		if (g->off == g->iov->iov_len) {
			g->iov++;
			g->iovcnt--;
			g->off = 0;
		}
	}
}

/* stage readies the SGEs of a transfer of len bytes from g: inline from
 * the caller's memory when it fits in one iovec and inline, else copied
 * into the send ring. It returns the SGE count; *flags gets INLINE. */
static int stage(struct rsock *rs, struct gather *g, uint32_t len, struct ibv_sge sgl[2], int *flags)
{
	*flags = 0;
	if (len <= rs->sq_inline && g->iov->iov_len - g->off >= len) {
		sgl[0] = (struct ibv_sge){.addr = (uintptr_t)g->iov->iov_base + g->off, .length = len};
		*flags = IBV_SEND_INLINE; /* the post copies it */
		g->off += len;
		if (g->off == g->iov->iov_len && g->iovcnt > 1) {
			g->iov++;
			g->iovcnt--;
			g->off = 0;
		}
		return 1;
	}
	uint32_t first = len <= sbuf_left(rs) ? len : sbuf_left(rs);
	sgl[0] = (struct ibv_sge){.addr = (uintptr_t)rs->sbuf + rs->shead, .length = first, .lkey = rs->smr->lkey};
	gather_copy(g, rs->sbuf + rs->shead, first);
	rs->shead += first;
	if (rs->shead == rs->sbuf_size)
		rs->shead = 0;
	if (first == len)
		return 1;
	sgl[1] = (struct ibv_sge){.addr = (uintptr_t)rs->sbuf, .length = len - first, .lkey = rs->smr->lkey};
	gather_copy(g, rs->sbuf, len - first);
	rs->shead = len - first;
	return 2;
}

/* xfer_size is the next transfer of a send of left bytes: transfers
 * start at 2 KiB and double to 64 KiB, so that the first bytes leave at
 * once and a large send still uses large WRITEs; never more than the
 * send ring has free or room (the peer's granted buffer or region). */
static uint32_t xfer_size(struct rsock *rs, uint32_t *olen, size_t left, uint64_t room)
{
	uint64_t x = left;
	if (*olen < left) {
		x = *olen;
		if (*olen < RS_MAX_TRANSFER)
			*olen <<= 1;
	}
	if (x > rs->sbuf_avail)
		x = rs->sbuf_avail;
	if (x > room)
		x = room;
	return (uint32_t)x;
}

/* --- credits --- */

static int ctrl_avail(struct rsock *rs) { return rs->ctrl_seqno != rs->ctrl_max; }

/* send_credits grants the next half of the receive buffer if the program
 * has read that much, else message credits only. */
static void send_credits(struct rsock *rs)
{
	rs->ctrl_seqno++;
	rs->rseq_comp = rs->rseq_no + (rs->rq_size >> 1);
	uint32_t msg = MSG(OP_SGL, (uint16_t)(rs->rseq_no + rs->rq_size));
	if (rs->rbuf_avail < (rs->rbuf_size >> 1)) {
		post_msg(rs, msg);
		return;
	}
	struct rs_sge sge = {.addr = (uintptr_t)rs->rbuf + rs->rbuf_free_off, .key = rs->rmr->rkey, .length = rs->rbuf_size >> 1};
	if (rs->swap) {
		sge.addr = __builtin_bswap64(sge.addr);
		sge.key = __builtin_bswap32(sge.key);
		sge.length = __builtin_bswap32(sge.length);
	}
	struct ibv_sge s = {.length = sizeof sge};
	int flags = 0;
	if (rs->sq_inline >= sizeof sge) {
		s.addr = (uintptr_t)&sge;
		flags = IBV_SEND_INLINE;
	} else {
		uint8_t *slot = rs->sbuf + rs->sbuf_size + RS_MAX_CTRL_MSG * (rs->ctrl_seqno & (RS_CTRL_WINDOW - 1));
		memcpy(slot, &sge, sizeof sge);
		s.addr = (uintptr_t)slot;
		s.lkey = rs->smr->lkey;
	}
	post_write(rs, &s, 1, msg, msg, 1, flags, rs->remote_sgl.addr + rs->remote_sge * sizeof(struct rs_sge),
		   rs->remote_sgl.key);
	rs->rbuf_avail -= rs->rbuf_size >> 1;
	rs->rbuf_free_off += rs->rbuf_size >> 1;
	if (rs->rbuf_free_off >= rs->rbuf_size)
		rs->rbuf_free_off = 0;
	if (++rs->remote_sge == (int)rs->remote_sgl.length)
		rs->remote_sge = 0;
}

static void update_credits(struct rsock *rs)
{
	if ((rs->rbuf_avail >= (rs->rbuf_size >> 1) || (int16_t)(rs->rseq_no - rs->rseq_comp) >= 0) && ctrl_avail(rs) &&
	    (rs->state & RS_CONNECTED))
		send_credits(rs);
}

/* --- completions --- */

static void fail(struct rsock *rs, int err)
{
	rs->state = RS_ERROR;
	rs->err = err;
}

/* arrived takes a message the peer sent. */
static void arrived(struct rsock *rs, uint32_t msg)
{
	switch (MSG_OP(msg)) {
	case OP_SGL:
		rs->sseq_comp = (uint16_t)MSG_DATA(msg);
		break;
	case OP_IOMAP_SGL:
		break; /* the peer published a region: riowrite finds it in the table */
	case OP_CTRL:
		if (MSG_DATA(msg) == CTRL_DISCONNECT) {
			rs->state = RS_DISCONNECTED;
		} else if (MSG_DATA(msg) == CTRL_SHUTDOWN) {
			if (rs->state & RS_WRITABLE)
				rs->state &= ~RS_READABLE;
			else
				rs->state = RS_DISCONNECTED;
		}
		break;
	case OP_DATA: {
		/* A peer that breaks the protocol (more than the buffer or the
		 * credits it was given) ends the connection, never a read
		 * outside the buffer. */
		uint32_t len = MSG_DATA(msg);
		int next = rs->rmsg_tail + 1 == rs->rq_size + 1 ? 0 : rs->rmsg_tail + 1;
		if (len > (rs->rbuf_size >> 1) || rs->rbuf_unread + len > rs->rbuf_size || next == rs->rmsg_head) {
			fail(rs, EPROTO);
			break;
		}
		if (!len)
			break;
		rs->rmsg[rs->rmsg_tail] = (struct rmsg){.len = len};
		rs->rmsg_tail = next;
		rs->rbuf_unread += len;
		break;
	}
	default:
		break; /* reserved ops: ignored, as rdma-core does */
	}
}

/* poll_cq takes every completion there is (cqlock held). */
static int poll_cq(struct rsock *rs)
{
	struct ibv_wc wc;
	int rcnt = 0, ret = 0;
	while (ibv_poll_cq(rs->cq, 1, &wc) > 0) {
		if (wc.wr_id & WRID_RECV) {
			if (wc.status != IBV_WC_SUCCESS)
				continue; /* flushed */
			rcnt++;
			if (wc.wc_flags & IBV_WC_WITH_IMM)
				arrived(rs, be32toh(wc.imm_data));
			continue;
		}
		uint32_t msg = (uint32_t)wc.wr_id;
		switch (MSG_OP(msg)) {
		case OP_SGL:
		case OP_CTRL:
			rs->ctrl_max++;
			if (MSG_OP(msg) == OP_CTRL && MSG_DATA(msg) == CTRL_DISCONNECT)
				rs->state = RS_DISCONNECTED;
			break;
		case OP_IOMAP_SGL:
			rs->sqe_avail++;
			rs->sbuf_avail += sizeof(struct rs_iomap);
			break;
		default:
			rs->sqe_avail++;
			rs->sbuf_avail += MSG_DATA(msg);
			break;
		}
		if (wc.status != IBV_WC_SUCCESS && (rs->state & RS_CONNECTED))
			fail(rs, EIO);
	}
	/* Receives go back while the QP lives: also before the socket has
	 * seen its ESTABLISHED (the peer may send as soon as it has). */
	if (rs->state & (RS_CONNECTED | RS_OPENING)) {
		while (!ret && rcnt--)
			ret = post_recv(rs);
		if (ret)
			fail(rs, errno);
	}
	return ret;
}

/* --- the CM side --- */

static int on_connected(struct rsock *rs, struct rdma_cm_event *ev)
{
	if (rs->state == RS_CONNECTING &&
	    take_conn_data(rs, ev->param.conn.private_data, ev->param.conn.private_data_len))
		return -1;
	rs->state = RS_CONNECT_RDWR;
	return 0;
}

static int start_connect(struct rsock *rs)
{
	struct conn_data c;
	if (create_ep(rs))
		return -1;
	put_conn_data(rs, &c);
	struct rdma_conn_param p = {
		.private_data = &c,
		.private_data_len = sizeof c,
		.flow_control = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
		.responder_resources = 1,
		.initiator_depth = 1,
	};
	return rdma_connect(rs->id, &p);
}

static int cm_errno(struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return ev->status == -ETIMEDOUT ? ETIMEDOUT : EHOSTUNREACH;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev->status < 0 ? -ev->status : EHOSTUNREACH;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return ENODEV;
	default:
		return ev->status < 0 ? -ev->status : ECONNABORTED;
	}
}

/* cm_event moves the socket along for one CM event of its id. */
static void cm_event(struct rsock *rs, struct rdma_cm_event *ev)
{
	int err = 0;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state == RS_RESOLVING_ADDR) {
			rs->state = RS_RESOLVING_ROUTE;
			if (rdma_resolve_route(rs->id, 2000))
				err = errno;
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state == RS_RESOLVING_ROUTE) {
			rs->state = RS_CONNECTING;
			if (start_connect(rs))
				err = errno;
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if ((rs->state == RS_CONNECTING || rs->state == RS_ACCEPTING) && on_connected(rs, ev))
			err = errno;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (rs->state & RS_CONNECTED)
			rs->state = RS_DISCONNECTED;
		else if (rs->state & RS_OPENING)
			err = ECONNRESET;
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (rs->state & RS_CONNECTED) {
			fail(rs, ENODEV);
			break;
		}
		err = ENODEV;
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		break;
	default: /* errors: REJECTED, UNREACHABLE, ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR */
		if (rs->state & RS_OPENING)
			err = cm_errno(ev);
		else if (rs->state & RS_CONNECTED)
			fail(rs, cm_errno(ev));
		break;
	}
	if (err && (rs->state & RS_OPENING)) {
		rs->state = RS_CONNECT_ERROR;
		rs->err = err;
	}
}

/* cm_poll takes the socket's CM events that are there (never waits). */
static void cm_poll(struct rsock *rs)
{
	struct rdma_cm_event *ev;
	while (!rdma_get_cm_event(rs->ch, &ev)) {
		cm_event(rs, ev);
		rdma_ack_cm_event(ev);
	}
}

/* --- waiting --- */

/* take_cq_event takes the completion channel's event (the CQ is no
 * longer armed); events are acknowledged in batches. */
static void take_cq_event(struct rsock *rs)
{
	struct ibv_cq *cq;
	void *ctx;
	if (ibv_get_cq_event(rs->cc, &cq, &ctx))
		return; /* another thread took it */
	pthread_mutex_lock(&rs->cqlock);
	rs->armed = 0;
	if (++rs->unacked >= 64) {
		ibv_ack_cq_events(rs->cq, rs->unacked);
		rs->unacked = 0;
	}
	pthread_mutex_unlock(&rs->cqlock);
}

/* wait_fds blocks until one of the socket's descriptors is readable. */
static void wait_fds(struct rsock *rs, int ms)
{
	struct pollfd p[2] = {{.fd = rs->ch->fd, .events = POLLIN}, {.fd = rs->cc ? rs->cc->fd : -1, .events = POLLIN}};
	if (poll(p, 2, ms) <= 0)
		return;
	if (p[0].revents & POLLIN)
		rs->cm_due = 0;
	if (p[1].revents & POLLIN)
		take_cq_event(rs);
}

/* process takes completions and CM events until test holds: 0; -1 with
 * EWOULDBLOCK if nonblock and it does not yet, or the socket's error. */
static int process(struct rsock *rs, int nonblock, int (*test)(struct rsock *))
{
	uint64_t spin_until = 0;
	for (;;) {
		/* A connected socket's CM events (the peer's DREQ, a device
		 * gone) are rare and its data is not: it looks at most every
		 * millisecond, and at once when a wait saw one. */
		if (!(rs->state & RS_CONNECTED) || now_us() >= rs->cm_due) {
			cm_poll(rs);
			rs->cm_due = now_us() + 1000;
		}
		pthread_mutex_lock(&rs->cqlock);
		if (rs->cq) {
			update_credits(rs);
			poll_cq(rs);
			update_credits(rs);
		}
		int ok = test(rs);
		pthread_mutex_unlock(&rs->cqlock);
		if (ok)
			return 0;
		if (rs->state & (RS_ERROR | RS_CONNECT_ERROR))
			return ERR(rs->err ? rs->err : EIO);
		if (nonblock)
			return ERR(EWOULDBLOCK);
		/* A short spin first: a completion is often microseconds away. */
		uint64_t now = now_us();
		if (!spin_until)
			spin_until = now + polling_time;
		if (now < spin_until)
			continue;
		pthread_mutex_lock(&rs->cqlock);
		int armed = rs->armed;
		if (!armed && rs->cq) {
			ibv_req_notify_cq(rs->cq, 0);
			rs->armed = 1;
		}
		pthread_mutex_unlock(&rs->cqlock);
		if (!armed && rs->cq)
			continue; /* a completion may have come before the arming */
		pthread_mutex_lock(&rs->waitlock);
		if (rs->armed || !rs->cq)
			wait_fds(rs, -1);
		pthread_mutex_unlock(&rs->waitlock);
	}
}

static int nonblocking(struct rsock *rs, int flags) { return rs->nonblock || (flags & MSG_DONTWAIT); }

static int can_send(struct rsock *rs)
{
	return rs->sqe_avail && rs->sbuf_avail >= RS_SNDLOWAT && rs->sseq_no != rs->sseq_comp &&
	       rs->target_sgl[rs->target_sge].length != 0;
}
static int conn_can_send(struct rsock *rs) { return can_send(rs) || !(rs->state & RS_WRITABLE); }
static int have_rdata(struct rsock *rs) { return rs->rmsg_head != rs->rmsg_tail; }
static int conn_have_rdata(struct rsock *rs) { return have_rdata(rs) || !(rs->state & RS_READABLE); }
static int conn_can_send_ctrl(struct rsock *rs) { return ctrl_avail(rs) || !(rs->state & RS_CONNECTED); }
static int all_sends_done(struct rsock *rs)
{
	return (int)(rs->ctrl_max - rs->ctrl_seqno) + rs->sqe_avail == rs->sq_size || !(rs->state & RS_CONNECTED);
}
static int not_opening(struct rsock *rs) { return !(rs->state & RS_OPENING); }

/* finish_connect completes a connection in progress: 0 once connected,
 * -1 with EINPROGRESS while it is not (non-blocking), or the error. */
static int finish_connect(struct rsock *rs, int nonblock)
{
	if (rs->state & RS_OPENING) {
		if (process(rs, nonblock, not_opening))
			return errno == EWOULDBLOCK ? ERR(EINPROGRESS) : -1;
	}
	if (rs->state == RS_CONNECT_ERROR) {
		int e = rs->err ? rs->err : ECONNREFUSED;
		return ERR(e);
	}
	if (rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR))
		return 0;
	return ERR(ENOTCONN);
}

/* --- the API --- */

int rsocket(int domain, int type, int protocol)
{
	int t = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
	if ((domain != AF_INET && domain != AF_INET6) || (t != SOCK_STREAM && t != SOCK_DGRAM))
		return ERR(EAFNOSUPPORT);
	if (t == SOCK_DGRAM)
		return ERR(ENOTSUP); /* datagram rsockets: not built */
	if (protocol && protocol != IPPROTO_TCP)
		return ERR(EPROTONOSUPPORT);
	configure();
	struct rsock *rs = alloc(NULL, domain);
	if (!rs)
		return -1;
	rs->nonblock = !!(type & SOCK_NONBLOCK);
	rs->fdflags = type & SOCK_CLOEXEC ? FD_CLOEXEC : 0;
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP) || table_put(rs)) {
		int e = errno;
		release(rs);
		return ERR(e);
	}
	rs->id->route.addr.src_addr.sa_family = domain;
	return rs->fd;
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (!addr || addrlen < sizeof(struct sockaddr_in) || (addr->sa_family == AF_INET6 && addrlen < sizeof(struct sockaddr_in6)))
		return ERR(EINVAL);
	if (rs->state != RS_INIT)
		return ERR(EINVAL);
	if (rdma_bind_addr(rs->id, (struct sockaddr *)addr))
		return -1;
	rs->state = RS_BOUND;
	return 0;
}

int rlisten(int socket, int backlog)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (rs->state == RS_LISTENING)
		return 0;
	if (rs->state != RS_BOUND && rs->state != RS_INIT)
		return ERR(EINVAL);
	if (rdma_listen(rs->id, backlog))
		return -1;
	rs->state = RS_LISTENING;
	return 0;
}

/* accept_one answers one connection request: the new socket's number, or
 * -1 (the request is rejected). */
static int accept_one(struct rsock *l, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct rsock *rs = alloc(l, l->domain);
	if (!rs) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return -1;
	}
	struct rdma_conn_param p = ev->param.conn;
	uint8_t priv[256];
	size_t plen = p.private_data_len;
	if (plen)
		memcpy(priv, p.private_data, plen);
	rs->id = id;
	id->context = rs;
	struct conn_data c;
	if (rdma_migrate_id(id, rs->ch) || table_put(rs) || create_ep(rs) || take_conn_data(rs, priv, plen))
		goto fail;
	put_conn_data(rs, &c);
	p.private_data = &c;
	p.private_data_len = sizeof c;
	p.rnr_retry_count = 7;
	p.retry_count = 7;
	if (p.responder_resources > 1)
		p.responder_resources = 1;
	if (p.initiator_depth > 1)
		p.initiator_depth = 1;
	if (rdma_accept(id, &p))
		goto fail;
	rs->state = RS_ACCEPTING;
	return rs->fd;
fail:;
	int e = errno;
	rdma_reject(id, NULL, 0);
	release(rs);
	errno = e;
	return -1;
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *l = lookup(socket);
	if (!l)
		return ERR(EBADF);
	if (l->state != RS_LISTENING)
		return ERR(EINVAL);
	for (;;) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(l->ch, &ev)) {
			if (errno != EAGAIN)
				return -1;
			if (l->nonblock)
				return ERR(EAGAIN);
			struct pollfd p = {.fd = l->ch->fd, .events = POLLIN};
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return -1;
			continue;
		}
		if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			rdma_ack_cm_event(ev);
			return ERR(ENODEV);
		}
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		int fd = accept_one(l, ev);
		rdma_ack_cm_event(ev);
		if (fd < 0)
			continue; /* that request was not an rsocket's, or failed: the next */
		struct rsock *rs = lookup(fd);
		/* As rdma-core: a blocking accept returns once the connection
		 * is established; a non-blocking one completes it later. */
		if (!rs->nonblock && finish_connect(rs, 0)) {
			release(rs);
			continue;
		}
		if (addr && addrlen)
			rgetpeername(fd, addr, addrlen);
		return fd;
	}
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (!addr || addrlen < sizeof(struct sockaddr_in))
		return ERR(EINVAL);
	if (rs->state & RS_OPENING) {
		int r = finish_connect(rs, rs->nonblock);
		return r && errno == EINPROGRESS ? ERR(EALREADY) : r;
	}
	if (rs->state & (RS_CONNECTED | RS_DISCONNECTED))
		return ERR(EISCONN);
	if (rs->state != RS_INIT && rs->state != RS_BOUND)
		return ERR(EINVAL);
	memcpy(&rs->dst, addr, addrlen < sizeof rs->dst ? addrlen : sizeof rs->dst);
	rs->state = RS_RESOLVING_ADDR;
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)&rs->dst, 2000)) {
		rs->err = errno;
		rs->state = RS_CONNECT_ERROR;
		return -1;
	}
	return finish_connect(rs, rs->nonblock);
}

/* wait_send waits (or not: flags, the socket) until a message can go:
 * 0, or -1 (EWOULDBLOCK, ECONNRESET once not writable, the error). */
static int wait_send(struct rsock *rs, int flags)
{
	if (can_send(rs))
		return 0;
	if (process(rs, nonblocking(rs, flags), conn_can_send))
		return -1;
	return rs->state & RS_WRITABLE ? 0 : ERR(ECONNRESET);
}

/* send_data sends what g holds (len bytes) on the stream. */
static ssize_t send_data(struct rsock *rs, struct gather *g, size_t len, int flags)
{
	size_t left = len;
	uint32_t olen = RS_OLAP_START;
	int ret = 0;
	pthread_mutex_lock(&rs->slock);
	while (left) {
		if ((ret = wait_send(rs, flags)))
			break;
		pthread_mutex_lock(&rs->cqlock);
		volatile struct rs_sge *t = &rs->target_sgl[rs->target_sge];
		uint32_t x = xfer_size(rs, &olen, left, t->length);
		struct ibv_sge sgl[2];
		int sflags, n = stage(rs, g, x, sgl, &sflags);
		uint64_t addr = t->addr;
		uint32_t rkey = t->key;
		t->addr += x;
		t->length -= x;
		if (!t->length && ++rs->target_sge == RS_SGL_SIZE)
			rs->target_sge = 0;
		rs->sseq_no++;
		rs->sqe_avail--;
		rs->sbuf_avail -= x;
		uint32_t msg = MSG(OP_DATA, x);
		ret = post_write(rs, sgl, n, msg, msg, 1, sflags, addr, rkey);
		pthread_mutex_unlock(&rs->cqlock);
		if (ret)
			break;
		left -= x;
	}
	pthread_mutex_unlock(&rs->slock);
	return ret && left == len ? ret : (ssize_t)(len - left);
}

static int send_iomaps(struct rsock *rs, int flags);

/* io_begin finds the socket of a send or receive and completes its
 * connection if it is under way: NULL with errno (EAGAIN while it is). */
static struct rsock *io_begin(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return errno = EBADF, NULL;
	if (iovcnt < 0 || (iovcnt && !iov))
		return errno = EINVAL, NULL;
	if ((rs->state & RS_OPENING) && finish_connect(rs, nonblocking(rs, flags))) {
		if (errno == EINPROGRESS)
			errno = EAGAIN;
		return NULL;
	}
	return rs;
}

static ssize_t sendv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsock *rs = io_begin(socket, iov, iovcnt, flags);
	if (!rs)
		return -1;
	if (!(rs->state & RS_CONNECTED)) {
		if (rs->state & (RS_DISCONNECTED | RS_ERROR))
			return ERR(rs->state & RS_ERROR && rs->err ? rs->err : EPIPE);
		return ERR(ENOTCONN);
	}
	if (!(rs->state & RS_WRITABLE))
		return ERR(EPIPE);
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (!len)
		return 0;
	/* Skip empty leading iovecs: stage reads from g->iov. */
	while (iovcnt && !iov->iov_len) {
		iov++;
		iovcnt--;
	}
	if (send_iomaps(rs, flags))
		return -1;
	struct gather g = {.iov = iov, .iovcnt = iovcnt};
	return send_data(rs, &g, len, flags);
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
	if (!buf && len)
		return ERR(EFAULT);
	return sendv(socket, &v, 1, flags);
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr, socklen_t addrlen)
{
	if (dest_addr || addrlen) {
		struct rsock *rs = lookup(socket);
		if (!rs)
			return ERR(EBADF);
		return ERR(EISCONN); /* a stream socket sends to its peer only */
	}
	return rsend(socket, buf, len, flags);
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (msg->msg_control && msg->msg_controllen)
		return ERR(ENOTSUP);
	return sendv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

ssize_t rwrite(int socket, const void *buf, size_t count) { return rsend(socket, buf, count, 0); }

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt) { return sendv(socket, iov, iovcnt, 0); }

/* copy_out reads up to len bytes of the stream into the iovecs (peek:
 * leaves them there); the bytes read. */
static size_t copy_out(struct rsock *rs, const struct iovec *iov, int iovcnt, size_t len, int peek)
{
	int head = rs->rmsg_head;
	uint32_t off = rs->rbuf_off;
	size_t done = 0, vo = 0;
	while (done < len && head != rs->rmsg_tail) {
		uint32_t n = rs->rmsg[head].len;
		if (n > len - done)
			n = len - done;
		uint32_t k = n;
		while (k) {
			uint32_t run = rs->rbuf_size - off; /* to the buffer's end */
			size_t room = iov->iov_len - vo;
			uint32_t c = k < run ? k : run;
			if (c > room)
				c = room;
			memcpy((uint8_t *)iov->iov_base + vo, rs->rbuf + off, c);
			vo += c;
			off += c;
			if (off == rs->rbuf_size)
				off = 0;
			k -= c;
			if (vo == iov->iov_len && iovcnt > 1) {
				iov++;
				iovcnt--;
				vo = 0;
			}
		}
		done += n;
		if (!peek) {
			rs->rbuf_avail += n;
			rs->rbuf_unread -= n;
			if (n < rs->rmsg[head].len) {
				rs->rmsg[head].len -= n;
			} else {
				rs->rseq_no++;
				head = head + 1 == rs->rq_size + 1 ? 0 : head + 1;
			}
		} else if (n == rs->rmsg[head].len) {
			head = head + 1 == rs->rq_size + 1 ? 0 : head + 1;
		}
	}
	if (!peek) {
		rs->rmsg_head = head;
		rs->rbuf_off = off;
	}
	return done;
}

static ssize_t recvv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsock *rs = io_begin(socket, iov, iovcnt, flags);
	if (!rs)
		return -1;
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR)))
		return ERR(ENOTCONN);
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (!len)
		return 0;
	if (iovcnt > IOV_MAX)
		return ERR(EINVAL);
	/* A copy the reads advance; empty iovecs left out. */
	struct iovec *v = alloca(iovcnt * sizeof *v);
	int k = 0;
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].iov_len)
			v[k++] = iov[i];
	iovcnt = k;
	size_t done = 0;
	int ret = 0;
	pthread_mutex_lock(&rs->rlock);
	do {
		if (!have_rdata(rs)) {
			ret = process(rs, nonblocking(rs, flags), conn_have_rdata);
			if (ret)
				break;
		}
		pthread_mutex_lock(&rs->cqlock);
		/* Data that arrived before an error is still read first. */
		size_t n = copy_out(rs, v, iovcnt, len - done, flags & MSG_PEEK);
		pthread_mutex_unlock(&rs->cqlock);
		if (flags & MSG_PEEK) {
			done = n;
			break;
		}
		done += n;
		/* the iovecs past what was read, for MSG_WAITALL's next round */
		for (size_t k = n; k && iovcnt;) {
			if (k < v->iov_len) {
				v->iov_base = (uint8_t *)v->iov_base + k;
				v->iov_len -= k;
				k = 0;
			} else {
				k -= v->iov_len;
				v++;
				iovcnt--;
			}
		}
		if (!have_rdata(rs) && !(rs->state & RS_READABLE))
			break;
	} while (done < len && (flags & MSG_WAITALL) && (rs->state & RS_READABLE));
	/* A read frees buffer the peer may be waiting for. */
	pthread_mutex_lock(&rs->cqlock);
	if (rs->cq)
		update_credits(rs);
	pthread_mutex_unlock(&rs->cqlock);
	pthread_mutex_unlock(&rs->rlock);
	if (done)
		return (ssize_t)done;
	if (ret && errno == EWOULDBLOCK)
		return -1;
	/* Nothing read: the end of the stream after the peer's close, the
	 * error after a failure. */
	if (rs->state & RS_ERROR)
		return ERR(rs->err ? rs->err : EIO);
	return ret && !(rs->state & RS_DISCONNECTED) ? -1 : 0;
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};
	if (!buf && len)
		return ERR(EFAULT);
	return recvv(socket, &v, 1, flags);
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr, socklen_t *addrlen)
{
	ssize_t r = rrecv(socket, buf, len, flags);
	if (r >= 0 && src_addr && addrlen)
		rgetpeername(socket, src_addr, addrlen);
	return r;
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (msg->msg_control && msg->msg_controllen)
		return ERR(ENOTSUP);
	ssize_t r = recvv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		msg->msg_flags = 0;
		if (msg->msg_name && msg->msg_namelen)
			rgetpeername(socket, msg->msg_name, &msg->msg_namelen);
	}
	return r;
}

ssize_t rread(int socket, void *buf, size_t count) { return rrecv(socket, buf, count, 0); }

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt) { return recvv(socket, iov, iovcnt, 0); }

/* --- poll and select --- */

/* revents_of is what the socket reports now, after taking its events
 * (never waiting). */
static short revents_of(struct rsock *rs, short events)
{
	if (rs->state == RS_LISTENING) {
		struct pollfd p = {.fd = rs->ch->fd, .events = POLLIN};
		poll(&p, 1, 0);
		return p.revents & POLLIN ? events & POLLIN : 0;
	}
	if (rs->state & RS_OPENING) {
		if (finish_connect(rs, 1) && errno == EINPROGRESS)
			return 0;
	}
	if (rs->state == RS_CONNECT_ERROR)
		return (events & (POLLIN | POLLOUT)) | POLLERR;
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR)))
		return 0;
	process(rs, 1, have_rdata);
	short r = 0;
	pthread_mutex_lock(&rs->cqlock);
	if ((events & POLLIN) && conn_have_rdata(rs))
		r |= POLLIN;
	if ((events & POLLOUT) && (rs->state & RS_WRITABLE) && can_send(rs))
		r |= POLLOUT;
	/* The end (the peer's close, an error) shows once the data that came
	 * before it is read, as a TCP socket's hang-up: a program that reads
	 * on POLLIN and stops at POLLHUP gets all of it. (rdma-core reports
	 * POLLHUP at once, and rstream -T a then fails now and then when the
	 * last data and the peer's DISCONNECT come in one poll.) */
	if (!(rs->state & RS_CONNECTED) && !have_rdata(rs))
		r |= rs->state == RS_DISCONNECTED ? POLLHUP : POLLERR;
	pthread_mutex_unlock(&rs->cqlock);
	return r;
}

static int check_all(struct pollfd *fds, nfds_t nfds)
{
	int n = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		struct rsock *rs = lookup(fds[i].fd);
		if (rs) {
			fds[i].revents = revents_of(rs, fds[i].events);
		} else {
			fds[i].revents = 0;
			poll(&fds[i], 1, 0);
		}
		if (fds[i].revents)
			n++;
	}
	return n;
}

/* arm readies the socket to wake a poll(): its CQ armed (and a check
 * after, for a completion that came first). */
static void arm(struct rsock *rs)
{
	pthread_mutex_lock(&rs->cqlock);
	if (rs->cq && !rs->armed && (rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR))) {
		ibv_req_notify_cq(rs->cq, 0);
		rs->armed = 1;
	}
	pthread_mutex_unlock(&rs->cqlock);
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	uint64_t start = now_us();
	for (;;) {
		int n = check_all(fds, nfds);
		if (n || !timeout)
			return n;
		if (now_us() - start > polling_time)
			break;
	}
	struct pollfd *p = calloc(2 * nfds + 1, sizeof *p);
	if (!p)
		return ERR(ENOMEM);
	int n;
	for (;;) {
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsock *rs = lookup(fds[i].fd);
			if (rs)
				arm(rs);
		}
		/* Armed, check again: what came before the arming shows now. */
		n = check_all(fds, nfds);
		if (n)
			break;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsock *rs = lookup(fds[i].fd);
			if (rs) {
				p[2 * i] = (struct pollfd){.fd = rs->ch->fd, .events = POLLIN};
				p[2 * i + 1] = (struct pollfd){.fd = rs->cc ? rs->cc->fd : -1, .events = POLLIN};
			} else {
				p[2 * i] = (struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
				p[2 * i + 1] = (struct pollfd){.fd = -1};
			}
		}
		int ms = -1;
		if (timeout >= 0) {
			int64_t left = (int64_t)timeout - (int64_t)((now_us() - start) / 1000);
			if (left <= 0) {
				n = 0;
				break;
			}
			ms = (int)left;
		}
		int r = poll(p, 2 * nfds, ms);
		if (r < 0) {
			n = -1;
			break;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsock *rs = lookup(fds[i].fd);
			if (rs && (p[2 * i].revents & POLLIN))
				rs->cm_due = 0;
			if (rs && rs->cc && (p[2 * i + 1].revents & POLLIN)) {
				pthread_mutex_lock(&rs->waitlock);
				take_cq_event(rs);
				pthread_mutex_unlock(&rs->waitlock);
			}
		}
		n = check_all(fds, nfds);
		if (n)
			break;
	}
	free(p);
	return n;
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	if (nfds < 0 || nfds > FD_SETSIZE)
		return ERR(EINVAL);
	struct pollfd *fds = calloc(nfds ? nfds : 1, sizeof *fds);
	if (!fds)
		return ERR(ENOMEM);
	int n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		int want = 0;
		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN, want = 1;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT, want = 1;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			want = 1;
		if (want)
			fds[n++] = (struct pollfd){.fd = fd, .events = ev};
	}
	int ms = timeout ? (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
	int r = rpoll(fds, n, ms);
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	if (r > 0) {
		r = 0;
		for (int i = 0; i < n; i++) {
			if (readfds && (fds[i].revents & (POLLIN | POLLHUP))) {
				FD_SET(fds[i].fd, readfds);
				r++;
			}
			if (writefds && (fds[i].revents & POLLOUT)) {
				FD_SET(fds[i].fd, writefds);
				r++;
			}
			if (exceptfds && (fds[i].revents & ~(POLLIN | POLLOUT))) {
				FD_SET(fds[i].fd, exceptfds);
				r++;
			}
		}
	}
	free(fds);
	return r;
}

/* --- shutdown and close --- */

int rshutdown(int socket, int how)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return ERR(EINVAL);
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR)))
		return ERR(ENOTCONN);
	int ret = 0;
	if (rs->state & RS_CONNECTED) {
		int ctrl;
		if (how == SHUT_RDWR) {
			ctrl = CTRL_DISCONNECT;
			rs->state &= ~(RS_READABLE | RS_WRITABLE);
		} else if (how == SHUT_WR) {
			rs->state &= ~RS_WRITABLE;
			ctrl = rs->state & RS_READABLE ? CTRL_SHUTDOWN : CTRL_DISCONNECT;
		} else {
			rs->state &= ~RS_READABLE;
			if (rs->state & RS_WRITABLE)
				return 0;
			ctrl = CTRL_DISCONNECT;
		}
		/* The peer learns it in order after the data sent before. */
		if (!ctrl_avail(rs))
			ret = process(rs, 0, conn_can_send_ctrl);
		pthread_mutex_lock(&rs->cqlock);
		if (!ret && (rs->state & RS_CONNECTED) && ctrl_avail(rs)) {
			rs->ctrl_seqno++;
			ret = post_msg(rs, MSG(OP_CTRL, ctrl));
		}
		pthread_mutex_unlock(&rs->cqlock);
	}
	if (rs->state & RS_CONNECTED)
		process(rs, 0, all_sends_done);
	if ((rs->state & RS_DISCONNECTED) && rs->id->qp) {
		/* Nothing more to send or take: the QP stops (its receives
		 * flush, waking a poll); the DREQ goes when the socket closes. */
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		ibv_modify_qp(rs->id->qp, &a, IBV_QP_STATE);
	}
	return ret;
}

int rclose(int socket)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (rs->state & RS_CONNECTED)
		rshutdown(socket, SHUT_RDWR);
	release(rs);
	return 0;
}

/* --- names and options --- */

static void copy_addr(struct sockaddr *dst, const struct sockaddr *src, socklen_t *len)
{
	socklen_t size = src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	memcpy(dst, src, *len < size ? *len : size);
	*len = size;
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (!addr || !addrlen)
		return ERR(EFAULT);
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR | RS_OPENING)))
		return ERR(ENOTCONN);
	copy_addr(addr, rdma_get_peer_addr(rs->id), addrlen);
	return 0;
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (!addr || !addrlen)
		return ERR(EFAULT);
	struct sockaddr *sa = rdma_get_local_addr(rs->id);
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) {
		struct sockaddr_storage any = {.ss_family = (sa_family_t)rs->domain};
		copy_addr(addr, (struct sockaddr *)&any, addrlen);
		return 0;
	}
	copy_addr(addr, sa, addrlen);
	return 0;
}

static int keepalive_add(struct rsock *rs);

int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (!optval || optlen < sizeof(int))
		return ERR(EINVAL);
	int v = *(const int *)optval;
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			/* The id's REUSEADDR, as rdma-core's rsocket sets it; as
			 * there, only a socket not yet bound sees its refusal (a
			 * bound id may not turn it off). */
			if (rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, (void *)optval, optlen) &&
			    errno != ENOSYS && rs->state == RS_INIT)
				return -1;
			rs->so_opts = v ? rs->so_opts | (1ULL << optname) : rs->so_opts & ~(1ULL << optname);
			return 0;
		case SO_OOBINLINE:
			rs->so_opts = v ? rs->so_opts | (1ULL << optname) : rs->so_opts & ~(1ULL << optname);
			return 0;
		case SO_RCVBUF:
			/* As TCP: the buffer is twice what is asked. Fixed once connected. */
			if (!rs->rbuf && v > 0)
				rs->rbuf_size = (uint32_t)v << 1;
			return 0;
		case SO_SNDBUF:
			if (!rs->sbuf && v > 0)
				rs->sbuf_size = (uint32_t)v << 1;
			if (rs->sbuf_size < RS_SNDLOWAT)
				rs->sbuf_size = RS_SNDLOWAT << 1;
			return 0;
		case SO_LINGER:
			if (optlen < sizeof(struct linger))
				return ERR(EINVAL);
			/* stored inverted, as rdma-core: linger is on by default */
			if (((const struct linger *)optval)->l_onoff)
				rs->so_opts &= ~(1ULL << optname);
			else
				rs->so_opts |= 1ULL << optname;
			return 0;
		case SO_KEEPALIVE:
			rs->so_opts = v ? rs->so_opts | (1ULL << optname) : rs->so_opts & ~(1ULL << optname);
			if (v)
				return keepalive_add(rs);
			keepalive_remove(rs);
			return 0;
		default:
			return ERR(ENOTSUP);
		}
	case IPPROTO_IP:
		if (optname != IP_TOS)
			return ERR(ENOTSUP);
		{
			uint8_t tos = (uint8_t)v;
			if (rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos))
				return -1;
			rs->tos = v;
			return 0;
		}
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
		case TCP_MAXSEG:
		case TCP_CONGESTION:
			return 0; /* a reliable connection has none of these */
		case TCP_NODELAY:
			rs->tcp_opts = v ? rs->tcp_opts | (1ULL << optname) : rs->tcp_opts & ~(1ULL << optname);
			return 0;
		case TCP_KEEPIDLE:
			if (v <= 0)
				return ERR(EINVAL);
			rs->keepalive_time = (unsigned)v;
			if (rs->keepalive)
				return keepalive_add(rs);
			return 0;
		default:
			return ERR(ENOTSUP);
		}
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY)
			return ERR(ENOTSUP);
		/* The id's AFONLY: a listener on [::] with it takes IPv6
		 * connections only, and 0.0.0.0 may listen on its port. */
		if (rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, (void *)optval, optlen))
			return -1;
		rs->ipv6_opts = v ? rs->ipv6_opts | (1ULL << optname) : rs->ipv6_opts & ~(1ULL << optname);
		return 0;
	case SOL_RDMA:
		if (rs->state >= RS_OPENING)
			return ERR(EINVAL);
		switch (optname) {
		case RDMA_SQSIZE:
			rs->sq_size = (uint16_t)((uint32_t)v > RS_QP_MAX ? RS_QP_MAX : (uint32_t)v);
			return 0;
		case RDMA_RQSIZE:
			rs->rq_size = (uint16_t)((uint32_t)v > RS_QP_MAX ? RS_QP_MAX : (uint32_t)v);
			return 0;
		case RDMA_INLINE:
			rs->sq_inline = (uint16_t)((uint32_t)v > RS_QP_MAX ? RS_QP_MAX : (uint32_t)v);
			return 0;
		case RDMA_IOMAPSIZE:
			rs->target_iomap_size = (uint16_t)rs_unscale(rs_scale(v < 0 ? 0 : v > 0xFFFF ? 0xFFFF : v, 8), 8);
			return 0;
		case RDMA_ROUTE:
			return ERR(ENOTSUP); /* paths are the NIC's CM's */
		default:
			return ERR(ENOTSUP);
		}
	default:
		return ERR(ENOTSUP);
	}
}

static int put_int(void *optval, socklen_t *optlen, int v)
{
	if (!optval || !optlen || *optlen < sizeof(int))
		return ERR(EINVAL);
	*(int *)optval = v;
	*optlen = sizeof(int);
	return 0;
}

int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			return put_int(optval, optlen, !!(rs->so_opts & (1ULL << optname)));
		case SO_RCVBUF:
			return put_int(optval, optlen, (int)rs->rbuf_size);
		case SO_SNDBUF:
			return put_int(optval, optlen, (int)rs->sbuf_size);
		case SO_LINGER:
			if (!optval || !optlen || *optlen < sizeof(struct linger))
				return ERR(EINVAL);
			*(struct linger *)optval = (struct linger){.l_onoff = !(rs->so_opts & (1ULL << optname))};
			*optlen = sizeof(struct linger);
			return 0;
		case SO_ERROR: {
			if (rs->state & RS_OPENING)
				finish_connect(rs, 1);
			int e = rs->err;
			rs->err = 0;
			return put_int(optval, optlen, e);
		}
		case SO_TYPE:
			return put_int(optval, optlen, SOCK_STREAM);
		default:
			return ERR(ENOTSUP);
		}
	case IPPROTO_IP:
		if (optname != IP_TOS)
			return ERR(ENOTSUP);
		return put_int(optval, optlen, rs->tos);
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
			return put_int(optval, optlen, 1);
		case TCP_KEEPIDLE:
			return put_int(optval, optlen, (int)rs->keepalive_time);
		case TCP_NODELAY:
			return put_int(optval, optlen, !!(rs->tcp_opts & (1ULL << optname)));
		case TCP_MAXSEG:
			return put_int(optval, optlen, rs->id->route.num_paths ? 1 << (7 + rs->id->route.path_rec->mtu) : 2048);
		default:
			return ERR(ENOTSUP);
		}
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY)
			return ERR(ENOTSUP);
		return put_int(optval, optlen, !!(rs->ipv6_opts & (1ULL << optname)));
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			return put_int(optval, optlen, rs->sq_size);
		case RDMA_RQSIZE:
			return put_int(optval, optlen, rs->rq_size);
		case RDMA_INLINE:
			return put_int(optval, optlen, rs->sq_inline);
		case RDMA_IOMAPSIZE:
			return put_int(optval, optlen, rs->target_iomap_size);
		default:
			return ERR(ENOTSUP);
		}
	default:
		return ERR(ENOTSUP);
	}
}

int rfcntl(int socket, int cmd, ...)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	va_list ap;
	va_start(ap, cmd);
	int arg = 0;
	if (cmd == F_SETFL || cmd == F_SETFD)
		arg = va_arg(ap, int);
	va_end(ap);
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		rs->nonblock = !!(arg & O_NONBLOCK);
		return 0;
	case F_GETFD:
		return rs->fdflags;
	case F_SETFD:
		rs->fdflags = arg & FD_CLOEXEC;
		return 0;
	default:
		return ERR(ENOTSUP);
	}
}

/* --- keepalive: one thread sends each socket's KEEPALIVE when due --- */

static pthread_mutex_t ka_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ka_cond = PTHREAD_COND_INITIALIZER;
static struct rsock **ka_socks;
static int ka_n, ka_cap, ka_running;

static uint64_t now_ms(void) { return now_us() / 1000; }

static void *ka_run(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ka_lock);
	while (ka_n) {
		uint64_t now = now_ms(), next = UINT64_MAX;
		for (int i = 0; i < ka_n; i++) {
			struct rsock *rs = ka_socks[i];
			if (rs->keepalive_due <= now) {
				/* A zero-length WRITE with immediate: an RC QP whose peer
				 * is gone fails it, and the socket learns. */
				pthread_mutex_lock(&rs->cqlock);
				if ((rs->state & RS_CONNECTED) && ctrl_avail(rs)) {
					rs->ctrl_seqno++;
					post_msg(rs, MSG(OP_CTRL, CTRL_KEEPALIVE));
				}
				pthread_mutex_unlock(&rs->cqlock);
				rs->keepalive_due = now + (uint64_t)rs->keepalive_time * 1000;
			}
			if (rs->keepalive_due < next)
				next = rs->keepalive_due;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t wait = next - now;
		ts.tv_sec += wait / 1000;
		ts.tv_nsec += (wait % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&ka_cond, &ka_lock, &ts);
	}
	ka_running = 0;
	pthread_mutex_unlock(&ka_lock);
	return NULL;
}

static int keepalive_add(struct rsock *rs)
{
	if (!rs->keepalive_time) {
		FILE *f = fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "r");
		if (!f || fscanf(f, "%u", &rs->keepalive_time) != 1 || !rs->keepalive_time)
			rs->keepalive_time = 7200;
		if (f)
			fclose(f);
	}
	pthread_mutex_lock(&ka_lock);
	rs->keepalive_due = now_ms() + (uint64_t)rs->keepalive_time * 1000;
	if (!rs->keepalive) {
		if (ka_n == ka_cap) {
			int cap = ka_cap ? 2 * ka_cap : 16;
			struct rsock **s = realloc(ka_socks, cap * sizeof *s);
			if (!s) {
				pthread_mutex_unlock(&ka_lock);
				return ERR(ENOMEM);
			}
			ka_socks = s;
			ka_cap = cap;
		}
		ka_socks[ka_n++] = rs;
		rs->keepalive = 1;
	}
	if (!ka_running) {
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_destroy(&ka_cond);
		pthread_cond_init(&ka_cond, &ca);
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, ka_run, NULL)) {
			ka_socks[--ka_n] = NULL;
			rs->keepalive = 0;
			pthread_mutex_unlock(&ka_lock);
			return ERR(EAGAIN);
		}
		ka_running = 1;
	}
	pthread_cond_signal(&ka_cond);
	pthread_mutex_unlock(&ka_lock);
	return 0;
}

static void keepalive_remove(struct rsock *rs)
{
	pthread_mutex_lock(&ka_lock);
	for (int i = 0; i < ka_n; i++)
		if (ka_socks[i] == rs) {
			ka_socks[i] = ka_socks[--ka_n];
			break;
		}
	rs->keepalive = 0;
	pthread_cond_signal(&ka_cond);
	pthread_mutex_unlock(&ka_lock);
}

/* --- iomap: regions the peer writes directly --- */

off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)flags;
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	if (!rs->id->pd || (prot & ~(PROT_WRITE | PROT_NONE)) || !buf || !len)
		return ERR(EINVAL);
	if (!rs->cq)
		return ERR(ENOTCONN); /* the peer's table is known once connecting */
	pthread_mutex_lock(&rs->maplock);
	int index = -1;
	if (prot & PROT_WRITE) {
		if (!rs->remote_slots && rs->remote_iomap.length)
			rs->remote_slots = calloc(rs->remote_iomap.length, sizeof *rs->remote_slots);
		for (uint32_t i = 0; rs->remote_slots && i < rs->remote_iomap.length; i++)
			if (!rs->remote_slots[i]) {
				index = (int)i;
				break;
			}
		if (index < 0) {
			pthread_mutex_unlock(&rs->maplock);
			return ERR(ENOMEM); /* the peer's table is full (or it has none) */
		}
	}
	struct iomap_mr *m = calloc(1, sizeof *m);
	if (!m) {
		pthread_mutex_unlock(&rs->maplock);
		return ERR(ENOMEM);
	}
	m->mr = ibv_reg_mr(rs->id->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | (prot & PROT_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0));
	if (!m->mr) {
		free(m);
		pthread_mutex_unlock(&rs->maplock);
		return -1;
	}
	if (offset == -1)
		offset = (off_t)(uintptr_t)buf;
	m->offset = (uint64_t)offset;
	m->index = index;
	m->sent = index < 0;
	if (index >= 0)
		rs->remote_slots[index] = m;
	m->next = rs->iomaps;
	rs->iomaps = m;
	pthread_mutex_unlock(&rs->maplock);
	return offset;
}

int riounmap(int socket, void *buf, size_t len)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return ERR(EBADF);
	pthread_mutex_lock(&rs->maplock);
	for (struct iomap_mr **p = &rs->iomaps; *p; p = &(*p)->next) {
		struct iomap_mr *m = *p;
		if (m->mr->addr != buf || m->mr->length != len)
			continue;
		*p = m->next;
		if (m->index >= 0)
			rs->remote_slots[m->index] = NULL;
		ibv_dereg_mr(m->mr);
		free(m);
		pthread_mutex_unlock(&rs->maplock);
		return 0;
	}
	pthread_mutex_unlock(&rs->maplock);
	return ERR(EINVAL);
}

/* send_iomaps publishes, in order, the regions riomap made since the last
 * send: each a WRITE of {offset, sge} into the peer's table. */
static int send_iomaps(struct rsock *rs, int flags)
{
	int ret = 0;
	pthread_mutex_lock(&rs->maplock);
	for (struct iomap_mr *m = rs->iomaps; m && !ret; m = m->next) {
		if (m->sent)
			continue;
		if ((ret = wait_send(rs, flags)))
			break;
		struct rs_iomap iom = {.offset = m->offset,
				       .sge = {.addr = (uintptr_t)m->mr->addr, .key = m->mr->rkey, .length = (uint32_t)m->mr->length}};
		if (rs->swap) {
			iom.offset = __builtin_bswap64(iom.offset);
			iom.sge.addr = __builtin_bswap64(iom.sge.addr);
			iom.sge.key = __builtin_bswap32(iom.sge.key);
			iom.sge.length = __builtin_bswap32(iom.sge.length);
		}
		pthread_mutex_lock(&rs->cqlock);
		struct iovec v = {.iov_base = &iom, .iov_len = sizeof iom};
		struct gather g = {.iov = &v, .iovcnt = 1};
		struct ibv_sge sgl[2];
		int sflags, n = stage(rs, &g, sizeof iom, sgl, &sflags);
		rs->sseq_no++;
		rs->sqe_avail--;
		rs->sbuf_avail -= sizeof iom;
		uint32_t msg = MSG(OP_IOMAP_SGL, m->index);
		ret = post_write(rs, sgl, n, msg, msg, 1, sflags, rs->remote_iomap.addr + m->index * sizeof(struct rs_iomap),
				 rs->remote_iomap.key);
		pthread_mutex_unlock(&rs->cqlock);
		m->sent = 1;
	}
	pthread_mutex_unlock(&rs->maplock);
	return ret;
}

static volatile struct rs_iomap *find_iomap(struct rsock *rs, uint64_t offset)
{
	for (int i = 0; i < rs->target_iomap_size; i++) {
		volatile struct rs_iomap *m = &rs->target_iomap[i];
		if (m->sge.length && offset >= m->offset && offset < m->offset + m->sge.length)
			return m;
	}
	return NULL;
}

size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsock *rs = lookup(socket);
	if (!rs)
		return (size_t)ERR(EBADF);
	if (!(rs->state & RS_CONNECTED))
		return (size_t)ERR(ENOTCONN);
	if (send_iomaps(rs, flags))
		return (size_t)-1;
	size_t left = count;
	uint32_t olen = RS_OLAP_START;
	int ret = 0;
	struct iovec v = {.iov_base = (void *)buf, .iov_len = count};
	struct gather g = {.iov = &v, .iovcnt = 1};
	pthread_mutex_lock(&rs->slock);
	while (left) {
		volatile struct rs_iomap *iom = find_iomap(rs, (uint64_t)offset);
		if (!iom) {
			if (left == count)
				ret = ERR(EINVAL); /* no region of the peer there */
			break;
		}
		if ((ret = wait_send(rs, flags)))
			break;
		pthread_mutex_lock(&rs->cqlock);
		uint32_t x = xfer_size(rs, &olen, left, iom->offset + iom->sge.length - (uint64_t)offset);
		struct ibv_sge sgl[2];
		int sflags, n = stage(rs, &g, x, sgl, &sflags);
		rs->sqe_avail--;
		rs->sbuf_avail -= x;
		ret = post_write(rs, sgl, n, MSG(OP_WRITE, x), 0, 0, sflags, iom->sge.addr + (uint64_t)offset - iom->offset,
				 iom->sge.key);
		pthread_mutex_unlock(&rs->cqlock);
		if (ret)
			break;
		left -= x;
		offset += x;
	}
	pthread_mutex_unlock(&rs->slock);
	return ret && left == count ? (size_t)ret : count - left;
}
