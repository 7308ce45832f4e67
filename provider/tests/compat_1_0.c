/*
 * A program of libibverbs' IBVERBS_1.0 ABI against rnic's
 * libibverbs.so.1 (cmd/rnic/abi_test.go runs it, the first two devices
 * being two NICs). It declares the 1.0 structures and calls itself and
 * binds each call to its @IBVERBS_1.0 version with .symver, as a program
 * linked against libibverbs 1.0 imports them, then: lists and opens the
 * devices, queries them, makes PDs, MRs, CQs (one with a completion
 * channel), an SRQ and RC and UD QPs, takes the RC QPs to RTS, and posts
 * and polls through the 1.0 context's ops (ibv_post_send and the others
 * were inline in 1.0: ctx->ops.post_send): a chained RDMA WRITE and SEND
 * with immediate into the SRQ, a SEND back into a QP's receive queue, a
 * completion event, the SRQ's limit event, UD SENDs both ways through 1.0
 * AHs; and destroys it all. Then the calls of rnic_str.c with known
 * values (rdma-core 44's), ibv_init_ah_from_wc on the UD receive's GRH,
 * without a GRH and on made-up headers, and ibv_reg_mr_iova by an RDMA
 * WRITE to its IOVA. Prints "ok" and exits 0, or says what failed and
 * exits 1.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAIL(...) do { fprintf(stderr, "compat_1_0: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)

/* --- The IBVERBS_1.0 ABI, as a program of it sees it --- */

struct ibv_context_1_0;
struct ibv_ah_1_0;

struct ibv_device_1_0 {
	void *obsolete_sysfs_dev, *obsolete_sysfs_ibdev;
	struct ibv_device *real_device;
	void *ops[2];
};

struct ibv_pd_1_0 {
	struct ibv_context_1_0 *context;
	uint32_t handle;
	struct ibv_pd *real_pd; /* rdma-core's, where 1.0 had nothing: only the ibv_reg_mr_iova check uses it */
};

struct ibv_mr_1_0 {
	struct ibv_context_1_0 *context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle, lkey, rkey;
};

struct ibv_srq_1_0 {
	struct ibv_context_1_0 *context;
	void *srq_context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
};

struct ibv_cq_1_0 {
	struct ibv_context_1_0 *context;
	void *cq_context;
	uint32_t handle;
	int cqe;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed, async_events_completed;
};

struct ibv_qp_init_attr_1_0 {
	void *qp_context;
	struct ibv_cq_1_0 *send_cq, *recv_cq;
	struct ibv_srq_1_0 *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;
};

struct ibv_qp_1_0 {
	struct ibv_context_1_0 *context;
	void *qp_context;
	struct ibv_pd_1_0 *pd;
	struct ibv_cq_1_0 *send_cq, *recv_cq;
	struct ibv_srq_1_0 *srq;
	uint32_t handle, qp_num;
	enum ibv_qp_state state;
	enum ibv_qp_type qp_type;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
};

struct ibv_ah_1_0 {
	struct ibv_context_1_0 *context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle;
};

struct ibv_send_wr_1_0 {
	struct ibv_send_wr_1_0 *next;
	uint64_t wr_id;
	struct ibv_sge *sg_list;
	int num_sge;
	enum ibv_wr_opcode opcode;
	int send_flags;
	uint32_t imm_data;
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr, compare_add, swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct ibv_ah_1_0 *ah;
			uint32_t remote_qpn, remote_qkey;
		} ud;
	} wr;
};

struct ibv_recv_wr_1_0 {
	struct ibv_recv_wr_1_0 *next;
	uint64_t wr_id;
	struct ibv_sge *sg_list;
	int num_sge;
};

struct ibv_comp_channel_1_0 {
	int fd;
};

struct ibv_context_ops_1_0 {
	void *query_device, *query_port, *alloc_pd, *dealloc_pd, *reg_mr, *dereg_mr, *create_cq;
	int (*poll_cq)(struct ibv_cq_1_0 *cq, int num_entries, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq_1_0 *cq, int solicited_only);
	void *cq_event, *resize_cq, *destroy_cq, *create_srq, *modify_srq, *query_srq, *destroy_srq;
	int (*post_srq_recv)(struct ibv_srq_1_0 *srq, struct ibv_recv_wr_1_0 *wr, struct ibv_recv_wr_1_0 **bad);
	void *create_qp, *query_qp, *modify_qp, *destroy_qp;
	int (*post_send)(struct ibv_qp_1_0 *qp, struct ibv_send_wr_1_0 *wr, struct ibv_send_wr_1_0 **bad);
	int (*post_recv)(struct ibv_qp_1_0 *qp, struct ibv_recv_wr_1_0 *wr, struct ibv_recv_wr_1_0 **bad);
	void *create_ah, *destroy_ah, *attach_mcast, *detach_mcast;
};

struct ibv_context_1_0 {
	struct ibv_device_1_0 *device;
	struct ibv_context_ops_1_0 ops;
	int cmd_fd, async_fd, num_comp_vectors;
	void *abi_compat;
};

/* 1.0's struct ibv_qp_attr ended before rate_limit, its ibv_port_attr
 * before link_layer: the library must write no further. */
enum { QP_ATTR_1_0 = offsetof(struct ibv_qp_attr, rate_limit), PORT_ATTR_1_0 = offsetof(struct ibv_port_attr, link_layer) };

