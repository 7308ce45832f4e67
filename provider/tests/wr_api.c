/*
 * A test of the extended send API (ibv_wr_*) through rnic's
 * libibverbs.so.1: two QPs on two NICs (the first two devices), created
 * with ibv_create_qp_ex, connected to each other in this process; an
 * RDMA WRITE and an inline SEND built with ibv_wr_*, each checked on
 * arrival. Prints "ok" and exits 0, or says what failed and exits 1.
 */
#include "pair.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	union ibv_gid gid;
	char buf[8192];
};

static void open_side(struct ibv_device *dev, struct side *s)
{
	if (!(s->ctx = ibv_open_device(dev)))
		FAIL("open %s", ibv_get_device_name(dev));
	if (!(s->pd = ibv_alloc_pd(s->ctx)) || !(s->cq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0)))
		FAIL("pd/cq");
	struct ibv_qp_init_attr_ex a = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 64},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = s->pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND,
	};
	if (!(s->qp = ibv_create_qp_ex(s->ctx, &a)))
		FAIL("ibv_create_qp_ex: %m");
	if (!(s->mr = ibv_reg_mr(s->pd, s->buf, sizeof s->buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		FAIL("reg_mr: %m");
	if (ibv_query_gid(s->ctx, 1, 1, &s->gid))
		FAIL("query_gid");
}

static void connect_to(struct side *s, struct side *peer)
{
	connect_qp(s->qp, peer->qp, &peer->gid, IBV_ACCESS_REMOTE_WRITE);
}

int main(void)
{
	int n;
	struct ibv_device **devs = ibv_get_device_list(&n);
	if (!devs || n < 2)
		FAIL("%d devices, want 2", n);
	static struct side a, b;
	open_side(devs[0], &a);
	open_side(devs[1], &b);
	connect_to(&a, &b);
	connect_to(&b, &a);

	/* An RDMA WRITE of 4 KiB, built with ibv_wr_*. */
	for (int i = 0; i < 4096; i++)
		a.buf[i] = (char)(i * 7 + 1);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a.qp);
	ibv_wr_start(x);
	x->wr_id = 11;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 100);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 4096);
	if (ibv_wr_complete(x))
		FAIL("wr_complete (write)");
	struct ibv_wc wc = wait_wc(a.cq);
	if (wc.wr_id != 11 || wc.opcode != IBV_WC_RDMA_WRITE)
		FAIL("write completion: wr_id %llu opcode %d", (unsigned long long)wc.wr_id, wc.opcode);
	if (memcmp(b.buf + 100, a.buf, 4096))
		FAIL("the WRITE's data differs");

	/* An inline SEND into a posted receive. */
	struct ibv_sge rs = {.addr = (uintptr_t)b.buf + 6000, .length = 100, .lkey = b.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 22, .sg_list = &rs, .num_sge = 1}, *bad;
	if (ibv_post_recv(b.qp, &rw, &bad))
		FAIL("post_recv");
	char msg[] = "an inline SEND through ibv_wr_*";
	ibv_wr_start(x);
	x->wr_id = 12;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, msg, sizeof msg);
	if (ibv_wr_complete(x))
		FAIL("wr_complete (send)");
	wc = wait_wc(a.cq);
	if (wc.wr_id != 12 || wc.opcode != IBV_WC_SEND)
		FAIL("send completion: wr_id %llu opcode %d", (unsigned long long)wc.wr_id, wc.opcode);
	wc = wait_wc(b.cq);
	if (wc.wr_id != 22 || wc.opcode != IBV_WC_RECV || wc.byte_len != sizeof msg || memcmp(b.buf + 6000, msg, sizeof msg))
		FAIL("receive: wr_id %llu opcode %d len %u", (unsigned long long)wc.wr_id, wc.opcode, wc.byte_len);
	/* A batch that is aborted posts nothing. */
	ibv_wr_start(x);
	x->wr_id = 13;
	ibv_wr_send(x);
	ibv_wr_abort(x);
	printf("ok\n");
	return 0;
}
