/*
 * A misbehaving program, for the NIC's bad-input tests: it opens the
 * device named by argv[1] through rnic's libibverbs.so.1, then writes
 * what a buggy or hostile program could into the memory it shares with
 * the NIC (it reaches the rings through the library's own structures,
 * provider/src/rnic.h): random WQEs and a producer index beyond its send
 * ring, receive WQEs with impossible SGE counts, random words over its
 * whole doorbell page and CQ consumer index, and an RDMA WRITE from
 * argv[2], an lkey of another process. The NIC must go on serving every
 * other program and lose nothing of theirs (the test runs a checked
 * pingpong beside it). The program checks that the foreign lkey's WRITE
 * completes in error, if it completes, prints "ok" and exits 0; it
 * exits 1 only if the foreign lkey's WRITE succeeded.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/rnic.h"

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(2); } while (0)

static uint32_t rnd(void) { return (uint32_t)random() ^ (uint32_t)random() << 16; }

static void garbage(void *p, size_t n)
{
	uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
}

int main(int argc, char **argv)
{
	if (argc < 3)
		FAIL("usage: bad_ring DEVICE FOREIGN_LKEY");
	srandom((unsigned)getpid());
	uint32_t foreign = (uint32_t)strtoul(argv[2], NULL, 0);
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev)
		FAIL("no device %s", argv[1]);
	struct ibv_context *c = ibv_open_device(dev);
	if (!c)
		FAIL("open: %m");
	struct ibv_pd *pd = ibv_alloc_pd(c);
	struct ibv_cq *cq = ibv_create_cq(c, 64, NULL, NULL, 0);
	static char buf[4096];
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!pd || !cq || !mr)
		FAIL("pd/cq/mr: %m");
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2}};
	struct ibv_qp *good = ibv_create_qp(pd, &ia), *bad = ibv_create_qp(pd, &ia);
	if (!good || !bad)
		FAIL("qp: %m");

	/* good: connected to itself, so that a WRITE executes. */
	union ibv_gid gid;
	if (ibv_query_gid(c, 1, 1, &gid))
		FAIL("gid");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	if (ibv_modify_qp(good, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
	    ibv_modify_qp(bad, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = good->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(good, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 10;
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(good, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					    IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTS");

	/* Another process's lkey in an SGE: the NIC's protection check
	 * (that lkey's PD is not this program's) fails the WRITE. */
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = foreign};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
	wr.wr.rdma.remote_addr = (uintptr_t)buf + 1024;
	wr.wr.rdma.rkey = mr->rkey;
	struct ibv_send_wr *badwr;
	if (ibv_post_send(good, &wr, &badwr))
		FAIL("post: %m");

	/* Garbage in the bad QP's rings, then a producer index far beyond
	 * them; receive WQEs with 255 SGEs. */
	struct rnic_qp *q = (struct rnic_qp *)bad;
	garbage(q->sq, (size_t)q->sq_depth * q->sq_slot);
	atomic_store(word(c, q->sq_word), q->sq_pi + 5);
	garbage(q->rq.mem, (size_t)q->rq.depth * q->rq.slot);
	for (uint32_t i = 0; i < q->rq.depth; i++)
		q->rq.mem[(size_t)i * q->rq.slot + RNIC_RECV_NUM_SGE] = 255;
	atomic_store(word(c, q->rq.word), q->rq.pi + 3);
	usleep(20000);
	atomic_store(word(c, q->sq_word), q->sq_pi + 1000000);
	usleep(20000);

	/* The foreign-lkey WRITE's completion, before the CQ's words go. */
	struct ibv_wc wc;
	int got = 0;
	for (int i = 0; i < 2000 && !got; i++) {
		int k = ibv_poll_cq(cq, 1, &wc);
		if (k > 0 && wc.wr_id == 1)
			got = 1;
		else
			usleep(1000);
	}
	if (got && wc.status == IBV_WC_SUCCESS) {
		fprintf(stderr, "a WRITE from another process's lkey %#x succeeded\n", foreign);
		return 1;
	}

	/* Random words over the whole doorbell page (the NIC's state word,
	 * every producer and consumer index and arm word), several times. */
	for (int round = 0; round < 20; round++) {
		for (uint32_t off = 0; off < 4096; off += 4)
			atomic_store(word(c, off), rnd());
		uint64_t one = 1;
		ssize_t r = write(to_ctx(c)->wake_fd, &one, sizeof one);
		(void)r;
		usleep(5000);
	}
	printf("ok (foreign lkey WRITE: %s)\n", got ? ibv_wc_status_str(wc.status) : "no completion");
	return 0; /* exit without cleaning up: the NIC tears down the rest */
}