/* The 1.0 calls, each bound to its IBVERBS_1.0 version. */
#define V10(ret, name, ...)                 \
	ret v10_##name(__VA_ARGS__); \
	__asm__(".symver v10_" #name ", ibv_" #name "@IBVERBS_1.0")

V10(struct ibv_device_1_0 **, get_device_list, int *num);
V10(void, free_device_list, struct ibv_device_1_0 **list);
V10(const char *, get_device_name, struct ibv_device_1_0 *device);
V10(uint64_t, get_device_guid, struct ibv_device_1_0 *device);
V10(struct ibv_context_1_0 *, open_device, struct ibv_device_1_0 *device);
V10(int, close_device, struct ibv_context_1_0 *context);
V10(int, get_async_event, struct ibv_context_1_0 *context, struct ibv_async_event *event);
V10(void, ack_async_event, struct ibv_async_event *event);
V10(int, query_device, struct ibv_context_1_0 *context, struct ibv_device_attr *attr);
V10(int, query_port, struct ibv_context_1_0 *context, uint8_t port, void *attr);
V10(int, query_gid, struct ibv_context_1_0 *context, uint8_t port, int index, union ibv_gid *gid);
V10(int, query_pkey, struct ibv_context_1_0 *context, uint8_t port, int index, uint16_t *pkey);
V10(struct ibv_pd_1_0 *, alloc_pd, struct ibv_context_1_0 *context);
V10(int, dealloc_pd, struct ibv_pd_1_0 *pd);
V10(struct ibv_mr_1_0 *, reg_mr, struct ibv_pd_1_0 *pd, void *addr, size_t length, int access);
V10(int, dereg_mr, struct ibv_mr_1_0 *mr);
V10(struct ibv_cq_1_0 *, create_cq, struct ibv_context_1_0 *context, int cqe, void *cq_context,
    struct ibv_comp_channel_1_0 *channel, int comp_vector);
V10(int, resize_cq, struct ibv_cq_1_0 *cq, int cqe);
V10(int, destroy_cq, struct ibv_cq_1_0 *cq);
V10(int, get_cq_event, struct ibv_comp_channel_1_0 *channel, struct ibv_cq_1_0 **cq, void **cq_context);
V10(void, ack_cq_events, struct ibv_cq_1_0 *cq, unsigned int nevents);
V10(struct ibv_srq_1_0 *, create_srq, struct ibv_pd_1_0 *pd, struct ibv_srq_init_attr *attr);
V10(int, modify_srq, struct ibv_srq_1_0 *srq, struct ibv_srq_attr *attr, int mask);
V10(int, query_srq, struct ibv_srq_1_0 *srq, struct ibv_srq_attr *attr);
V10(int, destroy_srq, struct ibv_srq_1_0 *srq);
V10(struct ibv_qp_1_0 *, create_qp, struct ibv_pd_1_0 *pd, struct ibv_qp_init_attr_1_0 *attr);
V10(int, query_qp, struct ibv_qp_1_0 *qp, void *attr, int mask, struct ibv_qp_init_attr_1_0 *init_attr);
V10(int, modify_qp, struct ibv_qp_1_0 *qp, void *attr, int mask);
V10(int, destroy_qp, struct ibv_qp_1_0 *qp);
V10(struct ibv_ah_1_0 *, create_ah, struct ibv_pd_1_0 *pd, struct ibv_ah_attr *attr);
V10(int, destroy_ah, struct ibv_ah_1_0 *ah);
V10(int, attach_mcast, struct ibv_qp_1_0 *qp, union ibv_gid *gid, uint16_t lid);

/* The same symbol in both ABIs; the library tells a 1.0 context. */
struct ibv_comp_channel_1_0 *create_comp_channel_1_0(struct ibv_context_1_0 *context) __asm__("ibv_create_comp_channel");
int destroy_comp_channel_1_0(struct ibv_comp_channel_1_0 *channel) __asm__("ibv_destroy_comp_channel");

void register_driver_1_1(const char *name, void *init);
__asm__(".symver register_driver_1_1, ibv_register_driver@IBVERBS_1.1");

/* --- Helpers --- */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* wait_wc polls cq through its context's ops until a completion comes
 * (10 s at most); it must be a success. */
static struct ibv_wc wait_wc(struct ibv_cq_1_0 *cq)
{
	struct ibv_wc wc;
	double end = now() + 10;
	for (;;) {
		int n = cq->context->ops.poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "poll_cq: %d", n);
		if (n == 1)
			break;
		CHECK(now() < end, "no completion in 10 s");
	}
	CHECK(wc.status == IBV_WC_SUCCESS, "completion %llu: %s", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	return wc;
}

/* readable waits up to 10 s for fd to be readable. */
static void readable(int fd, const char *what)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	CHECK(poll(&p, 1, 10000) == 1, "%s: nothing in 10 s", what);
}

static void modify(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *a, int mask, enum ibv_qp_state want)
{
	int r = v10_modify_qp(qp, a, mask);
	CHECK(r == 0, "modify_qp to %d: %s", want, strerror(r));
	CHECK(qp->state == want, "the 1.0 QP's state is %d after modify_qp, want %d", qp->state, want);
}

/* connect_rc takes an RC QP to RTS towards the QP peer_qpn at dgid. */
static void connect_rc(struct ibv_qp_1_0 *qp, uint32_t peer_qpn, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, IBV_QPS_INIT);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	modify(qp, &a,
	       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		       IBV_QP_MIN_RNR_TIMER,
	       IBV_QPS_RTR);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
	       IBV_QPS_RTS);
}

enum { QKEY = 0x11111111, UD_HOP_LIMIT = 37, UD_TCLASS = 0x28 };

static void connect_ud(struct ibv_qp_1_0 *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, IBV_QPS_INIT);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	modify(qp, &a, IBV_QP_STATE, IBV_QPS_RTR);
	a.qp_state = IBV_QPS_RTS;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, IBV_QPS_RTS);
}

/* One side: a NIC opened through the 1.0 ABI and its objects. */
struct side {
	const char *name;
	struct ibv_context_1_0 *ctx;
	struct ibv_pd_1_0 *pd;
	struct ibv_mr_1_0 *mr;
	struct ibv_cq_1_0 *cq;
	struct ibv_comp_channel_1_0 *ch; /* b's */
	struct ibv_srq_1_0 *srq;	 /* b's: its RC QP receives from it */
	struct ibv_qp_1_0 *rc, *ud;
	union ibv_gid gid;
	int cq_cookie, qp_cookie, srq_cookie;
	char buf[16384];
};

static struct ibv_qp_1_0 *make_qp(struct side *s, enum ibv_qp_type type, struct ibv_srq_1_0 *srq)
{
	struct ibv_qp_init_attr_1_0 ia = {
		.qp_context = &s->qp_cookie, .send_cq = s->cq, .recv_cq = s->cq, .srq = srq, .qp_type = type,
		.cap = {.max_send_wr = 8, .max_recv_wr = srq ? 0 : 8, .max_send_sge = 1, .max_recv_sge = srq ? 0 : 1},
	};
	struct ibv_qp_1_0 *qp = v10_create_qp(s->pd, &ia);
	CHECK(qp, "%s: create_qp: %m", s->name);
	CHECK(qp->qp_num && qp->context == s->ctx && qp->pd == s->pd && qp->send_cq == s->cq && qp->srq == srq &&
		      qp->qp_context == &s->qp_cookie && qp->qp_type == type && qp->state == IBV_QPS_RESET,
	      "%s: the 1.0 QP's fields", s->name);
	CHECK(ia.cap.max_send_wr >= 8, "%s: create_qp did not give back the caps", s->name);
	return qp;
}

static void open_side(struct side *s, struct ibv_device_1_0 *dev, int channel)
{
	s->name = v10_get_device_name(dev);
	CHECK((s->ctx = v10_open_device(dev)), "open_device %s: %m", s->name);
	CHECK(s->ctx->device == dev && s->ctx->async_fd >= 0 && s->ctx->num_comp_vectors >= 1, "%s: the 1.0 context's fields", s->name);
	CHECK(s->ctx->ops.post_send && s->ctx->ops.post_recv && s->ctx->ops.poll_cq && s->ctx->ops.req_notify_cq &&
		      s->ctx->ops.post_srq_recv,
	      "%s: the 1.0 context's data path ops", s->name);

	struct ibv_device_attr da;
	int r = v10_query_device(s->ctx, &da);
	CHECK(r == 0 && da.phys_port_cnt == 1 && da.max_qp > 0 && da.max_cqe > 0, "%s: query_device: %d", s->name, r);
	unsigned char pa[sizeof(struct ibv_port_attr)];
	memset(pa, 0xab, sizeof pa);
	r = v10_query_port(s->ctx, 1, pa);
	struct ibv_port_attr p;
	memcpy(&p, pa, sizeof p);
	CHECK(r == 0 && p.state == IBV_PORT_ACTIVE && p.gid_tbl_len > 1, "%s: query_port: %d", s->name, r);
	for (size_t i = PORT_ATTR_1_0; i < sizeof pa; i++)
		CHECK(pa[i] == 0xab, "%s: query_port wrote byte %zu, beyond 1.0's struct ibv_port_attr", s->name, i);
	CHECK(v10_query_gid(s->ctx, 1, 1, &s->gid) == 0, "%s: query_gid", s->name);
	CHECK(s->gid.raw[10] == 0xff && s->gid.raw[11] == 0xff && s->gid.raw[12] == 127, "%s: GID 1 is not IPv4-mapped 127.x", s->name);
	uint16_t pkey;
	CHECK(v10_query_pkey(s->ctx, 1, 0, &pkey) == 0 && pkey == 0xffff, "%s: query_pkey", s->name);

	CHECK((s->pd = v10_alloc_pd(s->ctx)) && s->pd->context == s->ctx, "%s: alloc_pd: %m", s->name);
	s->mr = v10_reg_mr(s->pd, s->buf, sizeof s->buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(s->mr && s->mr->pd == s->pd && s->mr->context == s->ctx && s->mr->lkey && s->mr->rkey, "%s: reg_mr: %m", s->name);
	if (channel) {
		CHECK((s->ch = create_comp_channel_1_0(s->ctx)) && s->ch->fd >= 0, "%s: create_comp_channel: %m", s->name);
	}
	s->cq = v10_create_cq(s->ctx, 16, &s->cq_cookie, s->ch, 0);
	CHECK(s->cq && s->cq->context == s->ctx && s->cq->cq_context == &s->cq_cookie && s->cq->cqe >= 16, "%s: create_cq: %m", s->name);
	r = v10_resize_cq(s->cq, 64);
	CHECK(r == 0 && s->cq->cqe >= 64, "%s: resize_cq: %d, cqe %d", s->name, r, s->cq->cqe);
}

/* --- rnic_str.c --- */

static void strings_and_rates(void)
{
	struct {
		const char *got, *want;
	} s[] = {
		{ibv_event_type_str(IBV_EVENT_DEVICE_FATAL), "local catastrophic error"},
		{ibv_event_type_str(IBV_EVENT_CQ_ERR), "CQ error"},
		{ibv_event_type_str(IBV_EVENT_SRQ_LIMIT_REACHED), "SRQ limit reached"},
		{ibv_event_type_str(IBV_EVENT_WQ_FATAL), "WQ fatal"},
		{ibv_event_type_str((enum ibv_event_type)99), "unknown"},
		{ibv_event_type_str((enum ibv_event_type)-1), "unknown"},
		{ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter"},
		{ibv_node_type_str(IBV_NODE_RNIC), "iWARP NIC"},
		{ibv_node_type_str(IBV_NODE_UNSPECIFIED), "unspecified"},
		{ibv_node_type_str(IBV_NODE_UNKNOWN), "unknown"},
		{ibv_node_type_str((enum ibv_node_type)0), "unknown"},
		{ibv_port_state_str(IBV_PORT_NOP), "no state change (NOP)"},
		{ibv_port_state_str(IBV_PORT_ACTIVE), "active"},
		{ibv_port_state_str(IBV_PORT_ACTIVE_DEFER), "active defer"},
		{ibv_port_state_str((enum ibv_port_state)6), "unknown"},
	};
	for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
		CHECK(s[i].got && !strcmp(s[i].got, s[i].want), "string %zu: \"%s\", want \"%s\"", i, s[i].got, s[i].want);

	struct {
		int got, want;
	} n[] = {
		{ibv_rate_to_mbps(IBV_RATE_100_GBPS), 103125}, /* rdma-core's: four 25.78125 Gb/s lanes */
		{ibv_rate_to_mbps(IBV_RATE_2_5_GBPS), 2500},
		{ibv_rate_to_mbps(IBV_RATE_14_GBPS), 14062},
		{ibv_rate_to_mbps(IBV_RATE_1200_GBPS), 1275000},
		{ibv_rate_to_mbps(IBV_RATE_MAX), -1},
		{ibv_rate_to_mbps((enum ibv_rate)1), -1},
		{mbps_to_ibv_rate(103125), IBV_RATE_100_GBPS},
		{mbps_to_ibv_rate(25781), IBV_RATE_25_GBPS},
		{mbps_to_ibv_rate(100000), IBV_RATE_MAX},
		{ibv_rate_to_mult(IBV_RATE_10_GBPS), 4},
		{ibv_rate_to_mult(IBV_RATE_2_5_GBPS), 1},
		{ibv_rate_to_mult(IBV_RATE_400_GBPS), 160},
		{ibv_rate_to_mult(IBV_RATE_100_GBPS), -1}, /* no multiple of 2.5 Gb/s */
		{ibv_rate_to_mult(IBV_RATE_MAX), -1},
		{mult_to_ibv_rate(4), IBV_RATE_10_GBPS},
		{mult_to_ibv_rate(11), IBV_RATE_28_GBPS},
		{mult_to_ibv_rate(480), IBV_RATE_1200_GBPS},
		{mult_to_ibv_rate(3), IBV_RATE_MAX},
		{mult_to_ibv_rate(0), IBV_RATE_MAX},
	};
	for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
		CHECK(n[i].got == n[i].want, "rate %zu: %d, want %d", i, n[i].got, n[i].want);
	/* Every rate that converts converts back. */
	for (int r = IBV_RATE_2_5_GBPS; r <= IBV_RATE_1200_GBPS; r++) {
		CHECK((int)mbps_to_ibv_rate(ibv_rate_to_mbps(r)) == r, "rate %d: Mb/s and back", r);
		if (ibv_rate_to_mult(r) > 0)
			CHECK((int)mult_to_ibv_rate(ibv_rate_to_mult(r)) == r, "rate %d: multiple and back", r);
	}
}

static int same_gid(const void *a, const void *b) { return !memcmp(a, b, 16); }

/* init_ah_cases runs ibv_init_ah_from_wc on the UD receive wc (from a,
 * whose GRH area is grh) on b's device c, without a GRH, and on made-up
 * headers; returns the address vector to a. */
static struct ibv_ah_attr init_ah_cases(struct ibv_context *c, const struct ibv_wc *wc, const uint8_t *grh, const union ibv_gid *a_gid,
					const union ibv_gid *b_gid)
{
	struct ibv_wc w = *wc;
	struct ibv_ah_attr ah;
	uint8_t g[40];
	memcpy(g, grh, 40);
	/* RoCE v2 over IPv4: the IPv4 header in the last 20 bytes. */
	CHECK(wc->wc_flags & IBV_WC_GRH, "the UD receive has no GRH");
	CHECK(g[20] == 0x45, "the GRH area holds no IPv4 header (%02x)", g[20]);
	memset(&ah, 0x5a, sizeof ah);
	CHECK(ibv_init_ah_from_wc(c, 1, &w, (struct ibv_grh *)g, &ah) == 0, "init_ah_from_wc: %m");
	/* The hop limit and traffic class are the IPv4 header's TTL and TOS:
	 * those a's AH sent with (UD_HOP_LIMIT, UD_TCLASS). */
	CHECK(ah.is_global == 1 && ah.port_num == 1 && ah.grh.sgid_index == 1 && same_gid(&ah.grh.dgid, a_gid) &&
		      ah.grh.hop_limit == UD_HOP_LIMIT && ah.grh.traffic_class == UD_TCLASS && ah.dlid == wc->slid && ah.sl == wc->sl,
	      "init_ah_from_wc (IPv4): is_global %d port %d sgid_index %d hop_limit %d tclass %#x", ah.is_global, ah.port_num,
	      ah.grh.sgid_index, ah.grh.hop_limit, ah.grh.traffic_class);
	struct ibv_ah_attr back = ah;

	/* Without a GRH: the LID fields, nothing global. */
	w.wc_flags = 0;
	w.slid = 0x1234;
	w.sl = 3;
	w.dlid_path_bits = 5;
	memset(&ah, 0x5a, sizeof ah);
	CHECK(ibv_init_ah_from_wc(c, 1, &w, NULL, &ah) == 0, "init_ah_from_wc without GRH: %m");
	struct ibv_global_route zero = {0};
	CHECK(!ah.is_global && ah.dlid == 0x1234 && ah.sl == 3 && ah.src_path_bits == 5 && ah.port_num == 1 && ah.static_rate == 0 &&
		      !memcmp(&ah.grh, &zero, sizeof zero),
	      "init_ah_from_wc without GRH: is_global %d dlid %#x sl %d path bits %d", ah.is_global, ah.dlid, ah.sl, ah.src_path_bits);

	/* RoCE v2 over IPv6: an IPv6 header to b's link-local GID (index 0). */
	union ibv_gid ll;
	CHECK(ibv_query_gid(c, 1, 0, &ll) == 0, "query_gid 0");
	struct ibv_grh h6 = {.version_tclass_flow = htobe32(6u << 28 | 0x2bu << 20 | 0x12345), .next_hdr = 17, .hop_limit = 33};
	memcpy(h6.sgid.raw, "\xfe\x80\0\0\0\0\0\0\x02\x11\x22\xff\xfe\x33\x44\x55", 16);
	h6.dgid = ll;
	w = *wc;
	memset(&ah, 0, sizeof ah);
	CHECK(ibv_init_ah_from_wc(c, 1, &w, &h6, &ah) == 0, "init_ah_from_wc (IPv6): %m");
	CHECK(ah.is_global && ah.grh.sgid_index == 0 && same_gid(&ah.grh.dgid, &h6.sgid) && ah.grh.hop_limit == 33 &&
		      ah.grh.traffic_class == 0x2b && ah.grh.flow_label == 0x12345,
	      "init_ah_from_wc (IPv6): sgid_index %d hop_limit %d tclass %#x flow %#x", ah.grh.sgid_index, ah.grh.hop_limit,
	      ah.grh.traffic_class, ah.grh.flow_label);
	/* IPv6 with b's IPv4-mapped GID finds index 1. */
	h6.dgid = *b_gid;
	CHECK(ibv_init_ah_from_wc(c, 1, &w, &h6, &ah) == 0 && ah.grh.sgid_index == 1, "init_ah_from_wc (IPv6, GID 1)");
	/* The IB next header (RoCE v1): rnic's GIDs are all RoCE v2. */
	h6.next_hdr = 0x1b;
	errno = 0;
	CHECK(ibv_init_ah_from_wc(c, 1, &w, &h6, &ah) == -1 && errno == ENOENT, "init_ah_from_wc (RoCE v1): errno %d", errno);
	/* Neither UDP nor the IB next header. */
	h6.next_hdr = 6;
	errno = 0;
	CHECK(ibv_init_ah_from_wc(c, 1, &w, &h6, &ah) == -1 && errno == EPROTONOSUPPORT, "init_ah_from_wc (TCP): errno %d", errno);
	/* A multicast destination. */
	h6.next_hdr = 17;
	memcpy(h6.dgid.raw, "\xff\x02\0\0\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
	errno = 0;
	CHECK(ibv_init_ah_from_wc(c, 1, &w, &h6, &ah) == -1 && errno == EINVAL, "init_ah_from_wc (multicast): errno %d", errno);
	/* A GID that is not the port's. */
	memcpy(h6.dgid.raw, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
	errno = 0;
	CHECK(ibv_init_ah_from_wc(c, 1, &w, &h6, &ah) == -1 && errno == ENOENT, "init_ah_from_wc (another GID): errno %d", errno);
	/* IPv4 to a multicast address. */
	memcpy(g, grh, 40);
	g[36] = 239;
	errno = 0;
	CHECK(ibv_init_ah_from_wc(c, 1, &w, (struct ibv_grh *)g, &ah) == -1 && errno == EINVAL, "init_ah_from_wc (IPv4 multicast): errno %d",
	      errno);
	/* Neither header. */
	memset(g, 0, sizeof g);
	errno = 0;
	CHECK(ibv_init_ah_from_wc(c, 1, &w, (struct ibv_grh *)g, &ah) == -1 && errno == EPROTONOSUPPORT, "init_ah_from_wc (no header): errno %d",
	      errno);
	return back;
}

int main(void)
{
	strings_and_rates();
	register_driver_1_1("compat_1_0", NULL); /* does nothing, says nothing */

	/* --- Devices --- */
	int n = -1;
	struct ibv_device_1_0 **list = v10_get_device_list(&n);
	CHECK(list && n >= 2, "get_device_list: %d devices, want 2", n);
	CHECK(list[n] == NULL, "the 1.0 list is not NULL-terminated");
	for (int i = 0; i < n; i++)
		CHECK(v10_get_device_guid(list[i]) != 0, "get_device_guid %s", v10_get_device_name(list[i]));
	static struct side a, b;
	open_side(&a, list[0], 0);
	open_side(&b, list[1], 1);
	/* An open device outlives the list (ibv_get_device_list(3)). */
	const char *bname = b.name;
	v10_free_device_list(list);
	CHECK(!strcmp(v10_get_device_name(b.ctx->device), bname), "the open device's name after free_device_list");

	/* --- SRQ (b), RC QPs --- */
	struct ibv_srq_init_attr si = {.srq_context = &b.srq_cookie, .attr = {.max_wr = 8, .max_sge = 1}};
	CHECK((b.srq = v10_create_srq(b.pd, &si)), "create_srq: %m");
	CHECK(b.srq->context == b.ctx && b.srq->pd == b.pd && b.srq->srq_context == &b.srq_cookie && si.attr.max_wr >= 8, "the 1.0 SRQ's fields");
	a.rc = make_qp(&a, IBV_QPT_RC, NULL);
	b.rc = make_qp(&b, IBV_QPT_RC, b.srq);
	connect_rc(a.rc, b.rc->qp_num, &b.gid);
	connect_rc(b.rc, a.rc->qp_num, &a.gid);
	unsigned char qa[sizeof(struct ibv_qp_attr)];
	memset(qa, 0xab, sizeof qa);
	struct ibv_qp_init_attr_1_0 qi;
	CHECK(v10_query_qp(b.rc, qa, IBV_QP_STATE, &qi) == 0, "query_qp");
	for (size_t i = QP_ATTR_1_0; i < sizeof qa; i++)
		CHECK(qa[i] == 0xab, "query_qp wrote byte %zu, beyond 1.0's struct ibv_qp_attr", i);
	CHECK(((struct ibv_qp_attr *)qa)->qp_state == IBV_QPS_RTS && qi.qp_context == &b.qp_cookie && qi.send_cq == b.cq &&
		      qi.recv_cq == b.cq && qi.srq == b.srq && qi.qp_type == IBV_QPT_RC,
	      "query_qp: state %d, or the init attributes do not name the 1.0 objects", ((struct ibv_qp_attr *)qa)->qp_state);

	/* Four receives on the SRQ, in one chained post, and its limit at
	 * four: the first message leaves fewer. */
	struct ibv_sge rsg[4];
	struct ibv_recv_wr_1_0 rw[4], *rbad = NULL;
	for (int i = 0; i < 4; i++) {
		rsg[i] = (struct ibv_sge){.addr = (uintptr_t)b.buf + 1024 * i, .length = 1024, .lkey = b.mr->lkey};
		rw[i] = (struct ibv_recv_wr_1_0){.next = i < 3 ? &rw[i + 1] : NULL, .wr_id = 100 + i, .sg_list = &rsg[i], .num_sge = 1};
	}
	CHECK(b.srq->context->ops.post_srq_recv(b.srq, rw, &rbad) == 0, "post_srq_recv");
	struct ibv_srq_attr sa = {.srq_limit = 4};
	CHECK(v10_modify_srq(b.srq, &sa, IBV_SRQ_LIMIT) == 0, "modify_srq");
	memset(&sa, 0, sizeof sa);
	CHECK(v10_query_srq(b.srq, &sa) == 0 && sa.srq_limit == 4 && sa.max_wr >= 8, "query_srq: limit %u", sa.srq_limit);

	/* a's receive queue: two receives chained. */
	struct ibv_sge asg[2] = {{.addr = (uintptr_t)a.buf + 8192, .length = 1024, .lkey = a.mr->lkey},
				 {.addr = (uintptr_t)a.buf + 9216, .length = 1024, .lkey = a.mr->lkey}};
	struct ibv_recv_wr_1_0 aw[2] = {{.next = &aw[1], .wr_id = 200, .sg_list = &asg[0], .num_sge = 1},
					{.wr_id = 201, .sg_list = &asg[1], .num_sge = 1}};
	CHECK(a.rc->context->ops.post_recv(a.rc, aw, &rbad) == 0, "post_recv");

	/* b is woken by its completion channel. */
	CHECK(b.cq->context->ops.req_notify_cq(b.cq, 0) == 0, "req_notify_cq");

	/* a: an RDMA WRITE of 4 KiB to b's buf + 8192, then a SEND with
	 * immediate, chained in one post. */
	for (int i = 0; i < 4096; i++)
		a.buf[i] = (char)(i * 7 + 1);
	static const char hello[] = "a SEND with immediate, posted through the 1.0 ABI";
	memcpy(a.buf + 4096, hello, sizeof hello);
	struct ibv_sge wsg = {.addr = (uintptr_t)a.buf, .length = 4096, .lkey = a.mr->lkey};
	struct ibv_sge ssg = {.addr = (uintptr_t)a.buf + 4096, .length = sizeof hello, .lkey = a.mr->lkey};
	struct ibv_send_wr_1_0 sw[2] = {
		{.next = &sw[1], .wr_id = 1, .sg_list = &wsg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		 .wr.rdma = {.remote_addr = (uintptr_t)b.buf + 8192, .rkey = b.mr->rkey}},
		{.wr_id = 2, .sg_list = &ssg, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
		 .imm_data = htobe32(0xc0ffee)},
	};
	struct ibv_send_wr_1_0 *sbad = NULL;
	CHECK(a.rc->context->ops.post_send(a.rc, sw, &sbad) == 0, "post_send");
	struct ibv_wc wc = wait_wc(a.cq);
	CHECK(wc.wr_id == 1 && wc.opcode == IBV_WC_RDMA_WRITE, "the WRITE's completion: wr_id %llu opcode %d", (unsigned long long)wc.wr_id,
	      wc.opcode);
	wc = wait_wc(a.cq);
	CHECK(wc.wr_id == 2 && wc.opcode == IBV_WC_SEND, "the SEND's completion: wr_id %llu opcode %d", (unsigned long long)wc.wr_id, wc.opcode);

	/* b: the completion event names the 1.0 CQ and its context. */
	readable(b.ch->fd, "the completion channel");
	struct ibv_cq_1_0 *ecq = NULL;
	void *ectx = NULL;
	CHECK(v10_get_cq_event(b.ch, &ecq, &ectx) == 0, "get_cq_event: %m");
	CHECK(ecq == b.cq && ectx == &b.cq_cookie, "get_cq_event: not the 1.0 CQ and its context");
	v10_ack_cq_events(b.cq, 1);
	wc = wait_wc(b.cq);
	CHECK(wc.wr_id == 100 && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0xc0ffee &&
		      wc.byte_len == sizeof hello && wc.qp_num == b.rc->qp_num && !memcmp(b.buf, hello, sizeof hello),
	      "the receive on the SRQ: wr_id %llu opcode %d len %u", (unsigned long long)wc.wr_id, wc.opcode, wc.byte_len);
	CHECK(!memcmp(b.buf + 8192, a.buf, 4096), "the RDMA WRITE's data differs");

	/* b: the SRQ's limit event names the 1.0 SRQ (a QP's event before
	 * it, communication established, would name the 1.0 QP). */
	for (int got = 0; !got;) {
		readable(b.ctx->async_fd, "the SRQ's limit event");
		struct ibv_async_event ev;
		CHECK(v10_get_async_event(b.ctx, &ev) == 0, "get_async_event: %m");
		if (ev.event_type == IBV_EVENT_COMM_EST)
			CHECK(ev.element.qp == (void *)b.rc, "the QP event does not name the 1.0 QP");
		else
			CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == (void *)b.srq,
			      "async event \"%s\", not the 1.0 SRQ's limit", ibv_event_type_str(ev.event_type));
		got = ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED;
		v10_ack_async_event(&ev);
	}

	/* b answers with a SEND into a's receive queue. */
	static const char answer[] = "and a SEND back into a QP's receive queue";
	memcpy(b.buf + 12288, answer, sizeof answer);
	struct ibv_sge bsg = {.addr = (uintptr_t)b.buf + 12288, .length = sizeof answer, .lkey = b.mr->lkey};
	struct ibv_send_wr_1_0 bw = {.wr_id = 3, .sg_list = &bsg, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	CHECK(b.rc->context->ops.post_send(b.rc, &bw, &sbad) == 0, "post_send (b)");
	wc = wait_wc(b.cq);
	CHECK(wc.wr_id == 3 && wc.opcode == IBV_WC_SEND, "b's SEND completion");
	wc = wait_wc(a.cq);
	CHECK(wc.wr_id == 200 && wc.opcode == IBV_WC_RECV && wc.byte_len == sizeof answer && !memcmp(a.buf + 8192, answer, sizeof answer),
	      "a's receive: wr_id %llu len %u", (unsigned long long)wc.wr_id, wc.byte_len);

	/* A bad request fails, and bad_wr names the 1.0 request. */
	struct ibv_sge many[2] = {wsg, wsg};
	struct ibv_send_wr_1_0 bad2[2] = {{.next = &bad2[1], .wr_id = 4, .sg_list = &wsg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					   .wr.rdma = {.remote_addr = (uintptr_t)b.buf + 8192, .rkey = b.mr->rkey}},
					  {.wr_id = 5, .sg_list = many, .num_sge = 2, .opcode = IBV_WR_SEND}};
	sbad = NULL;
	CHECK(a.rc->context->ops.post_send(a.rc, bad2, &sbad) != 0 && sbad == &bad2[1], "a post with too many SGEs: bad_wr %p, want %p",
	      (void *)sbad, (void *)&bad2[1]);

	/* Multicast: not supported, through the 1.0 call too. */
	CHECK(v10_attach_mcast(a.rc, &a.gid, 0) == EOPNOTSUPP, "attach_mcast");

	/* --- UD --- */
	a.ud = make_qp(&a, IBV_QPT_UD, NULL);
	b.ud = make_qp(&b, IBV_QPT_UD, NULL);
	connect_ud(a.ud);
	connect_ud(b.ud);
	struct ibv_sge usg = {.addr = (uintptr_t)b.buf + 14336, .length = 1024, .lkey = b.mr->lkey};
	struct ibv_recv_wr_1_0 uw = {.wr_id = 300, .sg_list = &usg, .num_sge = 1};
	CHECK(b.ud->context->ops.post_recv(b.ud, &uw, &rbad) == 0, "post_recv (UD)");
	struct ibv_ah_attr aha = {.is_global = 1, .port_num = 1, .grh = {.dgid = b.gid, .sgid_index = 1, .hop_limit = UD_HOP_LIMIT, .traffic_class = UD_TCLASS}};
	struct ibv_ah_1_0 *ah = v10_create_ah(a.pd, &aha);
	CHECK(ah && ah->pd == a.pd && ah->context == a.ctx, "create_ah: %m");
	static const char dgram[] = "a UD datagram through a 1.0 AH";
	memcpy(a.buf + 12288, dgram, sizeof dgram);
	struct ibv_sge dsg = {.addr = (uintptr_t)a.buf + 12288, .length = sizeof dgram, .lkey = a.mr->lkey};
	struct ibv_send_wr_1_0 dw = {.wr_id = 6, .sg_list = &dsg, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
				     .wr.ud = {.ah = ah, .remote_qpn = b.ud->qp_num, .remote_qkey = QKEY}};
	CHECK(a.ud->context->ops.post_send(a.ud, &dw, &sbad) == 0, "post_send (UD)");
	wc = wait_wc(a.cq);
	CHECK(wc.wr_id == 6 && wc.opcode == IBV_WC_SEND, "the UD SEND's completion");
	wc = wait_wc(b.cq);
	CHECK(wc.wr_id == 300 && wc.src_qp == a.ud->qp_num && wc.byte_len == 40 + sizeof dgram && !memcmp(b.buf + 14336 + 40, dgram, sizeof dgram),
	      "the UD receive: wr_id %llu src_qp %u len %u", (unsigned long long)wc.wr_id, wc.src_qp, wc.byte_len);

	/* ibv_init_ah_from_wc, on b's device opened through the current ABI
	 * (it takes a current context), and the answer through its address. */
	int nn;
	struct ibv_device **now_list = ibv_get_device_list(&nn);
	CHECK(now_list && nn >= 2, "ibv_get_device_list (current)");
	struct ibv_context *bc = NULL;
	for (int i = 0; i < nn; i++)
		if (!strcmp(ibv_get_device_name(now_list[i]), b.name))
			bc = ibv_open_device(now_list[i]);
	CHECK(bc, "ibv_open_device %s (current)", b.name);
	struct ibv_ah_attr back = init_ah_cases(bc, &wc, (const uint8_t *)b.buf + 14336, &a.gid, &b.gid);
	struct ibv_ah_1_0 *bah = v10_create_ah(b.pd, &back);
	CHECK(bah, "create_ah from init_ah_from_wc's attributes: %m");
	struct ibv_sge ausg = {.addr = (uintptr_t)a.buf + 14336, .length = 1024, .lkey = a.mr->lkey};
	struct ibv_recv_wr_1_0 auw = {.wr_id = 301, .sg_list = &ausg, .num_sge = 1};
	CHECK(a.ud->context->ops.post_recv(a.ud, &auw, &rbad) == 0, "post_recv (UD, a)");
	memcpy(b.buf + 12288, answer, sizeof answer);
	struct ibv_send_wr_1_0 bdw = {.wr_id = 7, .sg_list = &bsg, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
				      .wr.ud = {.ah = bah, .remote_qpn = wc.src_qp, .remote_qkey = QKEY}};
	CHECK(b.ud->context->ops.post_send(b.ud, &bdw, &sbad) == 0, "post_send (UD answer)");
	wc = wait_wc(b.cq);
	CHECK(wc.wr_id == 7, "the UD answer's completion");
	wc = wait_wc(a.cq);
	CHECK(wc.wr_id == 301 && wc.src_qp == b.ud->qp_num && !memcmp(a.buf + 14336 + 40, answer, sizeof answer), "the UD answer's receive");

	/* ibv_reg_mr_iova: a region of b's (its PD behind the 1.0 one) named
	 * by an IOVA of its own; a's RDMA WRITE to the IOVA lands in it. */
	static char target[8192];
	const uint64_t iova = 0x7e57000000ull;
	struct ibv_mr *imr = ibv_reg_mr_iova(b.pd->real_pd, target, sizeof target, iova, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(imr && imr->addr == target && imr->length == sizeof target, "ibv_reg_mr_iova: %m");
	struct ibv_send_wr_1_0 iw = {.wr_id = 8, .sg_list = &wsg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				     .wr.rdma = {.remote_addr = iova + 1000, .rkey = imr->rkey}};
	CHECK(a.rc->context->ops.post_send(a.rc, &iw, &sbad) == 0, "post_send (WRITE to the IOVA)");
	/* The failed post's first request went out unsignaled: no completion. */
	wc = wait_wc(a.cq);
	CHECK(wc.wr_id == 8, "the WRITE to the IOVA: wr_id %llu", (unsigned long long)wc.wr_id);
	CHECK(!memcmp(target + 1000, a.buf, 4096), "the WRITE to the IOVA did not land at its offset");
	CHECK(ibv_dereg_mr(imr) == 0, "ibv_dereg_mr (IOVA)");

	/* --- Destroy it all through the 1.0 calls --- */
	CHECK(ibv_close_device(bc) == 0, "ibv_close_device (current)");
	ibv_free_device_list(now_list);
	CHECK(v10_destroy_ah(ah) == 0 && v10_destroy_ah(bah) == 0, "destroy_ah");
	struct side *sides[] = {&a, &b};
	for (int i = 0; i < 2; i++) {
		struct side *s = sides[i];
		CHECK(v10_destroy_qp(s->ud) == 0 && v10_destroy_qp(s->rc) == 0, "%s: destroy_qp", s->name);
		if (s->srq)
			CHECK(v10_destroy_srq(s->srq) == 0, "%s: destroy_srq", s->name);
		CHECK(v10_destroy_cq(s->cq) == 0, "%s: destroy_cq", s->name);
		if (s->ch)
			CHECK(destroy_comp_channel_1_0(s->ch) == 0, "%s: destroy_comp_channel", s->name);
		CHECK(v10_dereg_mr(s->mr) == 0, "%s: dereg_mr", s->name);
		CHECK(v10_dealloc_pd(s->pd) == 0, "%s: dealloc_pd", s->name);
		CHECK(v10_close_device(s->ctx) == 0, "%s: close_device", s->name);
	}
	printf("ok\n");
	return 0;
}
